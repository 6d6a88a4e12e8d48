/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The HTTP/JSON API (host/API.md, openapi.json): one route table, one
 * dispatcher that checks who is asking (hr-api-auth) before any handler
 * runs, on the Unix socket and optionally on TCP with TLS.
 */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api.h"

#include <libsoup/soup.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "hr-acceptor.h"
#include "hr-api-auth.h"
#include "hr-api-json.h"
#include "hr-events.h"
#include "hr-json.h"
#include "hr-metrics.h"
#include "hr-monitor.h"
#include "hr-pcp.h"
#include "hr-prometheus.h"
#include "hr-socket.h"

/* a body larger than this is refused with 413 */
#define HR_API_MAX_BODY (64 * 1024)
/* GET /v1/host, /metrics and POST /v1/plan answer from a read at most this old */
#define HR_API_HOST_MAX_AGE_US (250 * 1000)
/* a request not read whole this long after it began gets a 408 */
#define HR_API_REQUEST_TIMEOUT_S 10
/* a connection that sends nothing for this long is closed (a stalled TLS handshake) */
#define HR_API_IDLE_TIMEOUT_S 15
/* open API connections one uid other than root may have */
#define HR_API_MAX_PER_UID 64
#define HR_API_LISTEN_BACKLOG 128
/* a kept-alive connection with no new request for this long is closed */
#define HR_API_KEEPALIVE_IDLE_S 10
#define HR_API_REQUEST_TIMER_KEY "hr-api-request-timer"

struct _HrApi {
	HrCore *core;
	HrPrepare *prepare;
	HrEventStream *events;
	SoupServer *server;
	HrAcceptor *acceptor; /* the Unix socket */
	GSocket *socket;
	GPtrArray *tcp_acceptors; /* HrAcceptor, one per address */
	GTlsCertificate *certificate;
	HrApiTokens *tokens; /* NULL without api_listen */
	gchar *tokens_path;  /* the file they were read from */
	gid_t admin_gid;
	gid_t read_gid;
	HrMetrics *metrics;
	HrMetricsHistogram *latency; /* request handling, by route */
	HrHostReader *host;	     /* the host's /proc and /sys, read in a thread */
	JsonNode *host_json;	     /* GET /v1/host's answer from the snapshot host_json_serial */
	guint64 host_json_serial;
	GHashTable *idle;      /* HrApiConn set: kept alive, waiting for a request */
	guint64 n_connections; /* accepted */
	guint64 n_reused;      /* answers on a connection after its first */
	guint trim_id;
};

typedef void (*HrApiHandler)(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);

typedef struct {
	HrApiRoute info;
	HrApiHandler handler;
} HrApiRouteEntry;

/* ---------------------------------------------------------------------- */
/* Answers */

static void
hr_api_reply_json(SoupServerMessage *msg, guint status, JsonNode *node)
{
	g_autofree gchar *body = json_to_string(node, TRUE);
	gsize len = strlen(body);
	soup_server_message_set_status(msg, status, NULL);
	soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE,
					 g_steal_pointer(&body), len);
}

static gchar *
hr_api_error_body(const gchar *code, const gchar *text)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "error");
	json_builder_add_string_value(b, text);
	json_builder_set_member_name(b, "code");
	json_builder_add_string_value(b, code);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	return json_to_string(node, FALSE);
}

static void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *code, const gchar *format,
		   ...) G_GNUC_PRINTF(4, 5);

/* {"error": what went wrong, "code": one of host/API.md's error codes} */
static void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *code, const gchar *format,
		   ...)
{
	g_autofree gchar *text = NULL;
	gchar *body;
	va_list args;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	body = hr_api_error_body(code, text);
	soup_server_message_set_status(msg, status, NULL);
	soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, body,
					 strlen(body));
}

/* a GError of the core or a guest: its status and code */
static void
hr_api_reply_gerror(SoupServerMessage *msg, const GError *error)
{
	guint status = SOUP_STATUS_CONFLICT;
	const gchar *code = "conflict";

	if (error->domain == G_IO_ERROR) {
		switch (error->code) {
		case G_IO_ERROR_INVALID_ARGUMENT:
			status = SOUP_STATUS_BAD_REQUEST;
			code = "invalid_argument";
			break;
		case G_IO_ERROR_NOT_FOUND:
			status = SOUP_STATUS_NOT_FOUND;
			code = "unknown_request";
			break;
		case G_IO_ERROR_NOT_CONNECTED:
			code = "not_connected";
			break;
		case G_IO_ERROR_NOT_SUPPORTED:
			code = "not_supported";
			break;
		default:
			break;
		}
	}
	hr_api_reply_error(msg, status, code, "%s", error->message);
}

static void
hr_api_reply_reservation_gerror(SoupServerMessage *msg, const GError *error)
{
	if (g_error_matches(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_NOT_FOUND))
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "unknown_reservation", "%s",
				   error->message);
	else if (g_error_matches(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID))
		hr_api_reply_error(msg, SOUP_STATUS_CONFLICT, "wrong_state", "%s", error->message);
	else
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
}

static gchar *
hr_api_known_guests(HrCore *core)
{
	GPtrArray *guests = hr_core_get_guests(core);
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

/* the guest the path names, or NULL after a 404 */
static HrGuest *
hr_api_find_guest(HrApi *api, SoupServerMessage *msg, const gchar *name)
{
	HrGuest *guest = hr_core_find_guest(api->core, name);
	if (guest == NULL) {
		g_autofree gchar *known = hr_api_known_guests(api->core);
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "unknown_guest",
				   "no guest named or with UUID '%s'; known guests: %s", name,
				   known);
	}
	return guest;
}

static HrReservation *
hr_api_find_reservation(HrApi *api, SoupServerMessage *msg, const gchar *id)
{
	HrReservation *r = hr_reservation_store_find(hr_prepare_get_store(api->prepare), id);
	if (r == NULL)
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "unknown_reservation",
				   "no reservation %s (GET /v1/reservations lists them)", id);
	return r;
}

