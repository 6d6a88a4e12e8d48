/* SPDX-License-Identifier: GPL-2.0-only */
/* The Prometheus text exposition format 0.0.4: what /metrics and the loop watch write */

#include "hr-prometheus.h"

void
hr_metrics_escape(GString *out, const gchar *value)
{
	for (const gchar *p = value; *p != '\0'; p++) {
		if (*p == '\\' || *p == '"')
			g_string_append_c(out, '\\');
		if (*p == '\n') {
			g_string_append(out, "\\n");
			continue;
		}
		g_string_append_c(out, *p);
	}
}

void
hr_metrics_head(GString *out, const gchar *metric, const gchar *type, const gchar *help)
{
	g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

/* ---------------------------------------------------------------------- */
/* Histograms */

struct _HrMetricsHistogram {
	gchar *name;
	gchar *help;
	gchar *label;	       /* NULL: one series */
	GStrv values;	       /* the label's values, one series each */
	const gdouble *bounds; /* upper bounds, ascending, ending with 0 */
	guint n_bounds;
	guint64 *counts; /* [series][bound], not cumulative; one more for +Inf */
	gdouble *sums;	 /* [series] */
};

const gdouble hr_metrics_bounds_fast[] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 0};
const gdouble hr_metrics_bounds_slow[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
					  10,	30,   60,  120,	 300, 600, 0};

HrMetricsHistogram *
hr_metrics_histogram_new(const gchar *name, const gchar *help, const gchar *label,
			 const gchar *const *values, const gdouble *bounds)
{
	HrMetricsHistogram *h = g_new0(HrMetricsHistogram, 1);
	guint n_series;

	h->name = g_strdup(name);
	h->help = g_strdup(help);
	h->label = g_strdup(label);
	h->values = g_strdupv((gchar **)values);
	h->bounds = bounds;
	while (bounds[h->n_bounds] != 0)
		h->n_bounds++;
	n_series = h->values != NULL ? g_strv_length(h->values) : 1;
	h->counts = g_new0(guint64, (gsize)n_series * (h->n_bounds + 1));
	h->sums = g_new0(gdouble, n_series);
	return h;
}

void
hr_metrics_histogram_free(HrMetricsHistogram *h)
{
	if (h == NULL)
		return;
	g_free(h->name);
	g_free(h->help);
	g_free(h->label);
	g_strfreev(h->values);
	g_free(h->counts);
	g_free(h->sums);
	g_free(h);
}

void
hr_metrics_histogram_observe(HrMetricsHistogram *h, guint series, gdouble value)
{
	guint b = 0;

	if (h->values != NULL && series >= g_strv_length(h->values))
		return;
	if (h->values == NULL)
		series = 0;
	while (b < h->n_bounds && value > h->bounds[b])
		b++;
	h->counts[series * (h->n_bounds + 1) + b]++;
	h->sums[series] += value;
}

static void
hr_metrics_histogram_labels(GString *out, HrMetricsHistogram *h, guint series, const gchar *le)
{
	gboolean any = h->values != NULL || le != NULL;

	if (!any)
		return;
	g_string_append_c(out, '{');
	if (h->values != NULL) {
		g_string_append_printf(out, "%s=\"", h->label);
		hr_metrics_escape(out, h->values[series]);
		g_string_append_c(out, '"');
	}
	if (le != NULL)
		g_string_append_printf(out, "%sle=\"%s\"", h->values != NULL ? "," : "", le);
	g_string_append_c(out, '}');
}

void
hr_metrics_histogram_append(GString *out, HrMetricsHistogram *h)
{
	guint n_series = h->values != NULL ? g_strv_length(h->values) : 1;

	hr_metrics_head(out, h->name, "histogram", h->help);
	for (guint s = 0; s < n_series; s++) {
		const guint64 *counts = &h->counts[s * (h->n_bounds + 1)];
		guint64 cumulative = 0;
		for (guint b = 0; b <= h->n_bounds; b++) {
			gchar le[G_ASCII_DTOSTR_BUF_SIZE];
			cumulative += counts[b];
			if (b < h->n_bounds)
				g_ascii_formatd(le, sizeof(le), "%g", h->bounds[b]);
			else
				g_strlcpy(le, "+Inf", sizeof(le));
			g_string_append_printf(out, "%s_bucket", h->name);
			hr_metrics_histogram_labels(out, h, s, le);
			g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", cumulative);
		}
		g_string_append_printf(out, "%s_sum", h->name);
		hr_metrics_histogram_labels(out, h, s, NULL);
		g_string_append_printf(out, " %.17g\n%s_count", h->sums[s], h->name);
		hr_metrics_histogram_labels(out, h, s, NULL);
		g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", cumulative);
	}
}
