/* SPDX-License-Identifier: GPL-2.0-only */
/* GET /metrics: Prometheus text exposition format 0.0.4 */

#define G_LOG_DOMAIN "HrMetrics"

#include "hr-metrics.h"

#include "hr-loopwatch.h"
#include "hr-monitor.h"
#include "hr-prometheus.h"

/* requests remembered as counted: far more than ever end twice in a row */
#define HR_METRICS_REQUESTS_SEEN 4096

static void
hr_metrics_metric(GString *out, const gchar *metric, HrGuest *guest, gdouble value)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_metrics_escape(out, hr_guest_get_name(guest));
	g_string_append_printf(out, "\",uuid=\"%s\"} %.17g\n", hr_guest_get_uuid(guest), value);
}

static void
hr_metrics_metric_labelled(GString *out, const gchar *metric, HrGuest *guest, const gchar *label,
			   const gchar *value, gdouble number)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_metrics_escape(out, hr_guest_get_name(guest));
	g_string_append_printf(out, "\",uuid=\"%s\",%s=\"%s\"} %.17g\n", hr_guest_get_uuid(guest),
			       label, value, number);
}

static void
hr_metrics_requests(GString *out, GPtrArray *guests)
{
	hr_metrics_head(out, "hugeroom_guest_requests", "gauge",
			"evacuate, capture and return requests waiting or running, by state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		guint n[HR_REQUEST_DONE] = {0};
		HrRequest *active = hr_guest_get_active_request(guest);
		n[HR_REQUEST_QUEUED] = hr_guest_get_queue_length(guest);
		if (active != NULL)
			n[active->state]++;
		for (guint st = 0; st < HR_REQUEST_DONE; st++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_requests", guest, "state",
						   hr_request_state_to_string(st), n[st]);
	}
	hr_metrics_head(out, "hugeroom_guest_requests_finished_total", "counter",
			"evacuate, capture and return requests that ended, by final state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint st = HR_REQUEST_DONE; st < HR_REQUEST_N_STATES; st++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_requests_finished_total",
						   guest, "state", hr_request_state_to_string(st),
						   hr_guest_get_requests_final(guest, st));
	}
	hr_metrics_head(out, "hugeroom_guest_blocks_freed_total", "counter",
			"2 MiB blocks freed and held by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_metrics_metric(out, "hugeroom_guest_blocks_freed_total", guest,
				  hr_guest_get_blocks_freed_total(guest));
	}
	hr_metrics_head(out, "hugeroom_guest_pages_migrated_total", "counter",
			"4 KiB guest pages migrated by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_metrics_metric(out, "hugeroom_guest_pages_migrated_total", guest,
				  hr_guest_get_pages_migrated_total(guest));
	}
	hr_metrics_head(out, "hugeroom_guest_blocks_returned_total", "counter",
			"held blocks the guest took back, by reason (host, pressure, unload)");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint r = 0; r < HR_GUEST_N_RETURN_REASONS; r++)
			hr_metrics_metric_labelled(out, "hugeroom_guest_blocks_returned_total",
						   guest, "reason",
						   hr_guest_return_reason_to_string(r),
						   hr_guest_get_blocks_returned(guest, r));
	}
}

static void
hr_metrics_guests(GString *out, HrCore *core)
{
	GPtrArray *guests = hr_core_get_guests(core);
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
				if (hr_guest_get_status(guest) != NULL)
					hr_metrics_metric(
					    out, metrics[m].name, guest,
					    hr_guest_get_status(guest)->mem_free_pages);
				break;
			case 2:
				hr_metrics_metric(out, metrics[m].name, guest,
						  g_hash_table_size(hr_guest_get_held(guest)));
				break;
			case 3:
				if (hr_guest_get_status(guest) != NULL)
					hr_metrics_metric(out, metrics[m].name, guest,
							  hr_guest_status_age_ms(guest) / 1000.0);
				break;
			default:
				hr_metrics_metric(out, metrics[m].name, guest,
						  hr_guest_get_rejected(guest));
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
	g_string_append_printf(out,
			       "# HELP hugeroom_guests_refused_per_uid_total HELLOs refused: the "
			       "uid had max_guests_per_uid guest entries\n"
			       "# TYPE hugeroom_guests_refused_per_uid_total counter\n"
			       "hugeroom_guests_refused_per_uid_total %" G_GUINT64_FORMAT "\n",
			       hr_core_get_refused_per_uid(core));
}

