/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The libvirt QEMU hook, installed as /etc/libvirt/hooks/qemu.d/hugeroom.
 * libvirt runs it synchronously as "hugeroom DOMAIN OPERATION SUB-OP EXTRA"
 * with the domain XML on stdin (docs/hooks.rst):
 *
 *   prepare begin  before anything of the domain exists: read the XML,
 *                  create one reservation per host node its memory goes to,
 *                  wait until they settle or the deadline passes, remember
 *                  their ids in STATE_DIR/NAME.json;
 *   start begin    just before QEMU starts and allocates guest RAM: consume
 *                  them, so the blocks the daemon held are free for QEMU's
 *                  THP faults and nothing else took them;
 *   release end    the domain is gone (also after a failed start): release
 *                  them, the daemon returns its holds to the donors.
 *
 * Every other operation exits 0 at once. The hook never calls back into
 * libvirt (a deadlock). A problem with the daemon (down, too slow, a
 * reservation that fails) is a warning and the domain starts (fail-open),
 * unless on_failure=closed in the configuration or the domain's policy: then
 * the hook exits 1 and libvirt refuses the start with the hook's stderr.
 */

#define G_LOG_DOMAIN "HugeroomHook"

#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "hr-client.h"
#include "hr-config.h"
#include "hr-libvirt.h"
#include "hr-safefile.h"

#define HR_HOOK_DEFAULT_CONFIG HR_SYSCONFDIR "/hugeroom/hook.conf"
#define HR_HOOK_DEFAULT_STATE_DIR "/run/hugeroom/hook"
/* a best-effort reservation settles at its deadline; allow the daemon a tick or two */
#define HR_HOOK_SETTLE_S 5
#define HR_HOOK_POLL_MS 250
/* The longest domain name the hook handles: its state file NAME.json must fit a file name. */
#define HR_HOOK_DOMAIN_MAX 200
/* a state file holds a few reservation ids */
#define HR_HOOK_STATE_MAX (64 * 1024)

typedef struct {
	gchar *api_socket;
	gchar *state_dir;
	HrLibvirtFailure on_failure;
	gboolean strict;
	guint deadline_s;
	guint max_deadline_s;
	guint request_timeout_s;
} HrHookConfig;

typedef struct {
	HrHookConfig config;
	const gchar *domain;
	/*
	 * "libvirt:UUID": the requester of the domain's reservations, which
	 * the daemon lets only the same requester consume or release; from
	 * the domain's XML at prepare, from the state file after
	 */
	gchar *requester;
	HrLibvirtFailure on_failure; /* the configuration's, or the domain policy's */
	const gchar *on_failure_from;
} HrHook;

static void G_GNUC_PRINTF(3, 4) hr_hook_log(HrHook *hook, int priority, const gchar *fmt, ...)
{
	g_autofree gchar *raw = NULL;
	g_autofree gchar *msg = NULL;
	g_autofree gchar *domain = hr_client_escape(hook->domain);
	va_list ap;

	va_start(ap, fmt);
	raw = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	/* names come from domain XML and the daemon: one line each, no terminal escapes */
	msg = hr_client_escape(raw);
	/* stderr reaches libvirt (its log; the user's error when we exit 1), syslog the admin */
	g_printerr("hugeroom hook: domain %s: %s%s\n", domain,
		   priority <= LOG_ERR	     ? "error: "
		   : priority == LOG_WARNING ? "warning: "
					     : "",
		   msg);
	syslog(priority, "domain %s: %s", domain, msg);
}

/*
 * A problem with the daemon or a reservation: the exit code for libvirt
 * after telling why, 0 (start anyway) or 1 (refuse), by on_failure.
 */
static int G_GNUC_PRINTF(2, 3) hr_hook_fail(HrHook *hook, const gchar *fmt, ...)
{
	g_autofree gchar *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (hook->on_failure == HR_LIBVIRT_FAILURE_CLOSED) {
		hr_hook_log(hook, LOG_ERR,
			    "%s; refusing to start the domain (on_failure=closed in %s; with "
			    "on_failure=open it would start without prepared memory)",
			    msg, hook->on_failure_from);
		return 1;
	}
	hr_hook_log(hook, LOG_WARNING,
		    "%s; the domain starts without prepared memory (on_failure=open in %s)", msg,
		    hook->on_failure_from);
	return 0;
}

