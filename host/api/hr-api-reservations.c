/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * /v1/reservations: create, list, read, consume and release the
 * executor's reservations.
 */

#define G_LOG_DOMAIN "HrApi"

#include <string.h>

#include "hr-api-json.h"
#include "hr-api-private.h"

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

/* the longest Idempotency-Key the API keeps; a longer one is refused */
#define HR_API_IDEMPOTENCY_KEY_MAX 255
/* at most this many reservations per page of GET /v1/reservations?limit= */
#define HR_API_LIST_LIMIT_MAX 1000

/*
 * what a create asked, and who, as a digest: a second request with its key
 * must ask the same, from the same client
 */
static gchar *
hr_api_reservation_digest(guint64 bytes, gint node, guint64 deadline_s, gboolean strict,
			  const gchar *requester, const gchar *principal)
{
	g_autofree gchar *text =
	    g_strdup_printf("bytes=%" G_GUINT64_FORMAT "\nnode=%d\ndeadline_s=%" G_GUINT64_FORMAT
			    "\nstrict=%d\nrequester=%s\nowner=%s",
			    bytes, node, deadline_s, strict ? 1 : 0,
			    requester != NULL ? requester : "", principal != NULL ? principal : "");
	return g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, -1);
}

/* printable ASCII without spaces, as RFC 9110 tokens and UUIDs are */
static gboolean
hr_api_idempotency_key_valid(const gchar *key)
{
	gsize len = strlen(key);

	if (len == 0 || len > HR_API_IDEMPOTENCY_KEY_MAX)
		return FALSE;
	for (gsize i = 0; i < len; i++)
		if (key[i] <= ' ' || key[i] > '~')
			return FALSE;
	return TRUE;
}

/* 201 with where the reservation is: the same answer for a replay of its key */
static void
hr_api_reply_created(HrApi *api, SoupServerMessage *msg, HrReservation *r, gboolean replayed)
{
	SoupMessageHeaders *headers = soup_server_message_get_response_headers(msg);
	g_autofree gchar *escaped = g_uri_escape_string(r->id, NULL, FALSE);
	g_autofree gchar *location = g_strdup_printf("/v1/reservations/%s", escaped);

	soup_message_headers_replace(headers, "Location", location);
	if (replayed)
		soup_message_headers_replace(headers, "Idempotent-Replayed", "true");
	hr_api_reply_reservation(api, msg, SOUP_STATUS_CREATED, r);
}

void
hr_api_reservation_create(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	HrReservationStore *store = hr_prepare_get_store(api->prepare);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	g_autofree gchar *digest = NULL;
	JsonObject *obj = hr_api_parse_body(msg, parser, &error);
	const gchar *key = soup_message_headers_get_one(
	    soup_server_message_get_request_headers(msg), "Idempotency-Key");
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
	if (key != NULL && !hr_api_idempotency_key_valid(key)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
				   "Idempotency-Key: must be 1 to %d printable ASCII characters "
				   "without spaces, such as a UUID",
				   HR_API_IDEMPOTENCY_KEY_MAX);
		return;
	}
	digest = hr_api_reservation_digest(bytes, node, deadline_s, strict, requester,
					   hr_api_message_principal(msg));
	r = hr_reservation_store_find_by_idempotency_key(store, key);
	if (r != NULL) {
		if (g_strcmp0(r->request_digest, digest) != 0) {
			hr_api_reply_error(
			    msg, SOUP_STATUS_UNPROCESSABLE_ENTITY, "idempotency_key_reused",
			    "Idempotency-Key %s made reservation %s with another request (bytes, "
			    "node, deadline_s, strict or requester differ); use a new key for a "
			    "new reservation",
			    key, r->id);
			return;
		}
		hr_api_reply_created(api, msg, r, TRUE);
		return;
	}
	r = hr_prepare_create(api->prepare, bytes, node, deadline_s, strict, requester, &error);
	if (r == NULL) {
		hr_api_reply_reservation_gerror(msg, error);
		return;
	}
	r->owner = g_strdup(hr_api_message_principal(msg));
	if (key != NULL) {
		r->idempotency_key = g_strdup(key);
		r->request_digest = g_steal_pointer(&digest);
	}
	hr_reservation_touch(store, r);
	g_message("request %s: reservation %s created", hr_api_message_request_id(msg), r->id);
	hr_api_reply_created(api, msg, r, FALSE);
}

