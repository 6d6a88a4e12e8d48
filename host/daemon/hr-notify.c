/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrNotify"

#include "hr-notify.h"

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <string.h>
#include <unistd.h>

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

guint64
hr_notify_watchdog_usec(void)
{
	const gchar *usec_str = g_getenv("WATCHDOG_USEC");
	const gchar *pid_str = g_getenv("WATCHDOG_PID");
	guint64 usec = 0, pid = 0;

	if (usec_str == NULL ||
	    !g_ascii_string_to_unsigned(usec_str, 10, 1, G_MAXUINT64, &usec, NULL))
		return 0;
	/* sd_watchdog_enabled(3): without WATCHDOG_PID the watchdog is ours */
	if (pid_str != NULL && (!g_ascii_string_to_unsigned(pid_str, 10, 1, G_MAXINT, &pid, NULL) ||
				(pid_t)pid != getpid()))
		return 0;
	return usec;
}

static gboolean
hr_notify_watchdog_cb(gpointer user_data)
{
	g_autoptr(GError) error = NULL;
	(void)user_data;
	/* from the main loop: a loop that hangs stops the pings, and systemd restarts us */
	if (!hr_notify("WATCHDOG=1", &error))
		g_warning("watchdog: %s", error->message);
	return G_SOURCE_CONTINUE;
}

guint
hr_notify_watchdog_start(void)
{
	guint64 usec = hr_notify_watchdog_usec();
	guint interval_ms;

	if (usec == 0)
		return 0;
	/* twice per period, as sd_watchdog_enabled(3) advises */
	interval_ms = (guint)MIN(MAX(usec / 2000, 1), G_MAXUINT);
	g_info("watchdog: pinging systemd every %u ms", interval_ms);
	hr_notify_watchdog_cb(NULL);
	return g_timeout_add(interval_ms, hr_notify_watchdog_cb, NULL);
}
