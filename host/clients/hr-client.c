/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrClient"

#include "hr-client.h"

#include <gio/gunixsocketaddress.h>
#include <libsoup/soup.h>
#include <stdio.h>
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

/* ---------------------------------------------------------------------- */
/* The event stream */

struct _HrClientEvents {
	GSocket *socket;
	GString *buf; /* received, not yet parsed */
};

void
hr_client_events_close(HrClientEvents *events)
{
	if (events == NULL)
		return;
	g_clear_object(&events->socket);
	g_string_free(events->buf, TRUE);
	g_free(events);
}

/* more bytes into the buffer within @deadline (monotonic us); FALSE at the deadline */
static gboolean
hr_client_events_fill(HrClientEvents *events, gint64 deadline, GError **error)
{
	gchar chunk[4096];
	gint64 left = deadline - g_get_monotonic_time();
	gssize n;

	if (left <= 0)
		return FALSE;
	if (!g_socket_condition_timed_wait(events->socket, G_IO_IN, left, NULL, error)) {
		if (g_error_matches(*error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
			g_clear_error(error);
		return FALSE;
	}
	n = g_socket_receive(events->socket, chunk, sizeof(chunk), NULL, error);
	if (n < 0)
		return FALSE;
	if (n == 0) {
		g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
				    "hugeroomd closed the event stream");
		return FALSE;
	}
	g_string_append_len(events->buf, chunk, n);
	return TRUE;
}

HrClientEvents *
hr_client_events_open(const gchar *socket_path, const gchar *query, GError **error)
{
	g_autoptr(HrClientEvents) events = g_new0(HrClientEvents, 1);
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(socket_path);
	g_autofree gchar *head = g_strdup_printf("GET /v1/events%s%s HTTP/1.1\r\n"
						 "Host: localhost\r\nAccept: text/event-stream\r\n\r\n",
						 query != NULL ? "?" : "", query != NULL ? query : "");
	gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
	const gchar *end;
	guint status = 0;

	events->buf = g_string_new(NULL);
	events->socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
				      G_SOCKET_PROTOCOL_DEFAULT, error);
	if (events->socket == NULL || !g_socket_connect(events->socket, addr, NULL, error) ||
	    g_socket_send(events->socket, head, strlen(head), NULL, error) < 0) {
		g_prefix_error(error, "cannot connect to hugeroomd at %s: ", socket_path);
		return NULL;
	}
	while ((end = strstr(events->buf->str, "\r\n\r\n")) == NULL) {
		if (!hr_client_events_fill(events, deadline, error)) {
			if (*error == NULL)
				g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
					    "hugeroomd at %s did not answer GET /v1/events",
					    socket_path);
			return NULL;
		}
	}
	if (sscanf(events->buf->str, "HTTP/1.%*d %u", &status) != 1 || status != 200) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "hugeroomd at %s refused GET /v1/events: %.*s", socket_path,
			    (gint)strcspn(events->buf->str, "\r\n"), events->buf->str);
		return NULL;
	}
	g_string_erase(events->buf, 0, end + 4 - events->buf->str);
	return g_steal_pointer(&events);
}

gboolean
hr_client_events_next(HrClientEvents *events, gint64 timeout_ms, gchar **type, gchar **data,
		      GError **error)
{
	gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

	for (;;) {
		const gchar *end = strstr(events->buf->str, "\n\n");
		if (end != NULL) {
			g_autofree gchar *block = g_strndup(events->buf->str, end - events->buf->str);
			g_auto(GStrv) lines = g_strsplit(block, "\n", -1);
			g_autofree gchar *ev_type = NULL;
			g_autofree gchar *ev_data = NULL;

			g_string_erase(events->buf, 0, end + 2 - events->buf->str);
			for (guint i = 0; lines[i] != NULL; i++) {
				if (g_str_has_prefix(lines[i], "event: ")) {
					g_free(ev_type);
					ev_type = g_strdup(lines[i] + 7);
				} else if (g_str_has_prefix(lines[i], "data: ")) {
					g_free(ev_data);
					ev_data = g_strdup(lines[i] + 6);
				}
			}
			/* pings and the retry hint carry no data */
			if (ev_data == NULL)
				continue;
			*type = g_steal_pointer(&ev_type);
			*data = g_steal_pointer(&ev_data);
			return TRUE;
		}
		if (!hr_client_events_fill(events, deadline, error))
			return FALSE;
	}
}
