/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrDaemon"

#include "hr-daemon.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>

#include "hr-api.h"
#include "hr-device.h"
#include "hr-prepare.h"
#include "hr-socket.h"

/* how often pending commands and vanished QEMU processes are checked */
#define HR_DAEMON_SWEEP_MS 1000

struct _HrDaemon {
	HrConfig *config;
	GSocketService *service;
	GSocket *vm_socket;
	HrApi *api;
	HrPrepare *prepare;
	GPtrArray *devices; /* HrDevice, open connections */
	GPtrArray *guests;  /* HrGuest */
	guint64 next_guest_id;
	guint64 next_request_id;
	guint64 rejected_unidentified;
	gchar *last_unidentified_reason;
	guint sweep_id;
	gboolean started;
};

HrDaemon *
hr_daemon_new(HrConfig *config)
{
	HrDaemon *daemon = g_new0(HrDaemon, 1);
	daemon->config = config;
	daemon->devices = g_ptr_array_new_with_free_func((GDestroyNotify)hr_device_unref);
	daemon->guests = g_ptr_array_new_with_free_func((GDestroyNotify)hr_guest_free);
	daemon->next_guest_id = 1;
	/* unique per VM across daemon restarts (SPEC 1.6.1) */
	daemon->next_request_id = (guint64)g_get_real_time();
	return daemon;
}

void
hr_daemon_free(HrDaemon *daemon)
{
	if (daemon == NULL)
		return;
	hr_daemon_stop(daemon);
	g_ptr_array_unref(daemon->devices);
	g_ptr_array_unref(daemon->guests);
	g_free(daemon->last_unidentified_reason);
	g_free(daemon);
}

HrPrepare *
hr_daemon_get_prepare(HrDaemon *daemon)
{
	return daemon->prepare;
}

const HrConfig *
hr_daemon_get_config(HrDaemon *daemon)
{
	return daemon->config;
}

GPtrArray *
hr_daemon_get_guests(HrDaemon *daemon)
{
	return daemon->guests;
}

guint64
hr_daemon_get_rejected_unidentified(HrDaemon *daemon)
{
	return daemon->rejected_unidentified;
}

const gchar *
hr_daemon_get_last_unidentified_reason(HrDaemon *daemon)
{
	return daemon->last_unidentified_reason;
}

HrGuest *
hr_daemon_find_guest(HrDaemon *daemon, const gchar *name_or_uuid)
{
	HrGuest *found = NULL;
	for (guint i = 0; i < daemon->guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(daemon->guests, i);
		if (g_ascii_strcasecmp(guest->uuid, name_or_uuid) != 0 &&
		    g_strcmp0(guest->name, name_or_uuid) != 0)
			continue;
		/* prefer a connected entry, then the most recent one */
		if (found == NULL || hr_guest_is_connected(guest) || !hr_guest_is_connected(found))
			found = guest;
	}
	return found;
}

HrGuest *
hr_daemon_attach_device(HrDaemon *daemon, HrDevice *device, const HrChanHello *hello, gint pid)
{
	HrGuest *guest = NULL;

	for (guint i = 0; i < daemon->guests->len; i++) {
		HrGuest *g = g_ptr_array_index(daemon->guests, i);
		if (!hr_guest_matches(g, hello))
			continue;
		if (hr_guest_is_connected(g)) {
			/* legitimate for a moment during a local migration: keep apart */
			g_info("%s: a second connection with the same identity (pid %d and %d)",
			       g->name, g->pid, pid);
			continue;
		}
		guest = g;
	}
	if (guest != NULL) {
		g_info("%s (%s) reconnected from pid %d", hello->name, guest->uuid, pid);
		hr_guest_update_identity(guest, hello, pid);
	} else {
		guest = hr_guest_new(daemon->next_guest_id++, hello, pid);
		guest->history = daemon->config->request_history;
		g_ptr_array_add(daemon->guests, guest);
		g_info("%s (%s) connected from pid %d, %u RAM ranges", guest->name, guest->uuid,
		       pid, hello->nr_ram);
	}
	guest->device = device;
	guest->ready = FALSE;
	guest->connections++;
	g_clear_pointer(&guest->connected_at, g_date_time_unref);
	g_clear_pointer(&guest->disconnected_at, g_date_time_unref);
	guest->connected_at = g_date_time_new_now_utc();
	/* commands sent on the old connection will not be answered */
	g_hash_table_remove_all(guest->pending);
	return guest;
}

void
hr_daemon_device_closed(HrDaemon *daemon, HrDevice *device, HrGuest *guest, const gchar *reason)
{
	if (guest != NULL) {
		if (reason != NULL)
			hr_guest_reject(guest, reason);
		guest->device = NULL;
		guest->disconnected_at = g_date_time_new_now_utc();
		hr_guest_device_lost(guest);
	} else if (reason != NULL) {
		daemon->rejected_unidentified++;
		g_free(daemon->last_unidentified_reason);
		daemon->last_unidentified_reason = g_strdup(reason);
	}
	g_ptr_array_remove(daemon->devices, device);
}

guint64
hr_daemon_new_request_id(HrDaemon *daemon)
{
	return daemon->next_request_id++;
}

guint64
hr_daemon_request_report(HrDaemon *daemon, HrGuest *guest, GError **error)
{
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) payload = NULL;
	HrPendingCmd *pending;

	if (!hr_guest_is_connected(guest)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
			    "guest %s is not connected (its QEMU has no hugeroom device "
			    "connection right now)",
			    guest->name);
		return 0;
	}
	cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, daemon->next_request_id++);
	payload = hr_cmd_encode(cmd);
	pending = g_new0(HrPendingCmd, 1);
	pending->request_id = cmd->hdr.request_id;
	pending->type = cmd->hdr.type;
	pending->sent_at = g_get_monotonic_time();
	g_hash_table_insert(guest->pending, &pending->request_id, pending);
	guest->cmds_sent++;
	hr_device_send(guest->device, HR_CHAN_HOST_CMD, payload);
	g_info("%s: sent report request %" G_GUINT64_FORMAT, guest->name, cmd->hdr.request_id);
	return cmd->hdr.request_id;
}

