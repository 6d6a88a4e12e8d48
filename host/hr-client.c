/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrClient"

#include "hr-client.h"

#include <gio/gunixsocketaddress.h>
#include <libsoup/soup.h>
#include <string.h>

JsonNode *
hr_client_request(const gchar *socket_path, const gchar *method, const gchar *path,
		  const gchar *body, guint timeout_s, guint *status, GError **error)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(socket_path);
	g_autoptr(SoupSession) session = soup_session_new_with_options(
	    "remote-connectable", addr, "timeout", timeout_s, NULL);
	g_autofree gchar *uri = g_strdup_printf("http://localhost%s", path);
	g_autoptr(SoupMessage) msg = soup_message_new(method, uri);
	g_autoptr(GBytes) answer = NULL;
	g_autoptr(JsonParser) parser = json_parser_new();
	gsize len = 0;
	const gchar *data;

	if (msg == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "'%s' cannot be part of a request path", path);
		return NULL;
	}
	if (body != NULL) {
		g_autoptr(GBytes) bytes = g_bytes_new(body, strlen(body));
		soup_message_set_request_body_from_bytes(msg, "application/json", bytes);
	}
	answer = soup_session_send_and_read(session, msg, NULL, error);
	if (answer == NULL) {
		g_prefix_error(error, "cannot connect to hugeroomd at %s: ", socket_path);
		return NULL;
	}
	*status = soup_message_get_status(msg);
	data = g_bytes_get_data(answer, &len);
	if (!json_parser_load_from_data(parser, data, len, error)) {
		g_prefix_error(error, "hugeroomd at %s answered HTTP %u with bad JSON: ",
			       socket_path, *status);
		return NULL;
	}
	return json_node_copy(json_parser_get_root(parser));
}

gchar *
hr_client_error_message(JsonNode *root, guint status)
{
	JsonObject *obj = root != NULL && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root)
								       : NULL;
	const gchar *msg =
	    obj != NULL ? json_object_get_string_member_with_default(obj, "error", NULL) : NULL;
	if (msg != NULL)
		return g_strdup(msg);
	return g_strdup_printf("HTTP %u from hugeroomd without an error message", status);
}
