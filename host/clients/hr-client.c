/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrClient"

#include "hr-client.h"
#include "hr-text.h"

#include <gio/gunixsocketaddress.h>
#include <libsoup/soup.h>
#include <stdio.h>
#include <string.h>

G_DEFINE_QUARK(hr - client - error - quark, hr_client_error)

struct _HrClient {
	gchar *socket_path; /* the Unix socket, or NULL */
	gchar *host;	    /* or HTTPS to host:port */
	guint16 port;
	gchar *token;
	GTlsDatabase *ca; /* NULL: the system's */
	gchar *describe;
};

HrClient *
hr_client_new_unix(const gchar *socket_path)
{
	HrClient *client = g_new0(HrClient, 1);

	client->socket_path = g_strdup(socket_path);
	client->describe = g_strdup_printf("hugeroomd at %s", socket_path);
	return client;
}

HrClient *
hr_client_new_url(const gchar *url, const gchar *token, const gchar *ca_file, GError **error)
{
	g_autoptr(HrClient) client = g_new0(HrClient, 1);
	g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_NONE, NULL);

	if (uri == NULL || g_strcmp0(g_uri_get_scheme(uri), "https") != 0 ||
	    g_uri_get_host(uri) == NULL || g_uri_get_host(uri)[0] == '\0' ||
	    g_uri_get_port(uri) <= 0 || g_uri_get_userinfo(uri) != NULL ||
	    (g_uri_get_path(uri)[0] != '\0' && g_strcmp0(g_uri_get_path(uri), "/") != 0) ||
	    g_uri_get_query(uri) != NULL || g_uri_get_fragment(uri) != NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "'%s' is not https://HOST:PORT (the daemon's api_listen; the API on "
			    "the network is HTTPS only)",
			    url);
		return NULL;
	}
	if (token == NULL || token[0] == '\0' || strpbrk(token, " \t\r\n") != NULL) {
		g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
				    "the API on the network needs a bearer token without spaces");
		return NULL;
	}
	if (ca_file != NULL) {
		client->ca = g_tls_file_database_new(ca_file, error);
		if (client->ca == NULL) {
			g_prefix_error(error, "CA file %s: ", ca_file);
			return NULL;
		}
	}
	client->host = g_strdup(g_uri_get_host(uri));
	client->port = (guint16)g_uri_get_port(uri);
	client->token = g_strdup(token);
	client->describe = g_strdup_printf(
	    "hugeroomd at https://%s%s%s:%u", strchr(client->host, ':') != NULL ? "[" : "",
	    client->host, strchr(client->host, ':') != NULL ? "]" : "", client->port);
	return g_steal_pointer(&client);
}

void
hr_client_free(HrClient *client)
{
	if (client == NULL)
		return;
	g_free(client->socket_path);
	g_free(client->host);
	g_free(client->token);
	g_clear_object(&client->ca);
	g_free(client->describe);
	g_free(client);
}

const gchar *
hr_client_describe(HrClient *client)
{
	return client->describe;
}

gboolean
hr_client_is_remote(HrClient *client)
{
	return client->socket_path == NULL;
}

/* the base URI of the daemon's routes */
static gchar *
hr_client_base(HrClient *client)
{
	if (client->socket_path != NULL)
		return g_strdup("http://localhost");
	return g_strdup_printf("https://%s%s%s:%u", strchr(client->host, ':') != NULL ? "[" : "",
			       client->host, strchr(client->host, ':') != NULL ? "]" : "",
			       client->port);
}

JsonNode *
hr_client_call(HrClient *client, const gchar *method, const gchar *path, const gchar *body,
	       guint timeout_s, guint *status, GError **error)
{
	g_autoptr(GSocketAddress) addr =
	    client->socket_path != NULL ? g_unix_socket_address_new(client->socket_path) : NULL;
	g_autoptr(SoupSession) session = NULL;
	g_autofree gchar *base = hr_client_base(client);
	g_autofree gchar *uri = g_strconcat(base, path, NULL);
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
	if (addr != NULL)
		session = soup_session_new_with_options("remote-connectable", addr, "timeout",
							timeout_s, NULL);
	else
		session = soup_session_new_with_options("timeout", timeout_s, NULL);
	if (client->ca != NULL)
		soup_session_set_tls_database(session, client->ca);
	if (client->token != NULL) {
		g_autofree gchar *auth = g_strconcat("Bearer ", client->token, NULL);
		soup_message_headers_replace(soup_message_get_request_headers(msg), "Authorization",
					     auth);
	}
	if (body != NULL) {
		g_autoptr(GBytes) bytes = g_bytes_new(body, strlen(body));
		soup_message_set_request_body_from_bytes(msg, "application/json", bytes);
	}
	answer = soup_session_send_and_read(session, msg, NULL, error);
	if (answer == NULL) {
		g_prefix_error(error, "cannot connect to %s: ", client->describe);
		return NULL;
	}
	*status = soup_message_get_status(msg);
	data = g_bytes_get_data(answer, &len);
	if (!json_parser_load_from_data(parser, data, len, error)) {
		g_prefix_error(error, "%s answered HTTP %u with bad JSON: ", client->describe,
			       *status);
		return NULL;
	}
	return json_node_copy(json_parser_get_root(parser));
}

JsonNode *
hr_client_request(const gchar *socket_path, const gchar *method, const gchar *path,
		  const gchar *body, guint timeout_s, guint *status, GError **error)
{
	g_autoptr(HrClient) client = hr_client_new_unix(socket_path);
	return hr_client_call(client, method, path, body, timeout_s, status, error);
}

gchar *
hr_client_escape(const gchar *text)
{
	return hr_text_escape(text);
}

