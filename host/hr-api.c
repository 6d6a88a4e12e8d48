/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api.h"

#include <libsoup/soup.h>
#include <string.h>

#include "hr-daemon.h"
#include "hr-json.h"
#include "hr-pcp.h"
#include "hr-prepare.h"
#include "hr-socket.h"

struct _HrApi {
	HrDaemon *daemon;
	SoupServer *server;
	GSocketService *service;
	GSocket *socket;
};

static const gchar *hist_names[VIRTIO_HUGEROOM_NR_HIST] = {"512", "448", "256", "64", "1", "0"};

static void
hr_api_add_status(JsonBuilder *b, const HrStatus *s)
{
	json_builder_begin_object(b);
	hr_json_add_int(b, "seq", s->seq);
	hr_json_add_int(b, "request_id", s->hdr.request_id);
	hr_json_add_int(b, "uptime_ns", s->uptime_ns);
	hr_json_add_int(b, "build_ns", s->build_ns);
	hr_json_add_int(b, "mem_total_pages", s->mem_total_pages);
	hr_json_add_int(b, "mem_free_pages", s->mem_free_pages);
	hr_json_add_int(b, "mem_available_pages", s->mem_available_pages);
	hr_json_add_int(b, "held_blocks", s->held_blocks);
	hr_json_add_int(b, "page_shift", s->page_shift);
	hr_json_add_int(b, "pageblock_order", s->pageblock_order);
	json_builder_set_member_name(b, "flags");
	json_builder_begin_array(b);
	if (s->hdr.flags & VIRTIO_HUGEROOM_STATUS_F_TRUNCATED)
		json_builder_add_string_value(b, "truncated");
	if (s->hdr.flags & VIRTIO_HUGEROOM_STATUS_F_MT_PARTIAL)
		json_builder_add_string_value(b, "mt_partial");
	json_builder_end_array(b);
	json_builder_set_member_name(b, "vmstat");
	json_builder_begin_object(b);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		hr_json_add_int(b, hr_vmstat_to_string(i), s->vmstat[i]);
	json_builder_end_object(b);

	json_builder_set_member_name(b, "zones");
	json_builder_begin_array(b);
	for (guint z = 0; z < s->nr_zones; z++) {
		const HrZone *zone = &s->zones[z];
		/* the guest's bytes; JSON needs UTF-8 */
		g_autofree gchar *name = g_utf8_make_valid(zone->name, -1);
		json_builder_begin_object(b);
		hr_json_add_int(b, "nid", zone->nid);
		json_builder_set_member_name(b, "zone");
		json_builder_add_string_value(b, name);
		hr_json_add_int(b, "zone_idx", zone->zone_idx);
		hr_json_add_int(b, "start_pfn", zone->start_pfn);
		hr_json_add_int(b, "spanned_pages", zone->spanned_pages);
		hr_json_add_int(b, "managed_pages", zone->managed_pages);
		hr_json_add_int(b, "free_pages", zone->free_pages);
		json_builder_set_member_name(b, "nr_free");
		json_builder_begin_array(b);
		for (guint o = 0; o < VIRTIO_HUGEROOM_NR_ORDERS; o++)
			json_builder_add_int_value(b, zone->nr_free[o]);
		json_builder_end_array(b);
		json_builder_set_member_name(b, "free_pageblock_by_mt");
		json_builder_begin_object(b);
		for (guint m = 0; m < VIRTIO_HUGEROOM_NR_MT; m++)
			hr_json_add_int(b, hr_mt_to_string(m), zone->nr_free_pb_mt[m]);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "pageblock_histogram");
		json_builder_begin_object(b);
		for (guint h = 0; h < VIRTIO_HUGEROOM_NR_HIST; h++)
			hr_json_add_int(b, hist_names[h], zone->hist[h]);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "pcp");
		json_builder_begin_object(b);
		hr_json_add_int(b, "count", zone->pcp_count);
		hr_json_add_int(b, "high", zone->pcp_high);
		hr_json_add_int(b, "batch", zone->pcp_batch);
		hr_json_add_int(b, "high_min", zone->pcp_high_min);
		hr_json_add_int(b, "high_max", zone->pcp_high_max);
		json_builder_set_member_name(b, "policy");
		json_builder_add_string_value(b, hr_pcp_policy_to_string(zone->pcp_policy) != NULL
						     ? hr_pcp_policy_to_string(zone->pcp_policy)
						     : "unknown");
		hr_json_add_int(b, "fraction", zone->pcp_fraction);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "watermarks");
		json_builder_begin_object(b);
		hr_json_add_int(b, "min", zone->wmark_min);
		hr_json_add_int(b, "low", zone->wmark_low);
		hr_json_add_int(b, "high", zone->wmark_high);
		json_builder_end_object(b);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "candidates");
	json_builder_begin_array(b);
	for (guint c = 0; c < s->nr_candidates; c++) {
		const HrCandidate *cand = &s->candidates[c];
		json_builder_begin_object(b);
		hr_json_add_int(b, "gpa", cand->gpa);
		hr_json_add_int(b, "free_pages", cand->free_pages);
		json_builder_set_member_name(b, "migratetype");
		json_builder_add_string_value(b, hr_mt_to_string(cand->migratetype));
		hr_json_add_int(b, "zone", cand->zone);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
}

static void
hr_api_add_summary_members(JsonBuilder *b, HrGuest *guest)
{
	json_builder_set_member_name(b, "name");
	json_builder_add_string_value(b, guest->name);
	json_builder_set_member_name(b, "uuid");
	json_builder_add_string_value(b, guest->uuid);
	hr_json_add_int(b, "pid", guest->pid);
	json_builder_set_member_name(b, "connected");
	json_builder_add_boolean_value(b, hr_guest_is_connected(guest));
	json_builder_set_member_name(b, "seq");
	if (guest->status != NULL)
		json_builder_add_int_value(b, guest->status->seq);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "age_ms");
	if (guest->status != NULL)
		json_builder_add_int_value(b, hr_guest_status_age_ms(guest));
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_total_pages");
	if (guest->status != NULL)
		json_builder_add_int_value(b, guest->status->mem_total_pages);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_free_pages");
	if (guest->status != NULL)
		json_builder_add_int_value(b, guest->status->mem_free_pages);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_available_pages");
	if (guest->status != NULL)
		json_builder_add_int_value(b, guest->status->mem_available_pages);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "held_blocks", g_hash_table_size(guest->held));
	hr_json_add_int(b, "rejected", guest->rejected);
}

