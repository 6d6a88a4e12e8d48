/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrSocket"

#include "hr-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <glib/gstdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* sd_listen_fds(3): the first socket a service manager passes is fd 3 */
#define HR_SOCKET_LISTEN_FDS_START 3

/* the Unix path of each socket passed in, by fd; those taken are removed */
static GHashTable *hr_socket_passed;
/* the paths of sockets we were given: not ours to remove */
static GHashTable *hr_socket_given;

/*
 * The sockets the service manager passed (LISTEN_PID is us, LISTEN_FDS of
 * them from fd 3), read once; the variables are unset so that nothing we
 * start takes them for its own.
 */
static void
hr_socket_read_passed(void)
{
	const gchar *pid_str = g_getenv("LISTEN_PID");
	const gchar *fds_str = g_getenv("LISTEN_FDS");
	guint64 pid = 0, n = 0;

	if (hr_socket_passed != NULL)
		return;
	hr_socket_passed = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	hr_socket_given = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	if (pid_str == NULL || fds_str == NULL ||
	    !g_ascii_string_to_unsigned(pid_str, 10, 1, G_MAXINT, &pid, NULL) ||
	    (pid_t)pid != getpid() || !g_ascii_string_to_unsigned(fds_str, 10, 0, 1024, &n, NULL))
		return;
	for (gint fd = HR_SOCKET_LISTEN_FDS_START; fd < HR_SOCKET_LISTEN_FDS_START + (gint)n;
	     fd++) {
		struct sockaddr_un sun = {0};
		socklen_t len = sizeof(sun);

		if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
		    getsockname(fd, (struct sockaddr *)&sun, &len) != 0 ||
		    sun.sun_family != AF_UNIX || len <= offsetof(struct sockaddr_un, sun_path) ||
		    sun.sun_path[0] == '\0') {
			g_warning("fd %d from the service manager is not a Unix socket with a "
				  "path; ignored",
				  fd);
			continue;
		}
		g_hash_table_insert(hr_socket_passed, GINT_TO_POINTER(fd),
				    g_strndup(sun.sun_path, sizeof(sun.sun_path)));
	}
	g_unsetenv("LISTEN_PID");
	g_unsetenv("LISTEN_FDS");
	g_unsetenv("LISTEN_FDNAMES");
}

/* the passed socket bound to @path, listening; NULL when none was */
static GSocket *
hr_socket_take_passed(const gchar *path, GError **error)
{
	GHashTableIter iter;
	gpointer key, value;

	hr_socket_read_passed();
	g_hash_table_iter_init(&iter, hr_socket_passed);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		gint fd = GPOINTER_TO_INT(key);
		GSocket *socket;

		if (g_strcmp0(value, path) != 0)
			continue;
		g_hash_table_iter_remove(&iter);
		socket = g_socket_new_from_fd(fd, error);
		if (socket == NULL) {
			g_prefix_error(error, "socket %s from the service manager: ", path);
			return NULL;
		}
		g_hash_table_add(hr_socket_given, g_strdup(path));
		g_info("%s: using the socket the service manager passed (fd %d)", path, fd);
		return socket;
	}
	return NULL;
}

gboolean
hr_socket_is_passed(const gchar *path)
{
	return hr_socket_given != NULL && g_hash_table_contains(hr_socket_given, path);
}

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
	g_autoptr(GError) error_local = NULL;

	socket = hr_socket_take_passed(path, &error_local);
	if (socket != NULL)
		return g_steal_pointer(&socket);
	if (error_local != NULL) {
		g_propagate_error(error, g_steal_pointer(&error_local));
		return NULL;
	}
	if (g_mkdir_with_parents(dir, 0755) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot create %s: %s",
			    dir, g_strerror(errno));
		return NULL;
	}
	if (g_file_test(path, G_FILE_TEST_EXISTS)) {
		if (hr_socket_path_in_use(path)) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
				    "%s is in use by another process (is another hugeroomd "
				    "running?)",
				    path);
			return NULL;
		}
		if (g_unlink(path) != 0) {
			g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
				    "cannot remove stale socket %s: %s", path, g_strerror(errno));
			return NULL;
		}
	}
	socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
			      error);
	if (socket == NULL)
		return NULL;
	if (!g_socket_bind(socket, addr, FALSE, error)) {
		g_prefix_error(error, "cannot bind %s: ", path);
		return NULL;
	}
	if (g_chmod(path, mode) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot chmod %s: %s",
			    path, g_strerror(errno));
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

void
hr_socket_set_group(const gchar *path, const gchar *group)
{
	struct group *gr;

	if (group == NULL || group[0] == '\0')
		return;
	errno = 0;
	gr = getgrnam(group);
	if (gr == NULL) {
		g_warning("group %s does not exist (%s): %s keeps the daemon's group, and a QEMU "
			  "running as another user cannot connect; set vm_socket_group",
			  group, errno != 0 ? g_strerror(errno) : "no such group", path);
		return;
	}
	if (chown(path, (uid_t)-1, gr->gr_gid) != 0)
		g_warning("cannot give %s to group %s: %s; a QEMU running as another user "
			  "cannot connect (run hugeroomd as root, or set vm_socket_group)",
			  path, group, g_strerror(errno));
}
