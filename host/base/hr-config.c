/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrConfig"

#include "hr-config.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include "hr-safefile.h"
#include <stddef.h>
#include <string.h>

#define GROUP "hugeroomd"
#define GUEST_GROUP_PREFIX "guest:"

/*
 * Every key of [hugeroomd], where it lives in HrConfig, and whether a
 * SIGHUP reload applies it (hr_config_reload) or it needs a restart. A new
 * key is one line here, its parsing in hr_config_load() and its entry in
 * hugeroomd.conf; any other key is an error that names it.
 */
typedef enum {
	HR_CONFIG_STR,	/* gchar * */
	HR_CONFIG_U32,	/* guint, guint32, gboolean or an enum */
	HR_CONFIG_U64,	/* guint64 */
	HR_CONFIG_STRV, /* gchar ** */
} HrConfigType;

typedef struct {
	const gchar *key;
	gsize offset;
	HrConfigType type;
	gboolean live; /* a reload applies it; else it takes a restart */
} HrConfigKey;

#define KEY(name, type, live)                                           \
	{                                                               \
#name, offsetof(HrConfig, name), HR_CONFIG_##type, live \
	}
static const HrConfigKey hr_config_keys[] = {
    KEY(vm_socket, STR, FALSE),
    KEY(vm_socket_group, STR, FALSE),
    KEY(api_socket, STR, FALSE),
    KEY(status_interval_ms, U32, TRUE), /* guests that connect after the reload */
    KEY(command_timeout_ms, U32, TRUE),
    KEY(request_timeout_s, U32, TRUE),
    KEY(request_history, U32, TRUE), /* guests seen for the first time after it */
    KEY(state_dir, STR, FALSE),
    KEY(host_root, STR, FALSE),
    KEY(reservation_tick_ms, U32, FALSE),
    KEY(reservation_ttl_s, U32, TRUE),
    KEY(migration_grace_s, U32, TRUE),
    KEY(return_high_mark_mb, U64, TRUE),
    KEY(guest_floor_mb, U64, TRUE),
    KEY(hold_in_pool, U32, TRUE), /* reservations planned after it */
    KEY(pool_margin_mb, U64, TRUE),
    KEY(reserve, STR, TRUE),
    KEY(reserve_rate_mb, U64, TRUE),
    KEY(reserve_pause_psi, U32, TRUE),
    KEY(donor_pcp_density, U32, TRUE),
    {"host_backing", offsetof(HrConfig, backing), HR_CONFIG_U32, TRUE},
    KEY(libvirt_uri, STR, FALSE),
    /* peers, bounds and restart (hr_config_load_limits) */
    KEY(qemu_user, STR, FALSE),
    KEY(qemu_executables, STRV, FALSE),
    KEY(hello_timeout_ms, U32, FALSE),
    KEY(max_connections, U32, FALSE),
    KEY(max_guests_per_uid, U32, FALSE),
    KEY(max_frames_per_s, U32, FALSE),
    KEY(guest_prune_s, U32, FALSE),
    KEY(max_guest_ram_mb, U64, FALSE),
    KEY(max_queued_requests, U32, FALSE),
    KEY(max_reservations, U32, FALSE),
    KEY(return_orphans, U32, FALSE),
    /* the API beyond the Unix socket's root access (host/API.md "Access") */
    KEY(api_group, STR, FALSE),
    KEY(api_read_group, STR, FALSE),
    KEY(api_listen, STR, FALSE),
    KEY(api_tls_cert, STR, FALSE),
    KEY(api_tls_key, STR, FALSE),
    KEY(api_tokens, STR, TRUE), /* re-read on every reload (hr_api_reload_tokens) */
};
#undef KEY
G_STATIC_ASSERT(sizeof(HrBackingMode) == sizeof(guint32) && sizeof(gboolean) == sizeof(guint32));