/* ---------------------------------------------------------------------- */
/* The daemon's metrics */

struct _HrMetrics {
	HrCore *core;
	HrPrepare *prepare;
	GHashTable *ready_seen; /* reservation ids already counted in time_to_ready */
	HrMetricsHistogram *time_to_ready;
	HrMetricsHistogram *plan_time;
	HrMetricsHistogram *request_time; /* guest requests, by kind */
	GHashTable *requests_seen;	  /* ids of requests counted in request_time */
	GQueue requests_order;		  /* the same ids, oldest first, owned */
	HrLoopWatch *loop;		  /* the main loop's stalls */
};

static void
hr_metrics_event_cb(HrCore *core, const HrEvent *event, gpointer user_data)
{
	HrMetrics *m = user_data;
	(void)core;

	switch (event->kind) {
	case HR_EVENT_REQUEST_CHANGED: {
		HrRequest *req = event->request;
		gint64 us;
		if (!hr_request_state_is_final(req->state) || req->finished_at == NULL ||
		    g_hash_table_contains(m->requests_seen, &req->id))
			break;
		/* a RESULT after a timeout changes it again: count its end once */
		g_queue_push_tail(&m->requests_order, g_memdup2(&req->id, sizeof(req->id)));
		g_hash_table_add(m->requests_seen, g_queue_peek_tail(&m->requests_order));
		if (g_queue_get_length(&m->requests_order) > HR_METRICS_REQUESTS_SEEN) {
			guint64 *old = g_queue_pop_head(&m->requests_order);
			g_hash_table_remove(m->requests_seen, old);
			g_free(old);
		}
		us = g_date_time_difference(req->finished_at, req->created_at);
		hr_metrics_histogram_observe(m->request_time, req->kind, us / 1e6);
		break;
	}
	default:
		break;
	}
}

static void
hr_metrics_prepare_cb(HrPrepare *prepare, const HrPrepareEvent *event, gpointer user_data)
{
	HrMetrics *m = user_data;
	HrReservation *r = event->reservation;
	(void)prepare;

	switch (event->kind) {
	case HR_PREPARE_PLAN_MADE:
		hr_metrics_histogram_observe(m->plan_time, 0, event->duration_us / 1e6);
		break;
	case HR_PREPARE_RESERVATION_CHANGED:
		if (r->state != HR_RESERVATION_READY || r->finished_at == 0 ||
		    g_hash_table_contains(m->ready_seen, r->id))
			break;
		g_hash_table_add(m->ready_seen, g_strdup(r->id));
		hr_metrics_histogram_observe(m->time_to_ready, 0,
					     (r->finished_at - r->created_at) / 1e6);
		break;
	default:
		break;
	}
}

HrMetrics *
hr_metrics_new(HrCore *core, HrPrepare *prepare)
{
	static const gchar *const kinds[] = {"evacuate", "capture", "return", NULL};
	HrMetrics *m = g_new0(HrMetrics, 1);

	m->core = core;
	m->prepare = prepare;
	m->ready_seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	m->requests_seen = g_hash_table_new(g_int64_hash, g_int64_equal);
	g_queue_init(&m->requests_order);
	m->time_to_ready = hr_metrics_histogram_new(
	    "hugeroom_reservation_time_to_ready_seconds",
	    "from a reservation's creation to ready, for those that became ready", NULL, NULL,
	    hr_metrics_bounds_slow);
	m->plan_time = hr_metrics_histogram_new("hugeroom_plan_duration_seconds",
						"the planner's decision time for a reservation",
						NULL, NULL, hr_metrics_bounds_fast);
	m->request_time = hr_metrics_histogram_new(
	    "hugeroom_guest_request_duration_seconds",
	    "from an evacuate, capture or return's creation to its end, by kind", "kind", kinds,
	    hr_metrics_bounds_slow);
	m->loop = hr_loop_watch_new();
	hr_core_listen(core, hr_metrics_event_cb, m);
	hr_prepare_listen(prepare, hr_metrics_prepare_cb, m);
	return m;
}

