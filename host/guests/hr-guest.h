/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

#include "hr-codec.h"
#include "hr-inflight.h"
#include "hr-peer.h"
#include "hr-request.h"

G_BEGIN_DECLS

typedef struct _HrDevice HrDevice;

/*
 * How a guest's commands reach its QEMU: the device channel above this
 * file (hr-device.c) is handed in when a connection attaches, so that
 * the guest's state never calls up into the channel that feeds it.
 */
typedef void (*HrGuestSendFunc)(HrDevice *device, guint16 type, GBytes *payload);

/* the reasons a guest gives held blocks back for: VIRTIO_HUGEROOM_RET_* below this */
#define HR_GUEST_N_RETURN_REASONS (VIRTIO_HUGEROOM_RET_UNLOAD + 1)

/* One block the guest holds for the host (SPEC 1.6.4). */
typedef struct {
	guint64 gpa;
	guint64 request_id; /* the HOLD's; 0 when first learnt from a resync */
	gint64 held_at;	    /* wall clock, us; when the daemon first saw it */
	gboolean orphan;    /* nobody owned it: a RETURN was sent for it */
} HrHeldBlock;

/*
 * What the daemon knows about one VM (its fields: hr-guest-private.h, for
 * the guest plane only; everything above reads it through the functions
 * below).
 */
typedef struct _HrGuest HrGuest;

/* What the layers above read of a guest. */
guint64
hr_guest_get_id(const HrGuest *guest);
const gchar *
hr_guest_get_name(const HrGuest *guest);
/* HrGuest.key: the guest bound to its QEMU process */
const gchar *
hr_guest_get_key(const HrGuest *guest);
gint
hr_guest_get_pid(const HrGuest *guest);
const HrPeer *
hr_guest_get_peer(const HrGuest *guest);
/* the UUID when it is known (uuid_known), else NULL */
const gchar *
hr_guest_get_known_uuid(const HrGuest *guest);
/* connected and its resync over */
gboolean
hr_guest_is_ready(const HrGuest *guest);
/* monotonic us it is disconnected since, 0 while connected */
gint64
hr_guest_get_gone_at(const HrGuest *guest);
/* gpa -> HrHeldBlock: the blocks it holds (the guest's; read only) */
GHashTable *
hr_guest_get_held(const HrGuest *guest);
/* bumped by every change of the held set */
guint64
hr_guest_get_held_gen(const HrGuest *guest);
/* the latest valid STATUS, or NULL */
const HrStatus *
hr_guest_get_status(const HrGuest *guest);
/* the latest DEVICE_STATE, or NULL before one */
const HrChanDeviceState *
hr_guest_get_state(const HrGuest *guest);
/* its RAM layout: @n_ranges ranges */
const HrRamRange *
hr_guest_get_ram(const HrGuest *guest, guint *n_ranges);
guint64
hr_guest_get_ram_size(const HrGuest *guest);
/* blocks it gave back with RETURNED for @reason (VIRTIO_HUGEROOM_RET_*), in all */
guint64
hr_guest_get_blocks_returned(const HrGuest *guest, guint32 reason);
/* the request sent or running, or NULL */
HrRequest *
hr_guest_get_active_request(const HrGuest *guest);
/* the request that finished last, or NULL */
HrRequest *
hr_guest_get_last_finished(const HrGuest *guest);
/* the key of the process the entry had before a new QEMU of the VM took it, or NULL */
const gchar *
hr_guest_get_prev_key(const HrGuest *guest);
/* ... and it is the caller's: the entry forgets it */
gchar *
hr_guest_take_prev_key(HrGuest *guest);
/* its UUID as text, all zero for a VM started without one; see hr_guest_get_known_uuid */
const gchar *
hr_guest_get_uuid(const HrGuest *guest);
guint32
hr_guest_get_proto_version(const HrGuest *guest);
/* when its latest connection came and went (NULL before either) */
GDateTime *
hr_guest_get_connected_at(const HrGuest *guest);
GDateTime *
hr_guest_get_disconnected_at(const HrGuest *guest);
guint
hr_guest_get_connections(const HrGuest *guest);
/* how many finished requests it remembers */
guint
hr_guest_get_history(const HrGuest *guest);
/* requests waiting behind the active one */
guint
hr_guest_get_queue_length(const HrGuest *guest);
/* requests that ended in final @state (HrRequestState), in all */
guint64
hr_guest_get_requests_final(const HrGuest *guest, guint state);
/* the latest RESULT or PROGRESS, or NULL */
const HrResult *
hr_guest_get_last_result(const HrGuest *guest);
/* REPORTs sent and not yet answered */
guint
hr_guest_get_cmds_pending(const HrGuest *guest);
/* the daemon's counters of the guest's frames and commands */
guint64
hr_guest_get_frames(const HrGuest *guest);
guint64
hr_guest_get_guest_msgs(const HrGuest *guest);
guint64
hr_guest_get_rejected(const HrGuest *guest);
/* why its latest frame was rejected, or NULL */
const gchar *
hr_guest_get_last_reject_reason(const HrGuest *guest);
guint64
hr_guest_get_cmds_sent(const HrGuest *guest);
guint64
hr_guest_get_cmds_lost(const HrGuest *guest);
/* what the guest said that nothing on our side accounts for */
guint64
hr_guest_get_holds_unknown(const HrGuest *guest);
guint64
hr_guest_get_returns_unknown(const HrGuest *guest);
guint64
hr_guest_get_orphans_returned(const HrGuest *guest);
/* by EVACUATE and CAPTURE results, in all */
guint64
hr_guest_get_blocks_freed_total(const HrGuest *guest);
guint64
hr_guest_get_pages_migrated_total(const HrGuest *guest);
/* RETURNs were sent for @n of its held blocks, @gpas, that nobody owned */
void
hr_guest_mark_orphans(HrGuest *guest, const guint64 *gpas, guint n);

