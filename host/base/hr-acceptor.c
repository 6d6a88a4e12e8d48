/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrAcceptor"

#include "hr-acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#define HR_ACCEPTOR_PAUSE_MIN_MS 100
#define HR_ACCEPTOR_PAUSE_MAX_MS 1600
/* connections taken per wakeup: a burst does not hold the loop */
#define HR_ACCEPTOR_BATCH 64

/*
 * Open connections per uid.  Shared with the connections' weak references,
 * which may outlive the acceptor: reference-counted.
 */
typedef struct {
	gint ref;
	GHashTable *open; /* uid -> count */
} HrAcceptorUids;

typedef struct {
	HrAcceptorUids *uids;
	uid_t uid;
} HrAcceptorTag;

struct _HrAcceptor {
	GSocket *listener;
	gchar *what;
	HrAcceptorFunc func;
	gpointer func_data;
	HrAcceptorFilter filter;
	gpointer filter_data;
	guint max_per_uid;
	GSource *watch;
	guint pause_id;
	guint pause_ms;
	gint reserve_fd;
	gboolean short_of_fds; /* warned for this shortage */
	HrAcceptorUids *uids;
	guint64 accepted;
	guint64 closed[HR_ACCEPTOR_N_CLOSED];
	guint64 wakeups;
};

static HrAcceptorUids *
hr_acceptor_uids_ref(HrAcceptorUids *uids)
{
	uids->ref++;
	return uids;
}

static void
hr_acceptor_uids_unref(HrAcceptorUids *uids)
{
	if (--uids->ref > 0)
		return;
	g_hash_table_unref(uids->open);
	g_free(uids);
}

static guint
hr_acceptor_uids_get(HrAcceptorUids *uids, uid_t uid)
{
	return GPOINTER_TO_UINT(g_hash_table_lookup(uids->open, GUINT_TO_POINTER(uid)));
}

/* a taken connection is gone: its uid has one fewer open */
static void
hr_acceptor_tag_cb(gpointer data, GObject *where_the_object_was)
{
	HrAcceptorTag *tag = data;
	guint n = hr_acceptor_uids_get(tag->uids, tag->uid);
	(void)where_the_object_was;

	if (n > 1)
		g_hash_table_insert(tag->uids->open, GUINT_TO_POINTER(tag->uid),
				    GUINT_TO_POINTER(n - 1));
	else
		g_hash_table_remove(tag->uids->open, GUINT_TO_POINTER(tag->uid));
	hr_acceptor_uids_unref(tag->uids);
	g_free(tag);
}

static void
hr_acceptor_take_reserve(HrAcceptor *acceptor)
{
	if (acceptor->reserve_fd < 0)
		acceptor->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
hr_acceptor_watch(HrAcceptor *acceptor);

static gboolean
hr_acceptor_resume_cb(gpointer user_data)
{
	HrAcceptor *acceptor = user_data;

	acceptor->pause_id = 0;
	hr_acceptor_take_reserve(acceptor);
	hr_acceptor_watch(acceptor);
	return G_SOURCE_REMOVE;
}

/*
 * Out of descriptors: drop the connection that waits, with the reserve's
 * descriptor, and look again after a pause.
 */
static void
hr_acceptor_short_of_fds(HrAcceptor *acceptor, gint err)
{
	gint fd;

	if (acceptor->reserve_fd >= 0) {
		close(acceptor->reserve_fd);
		acceptor->reserve_fd = -1;
		fd = accept4(g_socket_get_fd(acceptor->listener), NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			acceptor->closed[HR_ACCEPTOR_CLOSED_NO_FD]++;
		}
		hr_acceptor_take_reserve(acceptor);
	}
	if (!acceptor->short_of_fds) {
		g_warning("%s: out of file descriptors (%s): new connections are closed until "
			  "some are free; raise LimitNOFILE or look for a peer that opens many",
			  acceptor->what, g_strerror(err));
		acceptor->short_of_fds = TRUE;
	}
	acceptor->pause_ms = acceptor->pause_ms == 0
				 ? HR_ACCEPTOR_PAUSE_MIN_MS
				 : MIN(acceptor->pause_ms * 2, HR_ACCEPTOR_PAUSE_MAX_MS);
	if (acceptor->watch != NULL) {
		g_source_destroy(acceptor->watch);
		g_clear_pointer(&acceptor->watch, g_source_unref);
	}
	acceptor->pause_id = g_timeout_add(acceptor->pause_ms, hr_acceptor_resume_cb, acceptor);
}

/* FALSE when the peer is not let in; it is then closed */
static gboolean
hr_acceptor_admit(HrAcceptor *acceptor, gint fd, uid_t *uid)
{
	struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	socklen_t len = sizeof(cred);

	if (g_socket_get_family(acceptor->listener) == G_SOCKET_FAMILY_UNIX &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		cred.uid = (uid_t)-1;
		cred.gid = (gid_t)-1;
	}
	*uid = cred.uid;
	if (acceptor->filter != NULL &&
	    !acceptor->filter(cred.uid, cred.gid, cred.pid, acceptor->filter_data)) {
		acceptor->closed[HR_ACCEPTOR_CLOSED_REFUSED]++;
		return FALSE;
	}
	if (acceptor->max_per_uid > 0 && cred.uid != 0 && cred.uid != (uid_t)-1 &&
	    hr_acceptor_uids_get(acceptor->uids, cred.uid) >= acceptor->max_per_uid) {
		if (acceptor->closed[HR_ACCEPTOR_CLOSED_PER_UID]++ == 0)
			g_warning("%s: uid %u has %u connections open, the most one uid may "
				  "have; its new ones are closed",
				  acceptor->what, (guint)cred.uid, acceptor->max_per_uid);
		return FALSE;
	}
	return TRUE;
}

static void
hr_acceptor_hand(HrAcceptor *acceptor, gint fd, uid_t uid)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GSocket) socket = g_socket_new_from_fd(fd, &error);
	g_autoptr(GSocketConnection) connection = NULL;
	HrAcceptorTag *tag;

	if (socket == NULL) {
		g_warning("%s: %s", acceptor->what, error->message);
		close(fd);
		return;
	}
	connection = g_socket_connection_factory_create_connection(socket);
	tag = g_new0(HrAcceptorTag, 1);
	tag->uids = hr_acceptor_uids_ref(acceptor->uids);
	tag->uid = uid;
	g_hash_table_insert(acceptor->uids->open, GUINT_TO_POINTER(uid),
			    GUINT_TO_POINTER(hr_acceptor_uids_get(acceptor->uids, uid) + 1));
	g_object_weak_ref(G_OBJECT(connection), hr_acceptor_tag_cb, tag);
	acceptor->accepted++;
	acceptor->func(connection, acceptor->func_data);
}

