/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrGuest"

#include "hr-guest.h"
#include "hr-guest-private.h"

#include <gio/gio.h>
#include <string.h>

/* how long to wait before sending again a command the driver found busy */
#define HR_GUEST_BUSY_RETRY_MS 1000

GHashTable *
hr_guest_held_new(void)
{
	/* the key points into the value */
	return g_hash_table_new_full(hr_gpa_hash, g_int64_equal, NULL, g_free);
}

void
hr_guest_held_add(GHashTable *held, guint64 gpa, guint64 request_id)
{
	HrHeldBlock *block;

	if (g_hash_table_contains(held, &gpa))
		return;
	block = g_new0(HrHeldBlock, 1);
	block->gpa = gpa;
	block->request_id = request_id;
	block->held_at = g_get_real_time();
	g_hash_table_insert(held, &block->gpa, block);
}

static void
hr_guest_held_changed(HrGuest *guest)
{
	guest->held_gen++;
	if (guest->held_changed != NULL)
		guest->held_changed(guest, guest->held_changed_data);
}

void
hr_guest_held_clear(HrGuest *guest)
{
	g_hash_table_remove_all(guest->held);
	hr_guest_held_changed(guest);
}

void
hr_guest_resync_add(HrGuest *guest, GHashTable *resync, guint64 gpa)
{
	HrHeldBlock *known = g_hash_table_lookup(guest->held, &gpa);
	HrHeldBlock *block;

	hr_guest_held_add(resync, gpa, 0);
	block = g_hash_table_lookup(resync, &gpa);
	if (known != NULL) {
		block->request_id = known->request_id;
		block->held_at = known->held_at;
	}
}

static gpointer
hr_guest_held_free_thread(gpointer table)
{
	g_hash_table_unref(table);
	return NULL;
}

/*
 * A held set that is no more: a large one is freed in a thread (1 M blocks
 * took 115 ms of main loop); nothing points into it once it is replaced.
 */
static void
hr_guest_held_drop(GHashTable *held)
{
	if (g_hash_table_size(held) < 65536) {
		g_hash_table_unref(held);
		return;
	}
	g_thread_unref(g_thread_new("hr-held-free", hr_guest_held_free_thread, held));
}

void
hr_guest_held_take_resync(HrGuest *guest, GHashTable *resync)
{
	hr_guest_held_drop(guest->held);
	guest->held = g_hash_table_ref(resync);
	hr_guest_held_changed(guest);
}

void
hr_guest_held_replace(HrGuest *guest, GHashTable *resync)
{
	GHashTableIter iter;
	HrHeldBlock *block;

	g_hash_table_iter_init(&iter, resync);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&block)) {
		HrHeldBlock *known = g_hash_table_lookup(guest->held, &block->gpa);
		if (known != NULL) {
			block->request_id = known->request_id;
			block->held_at = known->held_at;
		}
	}
	g_hash_table_unref(guest->held);
	guest->held = g_hash_table_ref(resync);
	hr_guest_held_changed(guest);
}

static gint
hr_guest_u64_cmp(gconstpointer a, gconstpointer b)
{
	guint64 x = *(const guint64 *)a;
	guint64 y = *(const guint64 *)b;
	return x < y ? -1 : x > y;
}

GArray *
hr_guest_held_sorted(HrGuest *guest)
{
	GArray *gpas =
	    g_array_sized_new(FALSE, FALSE, sizeof(guint64), g_hash_table_size(guest->held));
	GHashTableIter iter;
	HrHeldBlock *block;

	g_hash_table_iter_init(&iter, guest->held);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&block))
		g_array_append_val(gpas, block->gpa);
	g_array_sort(gpas, hr_guest_u64_cmp);
	return gpas;
}

const gchar *
hr_guest_return_reason_to_string(guint32 reason)
{
	switch (reason) {
	case VIRTIO_HUGEROOM_RET_HOST:
		return "host";
	case VIRTIO_HUGEROOM_RET_PRESSURE:
		return "pressure";
	case VIRTIO_HUGEROOM_RET_UNLOAD:
		return "unload";
	default:
		return "unknown";
	}
}

guint64
hr_guest_get_id(const HrGuest *guest)
{
	return guest->id;
}

const gchar *
hr_guest_get_name(const HrGuest *guest)
{
	return guest->name;
}

const gchar *
hr_guest_get_key(const HrGuest *guest)
{
	return guest->key;
}

gint
hr_guest_get_pid(const HrGuest *guest)
{
	return guest->pid;
}

