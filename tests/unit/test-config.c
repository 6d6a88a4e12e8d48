/* SPDX-License-Identifier: GPL-2.0-only */
/* hugeroomd.conf: the shipped file, unknown keys, what a reload applies */

#define G_LOG_DOMAIN "TestConfig"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hr-api-auth.h"
#include "hr-config.h"

static gchar *
write_config(const gchar *text)
{
	g_autoptr(GError) error = NULL;
	gchar *path = NULL;
	gint fd = g_file_open_tmp("hr-config-XXXXXX.conf", &path, &error);
	g_assert_no_error(error);
	close(fd);
	g_assert_true(g_file_set_contents(path, text, -1, &error));
	return path;
}

/* loading @text fails with a message that contains @needle and the file's path */
static void
assert_load_fails(const gchar *text, const gchar *needle)
{
	g_autofree gchar *path = write_config(text);
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(GError) error = NULL;

	g_assert_false(hr_config_load(config, path, TRUE, &error));
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL || strstr(error->message, path) == NULL)
		g_error("'%s' does not name '%s' and %s", error->message, needle, path);
	g_unlink(path);
}

/* the shipped file sets every key, each to its default */
static void
test_shipped(void)
{
	g_autofree gchar *path = g_test_build_filename(G_TEST_DIST, "..", "..", "host",
						       "hugeroomd.conf", NULL);
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(HrConfig) defaults = hr_config_new();
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) error = NULL;
	g_auto(GStrv) names = hr_config_key_names();
	g_auto(GStrv) keys = NULL;
	g_autoptr(GPtrArray) applied = g_ptr_array_new();
	g_autoptr(GPtrArray) restart = g_ptr_array_new();

	g_assert_true(hr_config_load(config, path, TRUE, &error));
	g_assert_no_error(error);
	g_assert_true(g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &error));
	keys = g_key_file_get_keys(kf, "hugeroomd", NULL, &error);
	g_assert_no_error(error);
	g_assert_cmpstrv(keys, names);
	/* nothing differs from the built-in defaults */
	hr_config_reload(defaults, config, applied, restart);
	g_assert_cmpuint(applied->len, ==, 0);
	g_assert_cmpuint(restart->len, ==, 0);
}

static void
test_unknown(void)
{
	assert_load_fails("[hugeroomd]\nstatus_interval_ms=1000\nstatus_intervall_ms=5\n",
			  "unknown key 'status_intervall_ms' in [hugeroomd]");
	assert_load_fails("[hugeroomd]\n[hugeroom]\nvm_socket=/run/x.sock\n",
			  "unknown group [hugeroom]");
	assert_load_fails("[guest:web*]\ndonor=false\nfloor=12\n",
			  "unknown key 'floor' in [guest:web*]");
	assert_load_fails("[hugeroomd]\nrequest_timeout_s=0\n", "request_timeout_s=0 is not 1-86400");
	assert_load_fails("[hugeroomd]\nvm_socket=run/vm.sock\n", "not an absolute path");
	/* found by fuzz-config: GPatternSpec aborted on it at the first guest */
	assert_load_fails("[guest:batch-?\xeb\xeb]\nbudget_blocks=64\n",
			  "[guest:batch-?\xef\xbf\xbd\xef\xbf\xbd] is not valid UTF-8");
}

/*
 * qemu_executables lists QEMU binaries by path (issue 18: the default glob
 * let any executable called qemu-system-something in): a pattern, a
 * relative path or an empty list is refused, naming the key; a path is
 * taken as /proc/PID/exe names it, symbolic links resolved.
 */
static void
test_qemu_executables(void)
{
	g_autofree gchar *dir = g_dir_make_tmp("hr-config-exe-XXXXXX", NULL);
	g_autofree gchar *real = g_build_filename(dir, "qemu-system-x86_64", NULL);
	g_autofree gchar *link = g_build_filename(dir, "kvm", NULL);
	g_autofree gchar *text = NULL;
	g_autofree gchar *path = NULL;
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(GError) error = NULL;

	assert_load_fails("[hugeroomd]\nqemu_executables=*/qemu-system-*;*/qemu-kvm\n",
			  "qemu_executables: '*/qemu-system-*' is not an absolute path");
	assert_load_fails("[hugeroomd]\nqemu_executables=*\n", "qemu_executables: '*'");
	assert_load_fails("[hugeroomd]\nqemu_executables=/usr/bin/qemu-system-x86_6?\n",
			  "patterns are not accepted");
	assert_load_fails("[hugeroomd]\nqemu_executables=/usr/bin/[kq]vm\n", "qemu_executables");
	assert_load_fails("[hugeroomd]\nqemu_executables=bin/qemu\n",
			  "qemu_executables: 'bin/qemu' is not an absolute path");
	assert_load_fails("[hugeroomd]\nqemu_executables= ; \n", "qemu_executables is empty");

	g_assert_true(g_file_set_contents(real, "", 0, NULL));
	g_assert_cmpint(symlink(real, link), ==, 0);
	text = g_strdup_printf(
	    "[hugeroomd]\nqemu_executables=%s; /opt/qemu/bin/qemu-system-x86_64\n", link);
	path = write_config(text);
	g_assert_true(hr_config_load(config, path, TRUE, &error));
	g_assert_no_error(error);
	{
		const gchar *want[] = {real, "/opt/qemu/bin/qemu-system-x86_64", NULL};
		g_assert_cmpstrv(config->qemu_executables, want);
	}
	g_unlink(path);
	g_unlink(link);
	g_unlink(real);
	g_rmdir(dir);
}