static gboolean
hr_hook_parse_failure(const gchar *value, HrLibvirtFailure *out)
{
	if (g_strcmp0(value, "open") == 0)
		*out = HR_LIBVIRT_FAILURE_OPEN;
	else if (g_strcmp0(value, "closed") == 0)
		*out = HR_LIBVIRT_FAILURE_CLOSED;
	else
		return FALSE;
	return TRUE;
}

static gboolean
hr_hook_config_uint(GKeyFile *kf, const gchar *key, guint min, guint max, guint *out,
		    GError **error)
{
	g_autofree gchar *str = g_key_file_get_value(kf, "hook", key, NULL);
	guint64 v;
	if (str == NULL)
		return TRUE;
	if (!g_ascii_string_to_unsigned(g_strstrip(str), 10, min, max, &v, NULL)) {
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "[hook] %s=%s: must be a number from %u to %u", key, str, min, max);
		return FALSE;
	}
	*out = (guint)v;
	return TRUE;
}

/*
 * @path: a missing file leaves the defaults. On an error @config keeps what
 * it read so far, on_failure first: a broken file that asks for
 * fail-closed still fails closed.
 */
static gboolean
hr_hook_config_load(HrHookConfig *config, const gchar *path, GError **error)
{
	static const gchar *const keys[] = {
	    "api_socket", "state_dir",	    "on_failure",	 "strict",
	    "deadline_s", "max_deadline_s", "request_timeout_s", NULL};
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) local = NULL;
	g_auto(GStrv) groups = NULL;
	g_auto(GStrv) found = NULL;
	g_autofree gchar *failure = NULL;
	g_autofree gchar *strict = NULL;

	config->api_socket = g_strdup(HR_CONFIG_DEFAULT_API_SOCKET);
	config->state_dir = g_strdup(HR_HOOK_DEFAULT_STATE_DIR);
	config->on_failure = HR_LIBVIRT_FAILURE_OPEN;
	config->strict = FALSE;
	config->deadline_s = 30;
	config->max_deadline_s = 300;
	config->request_timeout_s = 10;
	if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &local)) {
		if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			return TRUE;
		g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", path);
		return FALSE;
	}
	failure = g_key_file_get_value(kf, "hook", "on_failure", NULL);
	if (failure != NULL && !hr_hook_parse_failure(g_strstrip(failure), &config->on_failure)) {
		/* the admin wanted something other than the default: be safe */
		config->on_failure = HR_LIBVIRT_FAILURE_CLOSED;
		g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
			    "%s: [hook] on_failure=%s: must be open or closed", path, failure);
		return FALSE;
	}
	groups = g_key_file_get_groups(kf, NULL);
	for (guint i = 0; groups[i] != NULL; i++) {
		if (g_strcmp0(groups[i], "hook") != 0) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND,
				    "%s: unknown group [%s]; the hook reads [hook]", path,
				    groups[i]);
			return FALSE;
		}
	}
	found = g_key_file_get_keys(kf, "hook", NULL, NULL);
	for (guint i = 0; found != NULL && found[i] != NULL; i++) {
		if (!g_strv_contains(keys, found[i])) {
			g_autofree gchar *known = g_strjoinv(", ", (gchar **)keys);
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_KEY_NOT_FOUND,
				    "%s: unknown key [hook] %s; known: %s", path, found[i], known);
			return FALSE;
		}
	}
	if (g_key_file_has_key(kf, "hook", "api_socket", NULL)) {
		g_free(config->api_socket);
		config->api_socket = g_key_file_get_string(kf, "hook", "api_socket", NULL);
	}
	if (g_key_file_has_key(kf, "hook", "state_dir", NULL)) {
		g_free(config->state_dir);
		config->state_dir = g_key_file_get_string(kf, "hook", "state_dir", NULL);
	}
	strict = g_key_file_get_value(kf, "hook", "strict", NULL);
	if (strict != NULL) {
		g_strstrip(strict);
		if (g_strcmp0(strict, "true") != 0 && g_strcmp0(strict, "false") != 0) {
			g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
				    "%s: [hook] strict=%s: must be true or false", path, strict);
			return FALSE;
		}
		config->strict = g_strcmp0(strict, "true") == 0;
	}
	if (!hr_hook_config_uint(kf, "deadline_s", 1, 86400, &config->deadline_s, error) ||
	    !hr_hook_config_uint(kf, "max_deadline_s", 1, 86400, &config->max_deadline_s, error) ||
	    !hr_hook_config_uint(kf, "request_timeout_s", 1, 600, &config->request_timeout_s,
				 error)) {
		g_prefix_error(error, "%s: ", path);
		return FALSE;
	}
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* The state file: which reservations a domain's start made */