/* ---------------------------------------------------------------------- */
/* Bodies */

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
					  "%s: %" G_GINT64_FORMAT
					  " is out of range %" G_GUINT64_FORMAT
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
		if (*str != '\0' &&
		    g_ascii_string_to_unsigned(str, base, 0, G_MAXUINT64, value, NULL))
			return TRUE;
	}
	{
		g_autofree gchar *text = hr_api_node_to_string(node);
		return hr_request_invalid(
		    error,
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
			return hr_request_invalid(
			    error, "ranges[%u]: must be {\"start\":..,\"end\":..}", i);
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
	const gchar *const *allowed = kind == HR_REQUEST_EVACUATE  ? evacuate
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
		return hr_request_invalid(error,
					  "blocks: return needs blocks, gpas or \"all\":true");
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

static const gchar *const reservation_fields[] = {"bytes",  "size",	 "node", "deadline_s",
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
			return hr_request_invalid(
			    error,
			    "size: %s is not a size such as \"1G\", \"512M\" (at most "
			    "9223372036854775807 bytes)",
			    text);
		}
	}
	if (*bytes == 0)
		return hr_request_invalid(
		    error, "bytes: missing; give {\"bytes\":N} or {\"size\":\"1G\"}");
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
			return hr_request_invalid(
			    error, "requester: must be a string of at most 256 bytes");
		*requester = json_node_get_string(n);
	}
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Guests and their requests */

static void
hr_api_reply_request_ref(SoupServerMessage *msg, guint status, HrGuest *guest, HrRequest *request)
{
	g_autoptr(JsonNode) node = hr_api_request_ref_to_json(guest, request);
	hr_api_reply_json(msg, status, node);
}

static void
hr_api_guests(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonNode) node = hr_api_guests_to_json(api->core);
	(void)query;
	(void)args;
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

static void
hr_api_guest(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonNode) node = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, args[0]);
	(void)query;

	if (guest == NULL)
		return;
	node = hr_api_guest_to_json(guest);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

static void
hr_api_report(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonBuilder) b = NULL;
	g_autoptr(JsonNode) node = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, args[0]);
	guint64 request_id;
	(void)query;

	if (guest == NULL)
		return;
	request_id = hr_core_request_report(api->core, guest, &error);
	if (request_id == 0) {
		hr_api_reply_error(msg, SOUP_STATUS_CONFLICT, "not_connected",
				   "%s; wait for its QEMU to reconnect and retry", error->message);
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
}

static void
hr_api_submit(HrApi *api, SoupServerMessage *msg, const gchar *name, HrRequestKind kind)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GArray) gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
	g_autoptr(GArray) ranges = g_array_new(FALSE, FALSE, sizeof(HrRange));
	g_autoptr(GError) error = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, name);
	HrRequestParams params;
	JsonObject *obj;
	HrRequest *request;

	if (guest == NULL)
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_params(obj, kind, &params, gpas, ranges, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	request = hr_core_submit(api->core, guest, &params, &error);
	if (request == NULL) {
		hr_api_reply_gerror(msg, error);
		return;
	}
	hr_api_reply_request_ref(msg, SOUP_STATUS_ACCEPTED, guest, request);
}

static void
hr_api_evacuate(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_EVACUATE);
}

static void
hr_api_capture(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_CAPTURE);
}

static void
hr_api_return(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_RETURN);
}

static void
hr_api_cancel(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	static const gchar *const allowed[] = {"request_id", NULL};
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, args[0]);
	guint64 id = 0;
	JsonObject *obj;
	(void)query;

	if (guest == NULL)
		return;
	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_check_members(obj, "cancel", allowed, &error) ||
	    !hr_api_get_uint(obj, "request_id", 1, G_MAXINT64, &id, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	if (id == 0) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
				   "request_id: missing; cancel names the request to stop");
		return;
	}
	if (!hr_guest_cancel_request(guest, id, &error)) {
		hr_api_reply_gerror(msg, error);
		return;
	}
	hr_api_reply_request_ref(msg, SOUP_STATUS_ACCEPTED, guest,
				 hr_guest_find_request(guest, id));
}

static void
hr_api_requests(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autoptr(GPtrArray) requests = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, args[0]);
	(void)query;

	if (guest == NULL)
		return;
	requests = hr_guest_list_requests(guest);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "guest");
	json_builder_add_string_value(b, guest->name);
	json_builder_set_member_name(b, "requests");
	json_builder_begin_array(b);
	for (guint i = 0; i < requests->len; i++)
		hr_request_add_json(g_ptr_array_index(requests, i), b);
	json_builder_end_array(b);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

/*
 * @guest's request @id, or that of an earlier QEMU process of the same VM
 * (same name and UUID) on this host: a request whose command was running
 * when the VM migrated ended on the source's entry (SPEC 1.7 item 5).
 */
static HrRequest *
hr_api_find_request(HrApi *api, HrGuest *guest, guint64 id)
{
	static const guint8 zero[16];
	GPtrArray *guests = hr_core_get_guests(api->core);
	HrRequest *request = hr_guest_find_request(guest, id);

	for (guint i = 0; request == NULL && i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g != guest && memcmp(g->uuid_bytes, zero, sizeof(zero)) != 0 &&
		    memcmp(g->uuid_bytes, guest->uuid_bytes, sizeof(g->uuid_bytes)) == 0 &&
		    g_strcmp0(g->name, guest->name) == 0)
			request = hr_guest_find_request(g, id);
	}
	return request;
}

static void
hr_api_request(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	HrGuest *guest = hr_api_find_guest(api, msg, args[0]);
	HrRequest *request = NULL;
	guint64 id = 0;
	(void)query;

	if (guest == NULL)
		return;
	if (g_ascii_string_to_unsigned(args[1], 10, 1, G_MAXUINT64, &id, NULL))
		request = hr_api_find_request(api, guest, id);
	if (request == NULL) {
		hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "unknown_request",
				   "guest %s has no request '%s' (the daemon keeps the last %u "
				   "finished requests per guest, and none across a restart)",
				   guest->name, args[1], guest->history);
		return;
	}
	hr_request_add_json(request, b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

/* ---------------------------------------------------------------------- */
/* Reservations, the host, plans */

static void
hr_api_reply_reservation(HrApi *api, SoupServerMessage *msg, guint status, HrReservation *r)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	const gchar *plan = hr_prepare_get_last_plan(api->prepare, r->id);

	hr_api_reservation_add_json(r, b, TRUE);
	node = json_builder_get_root(b);
	json_object_set_string_member(json_node_get_object(node), "last_plan", plan);
	if (plan == NULL)
		json_object_set_null_member(json_node_get_object(node), "last_plan");
	hr_api_reply_json(msg, status, node);
}

