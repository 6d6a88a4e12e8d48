/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/*
 * sd_notify(3) without libsystemd: send @state ("READY=1", "STOPPING=1",
 * "STATUS=...") to $NOTIFY_SOCKET. Without it there is no one to tell:
 * returns TRUE and does nothing.
 */
gboolean
hr_notify(const gchar *state, GError **error);

/*
 * The watchdog interval systemd expects pings within (WATCHDOG_USEC, when
 * WATCHDOG_PID is unset or ours), or 0 when there is no watchdog.
 */
guint64
hr_notify_watchdog_usec(void);
/*
 * Send WATCHDOG=1 from the main loop at half that interval; the source id,
 * or 0 without a watchdog.
 */
guint
hr_notify_watchdog_start(void);

G_END_DECLS