HrRequest *
hr_daemon_submit(HrDaemon *daemon, HrGuest *guest, const HrRequestParams *params, GError **error)
{
	HrRequestParams p = *params;
	HrRequest *request;

	if (p.timeout_s == 0)
		p.timeout_s = daemon->config->request_timeout_s;
	request = hr_request_new(daemon->next_request_id, &p, (const HrRamRange *)guest->ram->data,
				 guest->ram->len, error);
	if (request == NULL)
		return NULL;
	if (!hr_guest_check_gate(guest, p.kind, error)) {
		hr_request_unref(request);
		return NULL;
	}
	daemon->next_request_id++;
	hr_guest_submit(guest, request);
	return request;
}

static gboolean
hr_daemon_sweep_cb(gpointer user_data)
{
	HrDaemon *daemon = user_data;
	gint64 now = g_get_monotonic_time();
	gint64 timeout_us = (gint64)daemon->config->command_timeout_ms * 1000;

	for (guint i = 0; i < daemon->guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(daemon->guests, i);
		GHashTableIter iter;
		HrPendingCmd *cmd;

		g_hash_table_iter_init(&iter, guest->pending);
		while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&cmd)) {
			if (now - cmd->sent_at < timeout_us)
				continue;
			g_warning("%s: %s request %" G_GUINT64_FORMAT " unanswered after %u ms, "
				  "counted as lost",
				  guest->name, hr_msg_type_to_string(cmd->type), cmd->request_id,
				  daemon->config->command_timeout_ms);
			guest->cmds_lost++;
			g_hash_table_iter_remove(&iter);
		}
		/* a new QEMU process starts with no holds (SPEC 2.9) */
		if (!hr_guest_is_connected(guest) && guest->pid > 0 &&
		    g_hash_table_size(guest->held) > 0 && kill(guest->pid, 0) != 0 &&
		    errno == ESRCH) {
			g_info("%s: QEMU pid %d exited, dropping %u held blocks", guest->name,
			       guest->pid, g_hash_table_size(guest->held));
			g_hash_table_remove_all(guest->held);
		}
	}
	return G_SOURCE_CONTINUE;
}

static gboolean
hr_daemon_incoming_cb(GSocketService *service,
		      GSocketConnection *connection,
		      GObject *source_object,
		      gpointer user_data)
{
	HrDaemon *daemon = user_data;
	HrDevice *device = hr_device_new(daemon, connection, daemon->config->status_interval_ms);
	(void)service;
	(void)source_object;
	g_ptr_array_add(daemon->devices, device);
	hr_device_start(device);
	return TRUE;
}

static void
hr_daemon_remove_socket(const gchar *path);

gboolean
hr_daemon_start(HrDaemon *daemon, GError **error)
{
	daemon->vm_socket = hr_socket_listen_unix(daemon->config->vm_socket, 0660, error);
	if (daemon->vm_socket == NULL) {
		g_prefix_error(error, "VM socket: ");
		return FALSE;
	}
	daemon->service = g_socket_service_new();
	if (!g_socket_listener_add_socket(G_SOCKET_LISTENER(daemon->service), daemon->vm_socket,
					  NULL, error)) {
		g_prefix_error(error, "VM socket %s: ", daemon->config->vm_socket);
		return FALSE;
	}
	g_signal_connect(daemon->service, "incoming", G_CALLBACK(hr_daemon_incoming_cb), daemon);
	daemon->api = hr_api_new(daemon);
	if (!hr_api_listen(daemon->api, daemon->config->api_socket, error)) {
		g_prefix_error(error, "API socket: ");
		g_clear_object(&daemon->service);
		g_clear_object(&daemon->vm_socket);
		hr_daemon_remove_socket(daemon->config->vm_socket);
		return FALSE;
	}
	g_socket_service_start(daemon->service);
	/* reservations a previous run left resume here */
	daemon->prepare = hr_prepare_new(daemon);
	daemon->sweep_id = g_timeout_add(HR_DAEMON_SWEEP_MS, hr_daemon_sweep_cb, daemon);
	daemon->started = TRUE;
	g_info("listening for devices on %s, API on %s, status every %u ms",
	       daemon->config->vm_socket, daemon->config->api_socket,
	       daemon->config->status_interval_ms);
	return TRUE;
}

static void
hr_daemon_remove_socket(const gchar *path)
{
	if (g_unlink(path) != 0 && errno != ENOENT)
		g_warning("cannot remove %s: %s", path, g_strerror(errno));
}

void
hr_daemon_stop(HrDaemon *daemon)
{
	g_clear_handle_id(&daemon->sweep_id, g_source_remove);
	/* first, so that requests the closing devices end tell it nothing */
	g_clear_pointer(&daemon->prepare, hr_prepare_free);
	while (daemon->devices->len > 0)
		hr_device_close(g_ptr_array_index(daemon->devices, 0), NULL);
	if (daemon->service != NULL) {
		g_socket_service_stop(daemon->service);
		g_socket_listener_close(G_SOCKET_LISTENER(daemon->service));
		g_clear_object(&daemon->service);
	}
	g_clear_object(&daemon->vm_socket);
	g_clear_pointer(&daemon->api, hr_api_free);
	if (daemon->started) {
		hr_daemon_remove_socket(daemon->config->vm_socket);
		hr_daemon_remove_socket(daemon->config->api_socket);
		daemon->started = FALSE;
	}
}
