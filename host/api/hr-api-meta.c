/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon about itself: GET /healthz (is it well enough to be sent
 * work), GET /v1/version and GET /openapi.json, the document of this API,
 * built into the binary so that it is the one the daemon serves.
 */

#define G_LOG_DOMAIN "HrApi"

#include <string.h>

#include "hr-api-private.h"
#include "hr-codec.h"
#include "hr-json.h"
#include "hr-openapi.h"

void
hr_api_version(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	(void)api;
	(void)query;
	(void)args;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "version");
	json_builder_add_string_value(b, PACKAGE_VERSION);
	json_builder_set_member_name(b, "api");
	json_builder_add_string_value(b, "v1");
	hr_json_add_int(b, "protocol_version", VIRTIO_HUGEROOM_VERSION);
	json_builder_set_member_name(b, "openapi");
	json_builder_add_string_value(b, "/openapi.json");
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, SOUP_STATUS_OK, node);
}

/*
 * 200 while the daemon answers and keeps its state on disk; 503 while the
 * reservations cannot be saved (a full disk): a restart would lose what
 * changed since, so a scheduler should send its work elsewhere.
 */
void
hr_api_health(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *save_error =
	    hr_reservation_store_dup_save_error(hr_prepare_get_store(api->prepare));
	(void)query;
	(void)args;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "status");
	json_builder_add_string_value(b, save_error == NULL ? "ok" : "degraded");
	json_builder_set_member_name(b, "version");
	json_builder_add_string_value(b, PACKAGE_VERSION);
	hr_json_add_int(b, "uptime_s", (g_get_monotonic_time() - api->started_at) / G_USEC_PER_SEC);
	hr_json_add_int(b, "guests", hr_core_get_guests(api->core)->len);
	hr_json_add_int(b, "event_epoch", hr_event_stream_get_epoch(api->events));
	json_builder_set_member_name(b, "state_file");
	json_builder_add_string_value(b, save_error == NULL ? "ok" : save_error);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(
	    msg, save_error == NULL ? SOUP_STATUS_OK : SOUP_STATUS_SERVICE_UNAVAILABLE, node);
}

void
hr_api_openapi(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	static const gchar doc[] = HR_OPENAPI_JSON;
	(void)api;
	(void)query;
	(void)args;

	soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
	soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_STATIC, doc,
					 sizeof(doc) - 1);
}
