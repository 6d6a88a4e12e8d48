/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The daemon assembled: the core (hr-core), the device transport on the
 * VM socket (hr-device connections feed the core), the reservation
 * executor (hr-prepare) and the API (hr-api), which listen to the core.
 * Nothing calls back into this file; hugeroomd.c and the tests build the
 * daemon with it.
 */

#include <gio/gio.h>

#include "hr-api.h"
#include "hr-config.h"
#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

typedef struct _HrDaemon HrDaemon;

HrDaemon *
hr_daemon_new(HrConfig *config);
void
hr_daemon_free(HrDaemon *daemon);
/* listen on the VM and API sockets, resume saved reservations */
gboolean
hr_daemon_start(HrDaemon *daemon, GError **error);
/* close every connection and remove the sockets */
void
hr_daemon_stop(HrDaemon *daemon);

HrCore *
hr_daemon_get_core(HrDaemon *daemon);
/* the reservation executor; NULL before start and after stop */
HrPrepare *
hr_daemon_get_prepare(HrDaemon *daemon);
/* NULL before hr_daemon_start() */
HrApi *
hr_daemon_get_api(HrDaemon *daemon);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrDaemon, hr_daemon_free)

G_END_DECLS
