/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * HrAcceptor: takes connections from a listening socket on the main loop,
 * bounded, and without spinning when the process runs out of descriptors.
 *
 * GSocketService accepts again at once when accept() fails, so at the
 * descriptor limit it spins on the same pending connection (hundreds of
 * thousands of "Too many open files" a second) while every other source of
 * the loop starves.  An acceptor keeps one descriptor in reserve: on
 * EMFILE or ENFILE it closes the reserve, accepts the pending connection and
 * closes it at once (its peer sees the close instead of waiting in the
 * backlog), takes the reserve again and does not look at the socket for a
 * pause (100 ms, doubling to 1.6 s while the shortage lasts).  One warning
 * per shortage.
 *
 * On a Unix socket each peer's uid is read at accept (SO_PEERCRED): a peer
 * the filter refuses is closed before it costs anything more than the
 * accept, and a uid other than root with max_per_uid connections open has
 * its next one closed.
 */
#pragma once

#include <gio/gio.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct _HrAcceptor HrAcceptor;

/* why an acceptor closed a connection at accept */
typedef enum {
	HR_ACCEPTOR_CLOSED_NO_FD,   /* out of descriptors */
	HR_ACCEPTOR_CLOSED_REFUSED, /* the filter said no */
	HR_ACCEPTOR_CLOSED_PER_UID, /* the uid had max_per_uid open */
	HR_ACCEPTOR_N_CLOSED,
} HrAcceptorClosed;

/*
 * A peer at accept: its uid and gid (-1 when the socket is not a Unix
 * socket); FALSE closes it (HR_ACCEPTOR_CLOSED_REFUSED).
 */
typedef gboolean (*HrAcceptorFilter)(uid_t uid, gid_t gid, pid_t pid, gpointer user_data);
/* a connection taken: the callee owns a reference if it keeps it */
typedef void (*HrAcceptorFunc)(GSocketConnection *connection, gpointer user_data);

HrAcceptor *
hr_acceptor_new(GSocket *listener, const gchar *what, HrAcceptorFunc func, gpointer user_data);
void
hr_acceptor_free(HrAcceptor *acceptor);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrAcceptor, hr_acceptor_free)

void
hr_acceptor_set_filter(HrAcceptor *acceptor, HrAcceptorFilter filter, gpointer user_data);
/* connections one uid other than root may have open at once; 0: no bound */
void
hr_acceptor_set_max_per_uid(HrAcceptor *acceptor, guint max_per_uid);

guint64
hr_acceptor_get_accepted(const HrAcceptor *acceptor);
guint64
hr_acceptor_get_closed(const HrAcceptor *acceptor, HrAcceptorClosed why);
/* the times the socket woke the loop: bounded at the descriptor limit */
guint64
hr_acceptor_get_wakeups(const HrAcceptor *acceptor);
/* connections taken and not yet finalized, of @uid */
guint
hr_acceptor_get_open(const HrAcceptor *acceptor, uid_t uid);

G_END_DECLS