static gchar *
hr_hook_state_path(HrHook *hook)
{
	/* libvirt names have no '/'; escaping anyway keeps the file in state_dir */
	g_autofree gchar *escaped = g_uri_escape_string(hook->domain, NULL, FALSE);
	g_autofree gchar *file = g_strconcat(escaped, ".json", NULL);
	return g_build_filename(hook->config.state_dir, file, NULL);
}

static gboolean
hr_hook_state_save(HrHook *hook, GPtrArray *ids, GError **error)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *text = NULL;
	g_autofree gchar *path = hr_hook_state_path(hook);

	if (g_mkdir_with_parents(hook->config.state_dir, 0700) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot create %s: %s",
			    hook->config.state_dir, g_strerror(errno));
		return FALSE;
	}
	/* what others may write in, they may make us consume or release */
	if (!hr_safefile_check_dir(hook->config.state_dir, getuid(), HR_SAFEFILE_SHARED, error)) {
		g_prefix_error(error, "state_dir: ");
		return FALSE;
	}
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "domain");
	json_builder_add_string_value(b, hook->domain);
	json_builder_set_member_name(b, "on_failure");
	json_builder_add_string_value(b, hook->on_failure == HR_LIBVIRT_FAILURE_CLOSED ? "closed"
										       : "open");
	json_builder_set_member_name(b, "on_failure_from");
	json_builder_add_string_value(b, hook->on_failure_from);
	json_builder_set_member_name(b, "requester");
	json_builder_add_string_value(b, hook->requester);
	json_builder_set_member_name(b, "reservations");
	json_builder_begin_array(b);
	for (guint i = 0; i < ids->len; i++)
		json_builder_add_string_value(b, g_ptr_array_index(ids, i));
	json_builder_end_array(b);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	text = json_to_string(root, TRUE);
	if (!g_file_set_contents_full(path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
				      error)) {
		g_prefix_error(error, "cannot save the reservation ids: ");
		return FALSE;
	}
	return TRUE;
}

/*
 * The ids in the state file; NULL and no error when there is none. With
 * @adopt_failure the hook takes the on_failure the prepare decided.
 * @requester gets the requester they were made for (NULL in a file of a
 * hook before requesters were kept).
 */