JsonNode *
hr_api_guests_to_json(HrDaemon *daemon)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	GPtrArray *guests = hr_daemon_get_guests(daemon);

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "guests");
	json_builder_begin_array(b);
	for (guint i = 0; i < guests->len; i++) {
		json_builder_begin_object(b);
		hr_api_add_summary_members(b, g_ptr_array_index(guests, i));
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	hr_json_add_int(b, "rejected_unidentified", hr_daemon_get_rejected_unidentified(daemon));
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

static void
hr_api_add_held(JsonBuilder *b, HrGuest *guest)
{
	g_autoptr(GArray) gpas = hr_guest_held_sorted(guest);

	json_builder_begin_object(b);
	hr_json_add_int(b, "blocks", gpas->len);
	json_builder_set_member_name(b, "gpas");
	json_builder_begin_array(b);
	for (guint i = 0; i < gpas->len; i++) {
		g_autofree gchar *str =
		    g_strdup_printf("0x%" G_GINT64_MODIFIER "x", g_array_index(gpas, guint64, i));
		json_builder_add_string_value(b, str);
	}
	json_builder_end_array(b);
	json_builder_set_member_name(b, "returned");
	json_builder_begin_object(b);
	for (guint r = 0; r < G_N_ELEMENTS(guest->blocks_returned_total); r++)
		hr_json_add_int(b, hr_guest_return_reason_to_string(r),
				guest->blocks_returned_total[r]);
	json_builder_end_object(b);
	hr_json_add_int(b, "blocks_freed_total", guest->blocks_freed_total);
	hr_json_add_int(b, "pages_migrated_total", guest->pages_migrated_total);
	json_builder_end_object(b);
}

static JsonNode *
hr_api_guest_to_json(HrGuest *guest)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	hr_api_add_summary_members(b, guest);
	hr_json_add_time(b, "connected_at", guest->connected_at);
	hr_json_add_time(b, "disconnected_at", guest->disconnected_at);
	hr_json_add_int(b, "connections", guest->connections);
	hr_json_add_int(b, "proto_version", guest->proto_version);
	hr_json_add_int(b, "ram_size", guest->ram_size);
	json_builder_set_member_name(b, "ram");
	json_builder_begin_array(b);
	for (guint i = 0; i < guest->ram->len; i++) {
		const HrRamRange *r = &g_array_index(guest->ram, HrRamRange, i);
		json_builder_begin_object(b);
		hr_json_add_int(b, "gpa", r->gpa);
		hr_json_add_int(b, "size", r->size);
		hr_json_add_int(b, "hva", r->hva);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "device");
	if (guest->have_state) {
		json_builder_begin_object(b);
		hr_json_add_int(b, "guest_features", guest->state.guest_features);
		hr_json_add_int(b, "msgs_relayed", guest->state.msgs_relayed);
		hr_json_add_int(b, "msgs_rejected", guest->state.msgs_rejected);
		hr_json_add_int(b, "cmds_dropped", guest->state.cmds_dropped);
		hr_json_add_int(b, "num_held", guest->state.num_held);
		json_builder_set_member_name(b, "driver_ok");
		json_builder_add_boolean_value(b, guest->state.driver_ok);
		json_builder_set_member_name(b, "discard_disabled");
		json_builder_add_boolean_value(b, guest->state.discard_disabled);
		json_builder_end_object(b);
	} else {
		json_builder_add_null_value(b);
	}

	json_builder_set_member_name(b, "daemon_counters");
	json_builder_begin_object(b);
	hr_json_add_int(b, "frames", guest->frames);
	hr_json_add_int(b, "guest_msgs", guest->guest_msgs);
	hr_json_add_int(b, "rejected", guest->rejected);
	json_builder_set_member_name(b, "last_reject_reason");
	if (guest->last_reject_reason != NULL)
		json_builder_add_string_value(b, guest->last_reject_reason);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "cmds_sent", guest->cmds_sent);
	hr_json_add_int(b, "cmds_pending", g_hash_table_size(guest->pending));
	hr_json_add_int(b, "cmds_lost", guest->cmds_lost);
	json_builder_end_object(b);

	json_builder_set_member_name(b, "last_result");
	if (guest->last_result != NULL) {
		const HrResult *r = guest->last_result;
		json_builder_begin_object(b);
		hr_json_add_int(b, "request_id", r->hdr.request_id);
		json_builder_set_member_name(b, "final");
		json_builder_add_boolean_value(b, r->hdr.type == VIRTIO_HUGEROOM_MSG_RESULT);
		json_builder_set_member_name(b, "status");
		json_builder_add_string_value(b, hr_result_status_to_string(r->status));
		hr_request_add_counts(b, r);
		json_builder_end_object(b);
	} else {
		json_builder_add_null_value(b);
	}

	json_builder_set_member_name(b, "held");
	hr_api_add_held(b, guest);
	hr_pcp_add_json(guest, b);

	json_builder_set_member_name(b, "requests");
	json_builder_begin_array(b);
	{
		g_autoptr(GPtrArray) requests = hr_guest_list_requests(guest);
		for (guint i = 0; i < requests->len; i++)
			hr_request_add_summary_json(g_ptr_array_index(requests, i), b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "status");
	if (guest->status != NULL)
		hr_api_add_status(b, guest->status);
	else
		json_builder_add_null_value(b);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

static void
hr_api_metric_escape(GString *out, const gchar *value)
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
hr_api_metric(GString *out, const gchar *metric, HrGuest *guest, gdouble value)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_api_metric_escape(out, guest->name);
	g_string_append_printf(out, "\",uuid=\"%s\"} %.17g\n", guest->uuid, value);
}

static void
hr_api_metric_labelled(GString *out, const gchar *metric, HrGuest *guest, const gchar *label,
		       const gchar *value, gdouble number)
{
	g_string_append_printf(out, "%s{name=\"", metric);
	hr_api_metric_escape(out, guest->name);
	g_string_append_printf(out, "\",uuid=\"%s\",%s=\"%s\"} %.17g\n", guest->uuid, label, value,
			       number);
}

static void
hr_api_metric_head(GString *out, const gchar *metric, const gchar *type, const gchar *help)
{
	g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

static void
hr_api_metrics_requests(GString *out, GPtrArray *guests)
{
	hr_api_metric_head(out, "hugeroom_guest_requests", "gauge",
			   "evacuate, capture and return requests waiting or running, by state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		guint n[HR_REQUEST_DONE] = {0};
		n[HR_REQUEST_QUEUED] = g_queue_get_length(&guest->queue);
		if (guest->active != NULL)
			n[guest->active->state]++;
		for (guint st = 0; st < HR_REQUEST_DONE; st++)
			hr_api_metric_labelled(out, "hugeroom_guest_requests", guest, "state",
					       hr_request_state_to_string(st), n[st]);
	}
	hr_api_metric_head(out, "hugeroom_guest_requests_finished_total", "counter",
			   "evacuate, capture and return requests that ended, by final state");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint st = HR_REQUEST_DONE; st < HR_REQUEST_N_STATES; st++)
			hr_api_metric_labelled(out, "hugeroom_guest_requests_finished_total", guest,
					       "state", hr_request_state_to_string(st),
					       guest->requests_final[st]);
	}
	hr_api_metric_head(out, "hugeroom_guest_blocks_freed_total", "counter",
			   "2 MiB blocks freed and held by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_api_metric(out, "hugeroom_guest_blocks_freed_total", guest,
			      guest->blocks_freed_total);
	}
	hr_api_metric_head(out, "hugeroom_guest_pages_migrated_total", "counter",
			   "4 KiB guest pages migrated by evacuate and capture results");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		hr_api_metric(out, "hugeroom_guest_pages_migrated_total", guest,
			      guest->pages_migrated_total);
	}
	hr_api_metric_head(out, "hugeroom_guest_blocks_returned_total", "counter",
			   "held blocks the guest took back, by reason (host, pressure, unload)");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		for (guint r = 0; r < G_N_ELEMENTS(guest->blocks_returned_total); r++)
			hr_api_metric_labelled(out, "hugeroom_guest_blocks_returned_total", guest,
					       "reason", hr_guest_return_reason_to_string(r),
					       guest->blocks_returned_total[r]);
	}
}

