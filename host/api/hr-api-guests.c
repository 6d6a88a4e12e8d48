/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * /v1/guests: the guests, their reports and the requests sent to them
 * (evacuate, capture, return, cancel).
 */

#define G_LOG_DOMAIN "HrApi"

#include <string.h>

#include "hr-api-json.h"
#include "hr-api-private.h"
#include "hr-api-view-request.h"
#include "hr-json.h"

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
		g_string_append(str, hr_guest_get_name(guest)[0] != '\0'
					 ? hr_guest_get_name(guest)
					 : hr_guest_get_uuid(guest));
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

/* ---------------------------------------------------------------------- */
/* Guests and their requests */

static void
hr_api_reply_request_ref(SoupServerMessage *msg, guint status, HrGuest *guest, HrRequest *request)
{
	g_autoptr(JsonNode) node = hr_api_request_ref_to_json(guest, request);
	hr_api_reply_json(msg, status, node);
}

void
hr_api_guests(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonNode) node = hr_api_guests_to_json(api->core);
	(void)query;
	(void)args;
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

void
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

void
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
	json_builder_add_string_value(b, hr_guest_get_name(guest));
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

void
hr_api_evacuate(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_EVACUATE);
}

void
hr_api_capture(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_CAPTURE);
}

void
hr_api_return(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_submit(api, msg, args[0], HR_REQUEST_RETURN);
}

void
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

void
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
	json_builder_add_string_value(b, hr_guest_get_name(guest));
	json_builder_set_member_name(b, "requests");
	json_builder_begin_array(b);
	for (guint i = 0; i < requests->len; i++)
		hr_api_request_add_json(g_ptr_array_index(requests, i), b);
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
	GPtrArray *guests = hr_core_get_guests(api->core);
	HrRequest *request = hr_guest_find_request(guest, id);

	for (guint i = 0; request == NULL && i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g != guest && hr_guest_same_vm(g, guest))
			request = hr_guest_find_request(g, id);
	}
	return request;
}

void
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
				   hr_guest_get_name(guest), args[1], hr_guest_get_history(guest));
		return;
	}
	hr_api_request_add_json(request, b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}
