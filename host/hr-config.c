/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrConfig"

#include "hr-config.h"

#define GROUP "hugeroomd"

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
	return config;
}

void
hr_config_free(HrConfig *config)
{
	if (config == NULL)
		return;
	g_free(config->vm_socket);
	g_free(config->api_socket);
	g_free(config);
}

static gboolean
hr_config_get_path(GKeyFile *kf, const gchar *key, gchar **value, GError **error)
{
	g_autoptr(GError) error_local = NULL;
	g_autofree gchar *str = g_key_file_get_string(kf, GROUP, key, &error_local);
	if (str == NULL) {
		if (g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND) ||
		    g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND))
			return TRUE;
		g_propagate_error(error, g_steal_pointer(&error_local));
		return FALSE;
	}
	g_strstrip(str);
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
hr_config_get_uint(GKeyFile *kf, const gchar *key, guint64 min, guint64 max, gboolean zero_ok,
		   guint64 *value, GError **error)
{
	g_autoptr(GError) error_local = NULL;
	g_autofree gchar *str = g_key_file_get_string(kf, GROUP, key, &error_local);
	guint64 v = 0;
	if (str == NULL) {
		if (g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND) ||
		    g_error_matches(error_local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND))
			return TRUE;
		g_propagate_error(error, g_steal_pointer(&error_local));
		return FALSE;
	}
	g_strstrip(str);
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
	return TRUE;
fail:
	g_prefix_error(error, "config %s: ", path);
	return FALSE;
}