static GPtrArray *
hr_hook_state_load(HrHook *hook, gboolean adopt_failure, gchar **requester, GError **error)
{
	g_autofree gchar *path = hr_hook_state_path(hook);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) local = NULL;
	g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
	g_autofree gchar *text = NULL;
	gsize len = 0;
	JsonObject *obj;
	JsonArray *arr;

	/* a symlink, a FIFO (which would hang libvirt's start) or a file others wrote: refused */
	if (!hr_safefile_check_dir(hook->config.state_dir, getuid(), HR_SAFEFILE_SHARED, &local) ||
	    !hr_safefile_get_contents(path, getuid(), HR_SAFEFILE_SHARED, HR_HOOK_STATE_MAX, &text,
				      &len, &local)) {
		if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
			return NULL;
		g_propagate_prefixed_error(error, g_steal_pointer(&local), "the hook's state: ");
		return NULL;
	}
	if (!json_parser_load_from_data(parser, text, (gssize)len, &local)) {
		g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", path);
		return NULL;
	}
	obj = JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))
		  ? json_node_get_object(json_parser_get_root(parser))
		  : NULL;
	arr = obj != NULL && json_object_has_member(obj, "reservations")
		  ? json_object_get_array_member(obj, "reservations")
		  : NULL;
	if (arr == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
			    "%s has no reservations list; remove it", path);
		return NULL;
	}
	if (adopt_failure) {
		hr_hook_parse_failure(
		    json_object_get_string_member_with_default(obj, "on_failure", ""),
		    &hook->on_failure);
		hook->on_failure_from = g_intern_string(
		    json_object_get_string_member_with_default(obj, "on_failure_from", path));
	}
	*requester = g_strdup(json_object_get_string_member_with_default(obj, "requester", NULL));
	for (guint i = 0; i < json_array_get_length(arr); i++) {
		const gchar *id = json_array_get_string_element(arr, i);
		if (id != NULL)
			g_ptr_array_add(ids, g_strdup(id));
	}
	return g_steal_pointer(&ids);
}

static void
hr_hook_state_remove(HrHook *hook)
{
	g_autofree gchar *path = hr_hook_state_path(hook);
	if (g_unlink(path) != 0 && errno != ENOENT)
		hr_hook_log(hook, LOG_WARNING, "cannot remove %s: %s", path, g_strerror(errno));
}

/* ---------------------------------------------------------------------- */
/* Calls to the daemon */

/* the answer of a 2xx, else NULL with the daemon's reason */
static JsonObject *
hr_hook_call(HrHook *hook, const gchar *method, const gchar *path, const gchar *body,
	     JsonNode **root, guint *status, GError **error)
{
	*status = 0;
	*root = hr_client_request(hook->config.api_socket, method, path, body,
				  hook->config.request_timeout_s, status, error);
	if (*root == NULL)
		return NULL;
	if (!SOUP_STATUS_IS_SUCCESSFUL(*status) || !JSON_NODE_HOLDS_OBJECT(*root)) {
		g_autofree gchar *msg = hr_client_error_message(*root, *status);
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "hugeroomd: %s", msg);
		return NULL;
	}
	return json_node_get_object(*root);
}

/* as @requester: the daemon refuses a reservation of another's */
static gboolean
hr_hook_reservation_action(HrHook *hook, const gchar *id, const gchar *action,
			   const gchar *requester, guint *status, GError **error)
{
	g_autofree gchar *escaped = g_uri_escape_string(id, NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/reservations/%s/%s", escaped, action);
	g_autofree gchar *body = NULL;
	g_autoptr(JsonNode) root = NULL;

	if (requester != NULL) {
		g_autoptr(JsonBuilder) b = json_builder_new();
		g_autoptr(JsonNode) node = NULL;
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "requester");
		json_builder_add_string_value(b, requester);
		json_builder_end_object(b);
		node = json_builder_get_root(b);
		body = json_to_string(node, FALSE);
	}
	if (hr_hook_call(hook, SOUP_METHOD_POST, path, body, &root, status, error) == NULL) {
		g_prefix_error(error, "%s of reservation %s: ", action, id);
		return FALSE;
	}
	return TRUE;
}

/* release each of @ids, made for @requester; one that already ended (409) is not a problem */
static void
hr_hook_release_ids(HrHook *hook, GPtrArray *ids, const gchar *requester)
{
	for (guint i = 0; i < ids->len; i++) {
		g_autoptr(GError) error = NULL;
		const gchar *id = g_ptr_array_index(ids, i);
		guint status;
		if (hr_hook_reservation_action(hook, id, "release", requester, &status, &error))
			hr_hook_log(hook, LOG_INFO, "reservation %s released", id);
		else if (status != SOUP_STATUS_CONFLICT)
			hr_hook_log(hook, LOG_WARNING, "%s", error->message);
	}
}

