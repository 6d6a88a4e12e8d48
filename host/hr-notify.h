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

G_END_DECLS
