/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrCore"

#include "hr-core.h"

#include "hr-guest-private.h"

#include "hr-device.h"
#include "hr-listeners.h"
#include "hr-pcp.h"

/* how often pending commands and vanished QEMU processes are checked */
#define HR_CORE_SWEEP_MS 1000

struct _HrCore {
	HrConfig *config;
	GPtrArray *devices; /* HrDevice, open connections */
	GPtrArray *guests;  /* HrGuest */
	guint64 next_guest_id;
	guint64 next_request_id;
	guint64 rejected_unidentified;
	guint64 refused_per_uid; /* HELLOs refused: max_guests_per_uid */
	gchar *last_unidentified_reason;
	HrListeners *listeners; /* HrCoreFunc */
	guint sweep_id;
};

/* commands sent on an old connection will not be answered */
static gboolean
hr_core_drop_cb(HrInflightCmd *cmd, gpointer user_data)
{
	(void)cmd;
	(void)user_data;
	return TRUE;
}

typedef struct {
	HrCore *core;
	HrGuest *guest;
	gint64 now;
	gint64 timeout_us;
} Sweep;

/* a REPORT unanswered for command_timeout_ms is lost */
static gboolean
hr_core_lost_cb(HrInflightCmd *cmd, gpointer user_data)
{
	Sweep *sweep = user_data;

	if (sweep->now - cmd->sent_at < sweep->timeout_us)
		return FALSE;
	g_warning("%s: %s request %" G_GUINT64_FORMAT " unanswered after %u ms, "
		  "counted as lost",
		  sweep->guest->name, hr_msg_type_to_string(cmd->type), cmd->request_id,
		  sweep->core->config->command_timeout_ms);
	sweep->guest->cmds_lost++;
	return TRUE;
}

static gboolean
hr_core_sweep_cb(gpointer user_data);

/* a guest's SET_PCPs in flight go with it */
static void
hr_core_guest_free(HrGuest *guest)
{
	hr_pcp_guest_free(guest);
	hr_guest_free(guest);
}

HrCore *
hr_core_new(HrConfig *config)
{
	HrCore *core = g_new0(HrCore, 1);
	core->config = config;
	core->devices = g_ptr_array_new_with_free_func((GDestroyNotify)hr_device_unref);
	core->guests = g_ptr_array_new_with_free_func((GDestroyNotify)hr_core_guest_free);
	core->next_guest_id = 1;
	/* unique per VM across daemon restarts (SPEC 1.6.1) */
	core->next_request_id = (guint64)g_get_real_time();
	core->listeners = hr_listeners_new();
	core->sweep_id = g_timeout_add(HR_CORE_SWEEP_MS, hr_core_sweep_cb, core);
	return core;
}

void
hr_core_free(HrCore *core)
{
	if (core == NULL)
		return;
	g_clear_handle_id(&core->sweep_id, g_source_remove);
	hr_core_close_devices(core);
	g_ptr_array_unref(core->devices);
	g_ptr_array_unref(core->guests);
	hr_listeners_free(core->listeners);
	g_free(core->last_unidentified_reason);
	g_free(core);
}

const HrConfig *
hr_core_get_config(HrCore *core)
{
	return core->config;
}

GPtrArray *
hr_core_get_guests(HrCore *core)
{
	return core->guests;
}

guint64
hr_core_get_rejected_unidentified(HrCore *core)
{
	return core->rejected_unidentified;
}

const gchar *
hr_core_get_last_unidentified_reason(HrCore *core)
{
	return core->last_unidentified_reason;
}

/*
 * Which entry a name or UUID means: the VM's established process, never a
 * newcomer claiming its identity (SPEC 2.10 item 6). An entry whose process
 * runs (connected or not) and whose identity is its own (its UUID known, or
 * it has none) comes first, the one that had it first; then a running
 * process whose UUID another running one has (a migration's destination
 * while its source runs, or an impostor); then the most recent gone one.
 */