static void
hr_api_reservation_create(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	JsonObject *obj = hr_api_parse_body(msg, parser, &error);
	guint64 bytes, deadline_s;
	gint node;
	gboolean strict;
	const gchar *requester;
	HrReservation *r;
	(void)query;
	(void)args;

	if (obj == NULL || !hr_api_parse_reservation(obj, &bytes, &node, &deadline_s, &strict,
						     &requester, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	r = hr_prepare_create(api->prepare, bytes, node, deadline_s, strict, requester, &error);
	if (r == NULL) {
		hr_api_reply_reservation_gerror(msg, error);
		return;
	}
	hr_api_reply_reservation(api, msg, SOUP_STATUS_ACCEPTED, r);
}

static void
hr_api_reservations(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	GPtrArray *list = hr_reservation_store_list(hr_prepare_get_store(api->prepare));
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	(void)query;
	(void)args;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "reservations");
	json_builder_begin_array(b);
	for (guint i = 0; i < list->len; i++)
		hr_api_reservation_add_json(g_ptr_array_index(list, i), b, FALSE);
	json_builder_end_array(b);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

static void
hr_api_reply_reserve(HrApi *api, SoupServerMessage *msg)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;

	hr_reserve_add_json(hr_prepare_get_reserve(api->prepare), b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

static void
hr_api_reserve(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_reply_reserve(api, msg);
}

static const gchar *const reserve_fields[] = {"bytes", "size", "node", NULL};

/* {"size": "10G"} or {"bytes": N}, and "node"; 0 (or "0") drops the reserve */
static void
hr_api_reserve_set(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	JsonObject *obj = hr_api_parse_body(msg, parser, &error);
	guint64 bytes = 0, v = 0;
	gint node = HR_RESERVATION_ANY_NODE;
	JsonNode *n;
	(void)query;
	(void)args;

	if (obj == NULL || !hr_api_check_members(obj, "a reserve", reserve_fields, &error) ||
	    !hr_api_get_uint(obj, "bytes", 0, G_MAXINT64, &bytes, &error))
		goto invalid;
	n = json_object_get_member(obj, "size");
	if (n != NULL) {
		gint ignored;
		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
			g_set_error(&error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
				    "size: give a string such as \"10G\"");
			goto invalid;
		}
		if (!hr_reserve_parse(json_node_get_string(n), &bytes, &ignored, &error))
			goto invalid;
	}
	n = json_object_get_member(obj, "node");
	if (n != NULL && !JSON_NODE_HOLDS_NULL(n)) {
		if (!hr_api_get_uint(obj, "node", 0, 1023, &v, &error))
			goto invalid;
		node = (gint)v;
	}
	if (!hr_reserve_set(hr_prepare_get_reserve(api->prepare), bytes, node, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_CONFLICT, "conflict", "%s", error->message);
		return;
	}
	hr_api_reply_reserve(api, msg);
	return;
invalid:
	hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
			   error != NULL ? error->message : "invalid body");
}

static void
hr_api_reservation(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	HrReservation *r = hr_api_find_reservation(api, msg, args[0]);
	(void)query;
	if (r != NULL)
		hr_api_reply_reservation(api, msg, SOUP_STATUS_OK, r);
}

/* release (cancel) or consume the reservation the path names */
static void
hr_api_reservation_act(HrApi *api, SoupServerMessage *msg, const gchar *id,
		       gboolean (*act)(HrPrepare *, const gchar *, GError **))
{
	g_autoptr(GError) error = NULL;
	HrReservation *r = hr_api_find_reservation(api, msg, id);

	if (r == NULL)
		return;
	if (!act(api->prepare, r->id, &error)) {
		hr_api_reply_reservation_gerror(msg, error);
		return;
	}
	hr_api_reply_reservation(api, msg, SOUP_STATUS_OK, r);
}

static void
hr_api_reservation_release(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_reservation_act(api, msg, args[0], hr_prepare_release);
}

static void
hr_api_reservation_consume(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_reservation_act(api, msg, args[0], hr_prepare_consume);
}

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
	}
	hr_api_reply_prepare_json(msg, host != NULL ? api->host_json : NULL, error);
}

static void
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
	g_autoptr(JsonNode) node =
	    host != NULL ? hr_prepare_plan_json(api->prepare, host, data) : NULL;
	hr_api_reply_prepare_json(msg, node, error);
}

/* POST /v1/plan: what the planner would do for a reservation, without doing it */
static void
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
	    "# HELP hugeroom_api_connections_total connections accepted on the "
	    "API's sockets\n"
	    "# TYPE hugeroom_api_connections_total counter\n"
	    "hugeroom_api_connections_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_connection_reuses_total answers on a "
	    "connection after its first (keep-alive)\n"
	    "# TYPE hugeroom_api_connection_reuses_total counter\n"
	    "hugeroom_api_connection_reuses_total %" G_GUINT64_FORMAT "\n"
	    "# HELP hugeroom_api_idle_connections connections kept open for "
	    "their next request\n"
	    "# TYPE hugeroom_api_idle_connections gauge\n"
	    "hugeroom_api_idle_connections %u\n",
	    hr_event_stream_get_n_clients(api->events), hr_event_stream_get_delivered(api->events),
	    hr_event_stream_get_dropped(api->events), api->n_connections, api->n_reused,
	    g_hash_table_size(api->idle));
	len = out->len;
	soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
	soup_server_message_set_response(msg, "text/plain; version=0.0.4", SOUP_MEMORY_TAKE,
					 g_string_free(g_steal_pointer(&out), FALSE), len);
}

static void
hr_api_metrics(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_with_host(api, msg, hr_api_metrics_reply, NULL, NULL);
}

/* the connection under a (TLS) stream, for its socket's timeout */
static GSocket *
hr_api_base_socket(GIOStream *io)
{
	while (G_IS_TLS_CONNECTION(io)) {
		GIOStream *base = NULL;
		g_object_get(io, "base-io-stream", &base, NULL);
		g_object_unref(base); /* the TLS connection keeps it */
		io = base;
	}
	return G_IS_SOCKET_CONNECTION(io) ? g_socket_connection_get_socket(G_SOCKET_CONNECTION(io))
					  : NULL;
}

static GSocket *
hr_api_message_socket(SoupServerMessage *msg);