guint64
hr_guest_get_blocks_returned(const HrGuest *guest, guint32 reason)
{
	return reason < G_N_ELEMENTS(guest->blocks_returned_total)
		   ? guest->blocks_returned_total[reason]
		   : 0;
}

const HrPeer *
hr_guest_get_peer(const HrGuest *guest)
{
	return guest->peer;
}

const gchar *
hr_guest_get_known_uuid(const HrGuest *guest)
{
	return guest->uuid_known ? guest->uuid : NULL;
}

gboolean
hr_guest_is_ready(const HrGuest *guest)
{
	return guest->ready;
}

gint64
hr_guest_get_gone_at(const HrGuest *guest)
{
	return guest->gone_at;
}

GHashTable *
hr_guest_get_held(const HrGuest *guest)
{
	return guest->held;
}

guint64
hr_guest_get_held_gen(const HrGuest *guest)
{
	return guest->held_gen;
}

const HrStatus *
hr_guest_get_status(const HrGuest *guest)
{
	return guest->status;
}

const HrChanDeviceState *
hr_guest_get_state(const HrGuest *guest)
{
	return guest->have_state ? &guest->state : NULL;
}

const HrRamRange *
hr_guest_get_ram(const HrGuest *guest, guint *n_ranges)
{
	*n_ranges = guest->ram->len;
	return (const HrRamRange *)guest->ram->data;
}

guint64
hr_guest_get_ram_size(const HrGuest *guest)
{
	return guest->ram_size;
}

HrRequest *
hr_guest_get_active_request(const HrGuest *guest)
{
	return guest->active;
}

HrRequest *
hr_guest_get_last_finished(const HrGuest *guest)
{
	return g_queue_peek_tail((GQueue *)&guest->finished);
}

const gchar *
hr_guest_get_prev_key(const HrGuest *guest)
{
	return guest->prev_key;
}

gchar *
hr_guest_take_prev_key(HrGuest *guest)
{
	return g_steal_pointer(&guest->prev_key);
}

const gchar *
hr_guest_get_uuid(const HrGuest *guest)
{
	return guest->uuid;
}

guint32
hr_guest_get_proto_version(const HrGuest *guest)
{
	return guest->proto_version;
}

GDateTime *
hr_guest_get_connected_at(const HrGuest *guest)
{
	return guest->connected_at;
}

GDateTime *
hr_guest_get_disconnected_at(const HrGuest *guest)
{
	return guest->disconnected_at;
}

guint
hr_guest_get_connections(const HrGuest *guest)
{
	return guest->connections;
}

guint
hr_guest_get_history(const HrGuest *guest)
{
	return guest->history;
}

guint
hr_guest_get_queue_length(const HrGuest *guest)
{
	return guest->queue.length;
}

guint64
hr_guest_get_requests_final(const HrGuest *guest, guint state)
{
	return state < G_N_ELEMENTS(guest->requests_final) ? guest->requests_final[state] : 0;
}

const HrResult *
hr_guest_get_last_result(const HrGuest *guest)
{
	return guest->last_result;
}

guint
hr_guest_get_cmds_pending(const HrGuest *guest)
{
	return hr_inflight_count(guest->commands, HR_INFLIGHT_REPORT);
}

guint64
hr_guest_get_frames(const HrGuest *guest)
{
	return guest->frames;
}

guint64
hr_guest_get_guest_msgs(const HrGuest *guest)
{
	return guest->guest_msgs;
}

guint64
hr_guest_get_rejected(const HrGuest *guest)
{
	return guest->rejected;
}

const gchar *
hr_guest_get_last_reject_reason(const HrGuest *guest)
{
	return guest->last_reject_reason;
}

guint64
hr_guest_get_cmds_sent(const HrGuest *guest)
{
	return guest->cmds_sent;
}

guint64
hr_guest_get_cmds_lost(const HrGuest *guest)
{
	return guest->cmds_lost;
}

guint64
hr_guest_get_holds_unknown(const HrGuest *guest)
{
	return guest->holds_unknown;
}

guint64
hr_guest_get_returns_unknown(const HrGuest *guest)
{
	return guest->returns_unknown;
}

guint64
hr_guest_get_orphans_returned(const HrGuest *guest)
{
	return guest->orphans_returned;
}

guint64
hr_guest_get_blocks_freed_total(const HrGuest *guest)
{
	return guest->blocks_freed_total;
}

guint64
hr_guest_get_pages_migrated_total(const HrGuest *guest)
{
	return guest->pages_migrated_total;
}

void
hr_guest_mark_orphans(HrGuest *guest, const guint64 *gpas, guint n)
{
	for (guint i = 0; i < n; i++) {
		HrHeldBlock *b = g_hash_table_lookup(guest->held, &gpas[i]);
		if (b != NULL)
			b->orphan = TRUE;
	}
	guest->orphans_returned += n;
}