/* the keys of a [guest:PATTERN] group */
static const gchar *const hr_config_guest_keys[] = {"donor", "floor_mb", "budget_blocks", "pcp",
						    NULL};

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
	const HrDomainPolicy *domain;

	policy->pattern = NULL;
	policy->donor = TRUE;
	policy->floor_mb = config->guest_floor_mb;
	policy->budget_blocks = 0;
	policy->pcp_set = FALSE;
	for (guint i = 0; i < config->guest_policies->len; i++) {
		HrGuestPolicy *p = g_ptr_array_index(config->guest_policies, i);
		if (g_pattern_match_simple(p->pattern, name)) {
			*policy = *p;
			break;
		}
	}
	domain = g_hash_table_lookup(config->domain_policies, name);
	if (domain == NULL)
		return;
	if (domain->donor >= 0)
		policy->donor = domain->donor;
	if (domain->floor_mb >= 0)
		policy->floor_mb = domain->floor_mb;
}

void
hr_config_set_domain_policy(HrConfig *config, const gchar *name, const HrDomainPolicy *policy)
{
	if (policy == NULL) {
		g_hash_table_remove(config->domain_policies, name);
		return;
	}
	g_hash_table_insert(config->domain_policies, g_strdup(name),
			    g_memdup2(policy, sizeof(*policy)));
}

static void
hr_config_limits_init(HrConfig *config);
static gboolean
hr_config_resolve_users(HrConfig *config, gboolean from_file, GError **error);

HrConfig *
hr_config_new(void)
{
	HrConfig *config = g_new0(HrConfig, 1);
	config->vm_socket = g_strdup(HR_CONFIG_DEFAULT_VM_SOCKET);
	config->vm_socket_group = g_strdup(HR_CONFIG_DEFAULT_VM_SOCKET_GROUP);
	config->api_socket = g_strdup(HR_CONFIG_DEFAULT_API_SOCKET);
	config->status_interval_ms = HR_CONFIG_DEFAULT_STATUS_INTERVAL_MS;
	config->command_timeout_ms = 30000;
	config->request_timeout_s = 300;
	config->request_history = 32;
	config->state_dir = g_strdup(HR_CONFIG_DEFAULT_STATE_DIR);
	config->host_root = g_strdup("/");
	config->reservation_tick_ms = 250;
	config->reservation_ttl_s = 600;
	config->migration_grace_s = 30;
	config->return_high_mark_mb = 4096;
	config->guest_floor_mb = 256;
	config->hold_in_pool = TRUE;
	config->pool_margin_mb = 256;
	config->reserve_rate_mb = 256;
	config->reserve_pause_psi = 10;
	config->backing = HR_BACKING_SCAN;
	config->guest_policies =
	    g_ptr_array_new_with_free_func((GDestroyNotify)hr_guest_policy_free);
	hr_config_limits_init(config);
	config->libvirt_uri = g_strdup(HR_CONFIG_DEFAULT_LIBVIRT_URI);
	config->domain_policies = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	return config;
}

