/* SPDX-License-Identifier: GPL-2.0-only */
/* hr-safefile: what a tokens file, a TLS key or the state may look like */

#define G_LOG_DOMAIN "TestSafefile"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hr-safefile.h"

typedef struct {
	gchar *dir;
	gchar *file;
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer data)
{
	g_autoptr(GError) error = NULL;
	(void)data;
	f->dir = g_dir_make_tmp("hr-safefile-XXXXXX", &error);
	g_assert_no_error(error);
	f->file = g_build_filename(f->dir, "tokens", NULL);
	g_assert_true(g_file_set_contents(f->file, "admin 0123456789abcdef\n", -1, &error));
	g_assert_cmpint(g_chmod(f->file, 0600), ==, 0);
}

static void
fixture_tear_down(Fixture *f, gconstpointer data)
{
	g_autoptr(GDir) d = g_dir_open(f->dir, 0, NULL);
	const gchar *name;
	(void)data;
	while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
		g_autofree gchar *path = g_build_filename(f->dir, name, NULL);
		g_assert_cmpint(g_remove(path), ==, 0);
	}
	g_assert_cmpint(g_rmdir(f->dir), ==, 0);
	g_free(f->file);
	g_free(f->dir);
}

static void
assert_refused(const gchar *path, mode_t forbidden, const gchar *needle)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *text = NULL;

	g_assert_false(hr_safefile_get_contents(path, getuid(), forbidden, 4096, &text, NULL,
						&error));
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL || strstr(error->message, path) == NULL)
		g_error("'%s' does not name '%s' and %s", error->message, needle, path);
	g_assert_null(text);
}

static void
test_private(Fixture *f, gconstpointer data)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *text = NULL;
	gsize len = 0;
	(void)data;

	g_assert_true(hr_safefile_get_contents(f->file, getuid(), HR_SAFEFILE_SECRET, 4096, &text,
					       &len, &error));
	g_assert_no_error(error);
	g_assert_cmpstr(text, ==, "admin 0123456789abcdef\n");
	g_assert_cmpuint(len, ==, strlen(text));
}

/* as StrictModes: neither group nor others may read or write a secret */
static void
test_modes(Fixture *f, gconstpointer data)
{
	(void)data;
	g_assert_cmpint(g_chmod(f->file, 0622), ==, 0);
	assert_refused(f->file, HR_SAFEFILE_SECRET, "writable by everyone, writable by its group "
						    "(mode 0622): chmod go-rwx");
	g_assert_cmpint(g_chmod(f->file, 0644), ==, 0);
	assert_refused(f->file, HR_SAFEFILE_SECRET, "readable by everyone");
	assert_refused(f->file, HR_SAFEFILE_SECRET, "readable by its group");
	g_assert_cmpint(g_chmod(f->file, 0640), ==, 0);
	assert_refused(f->file, HR_SAFEFILE_SECRET, "(mode 0640)");
	/* state others may read, but not write */
	g_assert_true(hr_safefile_check(f->file, getuid(), HR_SAFEFILE_SHARED, NULL));
	g_assert_cmpint(g_chmod(f->file, 0660), ==, 0);
	assert_refused(f->file, HR_SAFEFILE_SHARED, "writable by its group (mode 0660): chmod go-w");
}

/* a file someone else owns is theirs to change, whatever its mode */
static void
test_owner(Fixture *f, gconstpointer data)
{
	(void)data;
	if (getuid() != 0) {
		g_test_skip("giving a file to another uid needs root");
		return;
	}
	g_assert_cmpint(chown(f->file, 65534, 65534), ==, 0);
	assert_refused(f->file, HR_SAFEFILE_SECRET, "is owned by uid 65534, not by root");
	/* the daemon's own user may own it */
	g_assert_true(hr_safefile_check(f->file, 65534, HR_SAFEFILE_SECRET, NULL));
	g_assert_cmpint(chown(f->file, 0, 0), ==, 0);
	g_assert_true(hr_safefile_check(f->file, 65534, HR_SAFEFILE_SECRET, NULL));
}

static void
test_symlink(Fixture *f, gconstpointer data)
{
	g_autofree gchar *link = g_build_filename(f->dir, "link", NULL);
	(void)data;
	g_assert_cmpint(symlink(f->file, link), ==, 0);
	assert_refused(link, HR_SAFEFILE_SECRET, "is a symbolic link");
}

/* a FIFO would block a plain open until someone writes: refused at once */
static void
test_fifo(Fixture *f, gconstpointer data)
{
	g_autofree gchar *fifo = g_build_filename(f->dir, "fifo", NULL);
	gint64 start = g_get_monotonic_time();
	(void)data;
	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
	alarm(10); /* a hang fails the test instead of stalling the suite */
	assert_refused(fifo, HR_SAFEFILE_SECRET, "is not a regular file (a FIFO)");
	alarm(0);
	g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC);
	assert_refused(f->dir, HR_SAFEFILE_SECRET, "is not a regular file (a directory)");
}

static void
test_missing_and_size(Fixture *f, gconstpointer data)
{
	g_autofree gchar *missing = g_build_filename(f->dir, "none", NULL);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *text = NULL;
	(void)data;

	g_assert_false(hr_safefile_get_contents(missing, getuid(), HR_SAFEFILE_SECRET, 4096, &text,
						NULL, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
	g_clear_error(&error);
	g_assert_false(hr_safefile_get_contents(f->file, getuid(), HR_SAFEFILE_SECRET, 10, &text,
						NULL, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
	g_assert_nonnull(strstr(error->message, "more than 10 bytes"));
}

static void
test_dir(Fixture *f, gconstpointer data)
{
	g_autofree gchar *link = g_build_filename(f->dir, "dirlink", NULL);
	g_autoptr(GError) error = NULL;
	(void)data;

	g_assert_cmpint(g_chmod(f->dir, 0750), ==, 0);
	g_assert_true(hr_safefile_check_dir(f->dir, getuid(), HR_SAFEFILE_SHARED, &error));
	g_assert_no_error(error);
	g_assert_cmpint(g_chmod(f->dir, 0777), ==, 0);
	g_assert_false(hr_safefile_check_dir(f->dir, getuid(), HR_SAFEFILE_SHARED, &error));
	g_assert_nonnull(strstr(error->message, "writable by everyone, writable by its group (mode 0777): chmod go-w"));
	g_clear_error(&error);
	g_assert_cmpint(g_chmod(f->dir, 0700), ==, 0);
	g_assert_false(hr_safefile_check_dir(f->file, getuid(), HR_SAFEFILE_SHARED, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY);
	g_clear_error(&error);
	g_assert_cmpint(symlink(f->dir, link), ==, 0);
	g_assert_false(hr_safefile_check_dir(link, getuid(), HR_SAFEFILE_SHARED, &error));
	g_assert_nonnull(strstr(error->message, "is a symbolic link: name the directory"));
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
	ADD("/safefile/private", test_private);
	ADD("/safefile/modes", test_modes);
	ADD("/safefile/owner", test_owner);
	ADD("/safefile/symlink", test_symlink);
	ADD("/safefile/fifo", test_fifo);
	ADD("/safefile/missing-and-size", test_missing_and_size);
	ADD("/safefile/dir", test_dir);
#undef ADD
	return g_test_run();
}
