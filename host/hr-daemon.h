/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <gio/gio.h>

#include "hr-config.h"
#include "hr-guest.h"

G_BEGIN_DECLS

typedef struct _HrDaemon HrDaemon;
typedef struct _HrPrepare HrPrepare;

HrDaemon *
hr_daemon_new(HrConfig *config);
void
hr_daemon_free(HrDaemon *daemon);
/* listen on the VM and API sockets */
gboolean
hr_daemon_start(HrDaemon *daemon, GError **error);
/* close every connection and remove the sockets */
void
hr_daemon_stop(HrDaemon *daemon);

const HrConfig *
hr_daemon_get_config(HrDaemon *daemon);
/* every guest seen, in order of first connection */
GPtrArray *
hr_daemon_get_guests(HrDaemon *daemon);
/* by UUID or name; a connected guest wins over a disconnected one */
HrGuest *
hr_daemon_find_guest(HrDaemon *daemon, const gchar *name_or_uuid);
/* connections dropped before a HELLO identified them */
guint64
hr_daemon_get_rejected_unidentified(HrDaemon *daemon);
const gchar *
hr_daemon_get_last_unidentified_reason(HrDaemon *daemon);
/* a request id no command of this daemon has used */
guint64
hr_daemon_new_request_id(HrDaemon *daemon);
/* send CMD_REPORT; returns its request id, or 0 with @error set */
guint64
hr_daemon_request_report(HrDaemon *daemon, HrGuest *guest, GError **error);

/*
 * Queue an EVACUATE, CAPTURE or RETURN for @guest. Returns the request,
 * owned by the guest (take a reference to keep it beyond its history), or
 * NULL with @error: G_IO_ERROR_INVALID_ARGUMENT for bad parameters (the
 * message names the field), G_IO_ERROR_NOT_CONNECTED or
 * G_IO_ERROR_NOT_SUPPORTED when the guest cannot run it now.
 */
HrRequest *
hr_daemon_submit(HrDaemon *daemon, HrGuest *guest, const HrRequestParams *params, GError **error);

/* the reservation executor; NULL before start and after stop */
HrPrepare *
hr_daemon_get_prepare(HrDaemon *daemon);

/* for hr-device.c */
HrGuest *
hr_daemon_attach_device(HrDaemon *daemon, HrDevice *device, const HrChanHello *hello, gint pid);
void
hr_daemon_device_closed(HrDaemon *daemon, HrDevice *device, HrGuest *guest, const gchar *reason);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrDaemon, hr_daemon_free)

G_END_DECLS