static void
hr_api_events(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GIOStream) io = NULL;
	const gchar *guest;
	guint32 mask;
	GSocket *socket;
	(void)args;

	if (!hr_event_stream_parse_filter(query, &mask, &guest, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	/* an event stream's client is quiet for as long as it listens, and
	 * the stream between events and pings: no HR_API_IDLE_TIMEOUT_S */
	socket = hr_api_message_socket(msg);
	/* the stream is ours from here: libsoup sends nothing more on it */
	io = soup_server_message_steal_connection(msg);
	if (socket != NULL)
		g_socket_set_timeout(socket, 0);
	hr_event_stream_add_client(api->events, io, mask, guest);
}

/* ---------------------------------------------------------------------- */
/* The route table */

#define ADMIN TRUE
#define READ FALSE

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
		hr_api_reply_error(call->msg, SOUP_STATUS_GATEWAY_TIMEOUT, "guest_timeout",
				   "guest %s did not answer PCP policy %s in time; see its next "
				   "report (pcp.in_force) for what it runs",
				   guest->name, text);
	} else if (status == VIRTIO_HUGEROOM_S_INVALID) {
		hr_api_reply_error(
		    call->msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
		    "guest %s refused PCP policy %s: its kernel cannot set it (an "
		    "explicit high must be at least 4 * batch = %u pages and at most "
		    "the largest zone's managed pages / (8 * CPUs)); nothing changed",
		    guest->name, text, 4 * hr_api_pcp_batch(guest));
	} else {
		hr_api_reply_error(call->msg, SOUP_STATUS_CONFLICT, "conflict",
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
		return hr_request_invalid(
		    error, "batch: no guest kernel hugeroom supports (6.1, 6.12) can "
			   "change it (zone_batchsize() sets it); set high only");
	if (!json_object_has_member(obj, "policy") ||
	    json_node_get_value_type(json_object_get_member(obj, "policy")) != G_TYPE_STRING)
		return hr_request_invalid(error, "policy: missing or not a string; for example "
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
	    (high != 0 &&
	     !hr_pcp_policy_check(&(HrPcpPolicy){policy->policy, (guint32)high}, &error_local)))
		return hr_request_invalid(error, "policy: %s", error_local->message);
	return TRUE;
}

/* a guest not seen yet, called {name}: kept for it (the libvirt hook at prepare) */
static void
hr_api_pcp(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrGuest *guest = hr_core_find_guest(api->core, args[0]);
	HrPcpPolicy policy;
	HrApiPcpCall *call;
	JsonObject *obj;
	(void)query;

	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_pcp(obj, &policy, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	if (guest == NULL) {
		hr_pcp_stash(args[0], &policy);
		hr_api_reply_pcp(msg, SOUP_STATUS_ACCEPTED, args[0], &policy, FALSE);
		return;
	}
	if (!hr_pcp_supported(guest, &error) || guest->pcp_evacuations > 0) {
		if (error != NULL &&
		    !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED)) {
			hr_api_reply_gerror(msg, error);
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
	if (!hr_pcp_send(hr_core_get_config(api->core), guest, &policy, hr_api_pcp_done, call,
			 &error)) {
		g_object_unref(call->msg);
		g_free(call);
		hr_api_reply_gerror(msg, error);
		return;
	}
	soup_server_message_pause(msg);
}

static const HrApiRouteEntry routes[] = {
    {{"GET", "/v1/guests", READ, "200"}, hr_api_guests},
    {{"GET", "/v1/guests/{name}", READ, "200 404"}, hr_api_guest},
    {{"POST", "/v1/guests/{name}/report", ADMIN, "202 404 409"}, hr_api_report},
    {{"POST", "/v1/guests/{name}/evacuate", ADMIN, "202 400 404 409"}, hr_api_evacuate},
    {{"POST", "/v1/guests/{name}/capture", ADMIN, "202 400 404 409"}, hr_api_capture},
    {{"POST", "/v1/guests/{name}/return", ADMIN, "202 400 404 409"}, hr_api_return},
    {{"POST", "/v1/guests/{name}/cancel", ADMIN, "202 400 404 409"}, hr_api_cancel},
    {{"GET", "/v1/guests/{name}/requests", READ, "200 404"}, hr_api_requests},
    {{"GET", "/v1/guests/{name}/requests/{id}", READ, "200 404"}, hr_api_request},
    {{"PUT", "/v1/guests/{name}/pcp", ADMIN, "200 202 400 409 504"}, hr_api_pcp},
    {{"POST", "/v1/reservations", ADMIN, "202 400 409"}, hr_api_reservation_create},
    {{"GET", "/v1/reservations", READ, "200"}, hr_api_reservations},
    {{"GET", "/v1/reservations/{id}", READ, "200 404"}, hr_api_reservation},
    {{"DELETE", "/v1/reservations/{id}", ADMIN, "200 404 409"}, hr_api_reservation_release},
    {{"POST", "/v1/reservations/{id}/release", ADMIN, "200 404 409"}, hr_api_reservation_release},
    {{"POST", "/v1/reservations/{id}/consume", ADMIN, "200 404 409"}, hr_api_reservation_consume},
    {{"GET", "/v1/reserve", READ, "200"}, hr_api_reserve},
    {{"PUT", "/v1/reserve", ADMIN, "200 400 409"}, hr_api_reserve_set},
    {{"POST", "/v1/plan", READ, "200 400 500"}, hr_api_plan},
    {{"GET", "/v1/host", READ, "200 500"}, hr_api_host},
    {{"GET", "/v1/events", READ, "200 400"}, hr_api_events},
    {{"GET", "/metrics", READ, "200"}, hr_api_metrics},
};

#undef ADMIN
#undef READ

const HrApiRoute *
hr_api_get_route(guint i)
{
	return i < G_N_ELEMENTS(routes) ? &routes[i].info : NULL;
}

/* @args gets the {} segments' values (at most 2) */
static gboolean
hr_api_route_matches(const gchar *pattern, gchar **segments, gchar **args)
{
	g_auto(GStrv) want = g_strsplit(pattern, "/", -1);
	guint n = 0;
	guint i;

	for (i = 0; want[i] != NULL && segments[i] != NULL; i++) {
		if (want[i][0] == '{') {
			if (segments[i][0] == '\0' || n >= 2)
				return FALSE;
			args[n++] = segments[i];
		} else if (g_strcmp0(want[i], segments[i]) != 0) {
			return FALSE;
		}
	}
	return want[i] == NULL && segments[i] == NULL;
}

/* ---------------------------------------------------------------------- */
/* Dispatch: who asks, which route, then the handler */

#define HR_API_ROLE_KEY "hr-api-role"
#define HR_API_TLS_KEY "hr-api-tls"
#define HR_API_REFUSED_KEY "hr-api-refused"

static HrApiRole
hr_api_message_role(HrApi *api, SoupServerMessage *msg)
{
	GSocketAddress *remote = soup_server_message_get_remote_address(msg);
	SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
	const gchar *auth;
	HrApiRole role;

	if (remote == NULL)
		return HR_API_ROLE_NONE;
	if (g_object_get_data(G_OBJECT(remote), HR_API_TLS_KEY) == NULL) {
		const gchar *why = g_object_get_data(G_OBJECT(remote), HR_API_REFUSED_KEY);
		if (why == NULL)
			return GPOINTER_TO_INT(
			    g_object_get_data(G_OBJECT(remote), HR_API_ROLE_KEY));
		/* nothing it sends will be answered otherwise */
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "Connection", "close");
		hr_api_reply_error(msg, SOUP_STATUS_FORBIDDEN, "forbidden",
				   "%s: run it as root, as the user hugeroomd runs as, or as a "
				   "member of api_group or api_read_group",
				   why);
		return HR_API_ROLE_NONE;
	}
	auth = soup_message_headers_get_one(headers, "Authorization");
	if (auth == NULL) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "WWW-Authenticate", "Bearer realm=\"hugeroomd\"");
		hr_api_reply_error(msg, SOUP_STATUS_UNAUTHORIZED, "unauthenticated",
				   "this API needs a bearer token: send \"Authorization: Bearer "
				   "TOKEN\" with a token from the daemon's api_tokens file");
		return HR_API_ROLE_NONE;
	}
	role = HR_API_ROLE_NONE;
	if (g_ascii_strncasecmp(auth, "Bearer ", 7) == 0) {
		g_autofree gchar *token = g_strstrip(g_strdup(auth + 7));
		role = hr_api_tokens_lookup(api->tokens, token);
	}
	if (role == HR_API_ROLE_NONE) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "WWW-Authenticate",
					     "Bearer realm=\"hugeroomd\", error=\"invalid_token\"");
		hr_api_reply_error(msg, SOUP_STATUS_UNAUTHORIZED, "bad_token",
				   "the bearer token is not in the daemon's api_tokens file");
	}
	return role;
}