void
hr_config_free(HrConfig *config)
{
	if (config == NULL)
		return;
	g_free(config->vm_socket);
	g_free(config->vm_socket_group);
	g_free(config->api_socket);
	g_free(config->state_dir);
	g_free(config->host_root);
	g_free(config->reserve);
	g_ptr_array_unref(config->guest_policies);
	g_free(config->api_group);
	g_free(config->api_read_group);
	g_free(config->api_listen);
	g_free(config->api_tls_cert);
	g_free(config->api_tls_key);
	g_free(config->api_tokens);
	g_strfreev(config->qemu_executables);
	g_free(config->qemu_user);
	g_array_unref(config->qemu_uids);
	g_free(config->libvirt_uri);
	g_hash_table_unref(config->domain_policies);
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
		if (g_error_matches(error_local, G_KEY_FILE_ERROR,
				    G_KEY_FILE_ERROR_KEY_NOT_FOUND) ||
		    g_error_matches(error_local, G_KEY_FILE_ERROR,
				    G_KEY_FILE_ERROR_GROUP_NOT_FOUND))
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
	if (str == NULL || str[0] == '\0') /* empty: not set */
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
hr_config_get_uint_in(GKeyFile *kf, const gchar *group, const gchar *key, guint64 min, guint64 max,
		      gboolean zero_ok, guint64 *value, GError **error)
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

/* [guest:PATTERN] donor=true|false floor_mb=N budget_blocks=N pcp=POLICY */
static gboolean
hr_config_get_policies(GKeyFile *kf, HrConfig *config, GError **error)
{
	g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
	for (guint i = 0; groups[i] != NULL; i++) {
		g_autoptr(GError) error_local = NULL;
		HrGuestPolicy *p;
		guint64 v;

		if (!g_str_has_prefix(groups[i], GUEST_GROUP_PREFIX))
			continue;
		p = g_new0(HrGuestPolicy, 1);
		p->pattern = g_strdup(groups[i] + strlen(GUEST_GROUP_PREFIX));
		p->donor = TRUE;
		p->floor_mb = config->guest_floor_mb;
		g_ptr_array_add(config->guest_policies, p);
		if (*p->pattern == '\0') {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "[%s] names no guest: use [guest:NAME] or [guest:PATTERN*]",
				    groups[i]);
			return FALSE;
		}
		/* GKeyFile lets any bytes through in a group name; GPatternSpec asserts UTF-8 */
		if (!g_utf8_validate(p->pattern, -1, NULL)) {
			g_autofree gchar *shown = g_utf8_make_valid(groups[i], -1);
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "[%s] is not valid UTF-8: write guest names and patterns in "
				    "UTF-8",
				    shown);
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
		if (g_key_file_has_key(kf, groups[i], "pcp", NULL)) {
			g_autofree gchar *text = g_key_file_get_string(kf, groups[i], "pcp", NULL);
			if (!hr_pcp_policy_parse(g_strstrip(text), &p->pcp, &error_local)) {
				g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
					    "[%s] pcp: %s", groups[i], error_local->message);
				return FALSE;
			}
			p->pcp_set = TRUE;
		}
	}
	return TRUE;
}

static gboolean
hr_config_get_api(GKeyFile *kf, HrConfig *config, GError **error)
{
	g_autofree gchar *listen = NULL;

	if (!hr_config_get_string(kf, GROUP, "api_group", &config->api_group, error) ||
	    !hr_config_get_string(kf, GROUP, "api_read_group", &config->api_read_group, error) ||
	    !hr_config_get_string(kf, GROUP, "api_listen", &listen, error) ||
	    !hr_config_get_path(kf, "api_tls_cert", &config->api_tls_cert, error) ||
	    !hr_config_get_path(kf, "api_tls_key", &config->api_tls_key, error) ||
	    !hr_config_get_path(kf, "api_tokens", &config->api_tokens, error))
		return FALSE;
	/* empty: not set */
	if (config->api_group != NULL && config->api_group[0] == '\0')
		g_clear_pointer(&config->api_group, g_free);
	if (config->api_read_group != NULL && config->api_read_group[0] == '\0')
		g_clear_pointer(&config->api_read_group, g_free);
	if (listen == NULL || listen[0] == '\0')
		return TRUE;
	if (config->api_tls_cert == NULL || config->api_tls_key == NULL ||
	    config->api_tokens == NULL) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "api_listen=%s needs api_tls_cert, api_tls_key and api_tokens: the "
			    "API is served on the network only with TLS and bearer tokens",
			    listen);
		return FALSE;
	}
	/*
	 * Whoever may write the key or the certificate may serve as this
	 * daemon; whoever may read the key may too. hr_api_tokens_load()
	 * checks api_tokens the same way each time it reads it.
	 */
	if (!hr_safefile_check(config->api_tls_key, getuid(), HR_SAFEFILE_SECRET, error)) {
		g_prefix_error(error, "api_tls_key: ");
		return FALSE;
	}
	if (!hr_safefile_check(config->api_tls_cert, getuid(), HR_SAFEFILE_SHARED, error)) {
		g_prefix_error(error, "api_tls_cert: ");
		return FALSE;
	}
	config->api_listen = g_steal_pointer(&listen);
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Peers, bounds and restart */

