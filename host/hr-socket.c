/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrSocket"

#include "hr-socket.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
hr_socket_path_in_use(const gchar *path)
{
	g_autoptr(GSocket) probe = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
						G_SOCKET_PROTOCOL_DEFAULT, NULL);
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
	if (probe == NULL)
		return FALSE;
	/* a local connect answers at once: listening, or ECONNREFUSED */
	return g_socket_connect(probe, addr, NULL, NULL);
}

GSocket *
hr_socket_listen_unix(const gchar *path, guint mode, GError **error)
{
	g_autoptr(GSocket) socket = NULL;
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
	g_autofree gchar *dir = g_path_get_dirname(path);

	if (g_mkdir_with_parents(dir, 0755) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot create %s: %s", dir, g_strerror(errno));
		return NULL;
	}
	if (g_file_test(path, G_FILE_TEST_EXISTS)) {
		if (hr_socket_path_in_use(path)) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
				    "%s is in use by another process (is another hugeroomd "
				    "running?)", path);
			return NULL;
		}
		if (g_unlink(path) != 0) {
			g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
				    "cannot remove stale socket %s: %s", path, g_strerror(errno));
			return NULL;
		}
	}
	socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
			      G_SOCKET_PROTOCOL_DEFAULT, error);
	if (socket == NULL)
		return NULL;
	if (!g_socket_bind(socket, addr, FALSE, error)) {
		g_prefix_error(error, "cannot bind %s: ", path);
		return NULL;
	}
	if (g_chmod(path, mode) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot chmod %s: %s", path, g_strerror(errno));
		return NULL;
	}
	/* after a daemon restart a thousand QEMUs reconnect within a second */
	g_socket_set_listen_backlog(socket, 4096);
	if (!g_socket_listen(socket, error)) {
		g_prefix_error(error, "cannot listen on %s: ", path);
		return NULL;
	}
	return g_steal_pointer(&socket);
}

gboolean
hr_socket_peer_is_trusted(GSocket *socket, GError **error)
{
	g_autoptr(GCredentials) creds = g_socket_get_credentials(socket, error);
	uid_t uid;
	if (creds == NULL) {
		g_prefix_error(error, "cannot read peer credentials: ");
		return FALSE;
	}
	uid = g_credentials_get_unix_user(creds, error);
	if (uid == (uid_t)-1)
		return FALSE;
	if (uid != 0 && uid != getuid()) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "uid %u may not use this API: only root and uid %u may", (guint)uid,
			    (guint)getuid());
		return FALSE;
	}
	return TRUE;
}