static void
hr_api_dispatch(HrApi *api, SoupServerMessage *msg, const gchar *path, GHashTable *query)
{
	const gchar *method = soup_server_message_get_method(msg);
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	g_auto(GStrv) segments = g_strsplit(path, "/", -1);
	g_autoptr(GString) allow = g_string_new(NULL);
	HrApiRole role;

	role = hr_api_message_role(api, msg);
	if (role == HR_API_ROLE_NONE)
		return;
	if ((body != NULL && body->length > HR_API_MAX_BODY) ||
	    soup_message_headers_get_content_length(soup_server_message_get_request_headers(msg)) >
		HR_API_MAX_BODY) {
		/* a client that sends that much is not kept */
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "Connection", "close");
		hr_api_reply_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body_too_large",
				   "the body is larger than the %d bytes the API takes",
				   HR_API_MAX_BODY);
		return;
	}
	for (guint i = 0; i < G_N_ELEMENTS(routes); i++) {
		const HrApiRouteEntry *route = &routes[i];
		gchar *args[3] = {NULL};
		gint64 start;

		if (!hr_api_route_matches(route->info.path, segments, args))
			continue;
		if (g_strcmp0(route->info.method, method) != 0) {
			g_string_append_printf(allow, "%s%s", allow->len > 0 ? ", " : "",
					       route->info.method);
			continue;
		}
		if (route->info.admin && role != HR_API_ROLE_ADMIN) {
			hr_api_reply_error(msg, SOUP_STATUS_FORBIDDEN, "read_only",
					   "%s %s changes the daemon's state: it needs the admin "
					   "role, this client has read",
					   method, route->info.path);
			return;
		}
		start = g_get_monotonic_time();
		route->handler(api, msg, query, args);
		hr_metrics_histogram_observe(api->latency, i,
					     (g_get_monotonic_time() - start) / 1e6);
		return;
	}
	if (allow->len > 0) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Allow",
					     allow->str);
		hr_api_reply_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "method_not_allowed",
				   "%s %s is not supported; use %s", method, path, allow->str);
		return;
	}
	hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "not_found",
			   "no such resource %s; try /v1/guests, /v1/reservations, /v1/host, "
			   "/v1/events or /metrics (openapi.json lists every route)",
			   path);
}

static void
hr_api_handler_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
		  gpointer user_data)
{
	(void)server;
	hr_api_dispatch(user_data, msg, path, query);
}

/* a body announced too large is not kept while it is read */
static void
hr_api_got_headers_cb(SoupServerMessage *msg, gpointer user_data)
{
	SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
	(void)user_data;
	if (soup_message_headers_get_content_length(headers) > HR_API_MAX_BODY)
		soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
}

static void
hr_api_timeout_written_cb(GObject *source, GAsyncResult *result, gpointer user_data)
{
	g_autoptr(GIOStream) io = user_data;
	(void)source;
	(void)result;
	/* the client may be gone already: there is nothing to tell it */
	g_io_stream_close_async(io, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
}

/*
 * libsoup 3.2 answers a request it cannot read in time with nothing: its
 * socket times out and it closes the connection. Before that happens the
 * connection is taken from it and gets a 408 with the usual JSON body.
 */
static gboolean
hr_api_request_timeout_cb(gpointer user_data)
{
	SoupServerMessage *msg = user_data;
	g_autofree gchar *body = NULL;
	g_autofree gchar *head = NULL;
	GIOStream *io;
	GBytes *bytes;

	g_object_steal_data(G_OBJECT(msg), HR_API_REQUEST_TIMER_KEY);
	body = hr_api_error_body("request_timeout",
				 "the request was not sent whole within " G_STRINGIFY(
				     HR_API_REQUEST_TIMEOUT_S) " s of its start; send "
							       "it again, all at once");
	head = g_strdup_printf("HTTP/1.1 408 Request Timeout\r\n"
			       "Content-Type: application/json\r\n"
			       "Content-Length: %zu\r\n"
			       "Connection: close\r\n\r\n%s",
			       strlen(body), body);
	io = soup_server_message_steal_connection(msg);
	if (io == NULL)
		return G_SOURCE_REMOVE;
	bytes = g_bytes_new_take(g_steal_pointer(&head), strlen(head));
	g_output_stream_write_all_async(g_io_stream_get_output_stream(io),
					g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes),
					G_PRIORITY_DEFAULT, NULL, hr_api_timeout_written_cb, io);
	/* the bytes live as long as the write: on the stream */
	g_object_set_data_full(G_OBJECT(io), "hr-api-timeout-body", bytes,
			       (GDestroyNotify)g_bytes_unref);
	return G_SOURCE_REMOVE;
}

