/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/*
 * A listening Unix stream socket at @path with @mode. A stale socket file
 * is replaced; one that still has a listener is an error.
 */
GSocket *
hr_socket_listen_unix(const gchar *path, guint mode, GError **error);

G_END_DECLS