static gchar *
hr_hook_reservation_body(HrHook *hook, const HrLibvirtPlacement *p, guint deadline_s,
			 gboolean strict)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "bytes");
	json_builder_add_int_value(b, (gint64)p->bytes);
	if (p->node >= 0) {
		json_builder_set_member_name(b, "node");
		json_builder_add_int_value(b, p->node);
	}
	json_builder_set_member_name(b, "deadline_s");
	json_builder_add_int_value(b, deadline_s);
	json_builder_set_member_name(b, "strict");
	json_builder_add_boolean_value(b, strict);
	json_builder_set_member_name(b, "requester");
	json_builder_add_string_value(b, hook->requester);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	return json_to_string(root, FALSE);
}

static gboolean
hr_hook_state_is_live(const gchar *state)
{
	return g_strcmp0(state, "created") == 0 || g_strcmp0(state, "in-progress") == 0;
}

/*
 * Poll @ids until none is live or @timeout_us passes; @results gets each
 * one's last answer (NULL where the daemon did not answer).
 */
static gboolean
hr_hook_wait(HrHook *hook, GPtrArray *ids, gint64 timeout_us, JsonNode **results, GError **error)
{
	gint64 end = g_get_monotonic_time() + timeout_us;

	for (;;) {
		gboolean live = FALSE;
		for (guint i = 0; i < ids->len; i++) {
			g_autofree gchar *escaped =
			    g_uri_escape_string(g_ptr_array_index(ids, i), NULL, FALSE);
			g_autofree gchar *path = g_strconcat("/v1/reservations/", escaped, NULL);
			JsonObject *obj;
			guint status;

			g_clear_pointer(&results[i], json_node_unref);
			obj = hr_hook_call(hook, SOUP_METHOD_GET, path, NULL, &results[i], &status,
					   error);
			if (obj == NULL)
				return FALSE;
			live |= hr_hook_state_is_live(
			    json_object_get_string_member_with_default(obj, "state", ""));
		}
		if (!live || g_get_monotonic_time() >= end)
			return TRUE;
		g_usleep(HR_HOOK_POLL_MS * 1000);
	}
}

static void
hr_hook_report_policy(HrHook *hook, const HrLibvirtPolicy *policy)
{
	g_autoptr(GString) noted = g_string_new(NULL);
	if (policy->donor != HR_LIBVIRT_TRI_UNSET)
		g_string_append_printf(noted, " donor=%s",
				       policy->donor == HR_LIBVIRT_TRI_YES ? "yes" : "no");
	if (policy->floor_bytes >= 0)
		g_string_append_printf(noted, " floor=%" G_GINT64_FORMAT " MiB",
				       policy->floor_bytes >> 20);
	if (noted->len > 0)
		hr_hook_log(hook, LOG_NOTICE,
			    "policy%s noted: hugeroomd applies donor and floor itself when it "
			    "looks up the domain of a guest that connects (libvirt_uri), over its "
			    "[guest:%s] group",
			    noted->str, hook->domain);
}

/* <hugeroom:pcp>: the daemon keeps it for the guest and sends it when its driver is up */
static void
hr_hook_set_pcp(HrHook *hook, const HrLibvirtPolicy *policy)
{
	g_autofree gchar *escaped = NULL;
	g_autofree gchar *path = NULL;
	g_autofree gchar *body = NULL;
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(GError) error = NULL;
	guint status;

	if (policy->pcp == NULL)
		return;
	escaped = g_uri_escape_string(hook->domain, NULL, FALSE);
	path = g_strdup_printf("/v1/guests/%s/pcp", escaped);
	body = g_strdup_printf("{\"policy\":\"%s\"}", policy->pcp);
	if (hr_hook_call(hook, SOUP_METHOD_PUT, path, body, &root, &status, &error) == NULL)
		hr_hook_log(hook, LOG_WARNING, "PCP policy %s not set: %s", policy->pcp,
			    error->message);
	else
		hr_hook_log(hook, LOG_INFO, "PCP policy %s set", policy->pcp);
}

/* ---------------------------------------------------------------------- */
/* The operations */