static void
hr_api_request_timer_remove(gpointer data)
{
	g_source_remove(GPOINTER_TO_UINT(data));
}

/* the request is read whole, or ended: it has all the time its answer needs */
static void
hr_api_request_read_cb(SoupServerMessage *msg, gpointer user_data)
{
	(void)user_data;
	g_object_set_data(G_OBJECT(msg), HR_API_REQUEST_TIMER_KEY, NULL);
}

/*
 * malloc keeps what a burst of answers freed (a /v1/guests of 1000 guests
 * for 200 clients at once) as the process's high-water mark; this often,
 * when it holds at least HR_API_TRIM_MIN free, it gives that back.
 */
#define HR_API_TRIM_S 30
#define HR_API_TRIM_MIN (8 << 20)

static gboolean
hr_api_trim_cb(gpointer user_data)
{
	(void)user_data;
	if (mallinfo2().fordblks >= HR_API_TRIM_MIN)
		malloc_trim(0);
	return G_SOURCE_CONTINUE;
}

/* ---------------------------------------------------------------------- */
/* Keep-alive */

#define HR_API_CONN_KEY "hr-api-conn"

/*
 * One client connection, kept on its remote address (libsoup hands that
 * very object to every message of a connection) from its accept to the
 * end of its last connection in libsoup.
 *
 * libsoup 3.2 keeps a connection open after an answer only when the server
 * has a listener of its own (request_finished() in soup-server.c tests
 * priv->listeners), and then loses a connection whose client leaves while
 * it is idle: the read of the next request fails with no one to tell, the
 * connection is never disconnected, its fd and buffers stay (fixed in
 * 3.3.0, "server: do not leak idle connections closed by the client").
 * So the daemon keeps connections alive itself: once an answer is written,
 * it takes the stream back from libsoup, waits for the next request (or
 * the client's close) and hands the stream over again as a new connection,
 * whose first read libsoup ends properly either way.
 */
typedef struct {
	HrApi *api;
	GIOStream *io; /* the socket, or TLS on it: what libsoup is handed */
	GSocketAddress *local;
	GSocketAddress *remote; /* held only while waiting for the next request */
	GSource *readable;
	guint idle_id;
	guint64 answers;
} HrApiConn;

/*
 * The socket under @msg's connection: what libsoup steals is its own
 * wrapper of the stream it was handed, which does not tell its socket
 */
static GSocket *
hr_api_message_socket(SoupServerMessage *msg)
{
	GSocketAddress *remote = soup_server_message_get_remote_address(msg);
	HrApiConn *conn =
	    remote != NULL ? g_object_get_data(G_OBJECT(remote), HR_API_CONN_KEY) : NULL;

	return conn != NULL ? hr_api_base_socket(conn->io) : NULL;
}

static void
hr_api_conn_free(gpointer data)
{
	HrApiConn *conn = data;
	g_object_unref(conn->io);
	g_object_unref(conn->local);
	g_free(conn);
}

/* stop waiting; the remote address (transfer full) keeps @conn alive */
static GSocketAddress *
hr_api_conn_unwait(HrApiConn *conn)
{
	if (conn->readable != NULL) {
		g_source_destroy(conn->readable);
		g_clear_pointer(&conn->readable, g_source_unref);
	}
	g_clear_handle_id(&conn->idle_id, g_source_remove);
	g_hash_table_remove(conn->api->idle, conn);
	return g_steal_pointer(&conn->remote);
}

static void
hr_api_conn_hand(HrApiConn *conn, GSocketAddress *remote)
{
	g_autoptr(GError) error = NULL;
	if (!soup_server_accept_iostream(conn->api->server, conn->io, conn->local, remote, &error))
		g_warning("API connection dropped: %s", error->message);
}

/* a request came, or the client closed: libsoup reads either */
static gboolean
hr_api_conn_readable_cb(GObject *stream, gpointer user_data)
{
	g_autoptr(GSocketAddress) remote = hr_api_conn_unwait(user_data);
	(void)stream;
	hr_api_conn_hand(user_data, remote);
	return G_SOURCE_REMOVE;
}