HrGuest *
hr_guest_new(guint64 id, const HrChanHello *hello, HrPeer *peer)
{
	HrGuest *guest = g_new0(HrGuest, 1);
	guest->id = id;
	guest->ram = g_array_new(FALSE, TRUE, sizeof(HrRamRange));
	guest->held = hr_guest_held_new();
	g_queue_init(&guest->queue);
	g_queue_init(&guest->finished);
	guest->commands = hr_inflight_new();
	guest->history = 32;
	hr_guest_update_identity(guest, hello, peer);
	return guest;
}

static gboolean
hr_guest_orphan_request_cb(HrInflightCmd *cmd, gpointer user_data)
{
	HrRequest *request = cmd->data;
	(void)user_data;
	g_clear_handle_id(&request->timeout_id, g_source_remove);
	request->owner = NULL;
	return FALSE;
}

void
hr_guest_free(HrGuest *guest)
{
	if (guest == NULL)
		return;
	g_free(guest->name);
	g_free(guest->uuid);
	g_free(guest->key);
	g_free(guest->prev_key);
	hr_peer_free(guest->peer);
	g_array_unref(guest->ram);
	g_clear_pointer(&guest->connected_at, g_date_time_unref);
	g_clear_pointer(&guest->disconnected_at, g_date_time_unref);
	hr_status_free(guest->status);
	g_hash_table_unref(guest->held);
	g_clear_handle_id(&guest->retry_id, g_source_remove);
	/* a planner may keep a request beyond us: no timer may fire on it */
	hr_inflight_foreach_remove(guest->commands, HR_INFLIGHT_REQUEST, hr_guest_orphan_request_cb,
				   NULL);
	g_queue_clear(&guest->queue);
	g_queue_clear(&guest->finished);
	hr_inflight_free(guest->commands);
	g_free(guest->last_result);
	g_free(guest->last_reject_reason);
	g_free(guest);
}

static gboolean
hr_uuid_is_null(const guint8 *uuid)
{
	for (guint i = 0; i < 16; i++) {
		if (uuid[i] != 0)
			return FALSE;
	}
	return TRUE;
}

void
hr_guest_update_identity(HrGuest *guest, const HrChanHello *hello, HrPeer *peer)
{
	g_autofree gchar *valid = g_utf8_make_valid(hello->name, -1);

	g_free(guest->name);
	/* a VM without -name is named by its QEMU process */
	guest->name =
	    *valid != '\0' ? g_steal_pointer(&valid) : g_strdup_printf("pid-%d", peer->pid);
	memcpy(guest->uuid_bytes, hello->uuid, sizeof(guest->uuid_bytes));
	g_free(guest->uuid);
	guest->uuid = hr_chan_hello_uuid_to_string(hello);
	guest->uuid_known = FALSE;
	hr_peer_free(guest->peer);
	guest->peer = peer;
	guest->pid = peer->pid;
	g_free(guest->key);
	guest->key =
	    g_strdup_printf("%s%s@%s", hr_uuid_is_null(hello->uuid) ? "name:" : "",
			    hr_uuid_is_null(hello->uuid) ? guest->name : guest->uuid, peer->key);
	guest->proto_version = MIN(hello->proto_version, VIRTIO_HUGEROOM_VERSION);
	guest->ram_size = hello->ram_size;
	guest->hello_features = hello->guest_features;
	g_array_set_size(guest->ram, 0);
	g_array_append_vals(guest->ram, hello->ram, hello->nr_ram);
}

const gchar *
hr_guest_vm_uuid(const HrGuest *guest)
{
	return hr_uuid_is_null(guest->uuid_bytes) ? NULL : guest->uuid;
}

gchar *
hr_guest_key_dup_uuid(const gchar *key)
{
	const gchar *at = key != NULL ? strchr(key, '@') : NULL;
	g_autofree gchar *identity = NULL;

	/* "name:NAME@...": a VM without a UUID */
	if (at == NULL || g_str_has_prefix(key, "name:"))
		return NULL;
	identity = g_strndup(key, at - key);
	return g_uuid_string_is_valid(identity) ? g_steal_pointer(&identity) : NULL;
}

