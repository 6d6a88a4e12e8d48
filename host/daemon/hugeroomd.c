/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "Hugeroomd"

#include <glib-unix.h>
#include <locale.h>
#include <stdio.h>
#include <unistd.h>

#include "hr-config.h"
#include "hr-daemon.h"
#include "hr-notify.h"
#include "hr-peer.h"
#include "hr-text.h"

static gboolean opt_foreground;
static gboolean opt_verbose;
static gchar *opt_config;
static gchar *opt_vm_socket;
static gchar *opt_api_socket;

/*
 * The journal when we run under systemd, else stderr. A message is one
 * line of text whatever it quotes: guest names, requesters and paths come
 * from whoever runs a VM or calls the API, and a newline or an ESC in one
 * would forge a log line or drive the terminal of whoever reads it.
 */
static GLogWriterOutput
hr_log_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
	g_autofree GLogField *safe = NULL;
	g_autofree gchar *escaped = NULL;

	(void)user_data;
	if (g_log_writer_default_would_drop(level, NULL) && !opt_verbose)
		return G_LOG_WRITER_HANDLED;
	for (gsize i = 0; i < n_fields; i++) {
		if (g_strcmp0(fields[i].key, "MESSAGE") != 0 || fields[i].length != -1 ||
		    hr_text_is_safe(fields[i].value))
			continue;
		safe = g_memdup2(fields, n_fields * sizeof(*fields));
		escaped = hr_text_escape(fields[i].value);
		safe[i].value = escaped;
		fields = safe;
		break;
	}
	if (!opt_foreground &&
	    g_log_writer_journald(level, fields, n_fields, NULL) == G_LOG_WRITER_HANDLED)
		return G_LOG_WRITER_HANDLED;
	return g_log_writer_standard_streams(level, fields, n_fields, NULL);
}

/* the file, then what the command line says over it */
static gboolean
hr_load_config(HrConfig *config, GError **error)
{
	/* an explicit --config must exist; the default may be absent */
	if (!hr_config_load(config, opt_config != NULL ? opt_config : HR_CONFIG_DEFAULT_PATH,
			    opt_config != NULL, error))
		return FALSE;
	if (opt_vm_socket != NULL) {
		g_free(config->vm_socket);
		config->vm_socket = g_strdup(opt_vm_socket);
	}
	if (opt_api_socket != NULL) {
		g_free(config->api_socket);
		config->api_socket = g_strdup(opt_api_socket);
	}
	return TRUE;
}

/* what a SIGHUP changes */
typedef struct {
	HrConfig *config;
	HrDaemon *daemon;
} HrReload;

/* SIGHUP: what can change live does; the log names what takes a restart */
static gboolean
hr_reload_cb(gpointer user_data)
{
	HrReload *reload = user_data;
	HrConfig *config = reload->config;
	g_autoptr(HrConfig) fresh = hr_config_new();
	g_autoptr(GPtrArray) applied = g_ptr_array_new();
	g_autoptr(GPtrArray) restart = g_ptr_array_new();
	g_autoptr(GError) error = NULL;

	g_autofree gchar *reloading = g_strdup_printf(
	    "RELOADING=1\nMONOTONIC_USEC=%" G_GINT64_FORMAT, g_get_monotonic_time());

	/* the unit is "reloading" until READY=1 */
	if (!hr_notify(reloading, &error)) {
		g_warning("%s", error->message);
		g_clear_error(&error);
	}
	if (!hr_load_config(fresh, &error)) {
		g_warning("reload: %s; keeping the configuration in use", error->message);
		hr_notify("READY=1\nSTATUS=reload failed: configuration kept", NULL);
		return G_SOURCE_CONTINUE;
	}
	hr_config_reload(config, fresh, applied, restart);
	/* the file's tokens may have changed under the same name */
	if (!hr_api_reload_tokens(hr_daemon_get_api(reload->daemon), config, &error)) {
		g_warning("reload: %s", error->message);
		g_clear_error(&error);
	}
	g_ptr_array_add(applied, NULL);
	g_ptr_array_add(restart, NULL);
	if (applied->len > 1) {
		g_autofree gchar *keys = g_strjoinv(", ", (gchar **)applied->pdata);
		g_message("reload: applied %s", keys);
	} else {
		g_message("reload: nothing that can change live changed");
	}
	if (restart->len > 1) {
		g_autofree gchar *keys = g_strjoinv(", ", (gchar **)restart->pdata);
		g_warning("reload: changed, but applied only when hugeroomd restarts "
			  "(systemctl restart hugeroomd): %s",
			  keys);
	}
	hr_notify("READY=1\nSTATUS=listening for devices", NULL);
	return G_SOURCE_CONTINUE;
}

