/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

#include "hr-codec.h"

G_BEGIN_DECLS

typedef struct _HrDevice HrDevice;

/* A command sent to a guest and not answered yet. */
typedef struct {
	guint64 request_id;
	guint16 type;
	gint64 sent_at; /* monotonic, us */
} HrPendingCmd;

/*
 * What the daemon knows about one VM. It outlives the connection: when the
 * same VM (same UUID, or same name without UUID) connects again after its
 * previous connection closed, the new connection takes this entry over and
 * its counters and last status are kept.
 */
typedef struct {
	guint64 id; /* daemon-unique, for logs */
	gchar *name; /* as sent in HELLO, made valid UTF-8 */
	guint8 uuid_bytes[16];
	gchar *uuid;
	gint pid; /* SO_PEERCRED of the QEMU process */
	guint32 proto_version;
	guint64 ram_size;
	guint64 hello_features;
	GArray *ram; /* HrRamRange */

	HrDevice *device; /* NULL while disconnected */
	GDateTime *connected_at;
	GDateTime *disconnected_at;
	guint connections;

	HrStatus *status; /* latest valid STATUS, or NULL */
	gint64 status_at; /* monotonic, us */
	gboolean have_state;
	HrChanDeviceState state; /* latest DEVICE_STATE */
	GHashTable *held; /* guint64 gpa set: relayed HOLDs minus RETURNEDs */
	HrResult *last_result;
	GHashTable *pending; /* request_id -> HrPendingCmd */

	guint64 frames;
	guint64 guest_msgs;
	guint64 rejected;
	gchar *last_reject_reason;
	guint64 cmds_sent;
	guint64 cmds_lost;
} HrGuest;

HrGuest *
hr_guest_new(guint64 id, const HrChanHello *hello, gint pid);
void
hr_guest_free(HrGuest *guest);
/* a new connection of the same VM: take its identity, keep the counters */
void
hr_guest_update_identity(HrGuest *guest, const HrChanHello *hello, gint pid);
gboolean
hr_guest_matches(HrGuest *guest, const HrChanHello *hello);
gboolean
hr_guest_is_connected(HrGuest *guest);
void
hr_guest_reject(HrGuest *guest, const gchar *reason);
/* the age of the latest status in ms, or -1 without one */
gint64
hr_guest_status_age_ms(HrGuest *guest);
void
hr_guest_held_add(HrGuest *guest, GHashTable *set, guint64 gpa);
GHashTable *
hr_guest_held_new(void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrGuest, hr_guest_free)

G_END_DECLS