static void
hr_config_limits_init(HrConfig *config)
{
	config->qemu_user = g_strdup(HR_CONFIG_DEFAULT_QEMU_USER);
	config->qemu_uids = g_array_new(FALSE, FALSE, sizeof(guint));
	/* root is always there, so the default never names nobody */
	hr_config_resolve_users(config, FALSE, NULL);
	config->qemu_executables =
	    hr_config_parse_executables(HR_CONFIG_DEFAULT_QEMU_EXECUTABLES, NULL);
	config->hello_timeout_ms = 5000;
	config->max_connections = 2048;
	config->max_guests_per_uid = 4096;
	config->max_frames_per_s = 5000;
	config->guest_prune_s = 3600;
	config->max_guest_ram_mb = G_GUINT64_CONSTANT(16) << 20; /* 16 TiB */
	config->max_queued_requests = 64;
	config->max_reservations = 1024;
	config->return_orphans = TRUE;
}

/*
 * qemu_executables=PATH;PATH...: the QEMU binaries an administrator
 * installed, by absolute path. A pattern would let in any executable a
 * local user can name to match (issue 18: the default glob took any file
 * called qemu-system-something), so none is taken. /proc/PID/exe names the binary with its
 * symlinks resolved: so is each path that exists.
 */
gchar **
hr_config_parse_executables(const gchar *value, GError **error)
{
	g_auto(GStrv) items = g_strsplit(value, ";", -1);
	g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);

	for (guint i = 0; items[i] != NULL; i++) {
		const gchar *item = g_strstrip(items[i]);
		gchar *real;

		if (*item == '\0')
			continue;
		if (strpbrk(item, "*?[") != NULL || !g_path_is_absolute(item)) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "qemu_executables: '%s' is not an absolute path: list the QEMU "
				    "binaries that may connect by their exact paths, separated by "
				    "';' (patterns are not accepted), for example %s",
				    item, HR_CONFIG_DEFAULT_QEMU_EXECUTABLES);
			return NULL;
		}
		real = realpath(item, NULL);
		g_ptr_array_add(paths, real != NULL ? g_strdup(real) : g_strdup(item));
		free(real);
	}
	if (paths->len == 0) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "qemu_executables is empty: no QEMU could connect (list the QEMU "
			    "binaries by path, for example %s)",
			    HR_CONFIG_DEFAULT_QEMU_EXECUTABLES);
		return NULL;
	}
	g_ptr_array_add(paths, NULL);
	return (gchar **)g_ptr_array_free(g_steal_pointer(&paths), FALSE);
}

/*
 * qemu_user=USER;USER...: names or numeric uids. A name this host lacks
 * is skipped (with a warning, but for libvirt-qemu: no libvirt here); a
 * list that names nobody is an error.
 */