/* ?state=a,b: the states' bits; FALSE after a 400 */
static gboolean
hr_api_parse_states(SoupServerMessage *msg, const gchar *value, guint *mask)
{
	g_auto(GStrv) states = g_strsplit(value, ",", -1);

	*mask = 0;
	for (guint i = 0; states[i] != NULL; i++) {
		gint st = hr_reservation_state_from_string(states[i]);
		if (st < 0) {
			g_autoptr(GString) known = g_string_new(NULL);
			for (guint k = 0; k < HR_RESERVATION_N_STATES; k++)
				g_string_append_printf(known, "%s%s", k > 0 ? ", " : "",
						       hr_reservation_state_to_string(k));
			hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
					   "state: unknown state '%s'; the states are %s",
					   states[i], known->str);
			return FALSE;
		}
		*mask |= 1u << st;
	}
	return TRUE;
}

/* the parameters of GET /v1/reservations; FALSE after a 400 */
static gboolean
hr_api_parse_list_query(SoupServerMessage *msg, GHashTable *query, guint *states,
			const gchar **requester, const gchar **cursor, guint64 *limit)
{
	GHashTableIter iter;
	const gchar *key, *value;

	if (query == NULL)
		return TRUE;
	g_hash_table_iter_init(&iter, query);
	while (g_hash_table_iter_next(&iter, (gpointer *)&key, (gpointer *)&value)) {
		if (g_strcmp0(key, "state") == 0) {
			if (!hr_api_parse_states(msg, value, states))
				return FALSE;
		} else if (g_strcmp0(key, "requester") == 0) {
			*requester = value;
		} else if (g_strcmp0(key, "cursor") == 0) {
			*cursor = value;
		} else if (g_strcmp0(key, "limit") == 0) {
			if (!g_ascii_string_to_unsigned(value, 10, 1, HR_API_LIST_LIMIT_MAX, limit,
							NULL)) {
				hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
						   "limit: '%s' is not a whole number from 1 to %d",
						   value, HR_API_LIST_LIMIT_MAX);
				return FALSE;
			}
		} else {
			hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
					   "%s: unknown parameter; /v1/reservations takes state, "
					   "requester, limit and cursor",
					   key);
			return FALSE;
		}
	}
	return TRUE;
}

/*
 * GET /v1/reservations?state=a,b&requester=R&limit=N&cursor=ID: oldest
 * first; a page cut at @limit says next_cursor, the id to go on after.
 */
void
hr_api_reservations(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	GPtrArray *list = hr_reservation_store_list(hr_prepare_get_store(api->prepare));
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	const gchar *requester = NULL, *cursor = NULL, *next = NULL;
	guint states = G_MAXUINT;
	guint64 limit = G_MAXUINT;
	guint start = 0, n = 0;
	(void)args;

	if (!hr_api_parse_list_query(msg, query, &states, &requester, &cursor, &limit))
		return;
	if (cursor != NULL) {
		while (start < list->len &&
		       g_strcmp0(((HrReservation *)g_ptr_array_index(list, start))->id, cursor) !=
			   0)
			start++;
		if (start == list->len) {
			hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
					   "cursor: no reservation %s any more (the daemon forgets "
					   "the oldest settled ones); list again without a cursor",
					   cursor);
			return;
		}
		start++;
	}
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "reservations");
	json_builder_begin_array(b);
	for (guint i = start; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		if ((states & (1u << r->state)) == 0 ||
		    (requester != NULL && g_strcmp0(r->requester, requester) != 0))
			continue;
		if (n == limit) {
			next = ((HrReservation *)g_ptr_array_index(list, i - 1))->id;
			break;
		}
		hr_api_reservation_add_json(r, b, FALSE);
		n++;
	}
	json_builder_end_array(b);
	json_builder_set_member_name(b, "next_cursor");
	if (next != NULL)
		json_builder_add_string_value(b, next);
	else
		json_builder_add_null_value(b);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

void
hr_api_reservation(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	HrReservation *r = hr_api_find_reservation(api, msg, args[0]);
	(void)query;
	if (r != NULL)
		hr_api_reply_reservation(api, msg, SOUP_STATUS_OK, r);
}

