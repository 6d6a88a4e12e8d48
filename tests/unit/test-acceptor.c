/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * HrAcceptor against real sockets and the real descriptor limit: at the
 * limit it wakes the loop a bounded number of times (GSocketService spins),
 * drops what waits and takes connections again once descriptors are free;
 * peers are bounded per uid and refused by the filter at accept.
 */

#include <gio/gunixsocketaddress.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hr-acceptor.h"

#define NOBODY 65534

typedef struct {
	gchar *dir;
	gchar *path;
	GSocket *listener;
	GPtrArray *taken; /* GSocketConnection */
	gint go[2];	  /* parent -> child: connect now, then exit */
	pid_t child;
} Fixture;

static void
taken_cb(GSocketConnection *connection, gpointer user_data)
{
	Fixture *f = user_data;
	g_ptr_array_add(f->taken, g_object_ref(connection));
}

static void
fixture_setup(Fixture *f, gconstpointer data)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GSocketAddress) addr = NULL;
	(void)data;

	f->dir = g_dir_make_tmp("hr-acceptor-XXXXXX", &error);
	g_assert_no_error(error);
	f->path = g_build_filename(f->dir, "s", NULL);
	addr = g_unix_socket_address_new(f->path);
	f->listener = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
				   G_SOCKET_PROTOCOL_DEFAULT, &error);
	g_assert_no_error(error);
	g_assert_true(g_socket_bind(f->listener, addr, FALSE, &error));
	g_socket_set_listen_backlog(f->listener, 256);
	g_assert_true(g_socket_listen(f->listener, &error));
	g_assert_cmpint(g_chmod(f->path, 0666), ==, 0);
	g_assert_cmpint(g_chmod(f->dir, 0755), ==, 0);
	f->taken = g_ptr_array_new_with_free_func(g_object_unref);
	f->child = -1;
}

static void
fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	if (f->child > 0) {
		kill(f->child, SIGKILL);
		waitpid(f->child, NULL, 0);
	}
	g_ptr_array_unref(f->taken);
	g_object_unref(f->listener);
	g_unlink(f->path);
	g_rmdir(f->dir);
	g_free(f->path);
	g_free(f->dir);
}

/*
 * A child (forked before the test lowers its own limit) that connects @n
 * times as @uid when told, keeps them open and exits when told again.
 */
static void
spawn_clients(Fixture *f, guint n, uid_t uid)
{
	g_assert_cmpint(pipe(f->go), ==, 0);
	f->child = fork();
	g_assert_cmpint(f->child, >=, 0);
	if (f->child == 0) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		gchar c;

		g_strlcpy(sun.sun_path, f->path, sizeof(sun.sun_path));
		close(f->go[1]);
		if (uid != 0 && setuid(uid) != 0)
			_exit(2);
		if (read(f->go[0], &c, 1) != 1)
			_exit(3);
		for (guint i = 0; i < n; i++) {
			gint fd = socket(AF_UNIX, SOCK_STREAM, 0);
			if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
				_exit(4);
		}
		_exit(read(f->go[0], &c, 1) == 1 ? 0 : 5);
	}
	close(f->go[0]);
}

static void
tell_child(Fixture *f)
{
	g_assert_cmpint(write(f->go[1], "g", 1), ==, 1);
}

static void
run_loop_ms(guint ms)
{
	gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
	while (g_get_monotonic_time() < end)
		if (!g_main_context_iteration(NULL, FALSE))
			g_usleep(1000);
}

static gint
highest_fd(void)
{
	gint fd = open("/dev/null", O_RDONLY);
	close(fd);
	return fd;
}