HrGuest *
hr_core_find_guest(HrCore *core, const gchar *name_or_uuid)
{
	HrGuest *found = NULL;
	guint found_rank = 0;
	for (guint i = 0; i < core->guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(core->guests, i);
		gboolean alive = hr_guest_is_connected(guest) ||
				 (guest->peer != NULL && hr_peer_is_alive(guest->peer));
		guint rank;
		if (!hr_guest_has_name(guest, name_or_uuid))
			continue;
		rank = !alive ? 0 : guest->uuid_known || hr_guest_vm_uuid(guest) == NULL ? 2 : 1;
		/* the registry keeps the order entries were made in */
		if (found == NULL || rank > found_rank || (rank == 0 && found_rank == 0)) {
			found = guest;
			found_rank = rank;
		}
	}
	return found;
}

/* ---------------------------------------------------------------------- */
/* Events */

void
hr_core_listen(HrCore *core, HrCoreFunc func, gpointer user_data)
{
	hr_listeners_add(core->listeners, G_CALLBACK(func), user_data);
}

void
hr_core_unlisten(HrCore *core, HrCoreFunc func, gpointer user_data)
{
	hr_listeners_remove(core->listeners, G_CALLBACK(func), user_data);
}

typedef struct {
	HrCore *core;
	const HrEvent *event;
} HrCoreEmission;

static void
hr_core_invoke(GCallback func, gpointer func_data, gpointer invoke_data)
{
	HrCoreEmission *e = invoke_data;
	((HrCoreFunc)(void (*)(void))func)(e->core, e->event, func_data);
}

void
hr_core_emit(HrCore *core, HrEventKind kind, HrGuest *guest, gpointer object)
{
	HrEvent event = {.kind = kind, .guest = guest};
	HrCoreEmission e = {.core = core, .event = &event};

	if (kind == HR_EVENT_REQUEST_CHANGED)
		event.request = object;
	hr_listeners_emit(core->listeners, hr_core_invoke, &e);
}

const gchar *
hr_event_kind_to_string(HrEventKind kind)
{
	static const gchar *const names[HR_EVENT_N_KINDS] = {
	    [HR_EVENT_GUEST_ADDED] = "guest-added",
	    [HR_EVENT_GUEST_CONNECTED] = "guest-connected",
	    [HR_EVENT_GUEST_DISCONNECTED] = "guest-disconnected",
	    [HR_EVENT_GUEST_REMOVED] = "guest-removed",
	    [HR_EVENT_STATUS_CHANGED] = "status",
	    [HR_EVENT_HELD_CHANGED] = "held",
	    [HR_EVENT_REQUEST_CHANGED] = "request",
	};
	return kind < HR_EVENT_N_KINDS ? names[kind] : "unknown";
}

/* ---------------------------------------------------------------------- */
/* Connections */

static HrGuest *
hr_core_attach_device(gpointer owner, HrDevice *device, const HrChanHello *hello, HrPeer *peer,
		      GError **error);
static void
hr_core_device_closed(gpointer owner, HrDevice *device, HrGuest *guest, const gchar *reason);

static void
hr_core_device_status(gpointer owner, HrGuest *guest)
{
	hr_core_emit(owner, HR_EVENT_STATUS_CHANGED, guest, NULL);
}

static const HrDeviceHooks hr_core_device_hooks = {
    .attach = hr_core_attach_device,
    .status = hr_core_device_status,
    .closed = hr_core_device_closed,
};

void
hr_core_accept(HrCore *core, GSocketConnection *connection, guint32 status_interval_ms)
{
	HrDevice *device = hr_device_new(core->config, &hr_core_device_hooks, core, connection,
					 status_interval_ms);

	g_ptr_array_add(core->devices, device);
	hr_device_start(device);
}

void
hr_core_close_devices(HrCore *core)
{
	while (core->devices->len > 0)
		hr_device_close(g_ptr_array_index(core->devices, 0), NULL);
}

guint
hr_core_get_n_devices(HrCore *core)
{
	return core->devices->len;
}

void
hr_core_note_unidentified(HrCore *core, const gchar *reason)
{
	core->rejected_unidentified++;
	g_free(core->last_unidentified_reason);
	core->last_unidentified_reason = g_strdup(reason);
}

static void
hr_core_held_changed(gpointer guest, gpointer data)
{
	hr_core_emit(data, HR_EVENT_HELD_CHANGED, guest, NULL);
}

/*
 * A QEMU process is one VM: the entries of gone guests a live process left
 * behind (a VM it renamed, a peer that says HELLO under a new name each
 * time) are kept up to this many, so that one process cannot grow the
 * registry, and its fds, without end.
 */