static int
hr_hook_prepare(HrHook *hook, const gchar *xml, gsize len)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrLibvirtDomain) domain = hr_libvirt_domain_parse(xml, len, &error);
	g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) stale = NULL;
	g_autofree gchar *stale_requester = NULL;
	g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) drop = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GString) problems = g_string_new(NULL);
	JsonNode **results = NULL;
	guint deadline_s;
	gboolean strict;
	gint64 start = g_get_monotonic_time();
	gboolean waited;
	int rc = 0;

	if (domain == NULL) {
		/*
		 * A domain that asked to fail closed does, whatever else in its
		 * policy is wrong; a broken policy never turns a closed
		 * configuration open.
		 */
		if (hr_libvirt_domain_on_failure(xml, len) == HR_LIBVIRT_FAILURE_CLOSED) {
			hook->on_failure = HR_LIBVIRT_FAILURE_CLOSED;
			hook->on_failure_from = "the domain's <hugeroom:policy>";
		}
		return hr_hook_fail(hook, "%s", error->message);
	}
	if (domain->policy.on_failure != HR_LIBVIRT_FAILURE_UNSET) {
		hook->on_failure = domain->policy.on_failure;
		hook->on_failure_from = "the domain's <hugeroom:policy>";
	}
	/* by its UUID: a domain defined again under the name is another requester */
	hook->requester =
	    g_strconcat("libvirt:", domain->uuid != NULL ? domain->uuid : domain->name, NULL);
	/* a start that never reached release (libvirtd died): end its reservations */
	stale = hr_hook_state_load(hook, FALSE, &stale_requester, &error);
	if (stale != NULL) {
		hr_hook_log(hook, LOG_NOTICE, "releasing %u reservation(s) of an earlier start",
			    stale->len);
		hr_hook_release_ids(hook, stale, stale_requester);
	} else if (error != NULL) {
		hr_hook_log(hook, LOG_WARNING, "%s", error->message);
		g_clear_error(&error);
	}
	hr_hook_state_remove(hook);
	hr_hook_set_pcp(hook, &domain->policy);

	if (domain->policy.prepare == HR_LIBVIRT_PREPARE_NO) {
		hr_hook_log(hook, LOG_INFO, "nothing prepared: <hugeroom:prepare> is no");
		return 0;
	}
	if (domain->policy.prepare == HR_LIBVIRT_PREPARE_AUTO &&
	    !hr_libvirt_backing_uses_thp(domain->backing)) {
		hr_hook_log(hook, LOG_INFO,
			    "nothing prepared: its memory is %s-backed, which takes no THP from "
			    "the host (<hugeroom:prepare>yes</hugeroom:prepare> prepares anyway)",
			    hr_libvirt_backing_to_string(domain->backing));
		return 0;
	}
	hr_hook_report_policy(hook, &domain->policy);
	deadline_s = domain->policy.deadline_s > 0 ? (guint)domain->policy.deadline_s
						   : hook->config.deadline_s;
	if (deadline_s > hook->config.max_deadline_s) {
		hr_hook_log(hook, LOG_WARNING,
			    "<hugeroom:deadline> %u s is more than max_deadline_s=%u of the hook's "
			    "configuration; waiting %u s",
			    deadline_s, hook->config.max_deadline_s, hook->config.max_deadline_s);
		deadline_s = hook->config.max_deadline_s;
	}
	strict = domain->policy.strict != HR_LIBVIRT_TRI_UNSET
		     ? domain->policy.strict == HR_LIBVIRT_TRI_YES
		     : hook->config.strict;

	for (guint i = 0; i < domain->placements->len; i++) {
		const HrLibvirtPlacement *p =
		    &g_array_index(domain->placements, HrLibvirtPlacement, i);
		g_autofree gchar *body = hr_hook_reservation_body(hook, p, deadline_s, strict);
		g_autoptr(JsonNode) root = NULL;
		JsonObject *obj;
		guint status;

		obj = hr_hook_call(hook, SOUP_METHOD_POST, "/v1/reservations", body, &root, &status,
				   &error);
		if (obj == NULL || !json_object_has_member(obj, "id")) {
			rc =
			    hr_hook_fail(hook, "cannot reserve %" G_GUINT64_FORMAT " MiB on %s: %s",
					 p->bytes >> 20, p->node >= 0 ? "its node" : "any node",
					 error != NULL ? error->message : "no id in the answer");
			hr_hook_release_ids(hook, ids, hook->requester);
			return rc;
		}
		g_ptr_array_add(ids, g_strdup(json_object_get_string_member(obj, "id")));
	}
	/* saved before the wait, so a release after a crash still finds them */
	if (!hr_hook_state_save(hook, ids, &error)) {
		rc = hr_hook_fail(hook, "%s", error->message);
		hr_hook_release_ids(hook, ids, hook->requester);
		return rc;
	}
	results = g_new0(JsonNode *, ids->len);
	waited = hr_hook_wait(hook, ids, (gint64)(deadline_s + HR_HOOK_SETTLE_S) * G_USEC_PER_SEC,
			      results, &error);
	if (!waited) {
		/* whatever the others said, nothing can be relied on now */
		g_string_append_printf(problems, "; %s", error->message);
		g_clear_error(&error);
	}
	for (guint i = 0; i < ids->len && waited; i++) {
		const gchar *id = g_ptr_array_index(ids, i);
		JsonObject *obj = json_node_get_object(results[i]);
		const gchar *state = json_object_get_string_member_with_default(obj, "state", "?");
		const gchar *reason =
		    json_object_get_string_member_with_default(obj, "reason", NULL);

		if (g_strcmp0(state, "ready") == 0) {
			gboolean partial =
			    json_object_get_boolean_member_with_default(obj, "partial", FALSE);
			hr_hook_log(hook, partial ? LOG_WARNING : LOG_INFO,
				    "reservation %s ready%s after %.1f s%s%s", id,
				    partial ? " in part" : "",
				    (g_get_monotonic_time() - start) / 1e6,
				    reason != NULL ? ": " : "", reason != NULL ? reason : "");
			g_ptr_array_add(keep, g_strdup(id));
			continue;
		}
		g_ptr_array_add(drop, g_strdup(id));
		if (hr_hook_state_is_live(state))
			g_string_append_printf(
			    problems,
			    "; reservation %s still %s after %u s (deadline %u s): "
			    "hugeroomd is too slow",
			    id, state, deadline_s + HR_HOOK_SETTLE_S, deadline_s);
		else
			g_string_append_printf(problems, "; reservation %s %s%s%s", id, state,
					       reason != NULL ? ": " : "",
					       reason != NULL ? reason : "");
	}
	for (guint i = 0; i < ids->len; i++)
		g_clear_pointer(&results[i], json_node_unref);
	g_free(results);
	if (problems->len == 0)
		return 0;
	rc = hr_hook_fail(hook, "%s", problems->str + 2);
	if (rc != 0 || keep->len == 0) {
		/* refused, or nothing ready (or the daemon failed mid-wait) */
		hr_hook_release_ids(hook, ids, hook->requester);
		hr_hook_state_remove(hook);
		return rc;
	}
	/* fail-open: what is ready still helps; the rest is released */
	hr_hook_release_ids(hook, drop, hook->requester);
	if (!hr_hook_state_save(hook, keep, &error))
		hr_hook_log(hook, LOG_WARNING, "%s", error->message);
	return 0;
}

