/* SPDX-License-Identifier: GPL-2.0-only */
/* GET /metrics: Prometheus text exposition format 0.0.4 */

#include "hr-metrics.h"

static void
hr_metrics_metric_escape(GString *out, const gchar *value)
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

static void
hr_metrics_metric(GString *out, const gchar *metric, HrGuest *guest, gdouble value)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_metrics_metric_escape(out, guest->name);
	g_string_append_printf(out, "\",uuid=\"%s\"} %.17g\n", guest->uuid, value);
}

static void
hr_metrics_metric_labelled(GString *out, const gchar *metric, HrGuest *guest, const gchar *label,
		       const gchar *value, gdouble number)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_metrics_metric_escape(out, guest->name);
	g_string_append_printf(out, "\",uuid=\"%s\",%s=\"%s\"} %.17g\n", guest->uuid, label, value,
			       number);
}

static void
hr_metrics_metric_head(GString *out, const gchar *metric, const gchar *type, const gchar *help)
{
	g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

static void
hr_metrics_requests(GString *out, GPtrArray *guests)
{
	hr_metrics_metric_head(out, "hugeroom_guest_requests", "gauge",
			   "evacuate, capture and return requests waiting or running, by state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		guint n[HR_REQUEST_DONE] = {0};
		n[HR_REQUEST_QUEUED] = g_queue_get_length(&guest->queue);
		if (guest->active != NULL)
			n[guest->active->state]++;
		for (guint st = 0; st < HR_REQUEST_DONE; st++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_requests", guest, "state",
					       hr_request_state_to_string(st), n[st]);
	}
	hr_metrics_metric_head(out, "hugeroom_guest_requests_finished_total", "counter",
			   "evacuate, capture and return requests that ended, by final state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint st = HR_REQUEST_DONE; st < HR_REQUEST_N_STATES; st++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_requests_finished_total", guest,
					       "state", hr_request_state_to_string(st),
					       guest->requests_final[st]);
	}
	hr_metrics_metric_head(out, "hugeroom_guest_blocks_freed_total", "counter",
			   "2 MiB blocks freed and held by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_metrics_metric(out, "hugeroom_guest_blocks_freed_total", guest,
			      guest->blocks_freed_total);
	}
	hr_metrics_metric_head(out, "hugeroom_guest_pages_migrated_total", "counter",
			   "4 KiB guest pages migrated by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_metrics_metric(out, "hugeroom_guest_pages_migrated_total", guest,
			      guest->pages_migrated_total);
	}
	hr_metrics_metric_head(out, "hugeroom_guest_blocks_returned_total", "counter",
			   "held blocks the guest took back, by reason (host, pressure, unload)");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint r = 0; r < G_N_ELEMENTS(guest->blocks_returned_total); r++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_blocks_returned_total", guest,
					       "reason", hr_guest_return_reason_to_string(r),
					       guest->blocks_returned_total[r]);
	}
}

gchar *
hr_metrics_text(HrCore *core, HrPrepare *prepare)
{
	GPtrArray *guests = hr_core_get_guests(core);
	GString *out = g_string_new(NULL);
	(void)prepare;
	struct {
		const gchar *name;
		const gchar *type;
		const gchar *help;
	} metrics[] = {
	    {"hugeroom_guest_connected", "gauge", "1 while the guest's device is connected"},
	    {"hugeroom_guest_free_pages", "gauge", "MemFree of the guest, 4 KiB pages"},
	    {"hugeroom_guest_held_blocks", "gauge", "2 MiB blocks the guest holds for the host"},
	    {"hugeroom_guest_status_age_seconds", "gauge", "age of the latest status report"},
	    {"hugeroom_guest_rejected_messages_total", "counter",
	     "frames from the guest's device that were rejected"},
	};

	for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
		g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name,
				       metrics[m].help, metrics[m].name, metrics[m].type);
		for (guint i = 0; i < guests->len; i++) {
			HrGuest *guest = g_ptr_array_index(guests, i);
			switch (m) {
			case 0:
				hr_metrics_metric(out, metrics[m].name, guest,
					      hr_guest_is_connected(guest));
				break;
			case 1:
				if (guest->status != NULL)
					hr_metrics_metric(out, metrics[m].name, guest,
						      guest->status->mem_free_pages);
				break;
			case 2:
				hr_metrics_metric(out, metrics[m].name, guest,
					      g_hash_table_size(guest->held));
				break;
			case 3:
				if (guest->status != NULL)
					hr_metrics_metric(out, metrics[m].name, guest,
						      hr_guest_status_age_ms(guest) / 1000.0);
				break;
			default:
				hr_metrics_metric(out, metrics[m].name, guest, guest->rejected);
				break;
			}
		}
	}
	hr_metrics_requests(out, guests);
	g_string_append_printf(out,
			       "# HELP hugeroom_rejected_connections_total connections closed "
			       "before a valid HELLO\n"
			       "# TYPE hugeroom_rejected_connections_total counter\n"
			       "hugeroom_rejected_connections_total %" G_GUINT64_FORMAT "\n",
			       hr_core_get_rejected_unidentified(core));
	return g_string_free(out, FALSE);
}