/* takes @peer */
HrGuest *
hr_guest_new(guint64 id, const HrChanHello *hello, HrPeer *peer);
void
hr_guest_free(HrGuest *guest);
/* a new connection of the same VM: take its identity (and @peer), keep the counters */
void
hr_guest_update_identity(HrGuest *guest, const HrChanHello *hello, HrPeer *peer);
/*
 * The disconnected entry of @guests a connection from @peer saying
 * @hello takes over: the same QEMU process with the same identity, or
 * the known UUID of a guest whose QEMU process is gone. NULL: a new guest.
 */
HrGuest *
hr_guest_find_for_hello(GPtrArray *guests, const HrChanHello *hello, const HrPeer *peer);
/* decide whether @guest's UUID is known among @guests (after it connected) */
void
hr_guest_settle_uuid(GPtrArray *guests, HrGuest *guest);
typedef void (*HrGuestPrunedFunc)(HrGuest *guest, gpointer user_data);
/*
 * Forget the guests of @guests that left more than @after_s ago and hold
 * nothing (0: never); @func is told of each before it is freed.
 */
guint
hr_guest_prune(GPtrArray *guests, guint after_s, HrGuestPrunedFunc func, gpointer user_data);
/*
 * Forget the oldest of the gone guests whose QEMU was @peer's process until
 * at most @keep are left, keeping those that hold blocks or migrate; @func
 * as above. Returns how many were forgotten.
 */
guint
hr_guest_prune_peer(GPtrArray *guests, const HrPeer *peer, guint keep, HrGuestPrunedFunc func,
		    gpointer user_data);
/* the guests whose QEMU runs (or ran) as @uid; @gone: of them, the disconnected */
guint
hr_guest_count_uid(GPtrArray *guests, guint uid, guint *gone);
/* hr_guest_prune_peer() for the gone guests of @uid's processes */
guint
hr_guest_prune_uid(GPtrArray *guests, guint uid, guint keep, HrGuestPrunedFunc func,
		   gpointer user_data);
