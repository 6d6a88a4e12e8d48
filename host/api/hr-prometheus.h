/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The Prometheus text exposition format (0.0.4): label escaping, a
 * metric's HELP and TYPE lines, and histograms. It knows no metric of
 * the daemon's: hr-metrics.c and hr-loopwatch.c write theirs with it.
 */

#include <glib.h>

G_BEGIN_DECLS

/* @value as a label value: backslash, double quote and newline escaped */
void
hr_metrics_escape(GString *out, const gchar *value);
/* the "# HELP" and "# TYPE" lines of @metric */
void
hr_metrics_head(GString *out, const gchar *metric, const gchar *type, const gchar *help);

/* A Prometheus histogram, optionally with one label. */
typedef struct _HrMetricsHistogram HrMetricsHistogram;

/* bucket bounds in seconds, ending with 0: up to 2.5 s, and up to 600 s */
extern const gdouble hr_metrics_bounds_fast[];
extern const gdouble hr_metrics_bounds_slow[];

/* @values: the label's values (one series each, NULL-terminated), or NULL */
HrMetricsHistogram *
hr_metrics_histogram_new(const gchar *name, const gchar *help, const gchar *label,
			 const gchar *const *values, const gdouble *bounds);
void
hr_metrics_histogram_free(HrMetricsHistogram *h);
/* @series: the index of the label's value (0 without a label) */
void
hr_metrics_histogram_observe(HrMetricsHistogram *h, guint series, gdouble value);
void
hr_metrics_histogram_append(GString *out, HrMetricsHistogram *h);

G_END_DECLS
