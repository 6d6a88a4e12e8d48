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
