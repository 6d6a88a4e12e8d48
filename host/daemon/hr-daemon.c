/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrDaemon"

#include "hr-daemon.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "hr-api.h"
#include "hr-socket.h"
#include "hr-virt.h"

struct _HrDaemon {
	HrConfig *config;
	HrCore *core;
	GSocketService *service;
	GSocket *vm_socket;
	HrApi *api;
	HrPrepare *prepare;
	HrVirt *virt; /* the guests' libvirt domains; NULL without libvirt */
	gboolean started;
};

HrDaemon *
hr_daemon_new(HrConfig *config)
{
	HrDaemon *daemon = g_new0(HrDaemon, 1);
	daemon->config = config;
	daemon->core = hr_core_new(config);
	return daemon;
}

void
hr_daemon_free(HrDaemon *daemon)
{
	if (daemon == NULL)
		return;
	hr_daemon_stop(daemon);
	hr_core_free(daemon->core);
	g_free(daemon);
}

HrCore *
hr_daemon_get_core(HrDaemon *daemon)
{
	return daemon->core;
}

HrPrepare *
hr_daemon_get_prepare(HrDaemon *daemon)
{
	return daemon->prepare;
}

HrApi *
hr_daemon_get_api(HrDaemon *daemon)
{
	return daemon->api;
}

/* a guest that connects: look its libvirt domain up (a thread of hr-virt's) */
static void
hr_daemon_core_cb(HrCore *core, const HrEvent *event, gpointer user_data)
{
	HrDaemon *daemon = user_data;
	(void)core;
	if (event->kind == HR_EVENT_GUEST_CONNECTED)
		hr_virt_lookup(daemon->virt, hr_guest_get_uuid(event->guest),
			       hr_guest_get_name(event->guest));
}

static gboolean
hr_daemon_incoming_cb(GSocketService *service, GSocketConnection *connection,
		      GObject *source_object, gpointer user_data)
{
	HrDaemon *daemon = user_data;
	(void)service;
	(void)source_object;
	if (hr_core_get_n_devices(daemon->core) >= daemon->config->max_connections) {
		g_warning("refusing a VM socket connection: %u open already (max_connections)",
			  hr_core_get_n_devices(daemon->core));
		hr_core_note_unidentified(daemon->core, "too many connections (max_connections)");
		g_io_stream_close(G_IO_STREAM(connection), NULL, NULL);
		return TRUE;
	}
	hr_core_accept(daemon->core, connection, daemon->config->status_interval_ms);
	return TRUE;
}

static void
hr_daemon_remove_socket(const gchar *path)
{
	/* a socket unit's file stays: the next start gets the same socket */
	if (hr_socket_is_passed(path))
		return;
	if (g_unlink(path) != 0 && errno != ENOENT)
		g_warning("cannot remove %s: %s", path, g_strerror(errno));
}

gboolean
hr_daemon_start(HrDaemon *daemon, GError **error)
{
	daemon->vm_socket = hr_socket_listen_unix(daemon->config->vm_socket, 0660, error);
	if (daemon->vm_socket == NULL) {
		g_prefix_error(error, "VM socket: ");
		return FALSE;
	}
	hr_socket_set_group(daemon->config->vm_socket, daemon->config->vm_socket_group);
	daemon->service = g_socket_service_new();
	if (!g_socket_listener_add_socket(G_SOCKET_LISTENER(daemon->service), daemon->vm_socket,
					  NULL, error)) {
		g_prefix_error(error, "VM socket %s: ", daemon->config->vm_socket);
		return FALSE;
	}
	g_signal_connect(daemon->service, "incoming", G_CALLBACK(hr_daemon_incoming_cb), daemon);
	/* reservations a previous run left resume here */
	daemon->prepare = hr_prepare_new(daemon->core);
	daemon->api = hr_api_new(daemon->core, daemon->prepare);
	if (!hr_api_listen(daemon->api, daemon->config, error)) {
		g_prefix_error(error, "API socket: ");
		g_clear_pointer(&daemon->api, hr_api_free);
		g_clear_pointer(&daemon->prepare, hr_prepare_free);
		g_clear_object(&daemon->service);
		g_clear_object(&daemon->vm_socket);
		hr_daemon_remove_socket(daemon->config->vm_socket);
		return FALSE;
	}
	g_socket_service_start(daemon->service);
	daemon->virt = hr_virt_new(daemon->config);
	hr_core_listen(daemon->core, hr_daemon_core_cb, daemon);
	daemon->started = TRUE;
	g_info("listening for devices on %s, API on %s, status every %u ms",
	       daemon->config->vm_socket, daemon->config->api_socket,
	       daemon->config->status_interval_ms);
	return TRUE;
}

void
hr_daemon_stop(HrDaemon *daemon)
{
	/* the API and the executor first: the closing devices' events tell them nothing */
	g_clear_pointer(&daemon->api, hr_api_free);
	g_clear_pointer(&daemon->prepare, hr_prepare_free);
	if (daemon->started)
		hr_core_unlisten(daemon->core, hr_daemon_core_cb, daemon);
	g_clear_pointer(&daemon->virt, hr_virt_free);
	hr_core_close_devices(daemon->core);
	if (daemon->service != NULL) {
		g_socket_service_stop(daemon->service);
		g_socket_listener_close(G_SOCKET_LISTENER(daemon->service));
		g_clear_object(&daemon->service);
	}
	g_clear_object(&daemon->vm_socket);
	if (daemon->started) {
		hr_daemon_remove_socket(daemon->config->vm_socket);
		hr_daemon_remove_socket(daemon->config->api_socket);
		daemon->started = FALSE;
	}
}