static void
test_reload(void)
{
	g_autofree gchar *path = write_config("[hugeroomd]\n"
					      "vm_socket=/tmp/other-vm.sock\n"
					      "command_timeout_ms=5000\n"
					      "hold_in_pool=false\n"
					      "host_backing=thp\n"
					      "reservation_tick_ms=100\n"
					      "api_tokens=/etc/hugeroom/other-tokens\n"
					      "[guest:db-*]\ndonor=false\n");
	g_autoptr(HrConfig) live = hr_config_new();
	g_autoptr(HrConfig) fresh = hr_config_new();
	g_autoptr(GPtrArray) applied = g_ptr_array_new();
	g_autoptr(GPtrArray) restart = g_ptr_array_new();
	g_autoptr(GError) error = NULL;
	HrGuestPolicy policy;

	g_assert_true(hr_config_load(fresh, path, TRUE, &error));
	g_assert_no_error(error);
	hr_config_reload(live, fresh, applied, restart);
	g_ptr_array_add(applied, NULL);
	g_ptr_array_add(restart, NULL);
	{
		const gchar *want_applied[] = {"command_timeout_ms", "hold_in_pool", "host_backing",
					       "api_tokens", "[guest:*]", NULL};
		const gchar *want_restart[] = {"vm_socket", "reservation_tick_ms", NULL};
		g_assert_cmpstrv((gchar **)applied->pdata, want_applied);
		g_assert_cmpstrv((gchar **)restart->pdata, want_restart);
	}
	g_assert_cmpuint(live->command_timeout_ms, ==, 5000);
	g_assert_false(live->hold_in_pool);
	g_assert_cmpint(live->backing, ==, HR_BACKING_THP);
	g_assert_cmpstr(live->api_tokens, ==, "/etc/hugeroom/other-tokens");
	/* what takes a restart stays as it was */
	g_assert_cmpstr(live->vm_socket, ==, HR_CONFIG_DEFAULT_VM_SOCKET);
	g_assert_cmpuint(live->reservation_tick_ms, ==, 250);
	hr_config_guest_policy(live, "db-1", &policy);
	g_assert_false(policy.donor);
	hr_config_guest_policy(live, "web-1", &policy);
	g_assert_true(policy.donor);
	g_unlink(path);
}

/* the file's text next to the tests, from the source tree */
static gchar *
read_source(const gchar *rel)
{
	g_autofree gchar *path = g_test_build_filename(G_TEST_DIST, "..", "..", "host", rel, NULL);
	g_autoptr(GError) error = NULL;
	gchar *text = NULL;

	g_assert_true(g_file_get_contents(path, &text, NULL, &error));
	g_assert_no_error(error);
	return text;
}

static void
assert_live(const gchar *where, const gchar *key, gboolean documented_live)
{
	gboolean live = FALSE;

	g_test_message("%s: %s is %s", where, key, documented_live ? "live" : "restart");
	g_assert_true(hr_config_key_is_live(key, &live));
	g_assert_cmpint(live, ==, documented_live);
}

/*
 * What hugeroomd.conf marks [live] or [restart] above each key, and
 * hugeroomd.conf(5) says after it, is what a reload does with it.
 */
static void
test_live_documented(void)
{
	g_autofree gchar *conf = read_source("hugeroomd.conf");
	g_auto(GStrv) lines = g_strsplit(conf, "\n", -1);
	g_auto(GStrv) names = hr_config_key_names();
	guint n_conf = 0, n_man = 0;
	gint mark = -1;

	for (guint i = 0; lines[i] != NULL && !g_str_has_prefix(lines[i], "[guest:"); i++) {
		const gchar *eq = strchr(lines[i], '=');
		g_autofree gchar *key = NULL;

		if (g_str_has_prefix(lines[i], "# [live"))
			mark = TRUE;
		else if (g_str_has_prefix(lines[i], "# [restart"))
			mark = FALSE;
		if (lines[i][0] == '#' || lines[i][0] == '[' || eq == NULL)
			continue;
		key = g_strndup(lines[i], eq - lines[i]);
		g_assert_cmpint(mark, !=, -1);
		assert_live("hugeroomd.conf", key, mark);
		n_conf++;
	}
	g_assert_cmpuint(n_conf, ==, g_strv_length(names));

	g_free(conf);
	conf = read_source("doc/hugeroomd.conf.5");
	g_strfreev(lines);
	lines = g_strsplit(conf, "\n", -1);
	for (guint i = 0; names[i] != NULL; i++) {
		g_autofree gchar *head = g_strdup_printf(".BR %s \" (", names[i]);
		for (guint l = 0; lines[l] != NULL; l++) {
			if (!g_str_has_prefix(lines[l], head))
				continue;
			assert_live("hugeroomd.conf(5)", names[i],
				    g_str_has_prefix(lines[l] + strlen(head), "live"));
			g_assert_true(g_str_has_prefix(lines[l] + strlen(head), "live") ||
				      g_str_has_prefix(lines[l] + strlen(head), "restart"));
			n_man++;
		}
	}
	g_assert_cmpuint(n_man, ==, g_strv_length(names));
}

