/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The answers that need the host's memory state (GET /v1/host, POST
 * /v1/plan, GET /metrics): from a fresh snapshot, or once the reader's
 * thread has read one, never with the main loop waiting.
 */

#define G_LOG_DOMAIN "HrApi"

#include <malloc.h>
#include <unistd.h>

#include "hr-api-json.h"
#include "hr-json.h"
#include "hr-api-private.h"
#include "hr-api-view-plan.h"

/* @node from hr_prepare_*_json(), or NULL with @error from reading the host */
static void
hr_api_reply_prepare_json(SoupServerMessage *msg, JsonNode *node, const GError *error)
{
	if (node == NULL) {
		hr_api_reply_error(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, "host_unreadable",
				   "cannot read the host's memory state: %s", error->message);
		return;
	}
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

/* ---------------------------------------------------------------------- */
/* Answers that need the host's state */

typedef void (*HrApiHostHandler)(HrApi *api, SoupServerMessage *msg, const HrHostState *host,
				 const GError *error, gpointer data);

typedef struct {
	HrApi *api;
	SoupServerMessage *msg; /* paused, a reference */
	gulong disconnected_id;
	gboolean gone; /* the client left while it waited */
	HrApiHostHandler handler;
	gpointer data;
	GDestroyNotify data_free;
} HrApiHostWait;

static void
hr_api_host_wait_free(HrApiHostWait *wait)
{
	g_signal_handler_disconnect(wait->msg, wait->disconnected_id);
	g_object_unref(wait->msg);
	if (wait->data_free != NULL)
		wait->data_free(wait->data);
	g_free(wait);
}

static void
hr_api_host_wait_disconnected_cb(SoupServerMessage *msg, gpointer user_data)
{
	HrApiHostWait *wait = user_data;
	(void)msg;
	wait->gone = TRUE;
}

static void
hr_api_host_read_cb(const HrHostState *host, const GError *error, gpointer user_data)
{
	HrApiHostWait *wait = user_data;

	if (wait->gone)
		return;
	wait->handler(wait->api, wait->msg, host, error, wait->data);
	soup_server_message_unpause(wait->msg);
}

/*
 * Answer @msg with @handler and the host's state: at once from a fresh
 * snapshot, else with @msg paused until the reader's thread has read the
 * host (about a millisecond on a small host, more with many zones and
 * CPUs), which the main loop does not wait for. /proc/pagetypeinfo (12 ms
 * on a 24 GiB host, with the zones' locks held) is not read at all.
 */
static void
hr_api_with_host(HrApi *api, SoupServerMessage *msg, HrApiHostHandler handler, gpointer data,
		 GDestroyNotify data_free)
{
	const HrConfig *config = hr_core_get_config(api->core);
	const HrHostState *host = hr_host_reader_peek(api->host, config->generation);
	HrApiHostWait *wait;

	if (host != NULL) {
		handler(api, msg, host, NULL, data);
		if (data_free != NULL)
			data_free(data);
		return;
	}
	wait = g_new0(HrApiHostWait, 1);
	wait->api = api;
	wait->msg = g_object_ref(msg);
	wait->handler = handler;
	wait->data = data;
	wait->data_free = data_free;
	wait->disconnected_id = g_signal_connect(
	    msg, "disconnected", G_CALLBACK(hr_api_host_wait_disconnected_cb), wait);
	soup_server_message_pause(msg);
	/* a reload (host_backing) shows at once: its generation is new */
	hr_host_reader_get(api->host, config->host_root, config->generation, hr_api_host_read_cb,
			   wait, (GDestroyNotify)hr_api_host_wait_free);
}

/*
 * "state_file": where the reservations are kept, and the entries of it
 * that the daemon could not read at its start and skipped
 */
static void
hr_api_add_state_file(HrApi *api, JsonObject *obj)
{
	HrReservationStore *store = hr_prepare_get_store(api->prepare);
	GPtrArray *errors = NULL;
	guint skipped = hr_reservation_store_get_skipped(store, &errors);
	JsonObject *sf = json_object_new();
	JsonArray *list = json_array_new();

	json_object_set_string_member(sf, "path", hr_reservation_store_get_path(store));
	json_object_set_int_member(sf, "skipped", skipped);
	for (guint i = 0; i < errors->len; i++)
		json_array_add_string_element(list, g_ptr_array_index(errors, i));
	json_object_set_array_member(sf, "skipped_entries", list);
	json_object_set_object_member(obj, "state_file", sf);
}

/* many clients share one answer per snapshot: 500 nodes take milliseconds */
static void
hr_api_host_reply(HrApi *api, SoupServerMessage *msg, const HrHostState *host, const GError *error,
		  gpointer data)
{
	(void)data;
	if (host != NULL && hr_host_reader_get_serial(api->host) != api->host_json_serial) {
		g_clear_pointer(&api->host_json, json_node_unref);
		api->host_json = hr_api_host_to_json(host, hr_prepare_get_store(api->prepare),
						     hr_core_get_config(api->core)->backing);
		api->host_json_serial = hr_host_reader_get_serial(api->host);
		hr_api_add_state_file(api, json_node_get_object(api->host_json));
	}
	hr_api_reply_prepare_json(msg, host != NULL ? api->host_json : NULL, error);
}

void
hr_api_host(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_with_host(api, msg, hr_api_host_reply, NULL, NULL);
}

static void
hr_api_plan_reply(HrApi *api, SoupServerMessage *msg, const HrHostState *host, const GError *error,
		  gpointer data)
{
	g_autoptr(HrPlanTrial) trial =
	    host != NULL ? hr_prepare_try_plan(api->prepare, host, data) : NULL;
	g_autoptr(JsonNode) node = trial != NULL ? hr_api_plan_trial_to_json(trial) : NULL;
	hr_api_reply_prepare_json(msg, node, error);
}

/*
 * What a prepare could make ready within 10, 30 and 60 s per node, for a
 * fleet's scheduler (host/doc/capacity.md): made from dry-run plans at
 * most every HR_API_CAPACITY_MAX_AGE_S, whoever asks (the route, /metrics)
 */
#define HR_API_CAPACITY_MAX_AGE_S 5

/*
 * {"within_s": [10, 30, 60], "nodes": [{"node", "ready_bytes": {"10",
 * "30", "60"}}], "guests", "decision_us"}
 */
static JsonNode *
hr_api_capacity_to_json(const HrCapacity *c)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "within_s");
	json_builder_begin_array(b);
	for (guint d = 0; d < HR_CAPACITY_WINDOWS; d++)
		json_builder_add_int_value(b, c->within_s[d]);
	json_builder_end_array(b);
	json_builder_set_member_name(b, "nodes");
	json_builder_begin_array(b);
	for (guint n = 0; n < c->nodes->len; n++) {
		const HrCapacityNode *cn = &g_array_index(c->nodes, HrCapacityNode, n);
		json_builder_begin_object(b);
		hr_json_add_int(b, "node", cn->node);
		json_builder_set_member_name(b, "ready_bytes");
		json_builder_begin_object(b);
		for (guint d = 0; d < HR_CAPACITY_WINDOWS; d++) {
			g_autofree gchar *key = g_strdup_printf("%u", c->within_s[d]);
			hr_json_add_int(b, key, (gint64)cn->ready_bytes[d]);
		}
		json_builder_end_object(b);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	hr_json_add_int(b, "guests", c->n_guests);
	hr_json_add_int(b, "decision_us", c->decision_us);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

static JsonNode *
hr_api_capacity_get(HrApi *api, const HrHostState *host)
{
	gint64 now = g_get_monotonic_time();

	if (api->capacity == NULL ||
	    now - api->capacity_at >= HR_API_CAPACITY_MAX_AGE_S * G_USEC_PER_SEC) {
		g_clear_pointer(&api->capacity, json_node_unref);
		g_autoptr(HrCapacity) c = hr_prepare_capacity(api->prepare, host);
		api->capacity = hr_api_capacity_to_json(c);
		api->capacity_at = now;
	}
	return api->capacity;
}

static void
hr_api_capacity_reply(HrApi *api, SoupServerMessage *msg, const HrHostState *host,
		      const GError *error, gpointer data)
{
	g_autoptr(JsonNode) node = NULL;
	(void)data;

	if (host != NULL) {
		node = json_node_copy(hr_api_capacity_get(api, host));
		json_object_set_int_member(json_node_get_object(node), "age_ms",
					   (g_get_monotonic_time() - api->capacity_at) / 1000);
		json_object_set_int_member(json_node_get_object(node), "max_age_s",
					   HR_API_CAPACITY_MAX_AGE_S);
	}
	hr_api_reply_prepare_json(msg, node, error);
}

void
hr_api_capacity(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_with_host(api, msg, hr_api_capacity_reply, NULL, NULL);
}

/* hugeroom_capacity_ready_bytes{node,within_s}: the same as GET /v1/capacity */
static void
hr_api_capacity_metrics(GString *out, HrApi *api, const HrHostState *host)
{
	JsonArray *nodes;

	if (host == NULL)
		return;
	nodes = json_object_get_array_member(json_node_get_object(hr_api_capacity_get(api, host)),
					     "nodes");
	g_string_append(out, "# HELP hugeroom_capacity_ready_bytes bytes of THP-capable memory a "
			     "prepare could make ready on the node within within_s seconds, from a "
			     "dry-run plan\n"
			     "# TYPE hugeroom_capacity_ready_bytes gauge\n");
	for (guint i = 0; i < json_array_get_length(nodes); i++) {
		JsonObject *n = json_array_get_object_element(nodes, i);
		JsonObject *ready = json_object_get_object_member(n, "ready_bytes");
		g_autoptr(GList) keys = json_object_get_members(ready);
		for (GList *k = keys; k != NULL; k = k->next)
			g_string_append_printf(
			    out,
			    "hugeroom_capacity_ready_bytes{node=\"%" G_GINT64_FORMAT
			    "\",within_s=\"%s\"} %" G_GINT64_FORMAT "\n",
			    json_object_get_int_member(n, "node"), (const gchar *)k->data,
			    json_object_get_int_member(ready, k->data));
	}
}

/* POST /v1/plan: what the planner would do for a reservation, without doing it */
void
hr_api_plan(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrPlanRequest req = {0};
	JsonObject *obj;
	guint64 deadline_s;
	const gchar *requester;
	(void)query;
	(void)args;

	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_reservation(obj, &req.bytes, &req.node, &deadline_s,
						     &req.strict, &requester, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	req.deadline_ms = deadline_s * 1000;
	hr_api_with_host(api, msg, hr_api_plan_reply, g_memdup2(&req, sizeof(req)), g_free);
}

/*
 * The daemon's own memory: its RSS, and what malloc holds (mallinfo2, over
 * all arenas): in use, free but kept from the system, and mapped on its
 * own. RSS that rises while the heap in use does not is malloc's
 * high-water mark, not a leak.
 */
static void
hr_api_process_metrics(GString *out)
{
	g_autofree gchar *statm = NULL;
	guint64 pages = 0;
	struct mallinfo2 mi = mallinfo2();

	if (g_file_get_contents("/proc/self/statm", &statm, NULL, NULL)) {
		gchar **fields = g_strsplit(statm, " ", 3);
		if (fields[0] != NULL && fields[1] != NULL)
			pages = g_ascii_strtoull(fields[1], NULL, 10);
		g_strfreev(fields);
	}
	g_string_append_printf(out,
			       "# HELP process_resident_memory_bytes resident memory of hugeroomd\n"
			       "# TYPE process_resident_memory_bytes gauge\n"
			       "process_resident_memory_bytes %" G_GUINT64_FORMAT "\n"
			       "# HELP hugeroom_heap_in_use_bytes malloc's memory in use in its "
			       "arenas (mallinfo2 uordblks)\n"
			       "# TYPE hugeroom_heap_in_use_bytes gauge\n"
			       "hugeroom_heap_in_use_bytes %zu\n"
			       "# HELP hugeroom_heap_free_bytes memory malloc holds free in its "
			       "arenas (mallinfo2 fordblks)\n"
			       "# TYPE hugeroom_heap_free_bytes gauge\n"
			       "hugeroom_heap_free_bytes %zu\n"
			       "# HELP hugeroom_heap_mmapped_bytes allocations malloc mapped "
			       "on their own, touched or not (mallinfo2 hblkhd)\n"
			       "# TYPE hugeroom_heap_mmapped_bytes gauge\n"
			       "hugeroom_heap_mmapped_bytes %zu\n",
			       pages * (guint64)sysconf(_SC_PAGESIZE), mi.uordblks, mi.fordblks,
			       mi.hblkhd);
}

/* a host that cannot be read leaves out the nodes' metrics, not the others */
static void
hr_api_metrics_reply(HrApi *api, SoupServerMessage *msg, const HrHostState *host,
		     const GError *error, gpointer data)
{
	g_autoptr(GString) out = g_string_new(NULL);
	gsize len;
	(void)data;

	if (host == NULL)
		g_debug("no host metrics: %s", error->message);
	hr_metrics_append(out, api->metrics, host, hr_host_reader_last_read_us(api->host));
	hr_api_capacity_metrics(out, api, host);
	hr_metrics_histogram_append(out, api->latency);
	hr_api_process_metrics(out);
	g_string_append_printf(
	    out,
	    "# HELP hugeroom_api_event_clients clients of /v1/events\n"
	    "# TYPE hugeroom_api_event_clients gauge\n"
	    "hugeroom_api_event_clients %u\n"
	    "# HELP hugeroom_api_events_delivered_total events queued to clients\n"
	    "# TYPE hugeroom_api_events_delivered_total counter\n"
	    "hugeroom_api_events_delivered_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_event_clients_dropped_total clients dropped "
	    "for falling behind\n"
	    "# TYPE hugeroom_api_event_clients_dropped_total counter\n"
	    "hugeroom_api_event_clients_dropped_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_state_file_skipped_entries reservations of the state "
	    "file that could not be read at the start and were skipped\n"
	    "# TYPE hugeroom_state_file_skipped_entries gauge\n"
	    "hugeroom_state_file_skipped_entries %u\n"
	    "# HELP hugeroom_api_events_replayed_total events sent again to clients "
	    "that came back with Last-Event-ID\n"
	    "# TYPE hugeroom_api_events_replayed_total counter\n"
	    "hugeroom_api_events_replayed_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_event_resets_total clients that came back for "
	    "events no longer kept, sent a reset instead\n"
	    "# TYPE hugeroom_api_event_resets_total counter\n"
	    "hugeroom_api_event_resets_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_connections_total connections accepted on the "
	    "API's sockets\n"
	    "# TYPE hugeroom_api_connections_total counter\n"
	    "hugeroom_api_connections_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_connection_reuses_total answers on a "
	    "connection after its first (keep-alive)\n"
	    "# TYPE hugeroom_api_connection_reuses_total counter\n"
	    "hugeroom_api_connection_reuses_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_tls_handshakes TLS connections waiting for their "
	    "client's first bytes or in their handshake\n"
	    "# TYPE hugeroom_api_tls_handshakes gauge\n"
	    "hugeroom_api_tls_handshakes %u\n"
	    "# HELP hugeroom_api_tls_handshake_failures_total TLS connections closed "
	    "before their handshake ended: timed out, refused (TLS < 1.2), too many\n"
	    "# TYPE hugeroom_api_tls_handshake_failures_total counter\n"
	    "hugeroom_api_tls_handshake_failures_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_idle_connections connections kept open for "
	    "their next request\n"
	    "# TYPE hugeroom_api_idle_connections gauge\n"
	    "hugeroom_api_idle_connections %u\n",
	    hr_event_stream_get_n_clients(api->events), hr_event_stream_get_delivered(api->events),
	    hr_event_stream_get_dropped(api->events),
	    hr_reservation_store_get_skipped(hr_prepare_get_store(api->prepare), NULL),
	    hr_event_stream_get_replayed(api->events), hr_event_stream_get_resets(api->events),
	    api->n_connections, api->n_reused,
	    api->handshakes != NULL ? g_hash_table_size(api->handshakes) : 0,
	    api->n_handshake_failures, g_hash_table_size(api->idle));
	len = out->len;
	soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
	soup_server_message_set_response(msg, "text/plain; version=0.0.4", SOUP_MEMORY_TAKE,
					 g_string_free(g_steal_pointer(&out), FALSE), len);
}

void
hr_api_metrics(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_with_host(api, msg, hr_api_metrics_reply, NULL, NULL);
}