static void
test_out_of_fds(Fixture *f, gconstpointer data)
{
	g_autoptr(HrAcceptor) acceptor = NULL;
	struct rlimit old, low;
	guint64 wakeups;
	(void)data;

	spawn_clients(f, 40, 0);
	acceptor = hr_acceptor_new(f->listener, "test socket", taken_cb, f);
	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &old), ==, 0);
	low = old;
	low.rlim_cur = (rlim_t)highest_fd() + 6;
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
	g_test_expect_message("HrAcceptor", G_LOG_LEVEL_WARNING, "*out of file descriptors*");
	tell_child(f);
	run_loop_ms(1500);
	g_test_assert_expected_messages();
	wakeups = hr_acceptor_get_wakeups(acceptor);
	g_test_message("at the limit: %u taken, %" G_GUINT64_FORMAT " dropped, %" G_GUINT64_FORMAT
		       " wakeups in 1.5 s",
		       f->taken->len, hr_acceptor_get_closed(acceptor, HR_ACCEPTOR_CLOSED_NO_FD),
		       wakeups);
	g_assert_cmpuint(f->taken->len, >=, 1);
	g_assert_cmpuint(f->taken->len, <=, 6);
	g_assert_cmpuint(hr_acceptor_get_closed(acceptor, HR_ACCEPTOR_CLOSED_NO_FD), >=, 1);
	/* a spinning accept wakes up hundreds of thousands of times */
	g_assert_cmpuint(wakeups, <, 100);

	/* descriptors free again: the connections still waiting are taken */
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &old), ==, 0);
	g_ptr_array_set_size(f->taken, 0);
	run_loop_ms(2000);
	g_assert_cmpuint(f->taken->len, >=, 10);
	g_assert_cmpuint(f->taken->len + hr_acceptor_get_closed(acceptor, HR_ACCEPTOR_CLOSED_NO_FD),
			 <=, 40);
}

static void
test_per_uid(Fixture *f, gconstpointer data)
{
	g_autoptr(HrAcceptor) acceptor = NULL;
	(void)data;

	spawn_clients(f, 5, NOBODY);
	acceptor = hr_acceptor_new(f->listener, "test socket", taken_cb, f);
	hr_acceptor_set_max_per_uid(acceptor, 3);
	g_test_expect_message("HrAcceptor", G_LOG_LEVEL_WARNING, "*uid 65534 has 3 connections*");
	tell_child(f);
	run_loop_ms(500);
	g_test_assert_expected_messages();
	g_assert_cmpuint(f->taken->len, ==, 3);
	g_assert_cmpuint(hr_acceptor_get_open(acceptor, NOBODY), ==, 3);
	g_assert_cmpuint(hr_acceptor_get_closed(acceptor, HR_ACCEPTOR_CLOSED_PER_UID), ==, 2);
	/* one closes: the uid may connect again */
	g_ptr_array_remove_index(f->taken, 0);
	g_assert_cmpuint(hr_acceptor_get_open(acceptor, NOBODY), ==, 2);
}

static gboolean
refuse_nobody(uid_t uid, gid_t gid, pid_t pid, gpointer user_data)
{
	(void)gid;
	(void)pid;
	(void)user_data;
	return uid != NOBODY;
}

static void
test_filter(Fixture *f, gconstpointer data)
{
	g_autoptr(HrAcceptor) acceptor = NULL;
	(void)data;

	spawn_clients(f, 4, NOBODY);
	acceptor = hr_acceptor_new(f->listener, "test socket", taken_cb, f);
	hr_acceptor_set_filter(acceptor, refuse_nobody, NULL);
	tell_child(f);
	run_loop_ms(500);
	g_assert_cmpuint(f->taken->len, ==, 0);
	g_assert_cmpuint(hr_acceptor_get_closed(acceptor, HR_ACCEPTOR_CLOSED_REFUSED), ==, 4);
	g_assert_cmpuint(hr_acceptor_get_open(acceptor, NOBODY), ==, 0);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	/* the peers connect as nobody and the limit is the real one: run as root */
	if (getuid() != 0)
		g_error("test-acceptor must run as root (scripts/test.sh does)");
	g_test_add("/acceptor/out-of-fds", Fixture, NULL, fixture_setup, test_out_of_fds,
		   fixture_teardown);
	g_test_add("/acceptor/per-uid", Fixture, NULL, fixture_setup, test_per_uid,
		   fixture_teardown);
	g_test_add("/acceptor/filter", Fixture, NULL, fixture_setup, test_filter,
		   fixture_teardown);
	return g_test_run();
}