/* a file in @dir with @text and @mode */
static gchar *
write_file(const gchar *dir, const gchar *name, const gchar *text, mode_t mode)
{
	g_autoptr(GError) error = NULL;
	gchar *path = g_build_filename(dir, name, NULL);
	g_assert_true(g_file_set_contents(path, text, -1, &error));
	g_assert_cmpint(g_chmod(path, mode), ==, 0);
	return path;
}

/*
 * The TLS key and the tokens decide who may use the API: as OpenSSH's
 * StrictModes, nobody but root or the daemon's user may have written
 * them, nobody else may read the key or the tokens, and neither is a
 * symlink or something that blocks (a FIFO).
 */
static void
test_secret_files(void)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *dir = g_dir_make_tmp("hr-config-tls-XXXXXX", &error);
	g_autofree gchar *cert = write_file(dir, "server.pem", "cert", 0644);
	g_autofree gchar *key = write_file(dir, "server.key", "key", 0644);
	g_autofree gchar *tokens =
	    write_file(dir, "tokens", "admin 0123456789abcdef0123\n", 0622);
	g_autofree gchar *fifo = g_build_filename(dir, "fifo", NULL);
	g_autofree gchar *link = g_build_filename(dir, "link", NULL);
	g_autofree gchar *text = g_strdup_printf("[hugeroomd]\napi_listen=127.0.0.1:1\n"
						 "api_tls_cert=%s\napi_tls_key=%s\napi_tokens=%s\n",
						 cert, key, tokens);
	g_autofree gchar *key_needle = g_strdup_printf("api_tls_key: %s is readable by everyone",
						       key);
	g_autoptr(HrApiTokens) loaded = NULL;
	const gchar *paths[] = {cert, key, tokens, fifo, link};

	assert_load_fails(text, key_needle);
	g_assert_cmpint(g_chmod(key, 0600), ==, 0);
	g_assert_cmpint(g_chmod(cert, 0666), ==, 0);
	assert_load_fails(text, "api_tls_cert: ");
	g_assert_cmpint(g_chmod(cert, 0644), ==, 0);
	{
		g_autofree gchar *path = write_config(text);
		g_autoptr(HrConfig) config = hr_config_new();
		g_assert_true(hr_config_load(config, path, TRUE, &error));
		g_assert_no_error(error);
		g_unlink(path);
	}

	/* at 0622 anyone could append an admin token */
	loaded = hr_api_tokens_load(tokens, &error);
	g_assert_null(loaded);
	g_assert_nonnull(strstr(error->message, "writable by everyone"));
	g_clear_error(&error);
	g_assert_cmpint(g_chmod(tokens, 0640), ==, 0);
	loaded = hr_api_tokens_load(tokens, &error);
	g_assert_null(loaded);
	g_assert_nonnull(strstr(error->message, "readable by its group"));
	g_clear_error(&error);
	g_assert_cmpint(g_chmod(tokens, 0600), ==, 0);
	if (getuid() == 0) {
		g_assert_cmpint(chown(tokens, 65534, 65534), ==, 0);
		loaded = hr_api_tokens_load(tokens, &error);
		g_assert_null(loaded);
		g_assert_nonnull(strstr(error->message, "is owned by uid 65534"));
		g_clear_error(&error);
		g_assert_cmpint(chown(tokens, 0, 0), ==, 0);
	}
	g_assert_cmpint(symlink(tokens, link), ==, 0);
	loaded = hr_api_tokens_load(link, &error);
	g_assert_null(loaded);
	g_assert_nonnull(strstr(error->message, "is a symbolic link"));
	g_clear_error(&error);
	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
	alarm(10); /* a FIFO must not hang the start-up */
	loaded = hr_api_tokens_load(fifo, &error);
	alarm(0);
	g_assert_null(loaded);
	g_assert_nonnull(strstr(error->message, "is not a regular file"));
	g_clear_error(&error);
	loaded = hr_api_tokens_load(tokens, &error);
	g_assert_no_error(error);
	g_assert_cmpint(hr_api_tokens_lookup(loaded, "0123456789abcdef0123"), ==,
			HR_API_ROLE_ADMIN);

	for (guint i = 0; i < G_N_ELEMENTS(paths); i++)
		g_assert_cmpint(g_unlink(paths[i]), ==, 0);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/config/shipped", test_shipped);
	g_test_add_func("/config/unknown", test_unknown);
	g_test_add_func("/config/qemu-executables", test_qemu_executables);
	g_test_add_func("/config/reload", test_reload);
	g_test_add_func("/config/live-documented", test_live_documented);
	g_test_add_func("/config/secret-files", test_secret_files);
	return g_test_run();
}