gchar *
hr_api_metrics(HrDaemon *daemon)
{
	GPtrArray *guests = hr_daemon_get_guests(daemon);
	GString *out = g_string_new(NULL);
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
				hr_api_metric(out, metrics[m].name, guest,
					      hr_guest_is_connected(guest));
				break;
			case 1:
				if (guest->status != NULL)
					hr_api_metric(out, metrics[m].name, guest,
						      guest->status->mem_free_pages);
				break;
			case 2:
				hr_api_metric(out, metrics[m].name, guest,
					      g_hash_table_size(guest->held));
				break;
			case 3:
				if (guest->status != NULL)
					hr_api_metric(out, metrics[m].name, guest,
						      hr_guest_status_age_ms(guest) / 1000.0);
				break;
			default:
				hr_api_metric(out, metrics[m].name, guest, guest->rejected);
				break;
			}
		}
	}
	hr_api_metrics_requests(out, guests);
	g_string_append_printf(out,
			       "# HELP hugeroom_rejected_connections_total connections closed "
			       "before a valid HELLO\n"
			       "# TYPE hugeroom_rejected_connections_total counter\n"
			       "hugeroom_rejected_connections_total %" G_GUINT64_FORMAT "\n",
			       hr_daemon_get_rejected_unidentified(daemon));
	return g_string_free(out, FALSE);
}

static void
hr_api_reply_json(SoupServerMessage *msg, guint status, JsonNode *node)
{
	g_autofree gchar *body = json_to_string(node, TRUE);
	gsize len = strlen(body);
	soup_server_message_set_status(msg, status, NULL);
	soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE,
					 g_steal_pointer(&body), len);
}

static void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *format, ...)
    G_GNUC_PRINTF(3, 4);

static void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *format, ...)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *text = NULL;
	va_list args;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "error");
	json_builder_add_string_value(b, text);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, status, node);
}

static gchar *
hr_api_known_guests(HrDaemon *daemon)
{
	GPtrArray *guests = hr_daemon_get_guests(daemon);
	g_autoptr(GString) str = g_string_new(NULL);
	if (guests->len == 0)
		return g_strdup("none connected yet");
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (i > 0)
			g_string_append(str, ", ");
		g_string_append(str, guest->name[0] != '\0' ? guest->name : guest->uuid);
	}
	return g_strdup(str->str);
}

static gboolean
hr_api_check_method(SoupServerMessage *msg, const gchar *allowed)
{
	if (g_strcmp0(soup_server_message_get_method(msg), allowed) == 0)
		return TRUE;
	soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Allow",
				     allowed);
	hr_api_reply_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "%s %s is not supported; use %s",
			   soup_server_message_get_method(msg),
			   g_uri_get_path(soup_server_message_get_uri(msg)), allowed);
	return FALSE;
}

/* ---------------------------------------------------------------------- */
/* Requests: POST evacuate, capture, return, cancel; GET requests */

static gchar *
hr_api_node_to_string(JsonNode *node)
{
	g_autofree gchar *text = json_to_string(node, FALSE);
	if (strlen(text) > 40)
		return g_strdup_printf("%.37s...", text);
	return g_steal_pointer(&text);
}

static JsonObject *
hr_api_parse_body(SoupServerMessage *msg, JsonParser *parser, GError **error)
{
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	g_autoptr(GError) error_local = NULL;
	JsonNode *root;

	if (body == NULL || body->length == 0) {
		hr_request_invalid(error, "the request needs a JSON object body, for example "
					  "{\"blocks\":4}");
		return NULL;
	}
	if (!json_parser_load_from_data(parser, body->data, body->length, &error_local)) {
		hr_request_invalid(error, "the body is not JSON: %s", error_local->message);
		return NULL;
	}
	root = json_parser_get_root(parser);
	if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
		hr_request_invalid(error,
				   "the body must be a JSON object, for example {\"blocks\":4}");
		return NULL;
	}
	return json_node_get_object(root);
}

static gboolean
hr_api_check_members(JsonObject *obj, const gchar *what, const gchar *const *allowed,
		     GError **error)
{
	g_autoptr(GList) members = json_object_get_members(obj);

	for (GList *l = members; l != NULL; l = l->next) {
		if (!g_strv_contains(allowed, l->data)) {
			g_autofree gchar *list = g_strjoinv(", ", (gchar **)allowed);
			return hr_request_invalid(error, "%s: unknown field; %s takes %s",
						  (const gchar *)l->data, what, list);
		}
	}
	return TRUE;
}

/* a JSON integer in [min, max]; absent members leave @value alone */
static gboolean
hr_api_get_uint(JsonObject *obj, const gchar *key, guint64 min, guint64 max, guint64 *value,
		GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);
	gint64 v;

	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
		g_autofree gchar *text = hr_api_node_to_string(node);
		return hr_request_invalid(error,
					  "%s: %s is not a whole number from %" G_GUINT64_FORMAT
					  " to %" G_GUINT64_FORMAT,
					  key, text, min, max);
	}
	v = json_node_get_int(node);
	if (v < 0 || (guint64)v < min || (guint64)v > max)
		return hr_request_invalid(error,
					  "%s: %" G_GINT64_FORMAT " is out of range %" G_GUINT64_FORMAT
					  "-%" G_GUINT64_FORMAT,
					  key, v, min, max);
	*value = v;
	return TRUE;
}

/* an address: a JSON integer, or a string in hex ("0x...") or decimal */
static gboolean
hr_api_parse_addr(JsonNode *node, const gchar *field, guint64 *value, GError **error)
{
	if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64 &&
	    json_node_get_int(node) >= 0) {
		*value = json_node_get_int(node);
		return TRUE;
	}
	if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING) {
		const gchar *str = json_node_get_string(node);
		guint base = 10;
		if (g_str_has_prefix(str, "0x") || g_str_has_prefix(str, "0X")) {
			str += 2;
			base = 16;
		}
		if (*str != '\0' && g_ascii_string_to_unsigned(str, base, 0, G_MAXUINT64, value, NULL))
			return TRUE;
	}
	{
		g_autofree gchar *text = hr_api_node_to_string(node);
		return hr_request_invalid(error,
					  "%s: %s is not an address (a whole number, or a string such as "
					  "\"0x40000000\")",
					  field, text);
	}
}

