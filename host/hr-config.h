/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define HR_CONFIG_DEFAULT_PATH "/etc/hugeroom/hugeroomd.conf"
#define HR_CONFIG_DEFAULT_VM_SOCKET "/run/hugeroom/vm.sock"
#define HR_CONFIG_DEFAULT_API_SOCKET "/run/hugeroom/api.sock"
#define HR_CONFIG_DEFAULT_STATUS_INTERVAL_MS 1000

typedef struct {
	gchar *vm_socket;
	gchar *api_socket;
	guint32 status_interval_ms; /* 0, or 100-86400000 (SPEC 1.4.2) */
	guint command_timeout_ms;   /* a command unanswered by then is lost */
	guint request_timeout_s;    /* default deadline of an evacuate, capture, return */
	guint request_history;	    /* finished requests kept per guest */
} HrConfig;

HrConfig *
hr_config_new(void);
void
hr_config_free(HrConfig *config);
/* a missing file is not an error when @must_exist is FALSE */
gboolean
hr_config_load(HrConfig *config, const gchar *path, gboolean must_exist, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrConfig, hr_config_free)

G_END_DECLS
