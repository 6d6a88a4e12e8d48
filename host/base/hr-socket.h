/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/*
 * A listening Unix stream socket at @path with @mode. The one the service
 * manager passed for @path (socket activation: LISTEN_FDS, LISTEN_PID), if
 * it did, as it is; else a new one: a stale socket file is replaced, one
 * that still has a listener is an error.
 */
GSocket *
hr_socket_listen_unix(const gchar *path, guint mode, GError **error);
/* @path came from the service manager: it owns the file, do not remove it */
gboolean
hr_socket_is_passed(const gchar *path);
/*
 * Give the socket file @path to @group (QEMU runs as another user). Not
 * fatal when it cannot (no such group, not root): a warning says what
 * QEMU will then not be able to do.
 */
void
hr_socket_set_group(const gchar *path, const gchar *group);

G_END_DECLS
