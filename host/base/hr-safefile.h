/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Files whose content decides who may do what (bearer tokens, a TLS key,
 * the daemon's state): read only when nobody but their owner could have
 * written them, as OpenSSH's StrictModes reads authorized_keys. A file must
 * be a regular file reached without following a symlink in its last
 * component, owned by root or @owner, and carry none of the mode bits in
 * @forbidden; a FIFO or a device is refused without blocking on it.
 *
 * A missing file is G_IO_ERROR_NOT_FOUND, so that callers can tell "none
 * yet" from "refused". Every other error names the file and says what to
 * run to fix it.
 */

#include <gio/gio.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* the mode bits a secret must not have: anything for group and others */
#define HR_SAFEFILE_SECRET ((mode_t)0077)
/* the mode bits a file others rely on must not have: write for group and others */
#define HR_SAFEFILE_SHARED ((mode_t)0022)

/*
 * @path's content, at most @max_len bytes (more is an error naming the
 * limit), NUL-terminated in *@contents.
 */
gboolean
hr_safefile_get_contents(const gchar *path, uid_t owner, mode_t forbidden, gsize max_len,
			 gchar **contents, gsize *length, GError **error);
/* the checks of hr_safefile_get_contents() without reading the file */
gboolean
hr_safefile_check(const gchar *path, uid_t owner, mode_t forbidden, GError **error);
/*
 * A directory that holds such files: a directory (not a symlink to one),
 * owned by root or @owner, without the bits in @forbidden.
 */
gboolean
hr_safefile_check_dir(const gchar *path, uid_t owner, mode_t forbidden, GError **error);

G_END_DECLS
