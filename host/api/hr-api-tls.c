/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The API on TCP (api_listen): TLS with the configured certificate, and
 * the bearer tokens of api_tokens, reread on a reload.
 */

#define G_LOG_DOMAIN "HrApi"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "hr-api.h"

#include "hr-api-private.h"

#define HR_API_LISTEN_BACKLOG 128

/*
 * TLS handshakes. A connection waits in the main loop (a poll source, no
 * thread) until its client sends its first bytes, at most
 * HR_API_TLS_HANDSHAKE_S; only then is its handshake run, by one of
 * HR_API_TLS_THREADS threads of the API's own, within the same bound.
 * glib-networking runs a handshake on a GTask thread (the pool host reads
 * and snapshots use), implicitly at the first read before: 100 clients
 * that never sent a ClientHello held that pool and stalled GET /v1/host.
 * Now at most HR_API_TLS_THREADS handshakes run at once, and a client
 * that sends nothing holds no thread. At most HR_API_TLS_MAX_PENDING wait
 * or run; more are closed at once. TLS 1.0 and 1.1 are refused.
 */
#define HR_API_TLS_THREADS 4
#define HR_API_TLS_HANDSHAKE_S 10
#define HR_API_TLS_MAX_PENDING 256

typedef struct {
	HrApi *api;
	GSocketConnection *connection;
	GIOStream *tls;
	GCancellable *cancellable; /* cancelled when the time is up */
	GSource *readable;	   /* waiting for the client's first bytes */
	guint timeout_id;
	GSource *done; /* to the main loop, attached by the thread when it is done */
	GError *error; /* the handshake's, in the thread */
} HrApiHandshake;

static void
hr_api_handshake_free(HrApiHandshake *hs)
{
	if (hs->readable != NULL) {
		g_source_destroy(hs->readable);
		g_source_unref(hs->readable);
	}
	g_clear_handle_id(&hs->timeout_id, g_source_remove);
	if (hs->done != NULL) {
		g_source_destroy(hs->done);
		g_source_unref(hs->done);
	}
	g_clear_object(&hs->tls);
	g_clear_object(&hs->connection);
	g_clear_object(&hs->cancellable);
	g_clear_error(&hs->error);
	g_free(hs);
}

/* the main loop: accept it, or close it */
static gboolean
hr_api_handshake_done_cb(gpointer user_data)
{
	HrApiHandshake *hs = user_data;
	HrApi *api = hs->api;

	g_clear_handle_id(&hs->timeout_id, g_source_remove);
	g_hash_table_remove(api->handshakes, hs);
	if (hs->error != NULL) {
		api->n_handshake_failures++;
		g_debug("TLS handshake failed: %s", hs->error->message);
		g_io_stream_close(G_IO_STREAM(hs->connection), NULL, NULL);
	} else {
		hr_api_accept(api, hs->tls, hs->connection, HR_API_ROLE_NONE, TRUE, NULL, NULL);
	}
	hr_api_handshake_free(hs);
	return G_SOURCE_REMOVE;
}

/* one of the API's handshake threads */
static void
hr_api_handshake_thread(gpointer data, gpointer user_data)
{
	HrApiHandshake *hs = data;
	(void)user_data;

	if (g_tls_connection_handshake(G_TLS_CONNECTION(hs->tls), hs->cancellable, &hs->error) &&
	    g_tls_connection_get_protocol_version(G_TLS_CONNECTION(hs->tls)) <
		G_TLS_PROTOCOL_VERSION_TLS_1_2)
		g_set_error_literal(&hs->error, G_TLS_ERROR, G_TLS_ERROR_HANDSHAKE,
				    "the client's TLS is older than 1.2");
	/* the last the thread does with @hs: the main loop may free it from here */
	g_source_attach(hs->done, NULL);
}

static gboolean
hr_api_handshake_timeout_cb(gpointer user_data)
{
	HrApiHandshake *hs = user_data;

	hs->timeout_id = 0;
	if (hs->readable != NULL) {
		/* it never sent a byte: no thread to stop */
		g_hash_table_remove(hs->api->handshakes, hs);
		hs->api->n_handshake_failures++;
		g_io_stream_close(G_IO_STREAM(hs->connection), NULL, NULL);
		hr_api_handshake_free(hs);
		return G_SOURCE_REMOVE;
	}
	/* under way in a thread, which ends it (G_IO_ERROR_CANCELLED) */
	g_cancellable_cancel(hs->cancellable);
	return G_SOURCE_REMOVE;
}