static int
hr_hook_start(HrHook *hook)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GPtrArray) ids = hr_hook_state_load(hook, TRUE, &hook->requester, &error);
	g_autoptr(GString) problems = g_string_new(NULL);
	int rc;

	if (ids == NULL) {
		if (error != NULL)
			return hr_hook_fail(hook, "%s", error->message);
		return 0; /* nothing was prepared */
	}
	for (guint i = 0; i < ids->len; i++) {
		const gchar *id = g_ptr_array_index(ids, i);
		guint status;
		if (hr_hook_reservation_action(hook, id, "consume", hook->requester, &status,
					       &error)) {
			hr_hook_log(hook, LOG_INFO,
				    "reservation %s consumed: its memory is free "
				    "for QEMU",
				    id);
			continue;
		}
		g_string_append_printf(problems, "; %s", error->message);
		g_clear_error(&error);
	}
	if (problems->len == 0)
		return 0;
	rc = hr_hook_fail(hook, "%s", problems->str + 2);
	if (rc != 0) {
		hr_hook_release_ids(hook, ids, hook->requester);
		hr_hook_state_remove(hook);
	}
	return rc;
}

static int
hr_hook_release(HrHook *hook)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GPtrArray) ids = hr_hook_state_load(hook, FALSE, &hook->requester, &error);

	if (ids != NULL)
		hr_hook_release_ids(hook, ids, hook->requester);
	else if (error != NULL)
		hr_hook_log(hook, LOG_WARNING, "%s", error->message);
	hr_hook_state_remove(hook);
	return 0; /* libvirt does not act on a release hook's failure */
}