void
hr_metrics_free(HrMetrics *m)
{
	if (m == NULL)
		return;
	hr_core_unlisten(m->core, hr_metrics_event_cb, m);
	hr_prepare_unlisten(m->prepare, hr_metrics_prepare_cb, m);
	g_hash_table_unref(m->ready_seen);
	g_hash_table_unref(m->requests_seen);
	g_queue_clear_full(&m->requests_order, g_free);
	hr_metrics_histogram_free(m->time_to_ready);
	hr_metrics_histogram_free(m->plan_time);
	hr_metrics_histogram_free(m->request_time);
	hr_loop_watch_free(m->loop);
	g_free(m);
}

static void
hr_metrics_host(GString *out, HrMetrics *m, const HrHostState *host, gint64 read_us)
{
	HrReservationStore *store = hr_prepare_get_store(m->prepare);
	struct {
		const gchar *name;
		const gchar *type;
		const gchar *help;
	} metrics[] = {
	    {"hugeroom_node_free_blocks", "gauge", "free 2 MiB blocks of the node (buddyinfo)"},
	    {"hugeroom_node_unusable_index", "gauge",
	     "fragmentation: share of free memory in chunks below 2 MiB, 0-1 (unusable free "
	     "space index, order 9)"},
	    {"hugeroom_node_promised_blocks", "gauge",
	     "2 MiB blocks promised to live reservations on the node"},
	    {"hugeroom_node_free_bytes", "gauge", "free memory of the node (buddyinfo)"},
	};

	if (host == NULL)
		return;
	hr_metrics_head(out, "hugeroom_host_read_seconds", "gauge",
			"how long the latest read of the host's /proc and /sys took, in "
			"the daemon's reader thread");
	g_string_append_printf(out, "hugeroom_host_read_seconds %.17g\n", read_us / 1e6);
	for (guint k = 0; k < G_N_ELEMENTS(metrics); k++) {
		hr_metrics_head(out, metrics[k].name, metrics[k].type, metrics[k].help);
		for (guint n = 0; n < host->nodes->len; n++) {
			const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
			gdouble v;
			switch (k) {
			case 0:
				v = ns->free_blocks;
				break;
			case 1:
				v = ns->unusable_index / 1000.0;
				break;
			case 2:
				v = hr_reservation_store_promised(store, ns->node, NULL);
				break;
			default:
				v = (gdouble)ns->free_pages * 4096;
				break;
			}
			g_string_append_printf(out, "%s{node=\"%u\"} %.17g\n", metrics[k].name,
					       ns->node, v);
		}
	}
}

static void
hr_metrics_reservations(GString *out, HrMetrics *m)
{
	HrReservationStore *store = hr_prepare_get_store(m->prepare);
	GPtrArray *list = hr_reservation_store_list(store);
	g_autofree gchar *stale = hr_reservation_store_dup_save_error(store);
	guint64 n[HR_RESERVATION_N_STATES] = {0};

	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		n[r->state]++;
	}
	hr_metrics_head(out, "hugeroom_reservations", "gauge",
			"reservations the daemon knows, by state");
	for (guint st = 0; st < HR_RESERVATION_N_STATES; st++)
		g_string_append_printf(
		    out, "hugeroom_reservations{state=\"%s\"} %" G_GUINT64_FORMAT "\n",
		    hr_reservation_state_to_string(st), n[st]);
	hr_metrics_head(out, "hugeroom_state_write_failures_total", "counter",
			"writes of the state file (reservations.json) that failed; each is "
			"retried");
	g_string_append_printf(out, "hugeroom_state_write_failures_total %" G_GUINT64_FORMAT "\n",
			       hr_reservation_store_save_failures(store));
	hr_metrics_head(out, "hugeroom_state_file_stale", "gauge",
			"1 while the state file on disk is older than the daemon's state "
			"(its latest write failed; a restart now would lose the difference)");
	g_string_append_printf(out, "hugeroom_state_file_stale %d\n", stale != NULL);
}

void
hr_metrics_append(GString *out, HrMetrics *m, const HrHostState *host, gint64 read_us)
{
	hr_metrics_guests(out, m->core);
	hr_metrics_host(out, m, host, read_us);
	hr_metrics_reservations(out, m);
	hr_metrics_histogram_append(out, m->time_to_ready);
	hr_metrics_histogram_append(out, m->plan_time);
	hr_metrics_histogram_append(out, m->request_time);
	hr_loop_watch_append(out, m->loop);
}