/* the same VM, in this or another QEMU process: a non-zero UUID and the name alike */
gboolean
hr_guest_same_vm(const HrGuest *a, const HrGuest *b);
/* @guest's VM UUID as its HELLO said, or NULL for a VM started without one (all zero) */
const gchar *
hr_guest_vm_uuid(const HrGuest *guest);
/* the VM UUID an HrGuest.key was made with, NULL for a VM without one (free it) */
gchar *
hr_guest_key_dup_uuid(const gchar *key);
/* does @str name @guest: its known UUID (any case) or its name? */
gboolean
hr_guest_has_name(HrGuest *guest, const gchar *str);

gboolean
hr_guest_is_connected(HrGuest *guest);
void
hr_guest_reject(HrGuest *guest, const gchar *reason);
/* the age of the latest status in ms, or -1 without one */
gint64
hr_guest_status_age_ms(HrGuest *guest);
/* a gpa -> HrHeldBlock table */
GHashTable *
hr_guest_held_new(void);
void
hr_guest_held_add(GHashTable *held, guint64 gpa, guint64 request_id);
/* empty the held set (a device reset, a new QEMU process) */
void
hr_guest_held_clear(HrGuest *guest);
/* replace the held set with @resync, keeping what we knew of each block */
void
hr_guest_held_replace(HrGuest *guest, GHashTable *resync);
/*
 * The resync's way, in steps that each cost what one message brought: add
 * @gpa to @resync with what we knew of it, then make @resync the held set
 * (no pass over it: a resync of 1 M blocks is not one turn of the main loop)
 */
void
hr_guest_resync_add(HrGuest *guest, GHashTable *resync, guint64 gpa);
void
hr_guest_held_take_resync(HrGuest *guest, GHashTable *resync);
/* the held gpas, ascending */
GArray *
hr_guest_held_sorted(HrGuest *guest);
const gchar *
hr_guest_return_reason_to_string(guint32 reason);

/* has @guest's driver negotiated feature @bit (known from a DEVICE_STATE)? */
gboolean
hr_guest_has_feature(HrGuest *guest, guint bit);
/* is @guest connected, its driver up, and feature @bit negotiated, to do @what? */
gboolean
hr_guest_check_feature(HrGuest *guest, guint bit, const gchar *bit_name, const gchar *what,
		       GError **error);
/* can the device and driver run a request of @kind right now? */
gboolean
hr_guest_check_gate(HrGuest *guest, HrRequestKind kind, GError **error);
/* may one more request be queued (fewer than @max waiting or running)? */
gboolean
hr_guest_check_queue(HrGuest *guest, guint max, GError **error);
/* take @request (its timeout_s set), queue it and send it when it is first */
void
hr_guest_submit(HrGuest *guest, HrRequest *request);
HrRequest *
hr_guest_find_request(HrGuest *guest, guint64 id);
/* every known request, oldest first */
GPtrArray *
hr_guest_list_requests(HrGuest *guest);
/* cancel a queued request, or send CANCEL for the running one */
gboolean
hr_guest_cancel_request(HrGuest *guest, guint64 id, GError **error);
/* a request id no command of this daemon has used (the registry's numbering) */
guint64
hr_guest_new_request_id(HrGuest *guest);
/* send @cmd to the connected device as it is */
void
hr_guest_send_cmd(HrGuest *guest, const HrCmd *cmd);
/* send the head of the queue if nothing runs */
void
hr_guest_dispatch(HrGuest *guest);

/* for hr-device.c: messages about requests, and the connection's fate */
void
hr_guest_handle_result(HrGuest *guest, const HrResult *result);
void
hr_guest_handle_blocks(HrGuest *guest, const HrBlocks *blocks);
void
hr_guest_handle_cmds_dropped(HrGuest *guest, guint64 cmds_dropped);
void
hr_guest_set_ready(HrGuest *guest, gboolean ready);
void
hr_guest_device_lost(HrGuest *guest);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrGuest, hr_guest_free)

G_END_DECLS
