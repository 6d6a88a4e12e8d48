/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrConfig"

#include "hr-config.h"

#include <pwd.h>
#include <string.h>

#define GROUP "hugeroomd"

static void
hr_guest_policy_free(HrGuestPolicy *policy)
{
	g_free(policy->pattern);
	g_free(policy);
}

const gchar *
hr_backing_mode_to_string(HrBackingMode mode)
{
	switch (mode) {
	case HR_BACKING_SCAN:
		return "scan";
	case HR_BACKING_THP:
		return "thp";
	case HR_BACKING_SMALL:
		return "small";
	}
	return "unknown";
}

void
hr_config_guest_policy(const HrConfig *config, const gchar *name, HrGuestPolicy *policy)
{
	policy->pattern = NULL;
	policy->donor = TRUE;
	policy->floor_mb = config->guest_floor_mb;
	policy->budget_blocks = 0;
	for (guint i = 0; i < config->guest_policies->len; i++) {
		HrGuestPolicy *p = g_ptr_array_index(config->guest_policies, i);
		if (g_pattern_match_simple(p->pattern, name)) {
			*policy = *p;
			return;
		}
	}
}

static void
hr_config_limits_init(HrConfig *config);

HrConfig *
hr_config_new(void)
{
	HrConfig *config = g_new0(HrConfig, 1);
	config->vm_socket = g_strdup(HR_CONFIG_DEFAULT_VM_SOCKET);
	config->api_socket = g_strdup(HR_CONFIG_DEFAULT_API_SOCKET);
	config->status_interval_ms = HR_CONFIG_DEFAULT_STATUS_INTERVAL_MS;
	config->command_timeout_ms = 30000;
	config->request_timeout_s = 300;
	config->request_history = 32;
	config->state_dir = g_strdup(HR_CONFIG_DEFAULT_STATE_DIR);
	config->host_root = g_strdup("/");
	config->reservation_tick_ms = 250;
	config->reservation_ttl_s = 600;
	config->return_high_mark_mb = 4096;
	config->guest_floor_mb = 256;
	config->hold_in_pool = TRUE;
	config->pool_margin_mb = 256;
	config->backing = HR_BACKING_SCAN;
	config->guest_policies = g_ptr_array_new_with_free_func((GDestroyNotify)hr_guest_policy_free);
	hr_config_limits_init(config);
	return config;
}

void
hr_config_free(HrConfig *config)
{
	if (config == NULL)
		return;
	g_free(config->vm_socket);
	g_free(config->api_socket);
	g_free(config->state_dir);
	g_free(config->host_root);
	g_ptr_array_unref(config->guest_policies);
	g_strfreev(config->qemu_executables);
	g_free(config);
}

/*
 * The stripped string of @key in @group; TRUE with *@str NULL when the key
 * or the group is not there, FALSE on a malformed value.
 */
static gboolean
hr_config_get_string(GKeyFile *kf, const gchar *group, const gchar *key, gchar **str,
		     GError **error)
{
	g_autoptr(GError) error_local = NULL;

	*str = g_key_file_get_string(kf, group, key, &error_local);
	if (*str == NULL) {
		if (g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND) ||
		    g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND))
			return TRUE;
		g_propagate_error(error, g_steal_pointer(&error_local));
		return FALSE;
	}
	g_strstrip(*str);
	return TRUE;
}

static gboolean
hr_config_get_path(GKeyFile *kf, const gchar *key, gchar **value, GError **error)
{
	g_autofree gchar *str = NULL;

	if (!hr_config_get_string(kf, GROUP, key, &str, error))
		return FALSE;
	if (str == NULL)
		return TRUE;
	if (!g_path_is_absolute(str)) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "%s=%s is not an absolute path", key, str);
		return FALSE;
	}
	g_free(*value);
	*value = g_steal_pointer(&str);
	return TRUE;
}

static gboolean
hr_config_get_uint_in(GKeyFile *kf, const gchar *group, const gchar *key, guint64 min,
		      guint64 max, gboolean zero_ok, guint64 *value, GError **error)
{
	g_autofree gchar *str = NULL;
	guint64 v = 0;

	if (!hr_config_get_string(kf, group, key, &str, error))
		return FALSE;
	if (str == NULL)
		return TRUE;
	if (!g_ascii_string_to_unsigned(str, 10, 0, G_MAXUINT32, &v, NULL) ||
	    (!(zero_ok && v == 0) && (v < min || v > max))) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "%s=%s is not %s%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, key, str,
			    zero_ok ? "0 or " : "", min, max);
		return FALSE;
	}
	*value = v;
	return TRUE;
}

static gboolean
hr_config_get_uint(GKeyFile *kf, const gchar *key, guint64 min, guint64 max, gboolean zero_ok,
		   guint64 *value, GError **error)
{
	return hr_config_get_uint_in(kf, GROUP, key, min, max, zero_ok, value, error);
}