static gboolean
hr_acceptor_ready_cb(GSocket *listener, GIOCondition condition, gpointer user_data)
{
	HrAcceptor *acceptor = user_data;
	(void)condition;

	acceptor->wakeups++;
	for (guint i = 0; i < HR_ACCEPTOR_BATCH; i++) {
		gint fd = accept4(g_socket_get_fd(listener), NULL, NULL, SOCK_CLOEXEC);
		uid_t uid;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				hr_acceptor_short_of_fds(acceptor, errno);
				return G_SOURCE_REMOVE;
			}
			/* EAGAIN, or a peer that left before its accept */
			break;
		}
		if (acceptor->short_of_fds) {
			g_message("%s: file descriptors free again; %" G_GUINT64_FORMAT
				  " connections were closed while there were none",
				  acceptor->what, acceptor->closed[HR_ACCEPTOR_CLOSED_NO_FD]);
			acceptor->short_of_fds = FALSE;
		}
		acceptor->pause_ms = 0;
		if (!hr_acceptor_admit(acceptor, fd, &uid)) {
			close(fd);
			continue;
		}
		hr_acceptor_hand(acceptor, fd, uid);
	}
	return G_SOURCE_CONTINUE;
}

static void
hr_acceptor_watch(HrAcceptor *acceptor)
{
	acceptor->watch = g_socket_create_source(acceptor->listener, G_IO_IN, NULL);
	g_source_set_callback(acceptor->watch, G_SOURCE_FUNC(hr_acceptor_ready_cb), acceptor, NULL);
	g_source_attach(acceptor->watch, g_main_context_get_thread_default());
}

HrAcceptor *
hr_acceptor_new(GSocket *listener, const gchar *what, HrAcceptorFunc func, gpointer user_data)
{
	HrAcceptor *acceptor = g_new0(HrAcceptor, 1);

	acceptor->listener = g_object_ref(listener);
	acceptor->what = g_strdup(what);
	acceptor->func = func;
	acceptor->func_data = user_data;
	acceptor->reserve_fd = -1;
	acceptor->uids = g_new0(HrAcceptorUids, 1);
	acceptor->uids->ref = 1;
	acceptor->uids->open = g_hash_table_new(NULL, NULL);
	g_socket_set_blocking(listener, FALSE);
	hr_acceptor_take_reserve(acceptor);
	hr_acceptor_watch(acceptor);
	return acceptor;
}

void
hr_acceptor_free(HrAcceptor *acceptor)
{
	if (acceptor == NULL)
		return;
	if (acceptor->watch != NULL) {
		g_source_destroy(acceptor->watch);
		g_source_unref(acceptor->watch);
	}
	g_clear_handle_id(&acceptor->pause_id, g_source_remove);
	if (acceptor->reserve_fd >= 0)
		close(acceptor->reserve_fd);
	hr_acceptor_uids_unref(acceptor->uids);
	g_object_unref(acceptor->listener);
	g_free(acceptor->what);
	g_free(acceptor);
}

void
hr_acceptor_set_filter(HrAcceptor *acceptor, HrAcceptorFilter filter, gpointer user_data)
{
	acceptor->filter = filter;
	acceptor->filter_data = user_data;
}

void
hr_acceptor_set_max_per_uid(HrAcceptor *acceptor, guint max_per_uid)
{
	acceptor->max_per_uid = max_per_uid;
}

guint64
hr_acceptor_get_accepted(const HrAcceptor *acceptor)
{
	return acceptor->accepted;
}

guint64
hr_acceptor_get_closed(const HrAcceptor *acceptor, HrAcceptorClosed why)
{
	g_return_val_if_fail(why < HR_ACCEPTOR_N_CLOSED, 0);
	return acceptor->closed[why];
}

guint64
hr_acceptor_get_wakeups(const HrAcceptor *acceptor)
{
	return acceptor->wakeups;
}

guint
hr_acceptor_get_open(const HrAcceptor *acceptor, uid_t uid)
{
	return hr_acceptor_uids_get(acceptor->uids, uid);
}