static gboolean
hr_api_handshake_readable_cb(GSocket *socket, GIOCondition condition, gpointer user_data)
{
	HrApiHandshake *hs = user_data;
	(void)socket;
	(void)condition;

	g_source_destroy(hs->readable);
	g_clear_pointer(&hs->readable, g_source_unref);
	hs->done = g_idle_source_new();
	g_source_set_callback(hs->done, hr_api_handshake_done_cb, hs, NULL);
	g_thread_pool_push(hs->api->handshake_pool, hs, NULL);
	return G_SOURCE_REMOVE;
}

static void
hr_api_tcp_incoming_cb(GSocketConnection *connection, gpointer user_data)
{
	HrApi *api = user_data;
	GSocket *socket = g_socket_connection_get_socket(connection);
	g_autoptr(GError) error = NULL;
	HrApiHandshake *hs;

	if (g_hash_table_size(api->handshakes) >= HR_API_TLS_MAX_PENDING) {
		api->n_handshake_failures++;
		g_debug("a TLS connection closed: %d handshakes wait or run already",
			HR_API_TLS_MAX_PENDING);
		g_io_stream_close(G_IO_STREAM(connection), NULL, NULL);
		return;
	}
	/* the handshake's small writes must not wait for delayed ACKs */
	g_socket_set_option(socket, IPPROTO_TCP, TCP_NODELAY, TRUE, NULL);
	hs = g_new0(HrApiHandshake, 1);
	hs->api = api;
	hs->connection = g_object_ref(connection);
	/* no client certificates: without a database none is read per connection */
	hs->tls =
	    g_initable_new(g_tls_backend_get_server_connection_type(g_tls_backend_get_default()),
			   NULL, &error, "base-io-stream", connection, "certificate",
			   api->certificate, "database", NULL, "require-close-notify", FALSE, NULL);
	if (hs->tls == NULL) {
		g_warning("TLS on an API connection: %s", error->message);
		hr_api_handshake_free(hs);
		return;
	}
	hs->cancellable = g_cancellable_new();
	/* each read of the handshake, in its thread, waits this long at most */
	g_socket_set_timeout(socket, HR_API_TLS_HANDSHAKE_S);
	hs->readable = g_socket_create_source(socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
	g_source_set_callback(hs->readable, G_SOURCE_FUNC(hr_api_handshake_readable_cb), hs, NULL);
	g_source_attach(hs->readable, NULL);
	hs->timeout_id =
	    g_timeout_add_seconds(HR_API_TLS_HANDSHAKE_S, hr_api_handshake_timeout_cb, hs);
	g_hash_table_add(api->handshakes, hs);
}

void
hr_api_tls_free(HrApi *api)
{
	GHashTableIter iter;
	gpointer hs;

	if (api->handshake_pool != NULL) {
		/* what runs ends within HR_API_TLS_HANDSHAKE_S, cancelled sooner */
		g_hash_table_iter_init(&iter, api->handshakes);
		while (g_hash_table_iter_next(&iter, &hs, NULL))
			g_cancellable_cancel(((HrApiHandshake *)hs)->cancellable);
		g_thread_pool_free(api->handshake_pool, FALSE, TRUE);
		api->handshake_pool = NULL;
	}
	if (api->handshakes != NULL) {
		/* no thread runs: what they finished is dropped with its answer */
		g_hash_table_iter_init(&iter, api->handshakes);
		while (g_hash_table_iter_next(&iter, &hs, NULL)) {
			g_hash_table_iter_steal(&iter);
			hr_api_handshake_free(hs);
		}
		g_clear_pointer(&api->handshakes, g_hash_table_unref);
	}
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

gboolean
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
	api->handshakes = g_hash_table_new(NULL, NULL);
	api->handshake_pool =
	    g_thread_pool_new(hr_api_handshake_thread, api, HR_API_TLS_THREADS, FALSE, error);
	if (api->handshake_pool == NULL)
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