/* the same VM as @hello says it is: its UUID, or without one its name */
static gboolean
hr_guest_same_identity(HrGuest *guest, const HrChanHello *hello)
{
	if (hr_uuid_is_null(hello->uuid) || hr_uuid_is_null(guest->uuid_bytes)) {
		g_autofree gchar *name = g_utf8_make_valid(hello->name, -1);
		return hr_uuid_is_null(hello->uuid) && hr_uuid_is_null(guest->uuid_bytes) &&
		       g_strcmp0(guest->name, *name != '\0' ? name : guest->name) == 0;
	}
	return memcmp(guest->uuid_bytes, hello->uuid, sizeof(guest->uuid_bytes)) == 0;
}

/* may @guest's entry still be the VM of a running QEMU? */
static gboolean
hr_guest_process_alive(HrGuest *guest)
{
	return guest->peer != NULL && hr_peer_is_alive(guest->peer);
}

HrGuest *
hr_guest_find_for_hello(GPtrArray *guests, const HrChanHello *hello, const HrPeer *peer)
{
	HrGuest *found = NULL;

	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (hr_guest_is_connected(g) || !hr_guest_same_identity(g, hello))
			continue;
		/* the same QEMU process reconnecting: always its own entry */
		if (hr_peer_same_process(g->peer, peer))
			return g;
		/*
		 * Another process with a known UUID: a new QEMU of the same VM
		 * once the old one is gone, never while it runs (a HELLO
		 * copying a disconnected guest's UUID takes nothing over).
		 */
		if (found == NULL && g->uuid_known && !hr_guest_process_alive(g))
			found = g;
	}
	return found;
}

void
hr_guest_settle_uuid(GPtrArray *guests, HrGuest *guest)
{
	if (hr_uuid_is_null(guest->uuid_bytes))
		return;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g == guest || memcmp(g->uuid_bytes, guest->uuid_bytes, 16) != 0)
			continue;
		/*
		 * A running process keeps the UUID it has: another that says it
		 * (a migration's destination while its source runs, or an
		 * impostor) does not take it, even when the first reconnects.
		 */
		if (g->uuid_known && (hr_guest_is_connected(g) || hr_guest_process_alive(g))) {
			g_warning("%s (pid %d) says it is UUID %s, which %s (pid %d) has: its UUID "
				  "counts as unknown",
				  guest->name, guest->pid, guest->uuid, g->name, g->pid);
			return;
		}
	}
	/* gone guests with the same UUID no longer answer to it */
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g != guest && memcmp(g->uuid_bytes, guest->uuid_bytes, 16) == 0)
			g->uuid_known = FALSE;
	}
	guest->uuid_known = TRUE;
}

/*
 * Is @guest, disconnected, one end of a live migration on this host: its
 * QEMU runs, and so does (or did) another QEMU of the VM? The destination
 * reconnects once it loaded the state, and what the source owned is to
 * follow it there: keep it however long that takes.
 */
static gboolean
hr_guest_migrating(GPtrArray *guests, HrGuest *guest)
{
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g != guest && hr_guest_same_vm(g, guest))
			return hr_guest_process_alive(guest);
	}
	return FALSE;
}

guint
hr_guest_prune(GPtrArray *guests, guint after_s, HrGuestPrunedFunc func, gpointer user_data)
{
	gint64 before = g_get_monotonic_time() - (gint64)after_s * G_USEC_PER_SEC;
	guint pruned = 0;

	if (after_s == 0)
		return 0;
	for (guint i = guests->len; i-- > 0;) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		/* what it holds is somebody's until its QEMU is gone (then it is dropped) */
		if (hr_guest_is_connected(guest) || guest->gone_at == 0 ||
		    guest->gone_at > before || g_hash_table_size(guest->held) > 0 ||
		    hr_guest_migrating(guests, guest))
			continue;
		g_info("%s: forgotten, gone for more than %u s (guest_prune_s)", guest->name,
		       after_s);
		func(guest, user_data);
		g_ptr_array_remove_index(guests, i);
		pruned++;
	}
	return pruned;
}

/* the gone guests of @peer's process, or with @peer NULL of @uid's processes */
static guint
hr_guest_prune_gone(GPtrArray *guests, const HrPeer *peer, guint uid, guint keep,
		    HrGuestPrunedFunc func, gpointer user_data)
{
	guint pruned = 0;

	for (;;) {
		HrGuest *oldest = NULL;
		guint gone = 0, at = 0;

		for (guint i = 0; i < guests->len; i++) {
			HrGuest *g = g_ptr_array_index(guests, i);
			if (hr_guest_is_connected(g) ||
			    (peer != NULL ? !hr_peer_same_process(g->peer, peer)
					  : g->peer == NULL || g->peer->uid != uid))
				continue;
			gone++;
			/* what holds blocks or migrates is kept, as hr_guest_prune() keeps it */
			if (g_hash_table_size(g->held) > 0 || hr_guest_migrating(guests, g))
				continue;
			if (oldest == NULL || g->gone_at < oldest->gone_at) {
				oldest = g;
				at = i;
			}
		}
		if (gone <= keep || oldest == NULL)
			return pruned;
		if (peer != NULL)
			g_info("%s: forgotten, one of more than %u gone guests of pid %d",
			       oldest->name, keep, peer->pid);
		else
			g_info("%s: forgotten, one of the gone guests of uid %u, which has "
			       "max_guests_per_uid",
			       oldest->name, uid);
		func(oldest, user_data);
		g_ptr_array_remove_index(guests, at);
		pruned++;
	}
}

