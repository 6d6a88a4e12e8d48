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
	hr_api_accept(api, tls, connection, HR_API_ROLE_NONE, TRUE, NULL, NULL);
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
