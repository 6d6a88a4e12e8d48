/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The API's HTTP server: libsoup, handed connections the daemon accepted
 * itself, with what libsoup 3.2 lacks done here (keep-alive without its
 * leak, a 408 for a request not sent in time, bodies bounded), and the
 * answers every handler gives.
 */

#define G_LOG_DOMAIN "HrApi"

#include <string.h>

#include "hr-api-private.h"

/* a request not read whole this long after it began gets a 408 */
#define HR_API_REQUEST_TIMEOUT_S 10
/* a connection that sends nothing for this long is closed (a stalled TLS handshake) */
#define HR_API_IDLE_TIMEOUT_S 15
/* a kept-alive connection with no new request for this long is closed */
#define HR_API_KEEPALIVE_IDLE_S 10
#define HR_API_REQUEST_TIMER_KEY "hr-api-request-timer"

/* ---------------------------------------------------------------------- */
/* Answers */

void
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

void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *code, const gchar *format,
		   ...) G_GNUC_PRINTF(4, 5);

/* {"error": what went wrong, "code": one of host/API.md's error codes} */
void
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
void
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

/* ---------------------------------------------------------------------- */
/* Requests */

/*
 * X-Request-Id: the client's, when it is one an operator can grep for (at
 * most HR_API_REQUEST_ID_MAX bytes of letters, digits and "-._:"), else a
 * new UUID. Every answer carries it, and the log lines of a request
 * that changes something name it.
 */
static gboolean
hr_api_request_id_valid(const gchar *id)
{
	gsize len = id != NULL ? strlen(id) : 0;

	if (len == 0 || len > HR_API_REQUEST_ID_MAX)
		return FALSE;
	for (gsize i = 0; i < len; i++)
		if (!g_ascii_isalnum(id[i]) && strchr("-._:", id[i]) == NULL)
			return FALSE;
	return TRUE;
}

const gchar *
hr_api_message_request_id(SoupServerMessage *msg)
{
	return g_object_get_data(G_OBJECT(msg), HR_API_REQUEST_ID_KEY);
}

/* what a request that changes something did, once its answer is on the way */
static void
hr_api_log_cb(SoupServerMessage *msg, gpointer user_data)
{
	(void)user_data;
	g_message("request %s: %s %s: %u", hr_api_message_request_id(msg),
		  soup_server_message_get_method(msg),
		  g_uri_get_path(soup_server_message_get_uri(msg)),
		  soup_server_message_get_status(msg));
}

static void
hr_api_handler_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
		  gpointer user_data)
{
	const gchar *asked = soup_message_headers_get_one(
	    soup_server_message_get_request_headers(msg), "X-Request-Id");
	gchar *id = hr_api_request_id_valid(asked) ? g_strdup(asked) : g_uuid_string_random();
	(void)server;

	g_object_set_data_full(G_OBJECT(msg), HR_API_REQUEST_ID_KEY, id, g_free);
	soup_message_headers_replace(soup_server_message_get_response_headers(msg), "X-Request-Id",
				     id);
	/* reads are many and change nothing: only at debug level */
	if (g_strcmp0(soup_server_message_get_method(msg), "GET") != 0)
		g_signal_connect(msg, "wrote-headers", G_CALLBACK(hr_api_log_cb), NULL);
	else
		g_debug("request %s: GET %s", id, path);
	((HrApi *)user_data)->dispatch(user_data, msg, path, query);
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

SoupServer *
hr_api_server_new(HrApi *api, HrApiDispatchFunc dispatch)
{
	SoupServer *server = soup_server_new("server-header", "hugeroomd/" PACKAGE_VERSION, NULL);

	api->dispatch = dispatch;
	soup_server_add_handler(server, NULL, hr_api_handler_cb, api, NULL);
	g_signal_connect(server, "request-started", G_CALLBACK(hr_api_request_started_cb), api);
	return server;
}

void
hr_api_close_idle(HrApi *api)
{
	while (g_hash_table_size(api->idle) > 0) {
		GHashTableIter iter;
		gpointer conn;

		g_hash_table_iter_init(&iter, api->idle);
		g_hash_table_iter_next(&iter, &conn, NULL);
		hr_api_conn_close(conn);
	}
}

/* ---------------------------------------------------------------------- */
/* GET /v1/events: the one route that takes its connection from libsoup */

void
hr_api_events(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GIOStream) io = NULL;
	const gchar *guest;
	guint32 mask;
	GSocket *socket;
	const gchar *last_event_id = soup_message_headers_get_one(
	    soup_server_message_get_request_headers(msg), "Last-Event-ID");
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
	hr_event_stream_add_client(api->events, io, mask, guest, last_event_id);
}

/* ---------------------------------------------------------------------- */
/* Connections */

/* hand the connection to libsoup; @refused: why the peer gets only 403s */
void
hr_api_accept(HrApi *api, GIOStream *io, GSocketConnection *connection, HrApiRole role,
	      gboolean tls, const gchar *refused, const gchar *principal)
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
	if (principal != NULL)
		g_object_set_data_full(G_OBJECT(remote), HR_API_PRINCIPAL_KEY, g_strdup(principal),
				       g_free);
	g_socket_set_timeout(g_socket_connection_get_socket(connection), HR_API_IDLE_TIMEOUT_S);
	hr_api_conn_hand(conn, remote);
}