/* a true or false member; absent members leave @value alone */
static gboolean
hr_api_get_bool(JsonObject *obj, const gchar *key, gboolean *value, GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);

	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN)
		return hr_request_invalid(error, "%s: must be true or false", key);
	*value = json_node_get_boolean(node);
	return TRUE;
}

/*
 * A non-empty array member; @usage says what it must hold. An absent
 * member sets @array to NULL.
 */
static gboolean
hr_api_get_list(JsonObject *obj, const gchar *key, const gchar *usage, JsonArray **array,
		GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);

	*array = NULL;
	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_ARRAY(node))
		return hr_request_invalid(error, "%s: must be an array of %s", key, usage);
	if (json_array_get_length(json_node_get_array(node)) == 0)
		return hr_request_invalid(error, "%s: the list is empty", key);
	*array = json_node_get_array(node);
	return TRUE;
}

static gboolean
hr_api_get_gpas(JsonObject *obj, GArray *gpas, GError **error)
{
	JsonArray *array;

	if (!hr_api_get_list(obj, "gpas", "addresses", &array, error))
		return FALSE;
	if (array == NULL)
		return TRUE;
	for (guint i = 0; i < json_array_get_length(array); i++) {
		g_autofree gchar *field = g_strdup_printf("gpas[%u]", i);
		guint64 gpa;
		if (!hr_api_parse_addr(json_array_get_element(array, i), field, &gpa, error))
			return FALSE;
		g_array_append_val(gpas, gpa);
	}
	return TRUE;
}

static gboolean
hr_api_get_ranges(JsonObject *obj, GArray *ranges, GError **error)
{
	JsonArray *array;

	if (!hr_api_get_list(obj, "ranges", "{\"start\":..,\"end\":..}", &array, error))
		return FALSE;
	if (array == NULL)
		return TRUE;
	for (guint i = 0; i < json_array_get_length(array); i++) {
		JsonNode *elem = json_array_get_element(array, i);
		const gchar *keys[] = {"start", "end"};
		HrRange range = {0};
		guint64 *values[] = {&range.start, &range.end};
		if (!JSON_NODE_HOLDS_OBJECT(elem))
			return hr_request_invalid(error,
						  "ranges[%u]: must be {\"start\":..,\"end\":..}", i);
		for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
			JsonNode *v = json_object_get_member(json_node_get_object(elem), keys[k]);
			g_autofree gchar *field = g_strdup_printf("ranges[%u].%s", i, keys[k]);
			if (v == NULL)
				return hr_request_invalid(error, "%s: missing", field);
			if (!hr_api_parse_addr(v, field, values[k], error))
				return FALSE;
		}
		if (json_object_get_size(json_node_get_object(elem)) != 2)
			return hr_request_invalid(error, "ranges[%u]: takes only start and end", i);
		g_array_append_val(ranges, range);
	}
	return TRUE;
}

/* the body of POST .../evacuate, .../capture or .../return */
static gboolean
hr_api_parse_params(JsonObject *obj, HrRequestKind kind, HrRequestParams *p, GArray *gpas,
		    GArray *ranges, GError **error)
{
	static const gchar *const evacuate[] = {"blocks",    "gpas",	  "ranges", "budget_pages",
						"budget_ms", "timeout_s", NULL};
	static const gchar *const capture[] = {"blocks", "budget_ms", "timeout_s", NULL};
	static const gchar *const ret[] = {"blocks", "gpas", "all", "timeout_s", NULL};
	const gchar *const *allowed = kind == HR_REQUEST_EVACUATE ? evacuate
				      : kind == HR_REQUEST_CAPTURE ? capture
								   : ret;
	guint64 count = 0, budget_pages = 0, budget_ms = 0, timeout_s = 0;

	memset(p, 0, sizeof(*p));
	p->kind = kind;
	if (!hr_api_check_members(obj, hr_request_kind_to_string(kind), allowed, error) ||
	    !hr_api_get_uint(obj, "blocks", 1, G_MAXUINT32 - 1, &count, error) ||
	    !hr_api_get_uint(obj, "budget_pages", 0, G_MAXINT64, &budget_pages, error) ||
	    !hr_api_get_uint(obj, "budget_ms", 0, G_MAXUINT32, &budget_ms, error) ||
	    !hr_api_get_uint(obj, "timeout_s", 1, 86400, &timeout_s, error) ||
	    !hr_api_get_gpas(obj, gpas, error) || !hr_api_get_ranges(obj, ranges, error) ||
	    !hr_api_get_bool(obj, "all", &p->all, error))
		return FALSE;
	if (kind == HR_REQUEST_RETURN && count > 0 && gpas->len > 0)
		return hr_request_invalid(error, "blocks: return takes blocks or gpas, not both");
	if (kind == HR_REQUEST_RETURN && count == 0 && gpas->len == 0 && !p->all)
		return hr_request_invalid(error, "blocks: return needs blocks, gpas or \"all\":true");
	if (kind != HR_REQUEST_RETURN && count == 0 && gpas->len == 0)
		return hr_request_invalid(error, "blocks: missing; give the number of blocks%s",
					  kind == HR_REQUEST_EVACUATE ? " or a list of gpas" : "");
	p->count = count;
	p->gpas = (const guint64 *)gpas->data;
	p->nr_gpas = gpas->len;
	p->ranges = (const HrRange *)ranges->data;
	p->nr_ranges = ranges->len;
	p->budget_pages = budget_pages;
	p->budget_ms = budget_ms;
	p->timeout_s = timeout_s;
	return TRUE;
}

static guint
hr_api_error_status(const GError *error)
{
	if (error->domain == G_IO_ERROR && error->code == G_IO_ERROR_INVALID_ARGUMENT)
		return SOUP_STATUS_BAD_REQUEST;
	if (error->domain == G_IO_ERROR && error->code == G_IO_ERROR_NOT_FOUND)
		return SOUP_STATUS_NOT_FOUND;
	return SOUP_STATUS_CONFLICT;
}

static void
hr_api_reply_request_ref(SoupServerMessage *msg, guint status, HrGuest *guest, HrRequest *request)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;

	json_builder_begin_object(b);
	hr_json_add_int(b, "request_id", request->id);
	json_builder_set_member_name(b, "guest");
	json_builder_add_string_value(b, guest->name);
	json_builder_set_member_name(b, "kind");
	json_builder_add_string_value(b, hr_request_kind_to_string(request->kind));
	json_builder_set_member_name(b, "state");
	json_builder_add_string_value(b, hr_request_state_to_string(request->state));
	json_builder_set_member_name(b, "cancel_requested");
	json_builder_add_boolean_value(b, request->cancel_sent);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, status, node);
}