static gboolean
hr_config_resolve_users(HrConfig *config, gboolean from_file, GError **error)
{
	g_auto(GStrv) users = NULL;

	g_array_set_size(config->qemu_uids, 0);
	users = g_strsplit(config->qemu_user, ";", -1);
	for (guint i = 0; users[i] != NULL; i++) {
		const gchar *user = g_strstrip(users[i]);
		struct passwd *pw;
		guint64 v;
		guint uid;

		if (*user == '\0')
			continue;
		if (g_ascii_string_to_unsigned(user, 10, 0, G_MAXUINT32 - 1, &v, NULL)) {
			uid = v;
		} else if ((pw = getpwnam(user)) != NULL) {
			uid = pw->pw_uid;
		} else {
			/* libvirt-qemu exists only where libvirt is installed */
			if (from_file && g_strcmp0(user, "libvirt-qemu") != 0)
				g_warning("qemu_user: %s is no user on this host: skipped", user);
			continue;
		}
		g_array_append_val(config->qemu_uids, uid);
	}
	if (config->qemu_uids->len == 0) {
		g_set_error_literal(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "qemu_user names no user of this host: no QEMU could connect "
				    "(libvirt's QEMU runs as libvirt-qemu on Debian)");
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_config_get_users(GKeyFile *kf, HrConfig *config, GError **error)
{
	g_autofree gchar *str = NULL;

	if (!hr_config_get_string(kf, GROUP, "qemu_user", &str, error))
		return FALSE;
	if (str == NULL)
		return TRUE;
	g_free(config->qemu_user);
	config->qemu_user = g_steal_pointer(&str);
	return hr_config_resolve_users(config, TRUE, error);
}

gboolean
hr_config_qemu_uid_ok(const HrConfig *config, guint uid)
{
	for (guint i = 0; i < config->qemu_uids->len; i++) {
		if (g_array_index(config->qemu_uids, guint, i) == uid)
			return TRUE;
	}
	return FALSE;
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
	    {"max_guests_per_uid", &config->max_guests_per_uid, 1, 1000000, TRUE},
	    {"max_frames_per_s", &config->max_frames_per_s, 10, 1000000, FALSE},
	    {"guest_prune_s", &config->guest_prune_s, 1, 86400 * 365, TRUE},
	    {"max_queued_requests", &config->max_queued_requests, 1, 100000, FALSE},
	    {"max_reservations", &config->max_reservations, 1, 1000000, FALSE},
	};
	g_autofree gchar *exes = NULL;
	guint64 v;

	if (!hr_config_get_users(kf, config, error))
		return FALSE;
	if (!hr_config_get_string(kf, GROUP, "qemu_executables", &exes, error))
		return FALSE;
	if (exes != NULL) {
		gchar **paths = hr_config_parse_executables(exes, error);
		if (paths == NULL)
			return FALSE;
		g_strfreev(config->qemu_executables);
		config->qemu_executables = paths;
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

gchar **
hr_config_key_names(void)
{
	gchar **names = g_new0(gchar *, G_N_ELEMENTS(hr_config_keys) + 1);
	for (guint i = 0; i < G_N_ELEMENTS(hr_config_keys); i++)
		names[i] = g_strdup(hr_config_keys[i].key);
	return names;
}

gboolean
hr_config_key_is_live(const gchar *key, gboolean *live)
{
	for (guint i = 0; i < G_N_ELEMENTS(hr_config_keys); i++) {
		if (g_strcmp0(hr_config_keys[i].key, key) == 0) {
			*live = hr_config_keys[i].live;
			return TRUE;
		}
	}
	return FALSE;
}

static gboolean
hr_config_is_key(const gchar *key)
{
	for (guint i = 0; i < G_N_ELEMENTS(hr_config_keys); i++) {
		if (g_strcmp0(hr_config_keys[i].key, key) == 0)
			return TRUE;
	}
	return FALSE;
}

/* a group or a key the daemon does not know is a typo or a setting that would be ignored */
static gboolean
hr_config_check_keys(GKeyFile *kf, GError **error)
{
	g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);

	for (guint i = 0; groups[i] != NULL; i++) {
		gboolean guest = g_str_has_prefix(groups[i], GUEST_GROUP_PREFIX);
		g_auto(GStrv) keys = NULL;

		if (!guest && g_strcmp0(groups[i], GROUP) != 0) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND,
				    "unknown group [%s]; hugeroomd knows [" GROUP
				    "] and [" GUEST_GROUP_PREFIX "PATTERN]",
				    groups[i]);
			return FALSE;
		}
		keys = g_key_file_get_keys(kf, groups[i], NULL, NULL);
		for (guint k = 0; keys != NULL && keys[k] != NULL; k++) {
			if (guest ? g_strv_contains(hr_config_guest_keys, keys[k])
				  : hr_config_is_key(keys[k]))
				continue;
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND,
				    "unknown key '%s' in [%s] (hugeroomd.conf(5) lists every key)",
				    keys[k], groups[i]);
			return FALSE;
		}
	}
	return TRUE;
}