static gboolean
hr_config_get_backing(GKeyFile *kf, HrBackingMode *mode, GError **error)
{
	g_autofree gchar *str = g_key_file_get_string(kf, GROUP, "host_backing", NULL);
	if (str == NULL)
		return TRUE;
	g_strstrip(str);
	for (guint m = HR_BACKING_SCAN; m <= HR_BACKING_SMALL; m++) {
		if (g_strcmp0(str, hr_backing_mode_to_string(m)) == 0) {
			*mode = m;
			return TRUE;
		}
	}
	g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
		    "host_backing=%s is not scan, thp or small", str);
	return FALSE;
}

/* [guest:PATTERN] donor=true|false floor_mb=N budget_blocks=N */
static gboolean
hr_config_get_policies(GKeyFile *kf, HrConfig *config, GError **error)
{
	g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
	for (guint i = 0; groups[i] != NULL; i++) {
		g_autoptr(GError) error_local = NULL;
		HrGuestPolicy *p;
		guint64 v;

		if (!g_str_has_prefix(groups[i], "guest:"))
			continue;
		p = g_new0(HrGuestPolicy, 1);
		p->pattern = g_strdup(groups[i] + strlen("guest:"));
		p->donor = TRUE;
		p->floor_mb = config->guest_floor_mb;
		g_ptr_array_add(config->guest_policies, p);
		if (*p->pattern == '\0') {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "[%s] names no guest: use [guest:NAME] or [guest:PATTERN*]",
				    groups[i]);
			return FALSE;
		}
		if (g_key_file_has_key(kf, groups[i], "donor", NULL)) {
			p->donor = g_key_file_get_boolean(kf, groups[i], "donor", &error_local);
			if (error_local != NULL) {
				g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
					    "[%s] donor is not true or false", groups[i]);
				return FALSE;
			}
		}
		v = p->floor_mb;
		if (!hr_config_get_uint_in(kf, groups[i], "floor_mb", 0, G_MAXUINT32, TRUE, &v,
					   error))
			return FALSE;
		p->floor_mb = v;
		v = 0;
		if (!hr_config_get_uint_in(kf, groups[i], "budget_blocks", 0, G_MAXUINT32, TRUE, &v,
					   error))
			return FALSE;
		p->budget_blocks = v;
	}
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Peers, bounds and restart */

static void
hr_config_limits_init(HrConfig *config)
{
	config->qemu_uid = 0;
	config->qemu_executables = g_strsplit("*/qemu-system-*;*/qemu-kvm", ";", -1);
	config->hello_timeout_ms = 5000;
	config->max_connections = 2048;
	config->max_frames_per_s = 5000;
	config->guest_prune_s = 3600;
	config->max_guest_ram_mb = G_GUINT64_CONSTANT(16) << 20; /* 16 TiB */
	config->max_queued_requests = 64;
	config->max_reservations = 1024;
	config->return_orphans = TRUE;
}

/* qemu_user=NAME or a numeric uid */
static gboolean
hr_config_get_user(GKeyFile *kf, guint *uid, GError **error)
{
	g_autofree gchar *str = NULL;
	struct passwd *pw;
	guint64 v;

	if (!hr_config_get_string(kf, GROUP, "qemu_user", &str, error))
		return FALSE;
	if (str == NULL)
		return TRUE;
	if (g_ascii_string_to_unsigned(str, 10, 0, G_MAXUINT32 - 1, &v, NULL)) {
		*uid = v;
		return TRUE;
	}
	pw = getpwnam(str);
	if (pw == NULL) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "qemu_user=%s is no user on this host (libvirt's QEMU runs as "
			    "libvirt-qemu on Debian)",
			    str);
		return FALSE;
	}
	*uid = pw->pw_uid;
	return TRUE;
}