static void
hr_api_submit(HrApi *api, SoupServerMessage *msg, HrGuest *guest, HrRequestKind kind)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GArray) gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
	g_autoptr(GArray) ranges = g_array_new(FALSE, FALSE, sizeof(HrRange));
	g_autoptr(GError) error = NULL;
	HrRequestParams params;
	JsonObject *obj;
	HrRequest *request;

	if (!hr_api_check_method(msg, SOUP_METHOD_POST))
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_params(obj, kind, &params, gpas, ranges, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
		return;
	}
	request = hr_daemon_submit(api->daemon, guest, &params, &error);
	if (request == NULL) {
		hr_api_reply_error(msg, hr_api_error_status(error), "%s", error->message);
		return;
	}
	hr_api_reply_request_ref(msg, SOUP_STATUS_ACCEPTED, guest, request);
}

static void
hr_api_cancel(SoupServerMessage *msg, HrGuest *guest)
{
	static const gchar *const allowed[] = {"request_id", NULL};
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	guint64 id = 0;
	JsonObject *obj;

	if (!hr_api_check_method(msg, SOUP_METHOD_POST))
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_check_members(obj, "cancel", allowed, &error) ||
	    !hr_api_get_uint(obj, "request_id", 1, G_MAXINT64, &id, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
		return;
	}
	if (id == 0) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST,
				   "request_id: missing; cancel names the request to stop");
		return;
	}
	if (!hr_guest_cancel_request(guest, id, &error)) {
		hr_api_reply_error(msg, hr_api_error_status(error), "%s", error->message);
		return;
	}
	hr_api_reply_request_ref(msg, SOUP_STATUS_ACCEPTED, guest,
				 hr_guest_find_request(guest, id));
}

static void
hr_api_requests(SoupServerMessage *msg, HrGuest *guest, const gchar *id_str)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;

	if (!hr_api_check_method(msg, SOUP_METHOD_GET))
		return;
	if (id_str != NULL) {
		guint64 id = 0;
		HrRequest *request = NULL;
		if (g_ascii_string_to_unsigned(id_str, 10, 1, G_MAXUINT64, &id, NULL))
			request = hr_guest_find_request(guest, id);
		if (request == NULL) {
			hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
					   "guest %s has no request '%s' (the daemon keeps the "
					   "last %u finished requests per guest, and none across "
					   "a restart)",
					   guest->name, id_str, guest->history);
			return;
		}
		hr_request_add_json(request, b);
	} else {
		g_autoptr(GPtrArray) requests = hr_guest_list_requests(guest);
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "guest");
		json_builder_add_string_value(b, guest->name);
		json_builder_set_member_name(b, "requests");
		json_builder_begin_array(b);
		for (guint i = 0; i < requests->len; i++)
			hr_request_add_json(g_ptr_array_index(requests, i), b);
		json_builder_end_array(b);
		json_builder_end_object(b);
	}
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

/* ---------------------------------------------------------------------- */
/* PUT /v1/guests/NAME/pcp {"policy": "latency"}: answered once the guest has */

typedef struct {
	SoupServerMessage *msg;
	HrPcpPolicy policy;
} HrApiPcpCall;

static void
hr_api_reply_pcp(SoupServerMessage *msg, guint status, const gchar *name, const HrPcpPolicy *policy,
		 gboolean applied)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *text = hr_pcp_policy_format(policy);

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "guest");
	json_builder_add_string_value(b, name);
	json_builder_set_member_name(b, "policy");
	json_builder_add_string_value(b, text);
	json_builder_set_member_name(b, "applied");
	json_builder_add_boolean_value(b, applied);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, status, node);
}

/* the batch of the guest's largest zone, from its latest report; 0 unknown */
static guint32
hr_api_pcp_batch(HrGuest *guest)
{
	const HrZone *big = NULL;

	for (guint z = 0; guest->status != NULL && z < guest->status->nr_zones; z++)
		if (big == NULL || guest->status->zones[z].managed_pages > big->managed_pages)
			big = &guest->status->zones[z];
	return big != NULL ? big->pcp_batch : 0;
}

static void
hr_api_pcp_done(HrGuest *guest, gint status, gpointer user_data)
{
	HrApiPcpCall *call = user_data;
	g_autofree gchar *text = hr_pcp_policy_format(&call->policy);

	if (status == VIRTIO_HUGEROOM_S_OK) {
		guest->pcp_want = call->policy;
		guest->pcp_want_set = TRUE;
		hr_api_reply_pcp(call->msg, SOUP_STATUS_OK, guest->name, &call->policy, TRUE);
	} else if (status < 0) {
		hr_api_reply_error(call->msg, SOUP_STATUS_GATEWAY_TIMEOUT,
				   "guest %s did not answer PCP policy %s in time; see its next "
				   "report (pcp.in_force) for what it runs",
				   guest->name, text);
	} else if (status == VIRTIO_HUGEROOM_S_INVALID) {
		hr_api_reply_error(call->msg, SOUP_STATUS_BAD_REQUEST,
				   "guest %s refused PCP policy %s: its kernel cannot set it (an "
				   "explicit high must be at least 4 * batch = %u pages and at most "
				   "the largest zone's managed pages / (8 * CPUs)); nothing changed",
				   guest->name, text, 4 * hr_api_pcp_batch(guest));
	} else {
		hr_api_reply_error(call->msg, SOUP_STATUS_CONFLICT,
				   "guest %s answered PCP policy %s with '%s'; nothing changed",
				   guest->name, text,
				   hr_result_status_to_string((guint32)status) != NULL
				       ? hr_result_status_to_string((guint32)status)
				       : "an unknown status");
	}
	soup_server_message_unpause(call->msg);
	g_object_unref(call->msg);
	g_free(call);
}

static gboolean
hr_api_parse_pcp(JsonObject *obj, HrPcpPolicy *policy, GError **error)
{
	static const gchar *const allowed[] = {"policy", "high", "batch", NULL};
	g_autoptr(GError) error_local = NULL;
	const gchar *text;
	guint64 high = 0;

	if (!hr_api_check_members(obj, "pcp", allowed, error))
		return FALSE;
	if (json_object_has_member(obj, "batch"))
		return hr_request_invalid(error,
					  "batch: no guest kernel hugeroom supports (6.1, 6.12) can "
					  "change it (zone_batchsize() sets it); set high only");
	if (!json_object_has_member(obj, "policy") ||
	    json_node_get_value_type(json_object_get_member(obj, "policy")) != G_TYPE_STRING)
		return hr_request_invalid(error,
					  "policy: missing or not a string; for example "
					  "{\"policy\":\"latency\"} or "
					  "{\"policy\":\"explicit\",\"high\":2000}");
	text = json_object_get_string_member(obj, "policy");
	if (!hr_api_get_uint(obj, "high", 1, G_MAXUINT32, &high, error))
		return FALSE;
	if (high != 0 && g_strcmp0(text, "explicit") == 0) {
		*policy = (HrPcpPolicy){VIRTIO_HUGEROOM_PCP_EXPLICIT, (guint32)high};
		return TRUE;
	}
	if (!hr_pcp_policy_parse(text, policy, &error_local) ||
	    (high != 0 && !hr_pcp_policy_check(&(HrPcpPolicy){policy->policy, (guint32)high},
					       &error_local)))
		return hr_request_invalid(error, "policy: %s", error_local->message);
	return TRUE;
}