#define HR_CORE_GONE_PER_PEER 4

static void
hr_core_guest_pruned(HrGuest *guest, gpointer user_data);

/*
 * Room for a new guest entry of @peer's uid within max_guests_per_uid: the
 * oldest gone entries of the uid go first (as hr_guest_prune() would let
 * them, not those holding blocks or migrating). FALSE when there is none:
 * QEMUs of one uid, a process per HELLO each saying a new name, would
 * otherwise grow the registry and its pidfds without end (issue 18).
 */
static gboolean
hr_core_room_for_uid(HrCore *core, const HrPeer *peer, GError **error)
{
	guint max = core->config->max_guests_per_uid;
	guint gone;
	guint n = hr_guest_count_uid(core->guests, peer->uid, &gone);

	if (max == 0 || n < max)
		return TRUE;
	hr_guest_prune_uid(core->guests, peer->uid, gone > n - max + 1 ? gone - (n - max + 1) : 0,
			   hr_core_guest_pruned, core);
	n = hr_guest_count_uid(core->guests, peer->uid, &gone);
	if (n < max)
		return TRUE;
	core->refused_per_uid++;
	g_set_error(error, G_IO_ERROR, G_IO_ERROR_TOO_MANY_OPEN_FILES,
		    "uid %u has %u guest entries already, %u of them connected "
		    "(max_guests_per_uid=%u in hugeroomd.conf): no new guest",
		    peer->uid, n, n - gone, max);
	return FALSE;
}

guint64
hr_core_get_refused_per_uid(HrCore *core)
{
	return core->refused_per_uid;
}

static HrGuest *
hr_core_attach_device(gpointer owner, HrDevice *device, const HrChanHello *hello, HrPeer *peer,
		      GError **error)
{
	HrCore *core = owner;
	HrGuest *guest = hr_guest_find_for_hello(core->guests, hello, peer);
	gint pid = peer->pid;
	gboolean added = FALSE;

	if (guest != NULL) {
		g_info("%s (%s) reconnected from pid %d", guest->name, guest->uuid, pid);
		if (!hr_peer_same_process(guest->peer, peer)) {
			/* a new QEMU process starts with no holds (SPEC 2.9) */
			hr_guest_held_clear(guest);
			/* but a migration's brings them: its resync tells */
			g_free(guest->prev_key);
			guest->prev_key = g_strdup(guest->key);
		}
		hr_guest_update_identity(guest, hello, peer);
	} else {
		hr_guest_prune_peer(core->guests, peer, HR_CORE_GONE_PER_PEER - 1,
				    hr_core_guest_pruned, core);
		if (!hr_core_room_for_uid(core, peer, error)) {
			hr_peer_free(peer);
			return NULL;
		}
		guest = hr_guest_new(core->next_guest_id++, hello, peer);
		guest->history = core->config->request_history;
		g_ptr_array_add(core->guests, guest);
		g_info("%s (%s) connected from pid %d, %u RAM ranges", guest->name, guest->uuid,
		       pid, hello->nr_ram);
		added = TRUE;
	}
	hr_guest_settle_uuid(core->guests, guest);
	guest->gone_at = 0;
	guest->held_changed = hr_core_held_changed;
	guest->held_changed_data = core;
	guest->device = device;
	guest->send = hr_device_send;
	guest->next_request_id = &core->next_request_id;
	guest->ready = FALSE;
	guest->connections++;
	g_clear_pointer(&guest->connected_at, g_date_time_unref);
	g_clear_pointer(&guest->disconnected_at, g_date_time_unref);
	guest->connected_at = g_date_time_new_now_utc();
	/* commands sent on the old connection will not be answered */
	hr_inflight_foreach_remove(guest->commands, HR_INFLIGHT_REPORT, hr_core_drop_cb, NULL);
	if (added)
		hr_core_emit(core, HR_EVENT_GUEST_ADDED, guest, NULL);
	hr_core_emit(core, HR_EVENT_GUEST_CONNECTED, guest, NULL);
	return guest;
}

