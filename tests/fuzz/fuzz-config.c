/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libFuzzer target: hugeroomd.conf as the daemon reads it. A file it
 * accepts must give values within the ranges the daemon relies on; any
 * other file must fail with an error, never crash or leak.
 */
#include <glib/gstdio.h>
#include <unistd.h>

#include "hr-config.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static gchar *path;

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(GError) error = NULL;

	if (path == NULL)
		path = g_strdup_printf("%s/hr-fuzz-config-%d.conf", g_get_tmp_dir(), getpid());
	g_assert(g_file_set_contents(path, (const gchar *)data, size, NULL));
	if (!hr_config_load(config, path, TRUE, &error)) {
		g_assert(error != NULL && error->message[0] != '\0');
		return 0;
	}
	g_assert(error == NULL);
	g_assert(config->status_interval_ms == 0 ||
		 (config->status_interval_ms >= 100 && config->status_interval_ms <= 86400000));
	g_assert(g_path_is_absolute(config->vm_socket) && g_path_is_absolute(config->api_socket));
	g_assert(g_path_is_absolute(config->state_dir) && g_path_is_absolute(config->host_root));
	g_assert(config->command_timeout_ms >= 100 && config->request_timeout_s >= 1);
	g_assert(config->reservation_tick_ms >= 10 && config->request_history >= 1);
	g_assert(config->qemu_executables != NULL && config->qemu_executables[0] != NULL);
	g_assert(config->hello_timeout_ms >= 100 && config->max_connections >= 1);
	g_assert(config->max_frames_per_s >= 10 && config->max_guest_ram_mb >= 1);
	g_assert(config->max_queued_requests >= 1 && config->max_reservations >= 1);
	for (guint i = 0; i < config->guest_policies->len; i++) {
		HrGuestPolicy *p = g_ptr_array_index(config->guest_policies, i);
		HrGuestPolicy got;
		g_assert(p->pattern != NULL && p->pattern[0] != '\0');
		hr_config_guest_policy(config, p->pattern, &got);
	}
	return 0;
}
