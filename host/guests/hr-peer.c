/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrPeer"

#include "hr-peer.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

guint64
hr_peer_read_starttime(gint pid)
{
	g_autofree gchar *path = g_strdup_printf("/proc/%d/stat", pid);
	g_autofree gchar *text = NULL;
	const gchar *p;

	if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL))
		return 0;
	/* comm may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(text, ')');
	if (p == NULL)
		return 0;
	/* field 3 (state) follows; starttime is field 22, 19 fields on */
	for (guint field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	return p != NULL ? g_ascii_strtoull(p + 1, NULL, 10) : 0;
}

HrPeer *
hr_peer_new_from_pid(gint pid, guint uid, GError **error)
{
	g_autoptr(HrPeer) peer = g_new0(HrPeer, 1);
	g_autofree gchar *exe_link = NULL;

	peer->pid = pid;
	peer->uid = uid;
	peer->pidfd = -1;
	if (pid <= 0) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "the peer has no pid (not a local process?)");
		return NULL;
	}
	/* first, so that what we read below is known to be about this process */
	peer->pidfd = (gint)syscall(SYS_pidfd_open, pid, 0);
	if (peer->pidfd < 0 && errno == ESRCH) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "peer pid %d exited before it could be checked", pid);
		return NULL;
	}
	peer->starttime = hr_peer_read_starttime(pid);
	exe_link = g_strdup_printf("/proc/%d/exe", pid);
	peer->exe = g_file_read_link(exe_link, NULL);
	if (!hr_peer_is_alive(peer)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "peer pid %d exited while it was checked", pid);
		return NULL;
	}
	peer->key = g_strdup_printf("pid:%d:%" G_GUINT64_FORMAT, pid, peer->starttime);
	return g_steal_pointer(&peer);
}

HrPeer *
hr_peer_new_from_socket(GSocket *socket, GError **error)
{
	g_autoptr(GCredentials) creds = g_socket_get_credentials(socket, error);
	gint pid;
	uid_t uid;

	if (creds == NULL) {
		g_prefix_error(error, "cannot read peer credentials: ");
		return NULL;
	}
	pid = g_credentials_get_unix_pid(creds, error);
	if (pid < 0)
		return NULL;
	uid = g_credentials_get_unix_user(creds, error);
	if (uid == (uid_t)-1)
		return NULL;
	return hr_peer_new_from_pid(pid, uid, error);
}

void
hr_peer_free(HrPeer *peer)
{
	if (peer == NULL)
		return;
	if (peer->pidfd >= 0)
		close(peer->pidfd);
	g_free(peer->exe);
	g_free(peer->key);
	g_free(peer);
}

gboolean
hr_peer_check(const HrPeer *peer, const HrConfig *config, GError **error)
{
	if (!hr_config_qemu_uid_ok(config, peer->uid)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "peer pid %d runs as uid %u, not as QEMU's user (qemu_user=%s in "
			    "hugeroomd.conf)",
			    peer->pid, peer->uid, config->qemu_user);
		return FALSE;
	}
	if (peer->exe != NULL) {
		/* a QEMU whose binary an upgrade replaced still is that QEMU */
		g_autofree gchar *exe = g_str_has_suffix(peer->exe, " (deleted)")
					    ? g_strndup(peer->exe, strlen(peer->exe) - 10)
					    : g_strdup(peer->exe);
		if (config->qemu_executables != NULL &&
		    g_strv_contains((const gchar *const *)config->qemu_executables, exe))
			return TRUE;
	}
	g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
		    "peer pid %d runs %s, which is not one of qemu_executables in "
		    "hugeroomd.conf (add its path there if it is a QEMU this host runs)",
		    peer->pid, peer->exe != NULL ? peer->exe : "an unreadable executable");
	return FALSE;
}

gboolean
hr_peer_is_alive(const HrPeer *peer)
{
	if (peer->exited)
		return FALSE;
	if (peer->pidfd >= 0) {
		/* a pidfd polls readable once its process exited */
		struct pollfd pfd = {.fd = peer->pidfd, .events = POLLIN};
		return poll(&pfd, 1, 0) == 0;
	}
	if (kill(peer->pid, 0) != 0 && errno == ESRCH)
		return FALSE;
	/* without a pidfd the start time tells a reused pid */
	return hr_peer_read_starttime(peer->pid) == peer->starttime;
}

gboolean
hr_peer_release(HrPeer *peer)
{
	if (peer == NULL)
		return TRUE;
	if (peer->exited)
		return TRUE;
	if (hr_peer_is_alive(peer))
		return FALSE;
	if (peer->pidfd >= 0)
		close(peer->pidfd);
	peer->pidfd = -1;
	peer->exited = TRUE;
	return TRUE;
}

gboolean
hr_peer_key_alive(const gchar *key)
{
	const gchar *p = key != NULL ? g_strrstr(key, "pid:") : NULL;
	gchar *end = NULL;
	gint64 pid;
	guint64 starttime;

	if (p == NULL)
		return FALSE;
	pid = g_ascii_strtoll(p + 4, &end, 10);
	if (end == p + 4 || *end != ':' || pid <= 0 || pid > G_MAXINT)
		return FALSE;
	starttime = g_ascii_strtoull(end + 1, NULL, 10);
	return hr_peer_read_starttime((gint)pid) == starttime;
}

gboolean
hr_peer_same_process(const HrPeer *a, const HrPeer *b)
{
	return a != NULL && b != NULL && a->pid == b->pid && a->starttime == b->starttime;
}

guint64
hr_peer_raise_nofile(guint64 want, GError **error)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "getrlimit(RLIMIT_NOFILE): %s", g_strerror(errno));
		return 0;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want)
		return rl.rlim_cur;
	if (rl.rlim_cur == RLIM_INFINITY)
		return G_MAXUINT64;
	rl.rlim_cur = want;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
		struct rlimit both = {.rlim_cur = want, .rlim_max = want};
		/* root may raise the hard limit; others get what the hard limit allows */
		if (setrlimit(RLIMIT_NOFILE, &both) == 0)
			return want;
		rl.rlim_cur = rl.rlim_max;
	}
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "setrlimit(RLIMIT_NOFILE, %" G_GUINT64_FORMAT "): %s",
			    (guint64)rl.rlim_cur, g_strerror(errno));
		return 0;
	}
	if (rl.rlim_cur < want) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "RLIMIT_NOFILE is %" G_GUINT64_FORMAT ", below the %" G_GUINT64_FORMAT
			    " descriptors max_connections needs; raise LimitNOFILE",
			    (guint64)rl.rlim_cur, want);
	}
	return rl.rlim_cur;
}