static gboolean
hr_config_get_bool(GKeyFile *kf, const gchar *key, gboolean *value, GError **error)
{
	g_autoptr(GError) local = NULL;

	if (!g_key_file_has_key(kf, GROUP, key, NULL))
		return TRUE;
	*value = g_key_file_get_boolean(kf, GROUP, key, &local);
	if (local != NULL) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "%s: %s (true or false)", key, local->message);
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_config_load_limits(GKeyFile *kf, HrConfig *config, GError **error)
{
	const struct {
		const gchar *key;
		guint *value;
		guint64 min, max;
		gboolean zero_ok;
	} uints[] = {
	    {"hello_timeout_ms", &config->hello_timeout_ms, 100, 600000, FALSE},
	    {"max_connections", &config->max_connections, 1, 1000000, FALSE},
	    {"max_frames_per_s", &config->max_frames_per_s, 10, 1000000, FALSE},
	    {"guest_prune_s", &config->guest_prune_s, 1, 86400 * 365, TRUE},
	    {"max_queued_requests", &config->max_queued_requests, 1, 100000, FALSE},
	    {"max_reservations", &config->max_reservations, 1, 1000000, FALSE},
	};
	g_autofree gchar *exes = NULL;
	guint64 v;

	if (!hr_config_get_user(kf, &config->qemu_uid, error))
		return FALSE;
	if (!hr_config_get_string(kf, GROUP, "qemu_executables", &exes, error))
		return FALSE;
	if (exes != NULL) {
		if (*exes == '\0') {
			g_set_error_literal(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
					    "qemu_executables is empty: no QEMU could connect "
					    "(use * to allow any executable)");
			return FALSE;
		}
		g_strfreev(config->qemu_executables);
		config->qemu_executables = g_strsplit(exes, ";", -1);
	}
	for (guint i = 0; i < G_N_ELEMENTS(uints); i++) {
		v = *uints[i].value;
		if (!hr_config_get_uint(kf, uints[i].key, uints[i].min, uints[i].max,
					uints[i].zero_ok, &v, error))
			return FALSE;
		*uints[i].value = v;
	}
	v = config->max_guest_ram_mb;
	if (!hr_config_get_uint(kf, "max_guest_ram_mb", 1, G_MAXUINT32, FALSE, &v, error))
		return FALSE;
	config->max_guest_ram_mb = v;
	return hr_config_get_bool(kf, "return_orphans", &config->return_orphans, error);
}

gboolean
hr_config_load(HrConfig *config, const gchar *path, gboolean must_exist, GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) error_local = NULL;
	guint64 v;

	if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &error_local)) {
		if (!must_exist && g_error_matches(error_local, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
			g_debug("no %s, using defaults", path);
			return TRUE;
		}
		g_propagate_error(error, g_steal_pointer(&error_local));
		g_prefix_error(error, "cannot read config %s: ", path);
		return FALSE;
	}
	if (!hr_config_get_path(kf, "vm_socket", &config->vm_socket, error) ||
	    !hr_config_get_path(kf, "api_socket", &config->api_socket, error))
		goto fail;
	v = config->status_interval_ms;
	if (!hr_config_get_uint(kf, "status_interval_ms", 100, 86400000, TRUE, &v, error))
		goto fail;
	config->status_interval_ms = v;
	v = config->command_timeout_ms;
	if (!hr_config_get_uint(kf, "command_timeout_ms", 100, 3600000, FALSE, &v, error))
		goto fail;
	config->command_timeout_ms = v;
	v = config->request_timeout_s;
	if (!hr_config_get_uint(kf, "request_timeout_s", 1, 86400, FALSE, &v, error))
		goto fail;
	config->request_timeout_s = v;
	v = config->request_history;
	if (!hr_config_get_uint(kf, "request_history", 1, 10000, FALSE, &v, error))
		goto fail;
	config->request_history = v;
	if (!hr_config_get_path(kf, "state_dir", &config->state_dir, error) ||
	    !hr_config_get_path(kf, "host_root", &config->host_root, error))
		goto fail;
	v = config->reservation_tick_ms;
	if (!hr_config_get_uint(kf, "reservation_tick_ms", 10, 60000, FALSE, &v, error))
		goto fail;
	config->reservation_tick_ms = v;
	v = config->reservation_ttl_s;
	if (!hr_config_get_uint(kf, "reservation_ttl_s", 1, 86400 * 30, FALSE, &v, error))
		goto fail;
	config->reservation_ttl_s = v;
	v = config->return_high_mark_mb;
	if (!hr_config_get_uint(kf, "return_high_mark_mb", 0, G_MAXUINT32, TRUE, &v, error))
		goto fail;
	config->return_high_mark_mb = v;
	v = config->guest_floor_mb;
	if (!hr_config_get_uint(kf, "guest_floor_mb", 0, G_MAXUINT32, TRUE, &v, error))
		goto fail;
	config->guest_floor_mb = v;
	v = config->pool_margin_mb;
	if (!hr_config_get_uint(kf, "pool_margin_mb", 0, G_MAXUINT32, TRUE, &v, error))
		goto fail;
	config->pool_margin_mb = v;
	if (g_key_file_has_key(kf, GROUP, "hold_in_pool", NULL)) {
		g_autoptr(GError) local = NULL;
		config->hold_in_pool = g_key_file_get_boolean(kf, GROUP, "hold_in_pool", &local);
		if (local != NULL) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "hold_in_pool: %s (true or false)", local->message);
			goto fail;
		}
	}
	if (!hr_config_get_backing(kf, &config->backing, error) ||
	    !hr_config_get_policies(kf, config, error) || !hr_config_load_limits(kf, config, error))
		goto fail;
	return TRUE;
fail:
	g_prefix_error(error, "config %s: ", path);
	return FALSE;
}