guint
hr_guest_prune_peer(GPtrArray *guests, const HrPeer *peer, guint keep, HrGuestPrunedFunc func,
		    gpointer user_data)
{
	return hr_guest_prune_gone(guests, peer, 0, keep, func, user_data);
}

guint
hr_guest_count_uid(GPtrArray *guests, guint uid, guint *gone)
{
	guint n = 0;

	*gone = 0;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g->peer == NULL || g->peer->uid != uid)
			continue;
		n++;
		if (!hr_guest_is_connected(g))
			(*gone)++;
	}
	return n;
}

guint
hr_guest_prune_uid(GPtrArray *guests, guint uid, guint keep, HrGuestPrunedFunc func,
		   gpointer user_data)
{
	return hr_guest_prune_gone(guests, NULL, uid, keep, func, user_data);
}

gboolean
hr_guest_same_vm(const HrGuest *a, const HrGuest *b)
{
	return !hr_uuid_is_null(a->uuid_bytes) &&
	       memcmp(a->uuid_bytes, b->uuid_bytes, sizeof(a->uuid_bytes)) == 0 &&
	       g_strcmp0(a->name, b->name) == 0;
}

gboolean
hr_guest_has_name(HrGuest *guest, const gchar *str)
{
	return (guest->uuid_known && g_ascii_strcasecmp(guest->uuid, str) == 0) ||
	       g_strcmp0(guest->name, str) == 0;
}

gboolean
hr_guest_is_connected(HrGuest *guest)
{
	return guest->device != NULL;
}

void
hr_guest_reject(HrGuest *guest, const gchar *reason)
{
	guest->rejected++;
	g_free(guest->last_reject_reason);
	guest->last_reject_reason = g_strdup(reason);
}

gint64
hr_guest_status_age_ms(HrGuest *guest)
{
	if (guest->status == NULL)
		return -1;
	return (g_get_monotonic_time() - guest->status_at) / 1000;
}

/* ---------------------------------------------------------------------- */
/* Requests */

gboolean
hr_guest_has_feature(HrGuest *guest, guint bit)
{
	return guest->have_state && (guest->state.guest_features & (1ULL << bit)) != 0;
}

gboolean
hr_guest_check_feature(HrGuest *guest, guint bit, const gchar *bit_name, const gchar *what,
		       GError **error)
{
	guint64 features = guest->state.guest_features;

	if (!hr_guest_is_connected(guest)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
			    "guest %s is not connected (its QEMU has no hugeroom device "
			    "connection right now)",
			    guest->name);
		return FALSE;
	}
	/* before the first DEVICE_STATE we cannot know; the device gates anyway */
	if (!guest->have_state)
		return TRUE;
	if (!guest->state.driver_ok) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
			    "the hugeroom driver of guest %s is not running (DRIVER_OK not set): "
			    "load virtio_hugeroom in the guest",
			    guest->name);
		return FALSE;
	}
	if (!(features & (1ULL << bit))) {
		g_set_error(
		    error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
		    "the driver of guest %s did not negotiate %s (features 0x%" G_GINT64_MODIFIER
		    "x), so it cannot %s",
		    guest->name, bit_name, features, what);
		return FALSE;
	}
	return TRUE;
}

gboolean
hr_guest_check_gate(HrGuest *guest, HrRequestKind kind, GError **error)
{
	guint bit = kind == HR_REQUEST_RETURN ? VIRTIO_HUGEROOM_F_HOLD : VIRTIO_HUGEROOM_F_EVACUATE;

	if (!hr_guest_check_feature(guest, bit,
				    bit == VIRTIO_HUGEROOM_F_HOLD ? "F_HOLD" : "F_EVACUATE",
				    hr_request_kind_to_string(kind), error))
		return FALSE;
	if (!guest->have_state)
		return TRUE;
	if (kind != HR_REQUEST_RETURN && guest->state.discard_disabled) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
			    "QEMU of guest %s cannot discard memory now (VFIO, postcopy or a "
			    "background snapshot), so nothing can be held",
			    guest->name);
		return FALSE;
	}
	return TRUE;
}

