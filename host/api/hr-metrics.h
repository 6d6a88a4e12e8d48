/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include "hr-core.h"
#include "hr-monitor.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

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

/*
 * GET /metrics (host/API.md "Metrics"): guests, nodes, reservations, and
 * histograms of the planner's decisions, the reservations' time to ready
 * and the guests' requests, which it follows on the core's events.
 */
typedef struct _HrMetrics HrMetrics;

HrMetrics *
hr_metrics_new(HrCore *core, HrPrepare *prepare);
void
hr_metrics_free(HrMetrics *metrics);
/* @host: a snapshot read @read_us microseconds long, or NULL to leave the nodes out */
void
hr_metrics_append(GString *out, HrMetrics *metrics, const HrHostState *host, gint64 read_us);

G_END_DECLS