static void
hr_api_conn_close(HrApiConn *conn)
{
	g_autoptr(GSocketAddress) remote = hr_api_conn_unwait(conn);
	/* the close (TLS's close_notify) holds its own reference */
	g_io_stream_close_async(conn->io, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
}

static gboolean
hr_api_conn_idle_cb(gpointer user_data)
{
	HrApiConn *conn = user_data;
	conn->idle_id = 0;
	hr_api_conn_close(conn);
	return G_SOURCE_REMOVE;
}

static void
hr_api_conn_wait(HrApiConn *conn, GSocketAddress *remote)
{
	GInputStream *in = g_io_stream_get_input_stream(conn->io);

	conn->remote = remote;
	g_hash_table_add(conn->api->idle, conn);
	/* a TLS stream is readable too when it holds decrypted bytes */
	conn->readable = g_pollable_input_stream_create_source(G_POLLABLE_INPUT_STREAM(in), NULL);
	g_source_set_callback(conn->readable, G_SOURCE_FUNC(hr_api_conn_readable_cb), conn, NULL);
	g_source_attach(conn->readable, NULL);
	conn->idle_id = g_timeout_add_seconds(HR_API_KEEPALIVE_IDLE_S, hr_api_conn_idle_cb, conn);
}

/* soup_server_message_is_keepalive() is libsoup's own: the same rules */
static gboolean
hr_api_message_keepalive(SoupServerMessage *msg)
{
	SoupMessageHeaders *request = soup_server_message_get_request_headers(msg);
	SoupMessageHeaders *response = soup_server_message_get_response_headers(msg);

	if (soup_message_headers_get_encoding(response) == SOUP_ENCODING_EOF)
		return FALSE;
	/* HTTP/1.0 keeps a connection only with Connection: Keep-Alive both ways */
	if (soup_server_message_get_http_version(msg) == SOUP_HTTP_1_0)
		return FALSE;
	return !soup_message_headers_header_contains(request, "Connection", "close") &&
	       !soup_message_headers_header_contains(response, "Connection", "close");
}

/*
 * The answer is written whole: unless either side said Connection: close,
 * the stream is taken back to wait for the next request. (A client that
 * pipelines, sending its next request before this answer, would lose it
 * in libsoup's read buffer; curl, wrk, browsers and Python do not.)
 */
static void
hr_api_wrote_body_cb(SoupServerMessage *msg, gpointer user_data)
{
	HrApi *api = user_data;
	GSocketAddress *remote = soup_server_message_get_remote_address(msg);
	HrApiConn *conn =
	    remote != NULL ? g_object_get_data(G_OBJECT(remote), HR_API_CONN_KEY) : NULL;
	GIOStream *wrapper;

	if (conn == NULL)
		return;
	if (conn->answers++ > 0)
		api->n_reused++;
	if (!hr_api_message_keepalive(msg))
		return;
	/* libsoup lets go of the address with its connection */
	g_object_ref(remote);
	wrapper = soup_server_message_steal_connection(msg);
	if (wrapper == NULL) {
		g_object_unref(remote);
		return;
	}
	/* libsoup's wrapper around conn->io, which it leaves open */
	g_object_unref(wrapper);
	hr_api_conn_wait(conn, remote);
}

static void
hr_api_request_started_cb(SoupServer *server, SoupServerMessage *msg, gpointer user_data)
{
	guint id = g_timeout_add_seconds(HR_API_REQUEST_TIMEOUT_S, hr_api_request_timeout_cb, msg);
	(void)server;

	/* the message's end removes the timer: it holds no reference */
	g_object_set_data_full(G_OBJECT(msg), HR_API_REQUEST_TIMER_KEY, GUINT_TO_POINTER(id),
			       hr_api_request_timer_remove);
	g_signal_connect(msg, "got-headers", G_CALLBACK(hr_api_got_headers_cb), user_data);
	g_signal_connect(msg, "got-body", G_CALLBACK(hr_api_request_read_cb), user_data);
	g_signal_connect(msg, "finished", G_CALLBACK(hr_api_request_read_cb), user_data);
	g_signal_connect(msg, "disconnected", G_CALLBACK(hr_api_request_read_cb), user_data);
	g_signal_connect(msg, "wrote-body", G_CALLBACK(hr_api_wrote_body_cb), user_data);
}

HrApi *
hr_api_new(HrCore *core, HrPrepare *prepare)
{
	HrApi *api = g_new0(HrApi, 1);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);

	api->core = core;
	api->prepare = prepare;
	api->admin_gid = (gid_t)-1;
	api->read_gid = (gid_t)-1;
	api->events = hr_event_stream_new(core, prepare);
	api->idle = g_hash_table_new(NULL, NULL);
	api->trim_id = g_timeout_add_seconds(HR_API_TRIM_S, hr_api_trim_cb, api);
	for (guint i = 0; i < G_N_ELEMENTS(routes); i++)
		g_ptr_array_add(
		    names, g_strdup_printf("%s %s", routes[i].info.method, routes[i].info.path));
	g_ptr_array_add(names, NULL);
	api->metrics = hr_metrics_new(core, prepare);
	api->host = hr_host_reader_new(HR_API_HOST_MAX_AGE_US);
	api->latency = hr_metrics_histogram_new(
	    "hugeroom_api_request_duration_seconds", "time to handle an API request, by route",
	    "route", (const gchar *const *)names->pdata, hr_metrics_bounds_fast);
	api->server = soup_server_new("server-header", "hugeroomd/" PACKAGE_VERSION, NULL);
	soup_server_add_handler(api->server, NULL, hr_api_handler_cb, api, NULL);
	g_signal_connect(api->server, "request-started", G_CALLBACK(hr_api_request_started_cb),
			 api);
	return api;
}

void
hr_api_free(HrApi *api)
{
	if (api == NULL)
		return;
	g_clear_pointer(&api->acceptor, hr_acceptor_free);
	g_clear_pointer(&api->tcp_acceptors, g_ptr_array_unref);
	while (g_hash_table_size(api->idle) > 0) {
		GHashTableIter iter;
		gpointer conn;

		g_hash_table_iter_init(&iter, api->idle);
		g_hash_table_iter_next(&iter, &conn, NULL);
		hr_api_conn_close(conn);
	}
	g_hash_table_unref(api->idle);
	g_clear_handle_id(&api->trim_id, g_source_remove);
	g_clear_object(&api->socket);
	hr_event_stream_free(api->events);
	soup_server_disconnect(api->server);
	g_object_unref(api->server);
	g_clear_object(&api->certificate);
	hr_api_tokens_free(api->tokens);
	g_free(api->tokens_path);
	hr_metrics_histogram_free(api->latency);
	hr_metrics_free(api->metrics);
	hr_host_reader_free(api->host);
	g_clear_pointer(&api->host_json, json_node_unref);
	g_free(api);
}

/* ---------------------------------------------------------------------- */
/* Connections */

/* hand the connection to libsoup; @refused: why the peer gets only 403s */
static void
hr_api_accept(HrApi *api, GIOStream *io, GSocketConnection *connection, HrApiRole role,
	      gboolean tls, const gchar *refused)
{
	g_autoptr(GSocketAddress) local = g_socket_connection_get_local_address(connection, NULL);
	g_autoptr(GSocketAddress) remote = g_socket_connection_get_remote_address(connection, NULL);
	HrApiConn *conn;

	if (local == NULL || remote == NULL) {
		g_io_stream_close(io, NULL, NULL);
		return;
	}
	conn = g_new0(HrApiConn, 1);
	conn->api = api;
	conn->io = g_object_ref(io);
	conn->local = g_steal_pointer(&local);
	g_object_set_data_full(G_OBJECT(remote), HR_API_CONN_KEY, conn, hr_api_conn_free);
	api->n_connections++;
	/* libsoup hands this very object to every message of the connection */
	g_object_set_data(G_OBJECT(remote), HR_API_ROLE_KEY, GINT_TO_POINTER(role));
	if (tls)
		g_object_set_data(G_OBJECT(remote), HR_API_TLS_KEY, GINT_TO_POINTER(1));
	if (refused != NULL)
		g_object_set_data_full(G_OBJECT(remote), HR_API_REFUSED_KEY, g_strdup(refused),
				       g_free);
	g_socket_set_timeout(g_socket_connection_get_socket(connection), HR_API_IDLE_TIMEOUT_S);
	hr_api_conn_hand(conn, remote);
}

/*
 * We accept connections ourselves and hand them to libsoup as streams:
 * the peer is checked once per connection, and libsoup 3.2's own listener
 * leaks a socket (and its fd) per connection.
 */