/* @guest NULL: one not seen yet, called @name (the libvirt hook at prepare) */
static void
hr_api_pcp(HrApi *api, SoupServerMessage *msg, const gchar *name, HrGuest *guest)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrPcpPolicy policy;
	HrApiPcpCall *call;
	JsonObject *obj;

	if (!hr_api_check_method(msg, SOUP_METHOD_PUT))
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_pcp(obj, &policy, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
		return;
	}
	if (guest == NULL) {
		hr_pcp_stash(name, &policy);
		hr_api_reply_pcp(msg, SOUP_STATUS_ACCEPTED, name, &policy, FALSE);
		return;
	}
	if (!hr_pcp_supported(guest, &error) || guest->pcp_evacuations > 0) {
		if (error != NULL && !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED)) {
			hr_api_reply_error(msg, SOUP_STATUS_CONFLICT, "%s", error->message);
			return;
		}
		/* sent when its driver comes up, or when its donation ends */
		guest->pcp_want = policy;
		guest->pcp_want_set = TRUE;
		hr_api_reply_pcp(msg, SOUP_STATUS_ACCEPTED, guest->name, &policy, FALSE);
		return;
	}
	call = g_new0(HrApiPcpCall, 1);
	call->msg = g_object_ref(msg);
	call->policy = policy;
	if (!hr_pcp_send(api->daemon, guest, &policy, hr_api_pcp_done, call, &error)) {
		g_object_unref(call->msg);
		g_free(call);
		hr_api_reply_error(msg, hr_api_error_status(error), "%s", error->message);
		return;
	}
	soup_server_message_pause(msg);
}

static void
hr_api_guests_cb(SoupServer *server, SoupServerMessage *msg, const char *path,
		 GHashTable *query, gpointer user_data)
{
	HrApi *api = user_data;
	g_auto(GStrv) parts = NULL;
	HrGuest *guest;
	(void)server;
	(void)query;

	/* "/v1/guests", "/v1/guests/NAME", "/v1/guests/NAME/report" */
	parts = g_strsplit(path + strlen("/v1/guests"), "/", -1);
	if (g_strv_length(parts) <= 1 || (g_strv_length(parts) == 2 && parts[1][0] == '\0')) {
		g_autoptr(JsonNode) node = NULL;
		if (!hr_api_check_method(msg, SOUP_METHOD_GET))
			return;
		node = hr_api_guests_to_json(api->daemon);
		hr_api_reply_json(msg, SOUP_STATUS_OK, node);
		return;
	}
	if (parts[0][0] != '\0' || g_strv_length(parts) > 4) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such resource %s; see "
				   "/v1/guests", path);
		return;
	}
	guest = hr_daemon_find_guest(api->daemon, parts[1]);
	if (guest == NULL && g_strv_length(parts) == 3 && g_strcmp0(parts[2], "pcp") == 0) {
		hr_api_pcp(api, msg, parts[1], NULL);
		return;
	}
	if (guest == NULL) {
		g_autofree gchar *known = hr_api_known_guests(api->daemon);
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
				   "no guest named or with UUID '%s'; known guests: %s", parts[1],
				   known);
		return;
	}
	if (g_strv_length(parts) == 2) {
		g_autoptr(JsonNode) node = NULL;
		if (!hr_api_check_method(msg, SOUP_METHOD_GET))
			return;
		node = hr_api_guest_to_json(guest);
		hr_api_reply_json(msg, SOUP_STATUS_OK, node);
		return;
	}
	if (g_strcmp0(parts[2], "requests") == 0) {
		hr_api_requests(msg, guest, parts[3]);
		return;
	}
	if (g_strv_length(parts) == 4) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such resource %s; see "
				   "/v1/guests/%s/requests/ID",
				   path, guest->name);
		return;
	}
	if (g_strcmp0(parts[2], "evacuate") == 0) {
		hr_api_submit(api, msg, guest, HR_REQUEST_EVACUATE);
		return;
	}
	if (g_strcmp0(parts[2], "capture") == 0) {
		hr_api_submit(api, msg, guest, HR_REQUEST_CAPTURE);
		return;
	}
	if (g_strcmp0(parts[2], "return") == 0) {
		hr_api_submit(api, msg, guest, HR_REQUEST_RETURN);
		return;
	}
	if (g_strcmp0(parts[2], "cancel") == 0) {
		hr_api_cancel(msg, guest);
		return;
	}
	if (g_strcmp0(parts[2], "pcp") == 0) {
		hr_api_pcp(api, msg, guest->name, guest);
		return;
	}
	if (g_strcmp0(parts[2], "report") == 0) {
		g_autoptr(GError) error = NULL;
		g_autoptr(JsonBuilder) b = NULL;
		g_autoptr(JsonNode) node = NULL;
		guint64 request_id;
		if (!hr_api_check_method(msg, SOUP_METHOD_POST))
			return;
		request_id = hr_daemon_request_report(api->daemon, guest, &error);
		if (request_id == 0) {
			hr_api_reply_error(msg, SOUP_STATUS_CONFLICT, "%s; wait for its QEMU to "
					   "reconnect and retry", error->message);
			return;
		}
		b = json_builder_new();
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "guest");
		json_builder_add_string_value(b, guest->name);
		hr_json_add_int(b, "request_id", request_id);
		json_builder_end_object(b);
		node = json_builder_get_root(b);
		hr_api_reply_json(msg, SOUP_STATUS_ACCEPTED, node);
		return;
	}
	hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such action '%s' on guest %s; "
			   "supported: report, evacuate, capture, return, cancel, requests, pcp",
			   parts[2], guest->name);
}

/* ---------------------------------------------------------------------- */
/* Reservations, the host, plans */

static const gchar *const reservation_fields[] = {"bytes", "size", "node", "deadline_s",
						  "strict", "requester", NULL};

