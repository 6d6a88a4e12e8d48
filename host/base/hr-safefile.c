/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrSafefile"

#include "hr-safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
hr_safefile_open_error(const gchar *path, gint err, gboolean dir, GError **error)
{
	if (err == ELOOP) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_TOO_MANY_LINKS,
			    "%s is a symbolic link: name the %s itself", path,
			    dir ? "directory" : "file");
		return FALSE;
	}
	g_set_error(error, G_IO_ERROR, g_io_error_from_errno(err), "%s: %s", path, g_strerror(err));
	return FALSE;
}

/* "readable by everyone, writable by its group" for the bits of @bad */
static gchar *
hr_safefile_describe(mode_t bad)
{
	static const struct {
		mode_t bit;
		const gchar *what;
	} bits[] = {
	    {S_IROTH, "readable by everyone"},	{S_IWOTH, "writable by everyone"},
	    {S_IXOTH, "usable by everyone"},	{S_IRGRP, "readable by its group"},
	    {S_IWGRP, "writable by its group"}, {S_IXGRP, "usable by its group"},
	};
	g_autoptr(GString) str = g_string_new(NULL);

	for (guint i = 0; i < G_N_ELEMENTS(bits); i++) {
		if (bad & bits[i].bit)
			g_string_append_printf(str, "%s%s", str->len > 0 ? ", " : "", bits[i].what);
	}
	return g_string_free(g_steal_pointer(&str), FALSE);
}

/* the owner and mode of the open @fd, and that it is what @dir says */
static gboolean
hr_safefile_check_fd(gint fd, const gchar *path, gboolean dir, uid_t owner, mode_t forbidden,
		     GError **error)
{
	struct stat st;
	mode_t bad;

	if (fstat(fd, &st) != 0)
		return hr_safefile_open_error(path, errno, dir, error);
	if (dir && !S_ISDIR(st.st_mode)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY, "%s is not a directory",
			    path);
		return FALSE;
	}
	if (!dir && !S_ISREG(st.st_mode)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE,
			    "%s is not a regular file (a %s): name a file", path,
			    S_ISFIFO(st.st_mode)   ? "FIFO"
			    : S_ISDIR(st.st_mode)  ? "directory"
			    : S_ISSOCK(st.st_mode) ? "socket"
						   : "device");
		return FALSE;
	}
	if (st.st_uid != 0 && st.st_uid != owner) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "%s is owned by uid %u, not by root or uid %u (who reads it), so "
			    "someone else may change it: chown %u %s",
			    path, (guint)st.st_uid, (guint)owner, (guint)owner, path);
		return FALSE;
	}
	bad = st.st_mode & forbidden & 07777;
	if (bad != 0) {
		g_autofree gchar *what = hr_safefile_describe(bad);
		g_autofree gchar *who =
		    g_strdup_printf("%s%s%s", (forbidden & 0070) != 0 ? "g" : "",
				    (forbidden & 0007) != 0 ? "o" : "",
				    (forbidden & 0066) == (forbidden & 0022) ? "-w" : "-rwx");
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "%s is %s (mode %04o): chmod %s %s", path, what,
			    (guint)(st.st_mode & 07777), who, path);
		return FALSE;
	}
	return TRUE;
}

/* an fd of the checked file, or -1 */
static gint
hr_safefile_open(const gchar *path, uid_t owner, mode_t forbidden, GError **error)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	gint fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		hr_safefile_open_error(path, errno, FALSE, error);
		return -1;
	}
	if (!hr_safefile_check_fd(fd, path, FALSE, owner, forbidden, error)) {
		close(fd);
		return -1;
	}
	return fd;
}

gboolean
hr_safefile_check(const gchar *path, uid_t owner, mode_t forbidden, GError **error)
{
	gint fd = hr_safefile_open(path, owner, forbidden, error);

	if (fd < 0)
		return FALSE;
	close(fd);
	return TRUE;
}

gboolean
hr_safefile_get_contents(const gchar *path, uid_t owner, mode_t forbidden, gsize max_len,
			 gchar **contents, gsize *length, GError **error)
{
	g_autoptr(GByteArray) buf = g_byte_array_new();
	gint fd = hr_safefile_open(path, owner, forbidden, error);
	guint8 chunk[65536];

	if (fd < 0)
		return FALSE;
	for (;;) {
		gssize n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			gint err = errno;
			close(fd);
			return hr_safefile_open_error(path, err, FALSE, error);
		}
		if (n == 0)
			break;
		if (buf->len + (gsize)n > max_len) {
			close(fd);
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
				    "%s is more than %" G_GSIZE_FORMAT " bytes, the most it may be",
				    path, max_len);
			return FALSE;
		}
		g_byte_array_append(buf, chunk, (guint)n);
	}
	close(fd);
	if (length != NULL)
		*length = buf->len;
	g_byte_array_append(buf, (const guint8 *)"", 1);
	*contents = (gchar *)g_byte_array_free(g_steal_pointer(&buf), FALSE);
	return TRUE;
}

gboolean
hr_safefile_check_dir(const gchar *path, uid_t owner, mode_t forbidden, GError **error)
{
	gint fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	gboolean ok;

	if (fd < 0) {
		/* O_DIRECTORY on a symlink to a directory says ENOTDIR: say why */
		struct stat st;
		gint err = errno;
		if (err == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
			err = ELOOP;
		return hr_safefile_open_error(path, err, TRUE, error);
	}
	ok = hr_safefile_check_fd(fd, path, TRUE, owner, forbidden, error);
	close(fd);
	return ok;
}