static gchar *
hr_hook_read_stdin(gsize *len, GError **error)
{
	g_autoptr(GString) buf = g_string_new(NULL);
	gchar chunk[65536];
	gsize n;

	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0) {
		g_string_append_len(buf, chunk, (gssize)n);
		if (buf->len > HR_LIBVIRT_XML_MAX) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
				    "the domain XML on stdin is more than %d bytes",
				    HR_LIBVIRT_XML_MAX);
			return NULL;
		}
	}
	if (ferror(stdin)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "cannot read the domain XML on stdin");
		return NULL;
	}
	*len = buf->len;
	return g_string_free(g_steal_pointer(&buf), FALSE);
}

int
main(int argc, char **argv)
{
	HrHook hook = {.domain = argc > 1 ? argv[1] : "?"};
	const gchar *config_path = g_getenv("HUGEROOM_HOOK_CONFIG");
	g_autoptr(GError) error = NULL;
	g_autofree gchar *xml = NULL;
	gsize len = 0;
	int rc;

	if (argc < 4) {
		g_printerr("usage: %s DOMAIN OPERATION SUB-OPERATION [EXTRA] < DOMAIN-XML\n"
			   "libvirt runs this as /etc/libvirt/hooks/qemu.d/hugeroom; see "
			   "host/HOOK.md\n",
			   argv[0]);
		return 2;
	}
	/* most calls are operations the hook does nothing for: leave at once */
	if (!(g_strcmp0(argv[2], "prepare") == 0 && g_strcmp0(argv[3], "begin") == 0) &&
	    !(g_strcmp0(argv[2], "start") == 0 && g_strcmp0(argv[3], "begin") == 0) &&
	    !(g_strcmp0(argv[2], "release") == 0 && g_strcmp0(argv[3], "end") == 0))
		return 0;

	openlog("hugeroom-hook", LOG_PID, LOG_DAEMON);
	if (config_path == NULL)
		config_path = HR_HOOK_DEFAULT_CONFIG;
	hook.on_failure_from = config_path;
	if (!hr_hook_config_load(&hook.config, config_path, &error)) {
		hook.on_failure = hook.config.on_failure;
		rc = hr_hook_fail(&hook, "%s", error->message);
		goto out;
	}
	hook.on_failure = hook.config.on_failure;

	if (strlen(hook.domain) > HR_HOOK_DOMAIN_MAX) {
		rc = hr_hook_fail(&hook,
				  "the domain name is %" G_GSIZE_FORMAT " bytes, more than the %d "
				  "the hook handles (its state file is NAME.json)",
				  strlen(hook.domain), HR_HOOK_DOMAIN_MAX);
		goto out;
	}
	if (g_strcmp0(argv[2], "prepare") == 0) {
		xml = hr_hook_read_stdin(&len, &error);
		rc = xml != NULL ? hr_hook_prepare(&hook, xml, len)
				 : hr_hook_fail(&hook, "%s", error->message);
	} else if (g_strcmp0(argv[2], "start") == 0) {
		rc = hr_hook_start(&hook);
	} else {
		rc = hr_hook_release(&hook);
	}
out:
	g_free(hook.config.api_socket);
	g_free(hook.config.state_dir);
	g_free(hook.requester);
	closelog();
	return rc;
}