static gboolean
hr_api_parse_reservation(JsonObject *obj, guint64 *bytes, gint *node, guint64 *deadline_s,
			 gboolean *strict, const gchar **requester, GError **error)
{
	JsonNode *n;
	guint64 v;

	if (!hr_api_check_members(obj, "a reservation", reservation_fields, error))
		return FALSE;
	*bytes = 0;
	if (!hr_api_get_uint(obj, "bytes", 1, G_MAXINT64, bytes, error))
		return FALSE;
	n = json_object_get_member(obj, "size");
	if (n != NULL) {
		if (*bytes != 0)
			return hr_request_invalid(error, "size: give bytes or size, not both");
		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING ||
		    !hr_parse_size(json_node_get_string(n), bytes)) {
			g_autofree gchar *text = hr_api_node_to_string(n);
			return hr_request_invalid(error, "size: %s is not a size such as \"1G\", \"512M\"",
						  text);
		}
	}
	if (*bytes == 0)
		return hr_request_invalid(error,
					  "bytes: missing; give {\"bytes\":N} or {\"size\":\"1G\"}");
	*node = -1;
	n = json_object_get_member(obj, "node");
	if (n != NULL && !JSON_NODE_HOLDS_NULL(n)) {
		v = 0;
		if (!hr_api_get_uint(obj, "node", 0, 1023, &v, error))
			return FALSE;
		*node = (gint)v;
	}
	*deadline_s = 0;
	if (!hr_api_get_uint(obj, "deadline_s", 0, 86400, deadline_s, error))
		return FALSE;
	*strict = FALSE;
	if (!hr_api_get_bool(obj, "strict", strict, error))
		return FALSE;
	*requester = NULL;
	n = json_object_get_member(obj, "requester");
	if (n != NULL) {
		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING ||
		    !g_utf8_validate(json_node_get_string(n), -1, NULL) ||
		    strlen(json_node_get_string(n)) > 256)
			return hr_request_invalid(error,
						  "requester: must be a string of at most 256 bytes");
		*requester = json_node_get_string(n);
	}
	return TRUE;
}

static void
hr_api_reply_reservation(SoupServerMessage *msg, guint status, HrPrepare *prepare,
			 HrReservation *r)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autoptr(JsonNode) obj = NULL;
	const gchar *plan = hr_prepare_get_last_plan(prepare, r->id);

	hr_reservation_add_json(r, b, TRUE);
	obj = json_builder_get_root(b);
	json_object_set_string_member(json_node_get_object(obj), "last_plan", plan);
	if (plan == NULL)
		json_object_set_null_member(json_node_get_object(obj), "last_plan");
	node = g_steal_pointer(&obj);
	hr_api_reply_json(msg, status, node);
}

static guint
hr_api_reservation_error_status(const GError *error)
{
	if (g_error_matches(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_NOT_FOUND))
		return SOUP_STATUS_NOT_FOUND;
	if (g_error_matches(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID))
		return SOUP_STATUS_CONFLICT;
	return SOUP_STATUS_BAD_REQUEST;
}

static void
hr_api_reservations_cb(SoupServer *server, SoupServerMessage *msg, const char *path,
		       GHashTable *query, gpointer user_data)
{
	HrApi *api = user_data;
	HrPrepare *prepare = hr_daemon_get_prepare(api->daemon);
	const gchar *method = soup_server_message_get_method(msg);
	g_auto(GStrv) parts = NULL;
	g_autoptr(GError) error = NULL;
	HrReservation *r;
	(void)server;
	(void)query;

	if (prepare == NULL) {
		hr_api_reply_error(msg, SOUP_STATUS_SERVICE_UNAVAILABLE, "reservations are not running");
		return;
	}
	/* "/v1/reservations", "/v1/reservations/ID", "/v1/reservations/ID/ACTION" */
	parts = g_strsplit(path + strlen("/v1/reservations"), "/", -1);
	if (parts[0] == NULL || (parts[0][0] == '\0' && (parts[1] == NULL || parts[1][0] == '\0'))) {
		if (g_strcmp0(method, SOUP_METHOD_POST) == 0) {
			g_autoptr(JsonParser) parser = json_parser_new();
			JsonObject *obj = hr_api_parse_body(msg, parser, &error);
			guint64 bytes, deadline_s;
			gint node;
			gboolean strict;
			const gchar *requester;

			if (obj == NULL ||
			    !hr_api_parse_reservation(obj, &bytes, &node, &deadline_s, &strict,
						      &requester, &error)) {
				hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
				return;
			}
			r = hr_prepare_create(prepare, bytes, node, deadline_s, strict, requester,
					      &error);
			if (r == NULL) {
				hr_api_reply_error(msg, hr_api_reservation_error_status(error), "%s",
						   error->message);
				return;
			}
			hr_api_reply_reservation(msg, SOUP_STATUS_ACCEPTED, prepare, r);
			return;
		}
		if (hr_api_check_method(msg, SOUP_METHOD_GET)) {
			GPtrArray *list = hr_reservation_store_list(hr_prepare_get_store(prepare));
			g_autoptr(JsonBuilder) b = json_builder_new();
			g_autoptr(JsonNode) node = NULL;
			json_builder_begin_object(b);
			json_builder_set_member_name(b, "reservations");
			json_builder_begin_array(b);
			for (guint i = 0; i < list->len; i++)
				hr_reservation_add_json(g_ptr_array_index(list, i), b, FALSE);
			json_builder_end_array(b);
			json_builder_end_object(b);
			node = json_builder_get_root(b);
			hr_api_reply_json(msg, SOUP_STATUS_OK, node);
		}
		return;
	}
	if (parts[0][0] != '\0' || parts[1] == NULL || (parts[2] != NULL && parts[3] != NULL)) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
				   "no such resource %s; use /v1/reservations/ID", path);
		return;
	}
	r = hr_reservation_store_find(hr_prepare_get_store(prepare), parts[1]);
	if (r == NULL) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
				   "no reservation %s (GET /v1/reservations lists them)", parts[1]);
		return;
	}
	if (parts[2] == NULL) {
		if (g_strcmp0(method, SOUP_METHOD_DELETE) == 0) {
			if (!hr_prepare_release(prepare, r->id, &error)) {
				hr_api_reply_error(msg, hr_api_reservation_error_status(error), "%s",
						   error->message);
				return;
			}
			hr_api_reply_reservation(msg, SOUP_STATUS_OK, prepare, r);
			return;
		}
		if (hr_api_check_method(msg, SOUP_METHOD_GET))
			hr_api_reply_reservation(msg, SOUP_STATUS_OK, prepare, r);
		return;
	}
	if (g_strcmp0(parts[2], "release") == 0 || g_strcmp0(parts[2], "consume") == 0) {
		gboolean ok;
		if (!hr_api_check_method(msg, SOUP_METHOD_POST))
			return;
		ok = parts[2][0] == 'r' ? hr_prepare_release(prepare, r->id, &error)
					: hr_prepare_consume(prepare, r->id, &error);
		if (!ok) {
			hr_api_reply_error(msg, hr_api_reservation_error_status(error), "%s",
					   error->message);
			return;
		}
		hr_api_reply_reservation(msg, SOUP_STATUS_OK, prepare, r);
		return;
	}
	hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
			   "no such action '%s' on reservation %s; supported: release, consume",
			   parts[2], r->id);
}

