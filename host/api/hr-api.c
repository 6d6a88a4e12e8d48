/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The HTTP/JSON API (host/API.md, openapi.json): one route table, one
 * dispatcher that checks who is asking (hr-api-auth) before any handler
 * runs, on the Unix socket and optionally on TCP with TLS. This file owns
 * the server's state and its Unix socket; hr-api-http.c is the HTTP
 * server, hr-api-routes.c the table, hr-api-tls.c the TCP listener, and
 * one file per resource has its handlers.
 */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api.h"

#include <malloc.h>
#include <sys/stat.h>

#include "hr-api-private.h"
#include "hr-socket.h"

/* GET /v1/host, /metrics and POST /v1/plan answer from a read at most this old */
#define HR_API_HOST_MAX_AGE_US (250 * 1000)
/* open API connections one uid other than root may have */
#define HR_API_MAX_PER_UID 64

/*
 * malloc keeps what a burst of answers freed (a /v1/guests of 1000 guests
 * for 200 clients at once) as the process's high-water mark; this often,
 * when it holds at least HR_API_TRIM_MIN free, it gives that back.
 */
#define HR_API_TRIM_S 30
#define HR_API_TRIM_MIN (8 << 20)

static gboolean
hr_api_trim_cb(gpointer user_data)
{
	(void)user_data;
	if (mallinfo2().fordblks >= HR_API_TRIM_MIN)
		malloc_trim(0);
	return G_SOURCE_CONTINUE;
}

HrApi *
hr_api_new(HrCore *core, HrPrepare *prepare)
{
	HrApi *api = g_new0(HrApi, 1);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);

	api->core = core;
	api->prepare = prepare;
	api->admin_gid = (gid_t)-1;
	api->read_gid = (gid_t)-1;
	api->events = hr_event_stream_new(core, prepare);
	api->idle = g_hash_table_new(NULL, NULL);
	api->started_at = g_get_monotonic_time();
	api->trim_id = g_timeout_add_seconds(HR_API_TRIM_S, hr_api_trim_cb, api);
	for (const HrApiRoute *route; (route = hr_api_get_route(names->len)) != NULL;)
		g_ptr_array_add(names, g_strdup_printf("%s %s", route->method, route->path));
	g_ptr_array_add(names, NULL);
	api->metrics = hr_metrics_new(core, prepare);
	api->host = hr_host_reader_new(HR_API_HOST_MAX_AGE_US);
	api->latency = hr_metrics_histogram_new(
	    "hugeroom_api_request_duration_seconds", "time to handle an API request, by route",
	    "route", (const gchar *const *)names->pdata, hr_metrics_bounds_fast);
	api->server = hr_api_server_new(api, hr_api_dispatch);
	return api;
}

void
hr_api_free(HrApi *api)
{
	if (api == NULL)
		return;
	g_clear_pointer(&api->acceptor, hr_acceptor_free);
	g_clear_pointer(&api->tcp_acceptors, g_ptr_array_unref);
	hr_api_tls_free(api);
	hr_api_close_idle(api);
	g_hash_table_unref(api->idle);
	g_clear_handle_id(&api->trim_id, g_source_remove);
	g_clear_object(&api->socket);
	hr_event_stream_free(api->events);
	soup_server_disconnect(api->server);
	g_object_unref(api->server);
	g_clear_object(&api->certificate);
	hr_api_tokens_free(api->tokens);
	g_free(api->tokens_path);
	hr_metrics_histogram_free(api->latency);
	hr_metrics_free(api->metrics);
	hr_host_reader_free(api->host);
	g_clear_pointer(&api->host_json, json_node_unref);
	g_clear_pointer(&api->capacity, json_node_unref);
	g_free(api);
}

/*
 * We accept connections ourselves and hand them to libsoup as streams:
 * the peer is checked once per connection, and libsoup 3.2's own listener
 * leaks a socket (and its fd) per connection.
 */
static void
hr_api_incoming_cb(GSocketConnection *connection, gpointer user_data)
{
	HrApi *api = user_data;
	g_autoptr(GError) error = NULL;
	g_autofree gchar *principal = NULL;
	HrApiRole role;

	role = hr_api_peer_role(g_socket_connection_get_socket(connection), api->admin_gid,
				api->read_gid, &principal, &error);
	if (role == HR_API_ROLE_NONE)
		g_warning("API connection refused: %s", error->message);
	hr_api_accept(api, G_IO_STREAM(connection), connection, role, FALSE,
		      role == HR_API_ROLE_NONE ? error->message : NULL, principal);
}

/*
 * A socket the service manager made keeps its file as the socket unit set
 * it (SocketGroup=, SocketMode=): say so when a group the configuration
 * names cannot connect to it, instead of the members' bare "Couldn't
 * connect".
 */
static void
hr_api_check_passed_mode(const gchar *path, gid_t gid, const gchar *key, const gchar *group)
{
	struct stat st;

	if (gid == (gid_t)-1 || stat(path, &st) != 0)
		return;
	if ((st.st_mode & S_IWOTH) != 0 || (st.st_gid == gid && (st.st_mode & S_IWGRP) != 0))
		return;
	g_warning("%s from the service manager is mode %04o, group %u: %s=%s's members cannot "
		  "connect; give the socket unit SocketGroup=%s (or SocketMode=0666)",
		  path, (guint)(st.st_mode & 07777), (guint)st.st_gid, key, group, group);
}

gboolean
hr_api_listen(HrApi *api, const HrConfig *config, GError **error)
{
	g_autoptr(GSocket) socket = NULL;

	if (config->api_group != NULL && config->api_group[0] != '\0' &&
	    !hr_api_group_lookup(config->api_group, &api->admin_gid, error)) {
		g_prefix_error(error, "api_group: ");
		return FALSE;
	}
	if (config->api_read_group != NULL && config->api_read_group[0] != '\0' &&
	    !hr_api_group_lookup(config->api_read_group, &api->read_gid, error)) {
		g_prefix_error(error, "api_read_group: ");
		return FALSE;
	}
	/* HTTPS first: once the socket's file exists, every API listener
	 * takes connections (clients and tests wait for that file) */
	if (config->api_listen != NULL && !hr_api_listen_tcp(api, config, error))
		return FALSE;
	/* with groups, anyone reaches the socket and the peer check decides */
	socket = hr_socket_listen_unix(
	    config->api_socket,
	    api->admin_gid != (gid_t)-1 || api->read_gid != (gid_t)-1 ? 0666 : 0660, error);
	if (socket == NULL)
		return FALSE;
	if (hr_socket_is_passed(config->api_socket)) {
		hr_api_check_passed_mode(config->api_socket, api->admin_gid, "api_group",
					 config->api_group);
		hr_api_check_passed_mode(config->api_socket, api->read_gid, "api_read_group",
					 config->api_read_group);
	}
	api->acceptor = hr_acceptor_new(socket, "API socket", hr_api_incoming_cb, api);
	/* a refused peer gets its 403 on one connection, not a thousand idle ones */
	hr_acceptor_set_max_per_uid(api->acceptor, HR_API_MAX_PER_UID);
	api->socket = g_steal_pointer(&socket);
	return TRUE;
}
