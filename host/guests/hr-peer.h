/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Who is at the other end of a VM socket connection.
 *
 * Anything local that can open the socket could claim to be a VM, so the
 * daemon checks the peer before it reads a frame: its uid (SO_PEERCRED)
 * must be the one QEMU runs as, its executable one the administrator lists, and a
 * pidfd taken at once pins the process, so a pid that is reused later
 * never passes for it. A guest's identity is bound to its QEMU process:
 * the process key "pid:PID:STARTTIME" names the process for its life and
 * across daemon restarts (QEMU keeps running and reconnects), and never
 * names another process.
 */

#include <gio/gio.h>

#include "hr-config.h"

G_BEGIN_DECLS

typedef struct {
	gint pid;
	guint uid;
	gint pidfd;	   /* -1 where the kernel has no pidfd_open(), or once it exited */
	gboolean exited;   /* seen gone: its pidfd is closed (hr_peer_release) */
	guint64 starttime; /* /proc/PID/stat field 22, clock ticks since boot */
	gchar *exe;	   /* /proc/PID/exe, or NULL when unreadable */
	gchar *key;	   /* "pid:PID:STARTTIME" */
} HrPeer;

/* the credentials and process of @socket's peer */
HrPeer *
hr_peer_new_from_socket(GSocket *socket, GError **error);
/* the process @pid itself (tests, and what a socket peer resolves to) */
HrPeer *
hr_peer_new_from_pid(gint pid, guint uid, GError **error);
void
hr_peer_free(HrPeer *peer);
/*
 * May @peer talk to the daemon as a VM? Its uid must be @config's
 * qemu_uid and its executable one of qemu_executables (exact paths).
 */
gboolean
hr_peer_check(const HrPeer *peer, const HrConfig *config, GError **error);
/* is the process still running (the same one, not a reused pid)? */
gboolean
hr_peer_is_alive(const HrPeer *peer);
/*
 * Close @peer's pidfd once its process has exited: a gone guest's entry
 * is kept for hours (guest_prune_s), and its pidfd pins nothing any
 * more, so it must not cost an fd each (a peer that says HELLO under a
 * new name each time would take the daemon's fds). Returns whether the
 * process has exited. NULL is a process that has.
 */
gboolean
hr_peer_release(HrPeer *peer);
/* do @a and @b name the same process? */
gboolean
hr_peer_same_process(const HrPeer *a, const HrPeer *b);
/*
 * Is the process a key "...pid:PID:STARTTIME" names still running? A key
 * that names no process is not.
 */
gboolean
hr_peer_key_alive(const gchar *key);
/* the start time of process @pid, 0 when unknown */
guint64
hr_peer_read_starttime(gint pid);

/*
 * Raise RLIMIT_NOFILE's soft limit to at least @want (within the hard
 * limit, which root may raise too): 1000 guests are 1000 sockets and 1000
 * pidfds. Returns the soft limit now in force.
 */
guint64
hr_peer_raise_nofile(guint64 want, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrPeer, hr_peer_free)

G_END_DECLS