gchar *
hr_client_error_message(JsonNode *root, guint status)
{
	JsonObject *obj =
	    root != NULL && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	const gchar *msg =
	    obj != NULL ? json_object_get_string_member_with_default(obj, "error", NULL) : NULL;
	if (msg != NULL)
		return g_strdup(msg);
	return g_strdup_printf("HTTP %u from hugeroomd without an error message", status);
}

/* ---------------------------------------------------------------------- */
/* The event stream */

struct _HrClientEvents {
	GIOStream *stream; /* the connection, or TLS over it */
	GSocket *socket;   /* under it, to wait on */
	GString *buf;	   /* received, not yet parsed */
};

void
hr_client_events_close(HrClientEvents *events)
{
	if (events == NULL)
		return;
	g_clear_object(&events->stream);
	g_clear_object(&events->socket);
	g_string_free(events->buf, TRUE);
	g_free(events);
}

/*
 * More bytes into the buffer within @deadline (monotonic us); FALSE at the
 * deadline. Reads without blocking and waits on the socket in between, so
 * that TLS records already decrypted are not waited for.
 */
static gboolean
hr_client_events_fill(HrClientEvents *events, gint64 deadline, GError **error)
{
	GPollableInputStream *in =
	    G_POLLABLE_INPUT_STREAM(g_io_stream_get_input_stream(events->stream));
	gchar chunk[4096];

	for (;;) {
		g_autoptr(GError) local = NULL;
		gint64 left;
		gssize n = g_pollable_input_stream_read_nonblocking(in, chunk, sizeof(chunk), NULL,
								    &local);
		if (n > 0) {
			g_string_append_len(events->buf, chunk, n);
			return TRUE;
		}
		if (n == 0) {
			g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
					    "hugeroomd closed the event stream");
			return FALSE;
		}
		if (!g_error_matches(local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
			g_propagate_error(error, g_steal_pointer(&local));
			return FALSE;
		}
		left = deadline - g_get_monotonic_time();
		if (left <= 0)
			return FALSE;
		g_clear_error(&local);
		if (!g_socket_condition_timed_wait(events->socket, G_IO_IN, left, NULL, &local)) {
			if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
				return FALSE;
			g_propagate_error(error, g_steal_pointer(&local));
			return FALSE;
		}
	}
}

/* the connection to the daemon, TLS and its handshake done for a URL */
static GIOStream *
hr_client_connect(HrClient *client, GSocket **socket, GError **error)
{
	g_autoptr(GSocketClient) sc = g_socket_client_new();
	g_autoptr(GSocketConnection) conn = NULL;
	g_autoptr(GIOStream) tls = NULL;
	g_autoptr(GSocketConnectable) identity = NULL;

	g_socket_client_set_timeout(sc, 30);
	if (client->socket_path != NULL) {
		g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(client->socket_path);
		conn = g_socket_client_connect(sc, G_SOCKET_CONNECTABLE(addr), NULL, error);
	} else {
		conn = g_socket_client_connect_to_host(sc, client->host, client->port, NULL, error);
	}
	if (conn == NULL)
		return NULL;
	*socket = g_object_ref(g_socket_connection_get_socket(conn));
	if (client->socket_path != NULL)
		return G_IO_STREAM(g_steal_pointer(&conn));
	identity = g_network_address_new(client->host, client->port);
	tls = g_tls_client_connection_new(G_IO_STREAM(conn), identity, error);
	if (tls == NULL)
		return NULL;
	if (client->ca != NULL)
		g_tls_connection_set_database(G_TLS_CONNECTION(tls), client->ca);
	if (!g_tls_connection_handshake(G_TLS_CONNECTION(tls), NULL, error))
		return NULL;
	return g_steal_pointer(&tls);
}

HrClientEvents *
hr_client_events_open(HrClient *client, const gchar *query, GError **error)
{
	g_autoptr(HrClientEvents) events = g_new0(HrClientEvents, 1);
	g_autofree gchar *auth =
	    client->token != NULL ? g_strdup_printf("Authorization: Bearer %s\r\n", client->token)
				  : g_strdup("");
	g_autofree gchar *head = g_strdup_printf(
	    "GET /v1/events%s%s HTTP/1.1\r\nHost: %s\r\n%sAccept: text/event-stream\r\n\r\n",
	    query != NULL ? "?" : "", query != NULL ? query : "",
	    client->host != NULL ? client->host : "localhost", auth);
	gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
	const gchar *end;
	guint status = 0;

	events->buf = g_string_new(NULL);
	events->stream = hr_client_connect(client, &events->socket, error);
	if (events->stream == NULL ||
	    !g_output_stream_write_all(g_io_stream_get_output_stream(events->stream), head,
				       strlen(head), NULL, NULL, error)) {
		g_prefix_error(error, "cannot connect to %s: ", client->describe);
		return NULL;
	}
	while ((end = strstr(events->buf->str, "\r\n\r\n")) == NULL) {
		if (!hr_client_events_fill(events, deadline, error)) {
			if (*error == NULL)
				g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
					    "%s did not answer GET /v1/events", client->describe);
			else
				g_prefix_error(error, "cannot connect to %s: ", client->describe);
			return NULL;
		}
	}
	if (sscanf(events->buf->str, "HTTP/1.%*d %u", &status) != 1 || status != 200) {
		g_set_error(error, HR_CLIENT_ERROR, HR_CLIENT_ERROR_REFUSED,
			    "%s refused GET /v1/events: %.*s", client->describe,
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
			g_autofree gchar *block =
			    g_strndup(events->buf->str, end - events->buf->str);
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