static void
hr_core_device_closed(gpointer owner, HrDevice *device, HrGuest *guest, const gchar *reason)
{
	HrCore *core = owner;

	if (guest != NULL) {
		if (reason != NULL)
			hr_guest_reject(guest, reason);
		guest->device = NULL;
		guest->send = NULL;
		guest->disconnected_at = g_date_time_new_now_utc();
		hr_guest_device_lost(guest);
	} else if (reason != NULL) {
		hr_core_note_unidentified(core, reason);
	}
	g_ptr_array_remove(core->devices, device);
	if (guest != NULL)
		hr_core_emit(core, HR_EVENT_GUEST_DISCONNECTED, guest, NULL);
}

/* ---------------------------------------------------------------------- */
/* Commands */

guint64
hr_core_request_report(HrCore *core, HrGuest *guest, GError **error)
{
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) payload = NULL;

	if (!hr_guest_is_connected(guest)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
			    "guest %s is not connected (its QEMU has no hugeroom device "
			    "connection right now)",
			    guest->name);
		return 0;
	}
	cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, core->next_request_id++);
	payload = hr_cmd_encode(cmd);
	hr_inflight_add(guest->commands, cmd->hdr.request_id, HR_INFLIGHT_REPORT, cmd->hdr.type,
			NULL, NULL);
	guest->cmds_sent++;
	hr_device_send(guest->device, HR_CHAN_HOST_CMD, payload);
	g_info("%s: sent report request %" G_GUINT64_FORMAT, guest->name, cmd->hdr.request_id);
	return cmd->hdr.request_id;
}

static void
hr_core_request_cb(HrRequest *request, gpointer user_data)
{
	HrCore *core = user_data;
	if (request->owner != NULL)
		hr_core_emit(core, HR_EVENT_REQUEST_CHANGED, request->owner, request);
}

HrRequest *
hr_core_submit(HrCore *core, HrGuest *guest, const HrRequestParams *params, GError **error)
{
	HrRequestParams p = *params;
	HrRequest *request;

	if (p.timeout_s == 0)
		p.timeout_s = core->config->request_timeout_s;
	request = hr_request_new(core->next_request_id, &p, (const HrRamRange *)guest->ram->data,
				 guest->ram->len, error);
	if (request == NULL)
		return NULL;
	if (!hr_guest_check_gate(guest, p.kind, error) ||
	    !hr_guest_check_queue(guest, core->config->max_queued_requests, error)) {
		hr_request_unref(request);
		return NULL;
	}
	core->next_request_id++;
	/* the guest owns its requests and the core its guests: no removal needed */
	hr_request_add_listener(request, hr_core_request_cb, core);
	hr_guest_submit(guest, request);
	return request;
}

static void
hr_core_guest_pruned(HrGuest *guest, gpointer user_data)
{
	hr_core_emit(user_data, HR_EVENT_GUEST_REMOVED, guest, NULL);
}

static gboolean
hr_core_sweep_cb(gpointer user_data)
{
	HrCore *core = user_data;
	gint64 now = g_get_monotonic_time();
	gint64 timeout_us = (gint64)core->config->command_timeout_ms * 1000;
	gboolean exited = FALSE;

	for (guint i = 0; i < core->guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(core->guests, i);
		Sweep sweep = {core, guest, now, timeout_us};

		hr_inflight_foreach_remove(guest->commands, HR_INFLIGHT_REPORT, hr_core_lost_cb,
					   &sweep);
		if (!hr_guest_is_connected(guest) && guest->peer != NULL && !guest->peer->exited)
			exited |= hr_peer_release(guest->peer);
		/* a new QEMU process starts with no holds (SPEC 2.9) */
		if (!hr_guest_is_connected(guest) && g_hash_table_size(guest->held) > 0 &&
		    !hr_peer_is_alive(guest->peer)) {
			g_info("%s: QEMU pid %d exited, dropping %u held blocks", guest->name,
			       guest->pid, g_hash_table_size(guest->held));
			hr_guest_held_clear(guest); /* emits HELD_CHANGED */
		}
	}
	/* the UUID of a process that exited is the next running one's (a migration's destination) */
	for (guint i = 0; exited && i < core->guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(core->guests, i);
		if (hr_guest_is_connected(guest) && !guest->uuid_known &&
		    hr_guest_vm_uuid(guest) != NULL)
			hr_guest_settle_uuid(core->guests, guest);
	}
	hr_guest_prune(core->guests, core->config->guest_prune_s, hr_core_guest_pruned, core);
	return G_SOURCE_CONTINUE;
}