gboolean
hr_config_load(HrConfig *config, const gchar *path, gboolean must_exist, GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) error_local = NULL;
	g_autofree gchar *str = NULL;
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
	if (!hr_config_check_keys(kf, error))
		goto fail;
	if (!hr_config_get_path(kf, "vm_socket", &config->vm_socket, error) ||
	    !hr_config_get_path(kf, "api_socket", &config->api_socket, error) ||
	    !hr_config_get_string(kf, GROUP, "vm_socket_group", &str, error))
		goto fail;
	if (str != NULL) {
		g_free(config->vm_socket_group);
		config->vm_socket_group = g_steal_pointer(&str);
	}
	if (!hr_config_get_string(kf, GROUP, "libvirt_uri", &str, error))
		goto fail;
	if (str != NULL) {
		g_free(config->libvirt_uri);
		config->libvirt_uri = g_steal_pointer(&str);
	}
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
	v = config->migration_grace_s;
	if (!hr_config_get_uint(kf, "migration_grace_s", 0, 3600, TRUE, &v, error))
		goto fail;
	config->migration_grace_s = v;
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
	if (!hr_config_get_string(kf, GROUP, "reserve", &str, error))
		goto fail;
	if (str != NULL) {
		/* "reserve=": none */
		g_free(config->reserve);
		config->reserve = *str != '\0' ? g_steal_pointer(&str) : NULL;
		g_clear_pointer(&str, g_free);
	}
	v = config->reserve_rate_mb;
	if (!hr_config_get_uint(kf, "reserve_rate_mb", 1, G_MAXUINT32, FALSE, &v, error))
		goto fail;
	config->reserve_rate_mb = v;
	v = config->reserve_pause_psi;
	if (!hr_config_get_uint(kf, "reserve_pause_psi", 1, 100, FALSE, &v, error))
		goto fail;
	config->reserve_pause_psi = v;
	if (!hr_config_get_bool(kf, "hold_in_pool", &config->hold_in_pool, error) ||
	    !hr_config_get_bool(kf, "donor_pcp_density", &config->donor_pcp_density, error))
		goto fail;
	if (!hr_config_get_backing(kf, &config->backing, error) ||
	    !hr_config_get_policies(kf, config, error) || !hr_config_get_api(kf, config, error) ||
	    !hr_config_load_limits(kf, config, error))
		goto fail;
	return TRUE;
fail:
	g_prefix_error(error, "config %s: ", path);
	return FALSE;
}

static gboolean
hr_config_policies_equal(GPtrArray *a, GPtrArray *b)
{
	if (a->len != b->len)
		return FALSE;
	for (guint i = 0; i < a->len; i++) {
		const HrGuestPolicy *pa = g_ptr_array_index(a, i);
		const HrGuestPolicy *pb = g_ptr_array_index(b, i);
		if (g_strcmp0(pa->pattern, pb->pattern) != 0 || pa->donor != pb->donor ||
		    pa->floor_mb != pb->floor_mb || pa->budget_blocks != pb->budget_blocks)
			return FALSE;
	}
	return TRUE;
}

void
hr_config_reload(HrConfig *live, HrConfig *fresh, GPtrArray *applied, GPtrArray *restart)
{
	for (guint i = 0; i < G_N_ELEMENTS(hr_config_keys); i++) {
		const HrConfigKey *k = &hr_config_keys[i];
		gpointer a = G_STRUCT_MEMBER_P(live, k->offset);
		gpointer b = G_STRUCT_MEMBER_P(fresh, k->offset);
		gboolean same;

		switch (k->type) {
		case HR_CONFIG_STR:
			same = g_strcmp0(*(gchar **)a, *(gchar **)b) == 0;
			break;
		case HR_CONFIG_U32:
			same = *(guint32 *)a == *(guint32 *)b;
			break;
		case HR_CONFIG_STRV:
			same = g_strv_equal(*(const gchar *const **)a, *(const gchar *const **)b);
			break;
		case HR_CONFIG_U64:
		default:
			same = *(guint64 *)a == *(guint64 *)b;
			break;
		}
		if (same)
			continue;
		if (!k->live) {
			g_ptr_array_add(restart, (gpointer)k->key);
			continue;
		}
		g_ptr_array_add(applied, (gpointer)k->key);
		/* the live keys are numbers or strings, whose old value @fresh frees */
		if (k->type == HR_CONFIG_STR) {
			gchar *old = *(gchar **)a;
			*(gchar **)a = *(gchar **)b;
			*(gchar **)b = old;
		} else {
			memcpy(a, b, k->type == HR_CONFIG_U32 ? sizeof(guint32) : sizeof(guint64));
		}
	}
	if (!hr_config_policies_equal(live->guest_policies, fresh->guest_policies)) {
		GPtrArray *old = live->guest_policies;
		live->guest_policies = fresh->guest_policies;
		fresh->guest_policies = old;
		g_ptr_array_add(applied, (gpointer) "[" GUEST_GROUP_PREFIX "*]");
	}
	if (applied->len > 0)
		live->generation++;
}
