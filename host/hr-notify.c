/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrNotify"

#include "hr-notify.h"

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <string.h>

gboolean
hr_notify(const gchar *state, GError **error)
{
	const gchar *path = g_getenv("NOTIFY_SOCKET");
	g_autoptr(GSocket) socket = NULL;
	g_autoptr(GSocketAddress) addr = NULL;

	if (path == NULL || path[0] == '\0')
		return TRUE;
	if (path[0] != '/' && path[0] != '@') {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
			    "NOTIFY_SOCKET=%s is neither a path nor an abstract socket", path);
		return FALSE;
	}
	socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_DATAGRAM,
			      G_SOCKET_PROTOCOL_DEFAULT, error);
	if (socket == NULL)
		return FALSE;
	/* a datagram to a local socket never waits on the main loop's behalf */
	g_socket_set_blocking(socket, FALSE);
	if (path[0] == '@')
		addr = g_unix_socket_address_new_with_type(path + 1, -1,
							   G_UNIX_SOCKET_ADDRESS_ABSTRACT);
	else
		addr = g_unix_socket_address_new(path);
	if (g_socket_send_to(socket, addr, state, strlen(state), NULL, error) < 0) {
		g_prefix_error(error, "cannot notify %s: ", path);
		return FALSE;
	}
	return TRUE;
}