gboolean
hr_guest_check_queue(HrGuest *guest, guint max, GError **error)
{
	guint n = g_queue_get_length(&guest->queue) + (guest->active != NULL);

	if (n < max)
		return TRUE;
	g_set_error(error, G_IO_ERROR, G_IO_ERROR_BUSY,
		    "guest %s has %u requests waiting or running already, the most it may have "
		    "(max_queued_requests): wait for them or cancel some",
		    guest->name, n);
	return FALSE;
}

HrRequest *
hr_guest_find_request(HrGuest *guest, guint64 id)
{
	HrInflightCmd *cmd = hr_inflight_lookup(guest->commands, id, HR_INFLIGHT_REQUEST);
	return cmd != NULL ? cmd->data : NULL;
}

GPtrArray *
hr_guest_list_requests(HrGuest *guest)
{
	GPtrArray *list = g_ptr_array_new();
	for (GList *l = guest->finished.head; l != NULL; l = l->next)
		g_ptr_array_add(list, l->data);
	if (guest->active != NULL)
		g_ptr_array_add(list, guest->active);
	for (GList *l = guest->queue.head; l != NULL; l = l->next)
		g_ptr_array_add(list, l->data);
	return list;
}

guint64
hr_guest_new_request_id(HrGuest *guest)
{
	return (*guest->next_request_id)++;
}

void
hr_guest_send_cmd(HrGuest *guest, const HrCmd *cmd)
{
	g_autoptr(GBytes) payload = hr_cmd_encode(cmd);
	guest->cmds_sent++;
	guest->send(guest->device, HR_CHAN_HOST_CMD, payload);
}

static void
hr_guest_send_cancel(HrGuest *guest, HrRequest *request)
{
	g_autoptr(HrCmd) cancel = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CANCEL, request->id);
	if (guest->device == NULL)
		return;
	hr_guest_send_cmd(guest, cancel);
	request->cancel_sent = TRUE;
	g_info("%s: sent cancel for request %" G_GUINT64_FORMAT, guest->name, request->id);
}

/* a request reached its final state: count it and keep it in the history */
static void
hr_guest_retire(HrGuest *guest, HrRequest *request)
{
	if (guest->active == request)
		guest->active = NULL;
	g_queue_remove(&guest->queue, request);
	guest->requests_final[request->state]++;
	g_queue_push_tail(&guest->finished, request);
	while (g_queue_get_length(&guest->finished) > guest->history) {
		HrRequest *old = g_queue_pop_head(&guest->finished);
		hr_inflight_remove(guest->commands, old->id);
	}
	g_info("%s: %s request %" G_GUINT64_FORMAT " %s%s%s", guest->name,
	       hr_request_kind_to_string(request->kind), request->id,
	       hr_request_state_to_string(request->state), request->error != NULL ? ": " : "",
	       request->error != NULL ? request->error : "");
}

static void
hr_guest_finish(HrGuest *guest, HrRequest *request, HrRequestState state, const gchar *error)
{
	hr_request_set_state(request, state, error);
	hr_guest_retire(guest, request);
}

static gboolean
hr_guest_retry_cb(gpointer user_data)
{
	HrGuest *guest = user_data;
	guest->retry_id = 0;
	hr_guest_dispatch(guest);
	return G_SOURCE_REMOVE;
}

void
hr_guest_dispatch(HrGuest *guest)
{
	while (guest->active == NULL && guest->ready) {
		g_autoptr(GError) error = NULL;
		HrRequest *next = g_queue_peek_head(&guest->queue);
		gint64 now = g_get_monotonic_time();

		if (next == NULL)
			return;
		if (next->retry_at > now) {
			if (guest->retry_id == 0)
				guest->retry_id = g_timeout_add((next->retry_at - now + 999) / 1000,
								hr_guest_retry_cb, guest);
			return;
		}
		if (!hr_guest_check_gate(guest, next->kind, &error)) {
			hr_guest_finish(guest, next, HR_REQUEST_FAILED, error->message);
			continue;
		}
		g_queue_pop_head(&guest->queue);
		guest->active = next;
		hr_guest_send_cmd(guest, next->cmd);
		hr_request_sent(next);
		g_info("%s: sent %s request %" G_GUINT64_FORMAT " (%u blocks)", guest->name,
		       hr_request_kind_to_string(next->kind), next->id, next->cmd->count);
	}
}

