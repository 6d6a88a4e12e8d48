/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * /v1/reservations: create, list, read, consume and release the
 * executor's reservations.
 */

#define G_LOG_DOMAIN "HrApi"

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

	hr_reservation_add_json(r, b, TRUE);
	node = json_builder_get_root(b);
	json_object_set_string_member(json_node_get_object(node), "last_plan", plan);
	if (plan == NULL)
		json_object_set_null_member(json_node_get_object(node), "last_plan");
	hr_api_reply_json(msg, status, node);
}

void
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

void
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
		hr_reservation_add_json(g_ptr_array_index(list, i), b, FALSE);
	json_builder_end_array(b);
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

void
hr_api_reservation_release(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_reservation_act(api, msg, args[0], hr_prepare_release);
}

void
hr_api_reservation_consume(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	(void)query;
	hr_api_reservation_act(api, msg, args[0], hr_prepare_consume);
}