/* @node from hr_prepare_*_json(), NULL with @error, or NULL when @prepare was NULL */
static void
hr_api_reply_prepare_json(SoupServerMessage *msg, JsonNode *node, const GError *error)
{
	if (node == NULL) {
		hr_api_reply_error(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, "%s",
				   error != NULL ? error->message : "reservations are not running");
		return;
	}
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

static void
hr_api_host_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
	       gpointer user_data)
{
	HrApi *api = user_data;
	HrPrepare *prepare = hr_daemon_get_prepare(api->daemon);
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) node = NULL;
	(void)server;
	(void)query;

	if (g_strcmp0(path, "/v1/host") != 0) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such resource %s", path);
		return;
	}
	if (!hr_api_check_method(msg, SOUP_METHOD_GET))
		return;
	node = prepare != NULL ? hr_prepare_host_json(prepare, &error) : NULL;
	hr_api_reply_prepare_json(msg, node, error);
}

/* POST /v1/plan: what the planner would do for a reservation, without doing it */
static void
hr_api_plan_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
	       gpointer user_data)
{
	HrApi *api = user_data;
	HrPrepare *prepare = hr_daemon_get_prepare(api->daemon);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) node = NULL;
	HrPlanRequest req = {0};
	JsonObject *obj;
	guint64 deadline_s;
	const gchar *requester;
	(void)server;
	(void)query;

	if (g_strcmp0(path, "/v1/plan") != 0) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such resource %s", path);
		return;
	}
	if (!hr_api_check_method(msg, SOUP_METHOD_POST))
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_reservation(obj, &req.bytes, &req.node, &deadline_s,
						     &req.strict, &requester, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
		return;
	}
	req.deadline_ms = deadline_s * 1000;
	node = prepare != NULL ? hr_prepare_plan_json(prepare, &req, &error) : NULL;
	hr_api_reply_prepare_json(msg, node, error);
}

static void
hr_api_metrics_cb(SoupServer *server, SoupServerMessage *msg, const char *path,
		  GHashTable *query, gpointer user_data)
{
	HrApi *api = user_data;
	gchar *text;
	(void)server;
	(void)query;

	if (g_strcmp0(path, "/metrics") != 0) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "no such resource %s", path);
		return;
	}
	if (!hr_api_check_method(msg, SOUP_METHOD_GET))
		return;
	text = hr_api_metrics(api->daemon);
	soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
	soup_server_message_set_response(msg, "text/plain; version=0.0.4", SOUP_MEMORY_TAKE, text,
					 strlen(text));
}

static void
hr_api_default_cb(SoupServer *server, SoupServerMessage *msg, const char *path,
		  GHashTable *query, gpointer user_data)
{
	(void)server;
	(void)query;
	(void)user_data;
	hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND,
			   "no such resource %s; try /v1/guests, /v1/reservations, /v1/host or "
			   "/metrics",
			   path);
}

HrApi *
hr_api_new(HrDaemon *daemon)
{
	HrApi *api = g_new0(HrApi, 1);
	api->daemon = daemon;
	api->server = soup_server_new("server-header", "hugeroomd/" PACKAGE_VERSION, NULL);
	soup_server_add_handler(api->server, NULL, hr_api_default_cb, api, NULL);
	soup_server_add_handler(api->server, "/v1/guests", hr_api_guests_cb, api, NULL);
	soup_server_add_handler(api->server, "/metrics", hr_api_metrics_cb, api, NULL);
	soup_server_add_handler(api->server, "/v1/reservations", hr_api_reservations_cb, api, NULL);
	soup_server_add_handler(api->server, "/v1/host", hr_api_host_cb, api, NULL);
	soup_server_add_handler(api->server, "/v1/plan", hr_api_plan_cb, api, NULL);
	return api;
}

void
hr_api_free(HrApi *api)
{
	if (api == NULL)
		return;
	if (api->service != NULL) {
		g_socket_service_stop(api->service);
		g_socket_listener_close(G_SOCKET_LISTENER(api->service));
		g_clear_object(&api->service);
	}
	g_clear_object(&api->socket);
	soup_server_disconnect(api->server);
	g_object_unref(api->server);
	g_free(api);
}

static void
hr_api_refused_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	g_autoptr(GSocketConnection) connection = user_data;
	g_autoptr(GError) error = NULL;
	if (!g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), res, NULL, &error))
		g_debug("refusal not delivered: %s", error->message);
	g_io_stream_close(G_IO_STREAM(connection), NULL, NULL);
}

/* answer 403 without HTTP parsing: the peer gets nothing else from us */
static void
hr_api_refuse(GSocketConnection *connection, const gchar *why)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *msg = g_strdup_printf("%s: run hugeroomctl as root or as the user "
						"hugeroomd runs as",
						why);
	g_autofree gchar *body = NULL;
	gchar *reply;
	GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(connection));

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "error");
	json_builder_add_string_value(b, msg);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	body = json_to_string(node, FALSE);
	reply = g_strdup_printf("HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
				"Content-Length: %" G_GSIZE_FORMAT "\r\nConnection: close\r\n\r\n%s",
				strlen(body), body);
	g_output_stream_write_all_async(out, reply, strlen(reply), G_PRIORITY_DEFAULT, NULL,
					hr_api_refused_cb, g_object_ref(connection));
	/* the stream does not copy: free the text once the connection goes */
	g_object_set_data_full(G_OBJECT(connection), "hr-api-refusal", reply, g_free);
}

/*
 * We accept connections ourselves and hand them to libsoup as streams:
 * the peer is checked once per connection, and libsoup 3.2's own listener
 * leaks a socket (and its fd) per connection.
 */
static gboolean
hr_api_incoming_cb(GSocketService *service, GSocketConnection *connection, GObject *source,
		   gpointer user_data)
{
	HrApi *api = user_data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GSocketAddress) local = NULL;
	g_autoptr(GSocketAddress) remote = NULL;
	(void)service;
	(void)source;

	if (!hr_socket_peer_is_trusted(g_socket_connection_get_socket(connection), &error)) {
		g_warning("API connection refused: %s", error->message);
		hr_api_refuse(connection, error->message);
		return TRUE;
	}
	local = g_socket_connection_get_local_address(connection, NULL);
	remote = g_socket_connection_get_remote_address(connection, NULL);
	if (!soup_server_accept_iostream(api->server, G_IO_STREAM(connection), local, remote,
					 &error))
		g_warning("API connection dropped: %s", error->message);
	return TRUE;
}

gboolean
hr_api_listen(HrApi *api, const gchar *path, GError **error)
{
	g_autoptr(GSocket) socket = hr_socket_listen_unix(path, 0660, error);
	g_autoptr(GSocketService) service = NULL;

	if (socket == NULL)
		return FALSE;
	service = g_socket_service_new();
	if (!g_socket_listener_add_socket(G_SOCKET_LISTENER(service), socket, NULL, error)) {
		g_prefix_error(error, "cannot serve HTTP on %s: ", path);
		return FALSE;
	}
	g_signal_connect(service, "incoming", G_CALLBACK(hr_api_incoming_cb), api);
	g_socket_service_start(service);
	api->service = g_steal_pointer(&service);
	api->socket = g_steal_pointer(&socket);
	return TRUE;
}