static gboolean
hr_guest_timeout_cb(gpointer user_data)
{
	HrRequest *request = user_data;
	HrGuest *guest = request->owner;
	g_autofree gchar *error = NULL;

	request->timeout_id = 0;
	if (request->state == HR_REQUEST_QUEUED) {
		error = g_strdup_printf("not sent within its %u s timeout: the guest's earlier "
					"commands ran that long",
					request->timeout_s);
	} else {
		/* stop the guest's work too; its RESULT, if any, is recorded late */
		hr_guest_send_cancel(guest, request);
		error = g_strdup_printf("no result within its %u s timeout; cancel sent",
					request->timeout_s);
	}
	hr_guest_finish(guest, request, HR_REQUEST_TIMED_OUT, error);
	hr_guest_dispatch(guest);
	return G_SOURCE_REMOVE;
}

void
hr_guest_submit(HrGuest *guest, HrRequest *request)
{
	request->owner = guest;
	request->deadline = g_get_monotonic_time() + (gint64)request->timeout_s * G_USEC_PER_SEC;
	request->timeout_id = g_timeout_add_seconds_full(G_PRIORITY_DEFAULT, request->timeout_s,
							 hr_guest_timeout_cb, request, NULL);
	hr_inflight_add(guest->commands, request->id, HR_INFLIGHT_REQUEST, request->cmd->hdr.type,
			request, (GDestroyNotify)hr_request_unref);
	g_queue_push_tail(&guest->queue, request);
	g_info("%s: %s request %" G_GUINT64_FORMAT " queued (%u ahead)", guest->name,
	       hr_request_kind_to_string(request->kind), request->id,
	       g_queue_get_length(&guest->queue) - 1 + (guest->active != NULL));
	hr_guest_dispatch(guest);
}

gboolean
hr_guest_cancel_request(HrGuest *guest, guint64 id, GError **error)
{
	HrRequest *request = hr_guest_find_request(guest, id);

	if (request == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "guest %s has no request %" G_GUINT64_FORMAT
			    " (the daemon keeps the last %u finished requests per guest, and none "
			    "across a restart)",
			    guest->name, id, guest->history);
		return FALSE;
	}
	if (hr_request_state_is_final(request->state)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "request %" G_GUINT64_FORMAT " already ended: %s", id,
			    hr_request_state_to_string(request->state));
		return FALSE;
	}
	if (request->state == HR_REQUEST_QUEUED) {
		hr_guest_finish(guest, request, HR_REQUEST_CANCELLED,
				"cancelled before it was sent");
		hr_guest_dispatch(guest);
		return TRUE;
	}
	/* the driver ends it with S_CANCELLED (SPEC 1.6.8.1) */
	if (!request->cancel_sent)
		hr_guest_send_cancel(guest, request);
	hr_request_set_state(request, request->state, NULL);
	return TRUE;
}

void
hr_guest_handle_result(HrGuest *guest, const HrResult *result)
{
	HrRequest *request = hr_guest_find_request(guest, result->hdr.request_id);
	gboolean final = result->hdr.type == VIRTIO_HUGEROOM_MSG_RESULT;

	if (request == NULL) {
		/* legitimately follows a migration or a daemon restart (SPEC 1.6.3.3) */
		g_info("%s: %s for unknown request %" G_GUINT64_FORMAT " ignored", guest->name,
		       hr_msg_type_to_string(result->hdr.type), result->hdr.request_id);
		return;
	}
	if (!final) {
		if (hr_request_state_is_final(request->state) ||
		    request->state == HR_REQUEST_QUEUED)
			return;
		if (!hr_request_progress(request, result))
			g_info("%s: progress of request %" G_GUINT64_FORMAT
			       " went backwards, ignored",
			       guest->name, request->id);
		return;
	}
	if (request->kind != HR_REQUEST_RETURN && result->status != VIRTIO_HUGEROOM_S_BUSY) {
		guest->blocks_freed_total += result->blocks_freed;
		guest->pages_migrated_total += result->pages_migrated;
	}
	if (request != guest->active) {
		/* late (timed out, lost) or not ours to run now: record only */
		if (hr_request_state_is_final(request->state))
			hr_request_result(request, result);
		else
			g_info("%s: result for request %" G_GUINT64_FORMAT " that is %s, ignored",
			       guest->name, request->id,
			       hr_request_state_to_string(request->state));
		return;
	}
	if (result->status == VIRTIO_HUGEROOM_S_BUSY && request->cancel_sent) {
		hr_guest_finish(guest, request, HR_REQUEST_CANCELLED,
				"cancelled; the driver was busy and never started it");
		hr_guest_dispatch(guest);
		return;
	}
	if (result->status == VIRTIO_HUGEROOM_S_BUSY) {
		/* an EVACUATE or CAPTURE we do not know of still runs: try again */
		request->busy_retries++;
		request->retry_at = g_get_monotonic_time() + HR_GUEST_BUSY_RETRY_MS * 1000;
		guest->active = NULL;
		g_queue_push_head(&guest->queue, request);
		hr_request_set_state(request, HR_REQUEST_QUEUED, NULL);
		g_info("%s: request %" G_GUINT64_FORMAT " found the driver busy, retrying",
		       guest->name, request->id);
		hr_guest_dispatch(guest);
		return;
	}
	hr_request_result(request, result);
	hr_guest_retire(guest, request);
	hr_guest_dispatch(guest);
}