static void
hr_api_incoming_cb(GSocketConnection *connection, gpointer user_data)
{
	HrApi *api = user_data;
	g_autoptr(GError) error = NULL;
	HrApiRole role;

	role = hr_api_peer_role(g_socket_connection_get_socket(connection), api->admin_gid,
				api->read_gid, &error);
	if (role == HR_API_ROLE_NONE)
		g_warning("API connection refused: %s", error->message);
	hr_api_accept(api, G_IO_STREAM(connection), connection, role, FALSE,
		      role == HR_API_ROLE_NONE ? error->message : NULL);
}

static void
hr_api_tcp_incoming_cb(GSocketConnection *connection, gpointer user_data)
{
	HrApi *api = user_data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GIOStream) tls = NULL;

	/* the handshake's small writes must not wait for delayed ACKs */
	g_socket_set_option(g_socket_connection_get_socket(connection), IPPROTO_TCP, TCP_NODELAY,
			    TRUE, NULL);
	/* no client certificates: without a database none is read per connection */
	tls =
	    g_initable_new(g_tls_backend_get_server_connection_type(g_tls_backend_get_default()),
			   NULL, &error, "base-io-stream", connection, "certificate",
			   api->certificate, "database", NULL, "require-close-notify", FALSE, NULL);
	if (tls == NULL) {
		g_warning("TLS on an API connection: %s", error->message);
		return;
	}
	/* the handshake runs on the first read, in the main loop, bounded by the timeout */
	hr_api_accept(api, tls, connection, HR_API_ROLE_NONE, TRUE, NULL);
}

/* a listening TCP socket on @sa */
static GSocket *
hr_api_listen_tcp_address(GSocketAddress *sa, GError **error)
{
	g_autoptr(GSocket) socket = g_socket_new(
	    g_socket_address_get_family(sa), G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, error);

	if (socket == NULL || !g_socket_bind(socket, sa, TRUE, error))
		return NULL;
	g_socket_set_listen_backlog(socket, HR_API_LISTEN_BACKLOG);
	if (!g_socket_listen(socket, error))
		return NULL;
	return g_steal_pointer(&socket);
}

static gboolean
hr_api_listen_tcp(HrApi *api, const HrConfig *config, GError **error)
{
	g_autoptr(GSocketConnectable) addr = NULL;
	g_autoptr(GSocketAddressEnumerator) e = NULL;
	g_autoptr(GPtrArray) acceptors =
	    g_ptr_array_new_with_free_func((GDestroyNotify)hr_acceptor_free);
	GSocketAddress *sa;

	api->certificate =
	    g_tls_certificate_new_from_files(config->api_tls_cert, config->api_tls_key, error);
	if (api->certificate == NULL) {
		g_prefix_error(error, "api_tls_cert %s, api_tls_key %s: ", config->api_tls_cert,
			       config->api_tls_key);
		return FALSE;
	}
	api->tokens = hr_api_tokens_load(config->api_tokens, error);
	if (api->tokens == NULL)
		return FALSE;
	api->tokens_path = g_strdup(config->api_tokens);
	addr = g_network_address_parse(config->api_listen, 0, error);
	if (addr == NULL) {
		g_prefix_error(error, "api_listen=%s: ", config->api_listen);
		return FALSE;
	}
	e = g_socket_connectable_enumerate(addr);
	/* a numeric address or localhost: resolving it does not wait on the network */
	while ((sa = g_socket_address_enumerator_next(e, NULL, NULL)) != NULL) {
		g_autoptr(GSocketAddress) owned = sa;
		g_autoptr(GSocket) socket = hr_api_listen_tcp_address(sa, error);
		if (socket == NULL) {
			g_prefix_error(error, "api_listen=%s: ", config->api_listen);
			return FALSE;
		}
		g_ptr_array_add(acceptors,
				hr_acceptor_new(socket, "API on TCP", hr_api_tcp_incoming_cb, api));
	}
	if (acceptors->len == 0) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "api_listen=%s: no address to listen on", config->api_listen);
		return FALSE;
	}
	api->tcp_acceptors = g_steal_pointer(&acceptors);
	g_info("API on https://%s, %s", config->api_listen, config->api_tokens);
	return TRUE;
}

gboolean
hr_api_listen(HrApi *api, const HrConfig *config, GError **error)
{
	g_autoptr(GSocket) socket = NULL;

	if (config->api_group != NULL && config->api_group[0] != '\0' &&
	    !hr_api_group_lookup(config->api_group, &api->admin_gid, error)) {
		g_prefix_error(error, "api_group: ");
		return FALSE;
	}
	if (config->api_read_group != NULL && config->api_read_group[0] != '\0' &&
	    !hr_api_group_lookup(config->api_read_group, &api->read_gid, error)) {
		g_prefix_error(error, "api_read_group: ");
		return FALSE;
	}
	/* HTTPS first: once the socket's file exists, every API listener
	 * takes connections (clients and tests wait for that file) */
	if (config->api_listen != NULL && !hr_api_listen_tcp(api, config, error))
		return FALSE;
	/* with groups, anyone reaches the socket and the peer check decides */
	socket = hr_socket_listen_unix(
	    config->api_socket,
	    api->admin_gid != (gid_t)-1 || api->read_gid != (gid_t)-1 ? 0666 : 0660, error);
	if (socket == NULL)
		return FALSE;
	api->acceptor = hr_acceptor_new(socket, "API socket", hr_api_incoming_cb, api);
	/* a refused peer gets its 403 on one connection, not a thousand idle ones */
	hr_acceptor_set_max_per_uid(api->acceptor, HR_API_MAX_PER_UID);
	api->socket = g_steal_pointer(&socket);
	return TRUE;
}

gboolean
hr_api_reload_tokens(HrApi *api, const HrConfig *config, GError **error)
{
	HrApiTokens *tokens;

	if (api->tokens == NULL)
		return TRUE;
	/* api_listen is set, so is api_tokens (hr_config_load) */
	tokens = hr_api_tokens_load(config->api_tokens, error);
	if (tokens == NULL) {
		g_prefix_error(error, "keeping the tokens of %s: ", api->tokens_path);
		return FALSE;
	}
	hr_api_tokens_free(api->tokens);
	api->tokens = tokens;
	g_free(api->tokens_path);
	api->tokens_path = g_strdup(config->api_tokens);
	g_message("reload: api_tokens %s read again", api->tokens_path);
	return TRUE;
}