/*
 * Who may end a reservation: its owner, acting for its requester, unless
 * an admin says "force". A consume or release by anyone else is how one
 * VM's start took another's memory; ids that are unique make it rare,
 * this makes it refused.
 */
static gboolean
hr_api_parse_act(SoupServerMessage *msg, GHashTable *query, const gchar **requester,
		 gboolean *force, JsonParser *parser)
{
	static const gchar *const allowed[] = {"requester", "force", NULL};
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	g_autoptr(GError) error = NULL;
	const gchar *q;

	*requester = NULL;
	*force = FALSE;
	if (body != NULL && body->length > 0) {
		JsonObject *obj = hr_api_parse_body(msg, parser, &error);
		JsonNode *n;

		if (obj == NULL || !hr_api_check_members(obj, "this route", allowed, &error) ||
		    !hr_api_get_bool(obj, "force", force, &error))
			goto invalid;
		n = json_object_get_member(obj, "requester");
		if (n != NULL) {
			if (!JSON_NODE_HOLDS_VALUE(n) ||
			    json_node_get_value_type(n) != G_TYPE_STRING) {
				hr_request_invalid(&error, "requester: must be a string");
				goto invalid;
			}
			*requester = json_node_get_string(n);
		}
	}
	if (query != NULL && (q = g_hash_table_lookup(query, "requester")) != NULL)
		*requester = q;
	if (query != NULL && (q = g_hash_table_lookup(query, "force")) != NULL) {
		if (g_strcmp0(q, "true") != 0 && g_strcmp0(q, "false") != 0) {
			hr_request_invalid(&error, "force: must be true or false");
			goto invalid;
		}
		*force = g_strcmp0(q, "true") == 0;
	}
	return TRUE;
invalid:
	hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s", error->message);
	return FALSE;
}

/* release (cancel) or consume the reservation the path names */
static void
hr_api_reservation_act(HrApi *api, SoupServerMessage *msg, GHashTable *query, const gchar *id,
		       const gchar *what, gboolean (*act)(HrPrepare *, const gchar *, GError **))
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrReservation *r = hr_api_find_reservation(api, msg, id);
	const gchar *principal = hr_api_message_principal(msg);
	const gchar *requester;
	gboolean force, other_owner, other_requester;

	if (r == NULL || !hr_api_parse_act(msg, query, &requester, &force, parser))
		return;
	other_owner = r->owner != NULL && g_strcmp0(r->owner, principal) != 0;
	other_requester = requester != NULL && g_strcmp0(r->requester, requester) != 0;
	if ((other_owner || other_requester) && !force) {
		hr_api_reply_error(
		    msg, SOUP_STATUS_FORBIDDEN, "not_owner",
		    "reservation %s is %s's, for requester %s; this request is %s's%s%s: only its "
		    "owner acting for its requester may %s it, or an admin with \"force\": true",
		    r->id, r->owner, r->requester != NULL ? r->requester : "(none)",
		    principal != NULL ? principal : "(unknown)",
		    requester != NULL ? ", for requester " : "", requester != NULL ? requester : "",
		    what);
		return;
	}
	if (other_owner || other_requester)
		g_message("request %s: %s of reservation %s (%s's, for %s) forced by %s",
			  hr_api_message_request_id(msg), what, r->id, r->owner,
			  r->requester != NULL ? r->requester : "no requester",
			  principal != NULL ? principal : "an unknown client");
	if (!act(api->prepare, r->id, &error)) {
		hr_api_reply_reservation_gerror(msg, error);
		return;
	}
	hr_api_reply_reservation(api, msg, SOUP_STATUS_OK, r);
}

void
hr_api_reservation_release(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	hr_api_reservation_act(api, msg, query, args[0], "release", hr_prepare_release);
}

void
hr_api_reservation_consume(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	hr_api_reservation_act(api, msg, query, args[0], "consume", hr_prepare_consume);
}

static void
hr_api_reply_reserve(HrApi *api, SoupServerMessage *msg)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;

	hr_api_reserve_add_json(hr_prepare_get_reserve(api->prepare), b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

void
hr_api_reserve(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	(void)args;
	hr_api_reply_reserve(api, msg);
}

static const gchar *const reserve_fields[] = {"bytes", "size", "node", NULL};

/* {"size": "10G"} or {"bytes": N}, and "node"; 0 (or "0") drops the reserve */
void
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