void
hr_guest_handle_blocks(HrGuest *guest, const HrBlocks *blocks)
{
	HrRequest *request = NULL;

	if (blocks->hdr.request_id != 0)
		request = hr_guest_find_request(guest, blocks->hdr.request_id);
	if (blocks->hdr.type == VIRTIO_HUGEROOM_MSG_HOLD) {
		/* the device discarded them already: they are held, whoever asked */
		for (guint32 i = 0; i < blocks->nr_blocks; i++)
			hr_guest_held_add(guest->held, blocks->gpas[i], blocks->hdr.request_id);
		if (request == NULL) {
			guest->holds_unknown += blocks->nr_blocks;
			g_message("%s: %u blocks held for request %" G_GUINT64_FORMAT
				  " the daemon does not know (%" G_GUINT64_FORMAT " such in all)",
				  guest->name, blocks->nr_blocks, blocks->hdr.request_id,
				  guest->holds_unknown);
		}
		g_info("%s: %u blocks now held (request %" G_GUINT64_FORMAT "), %u in all",
		       guest->name, blocks->nr_blocks, blocks->hdr.request_id,
		       g_hash_table_size(guest->held));
	} else {
		guint unknown = 0;
		for (guint32 i = 0; i < blocks->nr_blocks; i++) {
			if (!g_hash_table_remove(guest->held, &blocks->gpas[i]))
				unknown++;
		}
		if (unknown > 0) {
			guest->returns_unknown += unknown;
			g_message("%s: %u returned blocks were not known held (%" G_GUINT64_FORMAT
				  " such in all)",
				  guest->name, unknown, guest->returns_unknown);
		}
		if (blocks->reason < G_N_ELEMENTS(guest->blocks_returned_total))
			guest->blocks_returned_total[blocks->reason] += blocks->nr_blocks - unknown;
		g_info("%s: %u blocks returned (%s), %u still held", guest->name, blocks->nr_blocks,
		       hr_guest_return_reason_to_string(blocks->reason),
		       g_hash_table_size(guest->held));
	}
	if (request != NULL && request->state != HR_REQUEST_QUEUED)
		hr_request_add_blocks(request, blocks->gpas, blocks->nr_blocks);
	hr_guest_held_changed(guest);
}

void
hr_guest_handle_cmds_dropped(HrGuest *guest, guint64 cmds_dropped)
{
	HrRequest *request = guest->active;
	g_autofree gchar *error = NULL;

	/*
	 * The device dropped a command it could not place (SPEC 2.6). Blame
	 * the request only when it is the one command the device can have
	 * seen since: no REPORT pending and no CANCEL sent.
	 */
	if (request == NULL || request->state != HR_REQUEST_SENT || request->cancel_sent ||
	    hr_inflight_count(guest->commands, HR_INFLIGHT_REPORT) > 0)
		return;
	error =
	    g_strdup_printf("the device dropped the command (cmds_dropped is now %" G_GUINT64_FORMAT
			    "): the driver is not ready, lacks the feature, or discard is "
			    "disabled",
			    cmds_dropped);
	hr_guest_finish(guest, request, HR_REQUEST_FAILED, error);
	hr_guest_dispatch(guest);
}

void
hr_guest_set_ready(HrGuest *guest, gboolean ready)
{
	guest->ready = ready;
	if (ready)
		hr_guest_dispatch(guest);
}

void
hr_guest_device_lost(HrGuest *guest)
{
	guest->ready = FALSE;
	guest->gone_at = g_get_monotonic_time();
	g_clear_handle_id(&guest->retry_id, g_source_remove);
	if (guest->active != NULL)
		hr_guest_finish(guest, guest->active, HR_REQUEST_LOST,
				"the device disconnected before the result");
	/* a new connection may be a new QEMU: never send it old commands */
	while (!g_queue_is_empty(&guest->queue))
		hr_guest_finish(guest, g_queue_peek_head(&guest->queue), HR_REQUEST_LOST,
				"the device disconnected before it was sent");
}