static gboolean
hr_quit_cb(gpointer user_data)
{
	GMainLoop *loop = user_data;
	g_info("signal received, shutting down");
	g_main_loop_quit(loop);
	return G_SOURCE_REMOVE;
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GOptionContext) context = g_option_context_new(NULL);
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(HrDaemon) daemon = NULL;
	g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
	HrReload reload;
	const GOptionEntry entries[] = {
	    {"config", 'c', 0, G_OPTION_ARG_FILENAME, &opt_config,
	     "Configuration file (default " HR_CONFIG_DEFAULT_PATH ")", "PATH"},
	    {"vm-socket", 0, 0, G_OPTION_ARG_FILENAME, &opt_vm_socket,
	     "Socket QEMU devices connect to (default " HR_CONFIG_DEFAULT_VM_SOCKET ")", "PATH"},
	    {"api-socket", 0, 0, G_OPTION_ARG_FILENAME, &opt_api_socket,
	     "HTTP API socket (default " HR_CONFIG_DEFAULT_API_SOCKET ")", "PATH"},
	    {"foreground", 'f', 0, G_OPTION_ARG_NONE, &opt_foreground,
	     "Log to stderr instead of the journal", NULL},
	    {"verbose", 'v', 0, G_OPTION_ARG_NONE, &opt_verbose, "Log debug messages too", NULL},
	    {NULL},
	};

	setlocale(LC_ALL, "");
	/*
	 * No TLS 1.0 or 1.1 on the API, refused in the handshake by GnuTLS
	 * (glib-networking reads this when it starts; an admin's own setting
	 * wins). The API checks the version after the handshake as well.
	 */
	g_setenv("G_TLS_GNUTLS_PRIORITY", "NORMAL:-VERS-TLS1.1:-VERS-TLS1.0", FALSE);
	g_option_context_set_summary(context, "Makes room for huge pages by asking KVM guests "
					      "for whole 2 MiB blocks.");
	g_option_context_add_main_entries(context, entries, NULL);
	if (!g_option_context_parse(context, &argc, &argv, &error)) {
		g_printerr("hugeroomd: %s (see --help)\n", error->message);
		return 2;
	}
	if (argc > 1) {
		g_printerr("hugeroomd: unexpected argument '%s' (see --help)\n", argv[1]);
		return 2;
	}
	g_log_set_writer_func(hr_log_writer, NULL, NULL);
	if (opt_verbose)
		g_log_set_debug_enabled(TRUE);

	if (!hr_load_config(config, &error)) {
		g_printerr("hugeroomd: %s\n", error->message);
		return 1;
	}

	/* a socket and a pidfd per guest, and the API's clients */
	if (hr_peer_raise_nofile((guint64)config->max_connections * 2 + 256, &error) == 0 ||
	    error != NULL) {
		g_warning("%s", error->message);
		g_clear_error(&error);
	}
	daemon = hr_daemon_new(config);
	if (!hr_daemon_start(daemon, &error)) {
		g_printerr("hugeroomd: %s\n", error->message);
		return 1;
	}
	g_unix_signal_add(SIGTERM, hr_quit_cb, loop);
	g_unix_signal_add(SIGINT, hr_quit_cb, loop);
	reload.config = config;
	reload.daemon = daemon;
	g_unix_signal_add(SIGHUP, hr_reload_cb, &reload);
	if (!hr_notify("READY=1\nSTATUS=listening for devices", &error)) {
		g_warning("%s", error->message);
		g_clear_error(&error);
	}
	hr_notify_watchdog_start();
	g_main_loop_run(loop);
	if (!hr_notify("STOPPING=1", &error))
		g_warning("%s", error->message);
	hr_daemon_stop(daemon);
	return 0;
}
