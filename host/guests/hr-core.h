/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The daemon's core: the registry of guests and their requests, and the
 * guests' events everything above listens to. The device transport (hr-device)
 * feeds it; the reservation executor (hr-prepare) and the API (hr-api)
 * call it and listen to it; it calls none of them.
 */

#include <gio/gio.h>

#include "hr-config.h"
#include "hr-guest.h"

G_BEGIN_DECLS

typedef struct _HrCore HrCore;

typedef enum {
	HR_EVENT_GUEST_ADDED,	     /* first connection of a VM */
	HR_EVENT_GUEST_CONNECTED,    /* every connection, after GUEST_ADDED */
	HR_EVENT_GUEST_DISCONNECTED, /* the device connection closed */
	HR_EVENT_GUEST_REMOVED,	     /* pruned (guest_prune_s); freed after the event */
	HR_EVENT_STATUS_CHANGED,     /* a new STATUS */
	HR_EVENT_HELD_CHANGED,	     /* the guest's held set changed */
	HR_EVENT_REQUEST_CHANGED,    /* state, progress or result of a request */
	HR_EVENT_N_KINDS,
} HrEventKind;

typedef struct {
	HrEventKind kind;
	HrGuest *guest;
	HrRequest *request; /* REQUEST_CHANGED */
} HrEvent;

typedef void (*HrCoreFunc)(HrCore *core, const HrEvent *event, gpointer user_data);

HrCore *
hr_core_new(HrConfig *config);
void
hr_core_free(HrCore *core);

const HrConfig *
hr_core_get_config(HrCore *core);
/* every guest seen, in order of first connection */
GPtrArray *
hr_core_get_guests(HrCore *core);
/*
 * by UUID or name: the VM's established running process, never another
 * process that says its identity while it runs (SPEC 2.10 item 6); a gone
 * entry only when no process of the name runs
 */
HrGuest *
hr_core_find_guest(HrCore *core, const gchar *name_or_uuid);
/* connections dropped before a HELLO identified them */
guint64
hr_core_get_rejected_unidentified(HrCore *core);
const gchar *
hr_core_get_last_unidentified_reason(HrCore *core);
/* HELLOs refused for max_guests_per_uid */
guint64
hr_core_get_refused_per_uid(HrCore *core);

void
hr_core_listen(HrCore *core, HrCoreFunc func, gpointer user_data);
void
hr_core_unlisten(HrCore *core, HrCoreFunc func, gpointer user_data);
/* tell every listener; @object is the event's request */
void
hr_core_emit(HrCore *core, HrEventKind kind, HrGuest *guest, gpointer object);
const gchar *
hr_event_kind_to_string(HrEventKind kind);

/* send CMD_REPORT; returns its request id, or 0 with @error set */
guint64
hr_core_request_report(HrCore *core, HrGuest *guest, GError **error);
/*
 * Queue an EVACUATE, CAPTURE or RETURN for @guest. Returns the request,
 * owned by the guest (take a reference to keep it beyond its history), or
 * NULL with @error: G_IO_ERROR_INVALID_ARGUMENT for bad parameters (the
 * message names the field), G_IO_ERROR_NOT_CONNECTED or
 * G_IO_ERROR_NOT_SUPPORTED when the guest cannot run it now.
 */
HrRequest *
hr_core_submit(HrCore *core, HrGuest *guest, const HrRequestParams *params, GError **error);

/* a QEMU connected to the VM socket: its device channel, until it closes */
void
hr_core_accept(HrCore *core, GSocketConnection *connection, guint32 status_interval_ms);
guint
hr_core_get_n_devices(HrCore *core);
/* count a connection refused before a HELLO identified it */
void
hr_core_note_unidentified(HrCore *core, const gchar *reason);
void
hr_core_close_devices(HrCore *core);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrCore, hr_core_free)

G_END_DECLS
