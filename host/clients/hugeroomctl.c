/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "Hugeroomctl"

#include <libsoup/soup.h>
#include <locale.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hr-client.h"
#include "hr-config.h"
#include "hr-ctl.h"
#include "hr-libvirt.h"

/* the exit codes, as hugeroomctl(8) and --help document them */
typedef enum {
	HR_CTL_EXIT_OK = 0,
	HR_CTL_EXIT_ERROR = 1,	     /* the daemon refused, a request failed, a bad answer */
	HR_CTL_EXIT_USAGE = 2,	     /* a bad command line */
	HR_CTL_EXIT_UNREACHABLE = 3, /* no answer from hugeroomd */
	HR_CTL_EXIT_SHORT = 4,	     /* not satisfiable: ended short, timed out, a plan short */
} HrCtlExit;

static gchar *opt_socket;
static gboolean opt_json;
/* numbers the user did not give; any other value goes to the daemon to check */
#define HR_CTL_UNSET G_MININT64

static gint64 opt_blocks = HR_CTL_UNSET;
static gchar **opt_gpas;
static gchar **opt_ranges;
static gint64 opt_budget_pages = HR_CTL_UNSET;
static gint64 opt_budget_ms = HR_CTL_UNSET;
static gint64 opt_timeout = HR_CTL_UNSET;
static gboolean opt_all;
static gboolean opt_wait;
static gint64 opt_node = HR_CTL_UNSET;
static gint64 opt_deadline = HR_CTL_UNSET;
static gboolean opt_strict;
static gchar *opt_requester;
static gchar *opt_vm_socket;

/* how often --wait asks for the request without the event stream */
#define HR_CTL_POLL_MS 250
/* with it: a read after every event, and at least this often */
#define HR_CTL_REREAD_MS 5000

static void
hr_ctl_print_json(JsonNode *root)
{
	g_autofree gchar *text = json_to_string(root, TRUE);
	g_print("%s\n", text);
}

/* with --json, a failure of our own is {"error": ...} on stdout too */
static void
hr_ctl_print_json_error(const gchar *message)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "error");
	json_builder_add_string_value(b, message);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	hr_ctl_print_json(root);
}

/* the daemon's JSON with --json, else @render's text; FALSE after telling the user why */
static gboolean
hr_ctl_print(JsonNode *root, gboolean (*render)(JsonNode *, GString *, GError **))
{
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	if (opt_json) {
		hr_ctl_print_json(root);
		return TRUE;
	}
	if (!render(root, out, &error)) {
		g_printerr("hugeroomctl: %s\n", error->message);
		return FALSE;
	}
	g_print("%s", out->str);
	return TRUE;
}

/* the answer to a request that started one in a guest; NULL without its request_id */
static JsonObject *
hr_ctl_answer_with_id(JsonNode *root, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	if (obj == NULL || !json_object_has_member(obj, "request_id")) {
		g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
				    "the daemon's answer has no request_id");
		return NULL;
	}
	return obj;
}

static gboolean
hr_ctl_render_report(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = hr_ctl_answer_with_id(root, error);
	if (obj == NULL)
		return FALSE;
	g_string_append_printf(out, "report requested from %s (request %" G_GINT64_FORMAT ")\n",
			       json_object_get_string_member(obj, "guest"),
			       json_object_get_int_member(obj, "request_id"));
	return TRUE;
}

/*
 * A request to the daemon; NULL after telling the user why, with the exit
 * code in @code: UNREACHABLE when hugeroomd did not answer, else ERROR.
 */
static JsonNode *
hr_ctl_call(const gchar *method, const gchar *path, const gchar *body, HrCtlExit *code)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint status = 0;

	*code = HR_CTL_EXIT_ERROR;
	root = hr_client_request(opt_socket, method, path, body, 30, &status, &error);
	if (root == NULL) {
		/* a connection or a timeout, not an answer we could not read or a bad path */
		if (error->domain == G_IO_ERROR &&
		    !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT))
			*code = HR_CTL_EXIT_UNREACHABLE;
		if (opt_json)
			hr_ctl_print_json_error(error->message);
		g_printerr("hugeroomctl: %s (is hugeroomd running? start it with "
			   "'systemctl start hugeroomd', or pass --socket PATH)\n",
			   error->message);
		return NULL;
	}
	if (!SOUP_STATUS_IS_SUCCESSFUL(status)) {
		JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
		if (opt_json)
			hr_ctl_print_json(root);
		g_printerr("hugeroomctl: %s\n",
			   obj != NULL && json_object_has_member(obj, "error")
			       ? json_object_get_string_member(obj, "error")
			       : "the daemon refused the request");
		return NULL;
	}
	return g_steal_pointer(&root);
}

static HrCtlExit
hr_ctl_run(const gchar *method, const gchar *path,
	   gboolean (*render)(JsonNode *, GString *, GError **))
{
	HrCtlExit code;
	g_autoptr(JsonNode) root = hr_ctl_call(method, path, NULL, &code);

	if (root == NULL)
		return code;
	if (!hr_ctl_print(root, render))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

static gboolean
hr_ctl_is_final(const gchar *state)
{
	const gchar *running[] = {"queued", "sent", "running", NULL};
	return state != NULL && !g_strv_contains(running, state);
}

static guint
hr_ctl_term_width(void)
{
	struct winsize ws;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		return ws.ws_col;
	return 80;
}

/*
 * The event stream --wait reads again on, opened before the first read so
 * that no change falls between the two; NULL (then --wait polls) when the
 * daemon has none.
 */
static HrClientEvents *
hr_ctl_events_open(const gchar *query)
{
	g_autoptr(GError) error = NULL;
	HrClientEvents *events = hr_client_events_open(opt_socket, query, &error);
	if (events == NULL)
		g_debug("no event stream, polling: %s", error->message);
	return events;
}

/* until the daemon tells of a change (or HR_CTL_REREAD_MS passed) */
static void
hr_ctl_wait_change(HrClientEvents *events)
{
	g_autofree gchar *type = NULL;
	g_autofree gchar *data = NULL;
	g_autoptr(GError) error = NULL;

	if (events != NULL && hr_client_events_next(events, HR_CTL_REREAD_MS, &type, &data, &error))
		return;
	if (events == NULL || error != NULL)
		g_usleep(HR_CTL_POLL_MS * 1000);
}

/*
 * Read the request again on each of its events until it ends: a bar redrawn in place on a terminal, a
 * line per change otherwise (logs stay readable). Progress goes to stderr
 * so that stdout holds only the summary or the JSON.
 */
static HrCtlExit
hr_ctl_wait(const gchar *guest, guint64 id)
{
	g_autofree gchar *escaped = g_uri_escape_string(guest, NULL, FALSE);
	g_autofree gchar *path =
	    g_strdup_printf("/v1/guests/%s/requests/%" G_GUINT64_FORMAT, escaped, id);
	g_autofree gchar *last = NULL;
	g_autofree gchar *query = g_strdup_printf("types=request&guest=%s", escaped);
	g_autoptr(HrClientEvents) events = hr_ctl_events_open(query);
	g_autoptr(JsonNode) root = NULL;
	gboolean tty = isatty(STDERR_FILENO);
	const gchar *state;
	HrCtlExit code;

	for (;;) {
		g_autofree gchar *line = NULL;
		g_clear_pointer(&root, json_node_unref);
		root = hr_ctl_call(SOUP_METHOD_GET, path, NULL, &code);
		if (root == NULL) {
			if (tty && last != NULL)
				g_printerr("\n");
			return code;
		}
		state = json_object_get_string_member_with_default(json_node_get_object(root),
								   "state", NULL);
		if (tty) {
			line = hr_ctl_progress_line(root, hr_ctl_term_width() - 1, TRUE);
			g_printerr("\r\033[K%s", line);
		} else {
			line = hr_ctl_progress_line(root, 0, FALSE);
			/* without the time, which changes on every poll */
			if (g_strcmp0(state, last) != 0 || hr_ctl_is_final(state))
				g_printerr("request %" G_GUINT64_FORMAT ": %s\n", id, line);
		}
		g_free(last);
		last = g_strdup(state);
		if (hr_ctl_is_final(state))
			break;
		hr_ctl_wait_change(events);
	}
	if (tty)
		g_printerr("\n");
	if (!hr_ctl_print(root, hr_ctl_render_request))
		return HR_CTL_EXIT_ERROR;
	if (g_strcmp0(state, "done") == 0)
		return HR_CTL_EXIT_OK;
	if (g_strcmp0(state, "partial") == 0 || g_strcmp0(state, "budget") == 0 ||
	    g_strcmp0(state, "cancelled") == 0 || g_strcmp0(state, "timed-out") == 0)
		return HR_CTL_EXIT_SHORT;
	return HR_CTL_EXIT_ERROR;
}

static gboolean
hr_ctl_render_accepted(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = hr_ctl_answer_with_id(root, error);
	if (obj == NULL)
		return FALSE;
	g_string_append_printf(out, "%s request %" G_GINT64_FORMAT " for %s: %s\n",
			       json_object_get_string_member_with_default(obj, "kind", "?"),
			       json_object_get_int_member(obj, "request_id"),
			       json_object_get_string_member_with_default(obj, "guest", "?"),
			       json_object_get_string_member_with_default(obj, "state", "?"));
	return TRUE;
}

static gboolean
hr_ctl_usage(const gchar *format, ...) G_GNUC_PRINTF(1, 2);

static gboolean
hr_ctl_usage(const gchar *format, ...)
{
	va_list args;
	g_autofree gchar *text = NULL;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	if (opt_json)
		hr_ctl_print_json_error(text);
	g_printerr("hugeroomctl: %s (see --help)\n", text);
	return FALSE;
}

/* the options a command does not take must not be given */
static gboolean
hr_ctl_check_options(const gchar *command, gboolean blocks, gboolean gpas, gboolean ranges,
		     gboolean budget_pages, gboolean budget_ms, gboolean all)
{
	struct {
		gboolean given;
		gboolean allowed;
		const gchar *name;
	} opts[] = {
	    {opt_blocks != HR_CTL_UNSET, blocks, "--blocks"},
	    {opt_gpas != NULL, gpas, "--gpa"},
	    {opt_ranges != NULL, ranges, "--range"},
	    {opt_budget_pages != HR_CTL_UNSET, budget_pages, "--budget-pages"},
	    {opt_budget_ms != HR_CTL_UNSET, budget_ms, "--budget-ms"},
	    {opt_all, all, "--all"},
	};
	for (guint i = 0; i < G_N_ELEMENTS(opts); i++) {
		if (opts[i].given && !opts[i].allowed)
			return hr_ctl_usage("%s does not take %s", command, opts[i].name);
	}
	return TRUE;
}

/* --gpa 0x200000 --gpa 0x400000,0x600000 */
static void
hr_ctl_add_gpas(JsonBuilder *b)
{
	json_builder_set_member_name(b, "gpas");
	json_builder_begin_array(b);
	for (guint i = 0; opt_gpas[i] != NULL; i++) {
		g_auto(GStrv) parts = g_strsplit(opt_gpas[i], ",", -1);
		for (guint j = 0; parts[j] != NULL; j++) {
			g_strstrip(parts[j]);
			if (parts[j][0] != '\0')
				json_builder_add_string_value(b, parts[j]);
		}
	}
	json_builder_end_array(b);
}

/* --range START:END */
static gboolean
hr_ctl_add_ranges(JsonBuilder *b)
{
	json_builder_set_member_name(b, "ranges");
	json_builder_begin_array(b);
	for (guint i = 0; opt_ranges[i] != NULL; i++) {
		g_auto(GStrv) ends = g_strsplit(opt_ranges[i], ":", 2);
		if (g_strv_length(ends) != 2 || ends[0][0] == '\0' || ends[1][0] == '\0')
			return hr_ctl_usage("--range %s: give START:END, for example "
					    "0x100000000:0x140000000",
					    opt_ranges[i]);
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "start");
		json_builder_add_string_value(b, ends[0]);
		json_builder_set_member_name(b, "end");
		json_builder_add_string_value(b, ends[1]);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	return TRUE;
}

static HrCtlExit
hr_ctl_submit(const gchar *command, const gchar *guest)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) body_node = NULL;
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = NULL;
	g_autofree gchar *escaped = g_uri_escape_string(guest, NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/%s", escaped, command);
	gboolean evacuate = g_strcmp0(command, "evacuate") == 0;
	gboolean capture = g_strcmp0(command, "capture") == 0;
	gboolean ret = g_strcmp0(command, "return") == 0;
	HrCtlExit code;
	guint ways = (opt_blocks != HR_CTL_UNSET) + (opt_gpas != NULL) + opt_all;

	if (!hr_ctl_check_options(command, TRUE, !capture, evacuate, evacuate, !ret, ret))
		return HR_CTL_EXIT_USAGE;
	if (capture && opt_blocks == HR_CTL_UNSET) {
		hr_ctl_usage("capture needs --blocks N");
		return HR_CTL_EXIT_USAGE;
	}
	if (evacuate && ways == 0) {
		hr_ctl_usage("evacuate needs --blocks N or --gpa ADDR");
		return HR_CTL_EXIT_USAGE;
	}
	if (ret && ways != 1) {
		hr_ctl_usage("return takes exactly one of --blocks N, --gpa ADDR, --all");
		return HR_CTL_EXIT_USAGE;
	}

	json_builder_begin_object(b);
	if (opt_blocks != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "blocks");
		json_builder_add_int_value(b, opt_blocks);
	}
	if (opt_gpas != NULL)
		hr_ctl_add_gpas(b);
	if (opt_ranges != NULL && !hr_ctl_add_ranges(b))
		return HR_CTL_EXIT_USAGE;
	if (opt_budget_pages != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "budget_pages");
		json_builder_add_int_value(b, opt_budget_pages);
	}
	if (opt_budget_ms != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "budget_ms");
		json_builder_add_int_value(b, opt_budget_ms);
	}
	if (opt_timeout != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "timeout_s");
		json_builder_add_int_value(b, opt_timeout);
	}
	if (opt_all) {
		json_builder_set_member_name(b, "all");
		json_builder_add_boolean_value(b, TRUE);
	}
	json_builder_end_object(b);
	body_node = json_builder_get_root(b);
	body = json_to_string(body_node, FALSE);

	root = hr_ctl_call(SOUP_METHOD_POST, path, body, &code);
	if (root == NULL)
		return code;
	if (opt_wait) {
		guint64 id = json_object_get_int_member(json_node_get_object(root), "request_id");
		if (!opt_json) {
			g_autoptr(GString) out = g_string_new(NULL);
			if (hr_ctl_render_accepted(root, out, NULL))
				g_printerr("%s", out->str);
		}
		return hr_ctl_wait(guest, id);
	}
	if (!hr_ctl_print(root, hr_ctl_render_accepted))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

static gboolean
hr_ctl_parse_id(const gchar *str, guint64 *id)
{
	if (!g_ascii_string_to_unsigned(str, 10, 1, G_MAXINT64, id, NULL))
		return hr_ctl_usage("'%s' is not a request id (a number hugeroomctl printed)", str);
	return TRUE;
}

static HrCtlExit
hr_ctl_cancel(const gchar *guest, const gchar *id_str)
{
	g_autofree gchar *escaped = g_uri_escape_string(guest, NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/cancel", escaped);
	g_autofree gchar *body = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint64 id;
	HrCtlExit code;

	if (!hr_ctl_parse_id(id_str, &id))
		return HR_CTL_EXIT_USAGE;
	body = g_strdup_printf("{\"request_id\":%" G_GUINT64_FORMAT "}", id);
	root = hr_ctl_call(SOUP_METHOD_POST, path, body, &code);
	if (root == NULL)
		return code;
	if (opt_wait)
		return hr_ctl_wait(guest, id);
	if (!hr_ctl_print(root, hr_ctl_render_accepted))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

static gboolean
hr_ctl_render_pcp(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	(void)error;
	if (obj == NULL)
		return FALSE;
	g_string_append_printf(out, "%s: PCP policy %s %s\n",
			       json_object_get_string_member(obj, "guest"),
			       json_object_get_string_member(obj, "policy"),
			       json_object_get_boolean_member(obj, "applied")
				   ? "applied"
				   : "stored; sent when its driver is up and not donating");
	return TRUE;
}

/* PUT the policy; the daemon answers once the guest has (or stores it) */
static HrCtlExit
hr_ctl_pcp(const gchar *guest, const gchar *policy)
{
	g_autofree gchar *escaped = g_uri_escape_string(guest, NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/pcp", escaped);
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) body = NULL;
	g_autofree gchar *text = NULL;
	g_autoptr(JsonNode) root = NULL;
	HrCtlExit code;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "policy");
	json_builder_add_string_value(b, policy);
	json_builder_end_object(b);
	body = json_builder_get_root(b);
	text = json_to_string(body, FALSE);
	root = hr_ctl_call(SOUP_METHOD_PUT, path, text, &code);
	if (root == NULL)
		return code;
	if (!hr_ctl_print(root, hr_ctl_render_pcp))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

/*
 * Read a reservation again on each reservation event until it settles,
 * then print the report. Exit 0 when ready with all that was asked, 4 when
 * ready with part of it or failed (the memory could not be made free), 1
 * when it expired or was cancelled.
 */
static HrCtlExit
hr_ctl_wait_reservation(const gchar *id)
{
	g_autofree gchar *escaped = g_uri_escape_string(id, NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/reservations/%s", escaped);
	g_autofree gchar *last = NULL;
	g_autoptr(HrClientEvents) events = hr_ctl_events_open("types=reservation");
	g_autoptr(JsonNode) root = NULL;
	gboolean tty = isatty(STDERR_FILENO);
	const gchar *state;
	HrCtlExit code;

	for (;;) {
		g_autofree gchar *line = NULL;
		g_clear_pointer(&root, json_node_unref);
		root = hr_ctl_call(SOUP_METHOD_GET, path, NULL, &code);
		if (root == NULL)
			return code;
		state = json_object_get_string_member_with_default(json_node_get_object(root),
								   "state", "");
		line = hr_ctl_reservation_progress_line(root, hr_ctl_term_width() - 1, tty);
		if (tty) {
			g_printerr("\r\033[K%s", line);
		} else if (g_strcmp0(line, last) != 0) {
			g_printerr("%s\n", line);
		}
		g_free(last);
		last = g_steal_pointer(&line);
		if (g_strcmp0(state, "created") != 0 && g_strcmp0(state, "in-progress") != 0)
			break;
		hr_ctl_wait_change(events);
	}
	if (tty)
		g_printerr("\n");
	if (!hr_ctl_print(root, hr_ctl_render_reservation))
		return HR_CTL_EXIT_ERROR;
	if (g_strcmp0(state, "ready") == 0)
		return json_object_get_boolean_member_with_default(json_node_get_object(root),
								   "partial", FALSE)
			   ? HR_CTL_EXIT_SHORT
			   : HR_CTL_EXIT_OK;
	if (g_strcmp0(state, "failed") == 0)
		return HR_CTL_EXIT_SHORT;
	return HR_CTL_EXIT_ERROR;
}

/* a reservation's body, for prepare and (without a requester) plan */
static gchar *
hr_ctl_reservation_body(const gchar *size, gboolean requester)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) body_node = NULL;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "size");
	json_builder_add_string_value(b, size);
	if (opt_node != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "node");
		json_builder_add_int_value(b, opt_node);
	}
	if (opt_deadline != HR_CTL_UNSET) {
		json_builder_set_member_name(b, "deadline_s");
		json_builder_add_int_value(b, opt_deadline);
	}
	json_builder_set_member_name(b, "strict");
	json_builder_add_boolean_value(b, opt_strict);
	if (requester) {
		json_builder_set_member_name(b, "requester");
		json_builder_add_string_value(b, opt_requester != NULL ? opt_requester
								: "hugeroomctl");
	}
	json_builder_end_object(b);
	body_node = json_builder_get_root(b);
	return json_to_string(body_node, FALSE);
}

static HrCtlExit
hr_ctl_prepare(const gchar *size)
{
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = hr_ctl_reservation_body(size, TRUE);
	const gchar *id;
	HrCtlExit code;

	root = hr_ctl_call(SOUP_METHOD_POST, "/v1/reservations", body, &code);
	if (root == NULL)
		return code;
	id = json_object_get_string_member_with_default(json_node_get_object(root), "id", "?");
	if (opt_wait) {
		if (!opt_json)
			g_printerr("reservation %s accepted\n", id);
		return hr_ctl_wait_reservation(id);
	}
	if (opt_json) {
		hr_ctl_print_json(root);
	} else {
		g_print("reservation %s accepted; follow it with 'hugeroomctl reservation %s'\n", id,
			id);
	}
	return HR_CTL_EXIT_OK;
}

/* a dry run: exit 0 when the plan makes all of @size free, 4 when it falls short */
static HrCtlExit
hr_ctl_plan(const gchar *size)
{
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = hr_ctl_reservation_body(size, FALSE);
	JsonObject *plan;
	HrCtlExit code;

	root = hr_ctl_call(SOUP_METHOD_POST, "/v1/plan", body, &code);
	if (root == NULL)
		return code;
	if (!hr_ctl_print(root, hr_ctl_render_plan))
		return HR_CTL_EXIT_ERROR;
	plan = json_object_get_object_member(json_node_get_object(root), "plan");
	return json_object_get_boolean_member_with_default(plan, "complete", FALSE)
		   ? HR_CTL_EXIT_OK
		   : HR_CTL_EXIT_SHORT;
}

/* the host, the reservations and the guests: three calls, one view */
static HrCtlExit
hr_ctl_status(void)
{
	const gchar *parts[][2] = {
	    {"host", "/v1/host"},
	    {"reservations", "/v1/reservations"},
	    {"guests", "/v1/guests"},
	};
	g_autoptr(JsonObject) status = json_object_new();
	g_autoptr(JsonNode) root = json_node_new(JSON_NODE_OBJECT);
	HrCtlExit code;

	for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
		JsonNode *part = hr_ctl_call(SOUP_METHOD_GET, parts[i][1], NULL, &code);
		JsonObject *obj;
		if (part == NULL)
			return code;
		obj = JSON_NODE_HOLDS_OBJECT(part) ? json_node_get_object(part) : NULL;
		/* the lists unwrapped: {"reservations": [...]} -> [...] */
		if (i > 0 && obj != NULL && json_object_has_member(obj, parts[i][0])) {
			json_object_set_member(status, parts[i][0],
					       json_node_copy(json_object_get_member(obj, parts[i][0])));
			if (json_object_has_member(obj, "rejected_unidentified"))
				json_object_set_member(
				    status, "rejected_unidentified",
				    json_node_copy(json_object_get_member(obj,
									  "rejected_unidentified")));
			json_node_unref(part);
		} else {
			json_object_set_member(status, parts[i][0], part);
		}
	}
	json_node_set_object(root, status);
	if (!hr_ctl_print(root, hr_ctl_render_status))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

/*
 * What a libvirt domain needs for the device: QEMU's chardev to the
 * daemon's VM socket (--vm-socket, else vm_socket of hugeroomd.conf).
 */
static HrCtlExit
hr_ctl_libvirt_xml(const gchar *domain)
{
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(GError) error = NULL;
	g_autofree gchar *xml = NULL;
	const gchar *vm_socket = opt_vm_socket;

	if (vm_socket == NULL) {
		if (!hr_config_load(config, HR_CONFIG_DEFAULT_PATH, FALSE, &error)) {
			g_printerr("hugeroomctl: %s; pass --vm-socket PATH\n", error->message);
			return HR_CTL_EXIT_ERROR;
		}
		vm_socket = config->vm_socket;
	}
	xml = hr_libvirt_qemu_commandline(vm_socket);
	if (opt_json) {
		g_autoptr(JsonBuilder) b = json_builder_new();
		g_autoptr(JsonNode) root = NULL;
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "domain");
		json_builder_add_string_value(b, domain);
		json_builder_set_member_name(b, "vm_socket");
		json_builder_add_string_value(b, vm_socket);
		json_builder_set_member_name(b, "qemu_commandline");
		json_builder_add_string_value(b, xml);
		json_builder_end_object(b);
		root = json_builder_get_root(b);
		hr_ctl_print_json(root);
		return HR_CTL_EXIT_OK;
	}
	g_print("<!-- hugeroom for domain %s: add inside <domain> with 'virsh edit %s'.\n"
		"     QEMU runs as libvirt's qemu user: it needs write access to %s\n"
		"     (see HOOK.md, \"The VM socket\"). -->\n%s",
		domain, domain, vm_socket, xml);
	return HR_CTL_EXIT_OK;
}

/*
 * The commands that are one call to the daemon. With a @suffix the command
 * takes one argument, and the path is PATH/ARGUMENT@suffix.
 */
typedef struct {
	const gchar *name;
	const gchar *method;
	const gchar *path;
	const gchar *suffix;
	gboolean (*render)(JsonNode *, GString *, GError **);
} HrCtlCall;

static const HrCtlCall hr_ctl_calls[] = {
    {"guests", "GET", "/v1/guests", NULL, hr_ctl_render_guests},
    {"guest", "GET", "/v1/guests", "", hr_ctl_render_guest},
    {"requests", "GET", "/v1/guests", "/requests", hr_ctl_render_requests},
    {"report", "POST", "/v1/guests", "/report", hr_ctl_render_report},
    {"reservations", "GET", "/v1/reservations", NULL, hr_ctl_render_reservations},
    {"reservation", "GET", "/v1/reservations", "", hr_ctl_render_reservation},
    {"release", "POST", "/v1/reservations", "/release", hr_ctl_render_reservation},
    {"consume", "POST", "/v1/reservations", "/consume", hr_ctl_render_reservation},
    {"host", "GET", "/v1/host", NULL, hr_ctl_render_host},
};

/* one line of `watch` for the event @obj of @type */
static gchar *
hr_ctl_watch_line(const gchar *type, JsonObject *obj)
{
	g_autoptr(GDateTime) now = g_date_time_new_now_local();
	g_autofree gchar *when = g_date_time_format(now, "%H:%M:%S");
	const gchar *guest = json_object_get_string_member_with_default(obj, "guest", "-");
	g_autoptr(GString) line = g_string_new(NULL);

	g_string_printf(line, "%s %-18s %-12s ", when, type, guest);
	if (json_object_has_member(obj, "request")) {
		JsonObject *r = json_object_get_object_member(obj, "request");
		JsonObject *p = json_object_get_object_member(r, "progress");
		g_string_append_printf(
		    line, "%s %" G_GINT64_FORMAT " %s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
			  " blocks",
		    json_object_get_string_member(r, "kind"),
		    json_object_get_int_member(r, "request_id"),
		    json_object_get_string_member(r, "state"),
		    p != NULL ? json_object_get_int_member_with_default(p, "blocks_freed", 0) : 0,
		    json_object_get_int_member_with_default(r, "target_blocks", 0));
	} else if (json_object_has_member(obj, "reservation")) {
		JsonObject *r = json_object_get_object_member(obj, "reservation");
		g_string_append_printf(line, "%s %s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
					     " blocks",
				       json_object_get_string_member(r, "id"),
				       json_object_get_string_member(r, "state"),
				       json_object_get_int_member_with_default(r, "obtained", 0),
				       json_object_get_int_member_with_default(r, "need_blocks", 0));
	} else if (g_strcmp0(type, "status") == 0) {
		g_string_append_printf(
		    line, "free %" G_GINT64_FORMAT " MiB, %" G_GINT64_FORMAT " blocks held",
		    json_object_get_int_member_with_default(obj, "mem_free_pages", 0) / 256,
		    json_object_get_int_member_with_default(obj, "held_blocks", 0));
	} else if (g_strcmp0(type, "plan") == 0) {
		g_string_append_printf(
		    line, "%s: decided in %" G_GINT64_FORMAT " us",
		    json_object_get_string_member_with_default(obj, "reservation_id", "?"),
		    json_object_get_int_member_with_default(obj, "decision_us", 0));
	} else {
		g_string_append_printf(
		    line, "%s, %" G_GINT64_FORMAT " blocks held",
		    json_object_get_boolean_member_with_default(obj, "connected", FALSE)
			? "connected"
			: "disconnected",
		    json_object_get_int_member_with_default(obj, "held_blocks", 0));
	}
	return g_string_free(g_steal_pointer(&line), FALSE);
}

/* the event stream live, a line per event (JSON Lines with --json), until interrupted */
static HrCtlExit
hr_ctl_watch(const gchar *guest)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *escaped = guest != NULL ? g_uri_escape_string(guest, NULL, FALSE) : NULL;
	g_autofree gchar *query = escaped != NULL ? g_strdup_printf("guest=%s", escaped) : NULL;
	g_autoptr(HrClientEvents) events = hr_client_events_open(opt_socket, query, &error);

	if (events == NULL) {
		g_printerr("hugeroomctl: %s\n", error->message);
		return HR_CTL_EXIT_ERROR;
	}
	for (;;) {
		g_autofree gchar *type = NULL;
		g_autofree gchar *data = NULL;
		g_autoptr(JsonParser) parser = json_parser_new();
		g_autofree gchar *line = NULL;
		JsonNode *root;

		if (!hr_client_events_next(events, G_MAXINT32, &type, &data, &error)) {
			if (error == NULL)
				continue;
			g_printerr("hugeroomctl: %s\n", error->message);
			return HR_CTL_EXIT_ERROR;
		}
		if (opt_json) {
			g_print("%s\n", data);
			fflush(stdout);
			continue;
		}
		if (!json_parser_load_from_data(parser, data, -1, &error) ||
		    !JSON_NODE_HOLDS_OBJECT(root = json_parser_get_root(parser))) {
			g_printerr("hugeroomctl: a %s event without a JSON object: %s\n", type,
				   error != NULL ? error->message : data);
			return HR_CTL_EXIT_ERROR;
		}
		line = hr_ctl_watch_line(type, json_node_get_object(root));
		g_print("%s\n", line);
		fflush(stdout);
	}
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GOptionContext) context = g_option_context_new("COMMAND [GUEST] [ARGS]");
	const GOptionEntry entries[] = {
	    {"socket", 's', 0, G_OPTION_ARG_FILENAME, &opt_socket,
	     "hugeroomd's API socket (default " HR_CONFIG_DEFAULT_API_SOCKET ")", "PATH"},
	    {"json", 'j', 0, G_OPTION_ARG_NONE, &opt_json, "Print the daemon's JSON", NULL},
	    {"blocks", 'n', 0, G_OPTION_ARG_INT64, &opt_blocks, "Number of 2 MiB blocks", "N"},
	    {"gpa", 'g', 0, G_OPTION_ARG_STRING_ARRAY, &opt_gpas,
	     "A guest-physical block address (repeat, or separate with commas)", "ADDR"},
	    {"range", 'r', 0, G_OPTION_ARG_STRING_ARRAY, &opt_ranges,
	     "evacuate: pick blocks only inside START:END (repeat)", "START:END"},
	    {"budget-pages", 0, 0, G_OPTION_ARG_INT64, &opt_budget_pages,
	     "evacuate: stop after migrating this many 4 KiB pages", "P"},
	    {"budget-ms", 0, 0, G_OPTION_ARG_INT64, &opt_budget_ms,
	     "evacuate, capture: stop after this many ms in the guest", "MS"},
	    {"timeout", 't', 0, G_OPTION_ARG_INT64, &opt_timeout,
	     "Give up after S seconds, queue included (default: the daemon's)", "S"},
	    {"all", 'a', 0, G_OPTION_ARG_NONE, &opt_all, "return: every held block", NULL},
	    {"wait", 'w', 0, G_OPTION_ARG_NONE, &opt_wait,
	     "Wait for the request to end, showing progress, then summarize it", NULL},
	    {"node", 0, 0, G_OPTION_ARG_INT64, &opt_node,
	     "prepare, plan: the host NUMA node (default any)", "N"},
	    {"deadline", 'd', 0, G_OPTION_ARG_INT64, &opt_deadline,
	     "prepare, plan: stop working after S seconds and keep what was made free", "S"},
	    {"strict", 0, 0, G_OPTION_ARG_NONE, &opt_strict,
	     "prepare, plan: all or nothing (fail rather than keep part)", NULL},
	    {"requester", 0, 0, G_OPTION_ARG_STRING, &opt_requester,
	     "prepare: who asks, shown in the reservation (default hugeroomctl)", "NAME"},
	    {"vm-socket", 0, 0, G_OPTION_ARG_FILENAME, &opt_vm_socket,
	     "libvirt-xml: the daemon's VM socket (default: vm_socket of " HR_CONFIG_DEFAULT_PATH
	     ")",
	     "PATH"},
	    {NULL},
	};
	g_autofree gchar *escaped = NULL;
	g_autofree gchar *path = NULL;
	const gchar *cmd;
	gboolean plan;

	setlocale(LC_ALL, "");
	g_option_context_set_summary(
	    context,
	    "Commands:\n"
	    "  status                       host nodes and their free 2 MiB blocks, reservations\n"
	    "                               and guests in one view\n"
	    "  guests                       list the guests hugeroomd knows\n"
	    "  guest GUEST                  show one guest (name or UUID) in detail\n"
	    "  report GUEST                 ask a guest for a status report now\n"
	    "  evacuate GUEST (--blocks N | --gpa ADDR...) [--range START:END...]\n"
	    "           [--budget-pages P] [--budget-ms MS] [--timeout S] [--wait]\n"
	    "                               free and hold 2 MiB blocks: the N cheapest,\n"
	    "                               or the named ones (with --blocks: stop after N)\n"
	    "  capture GUEST --blocks N [--budget-ms MS] [--timeout S] [--wait]\n"
	    "                               hold N blocks the guest's own compaction finds\n"
	    "  return GUEST (--blocks N | --gpa ADDR... | --all) [--wait]\n"
	    "                               give held blocks back to the guest\n"
	    "  cancel GUEST REQUEST_ID [--wait]\n"
	    "  pcp GUEST POLICY             tune the guest's per-CPU page lists: latency,\n"
	    "                               balanced, density, default or explicit:HIGH\n"
	    "  requests GUEST               the guest's recent requests\n"
	    "  request GUEST REQUEST_ID     one request in detail\n"
	    "  prepare SIZE [--node N] [--deadline S] [--strict] [--requester NAME] [--wait]\n"
	    "                               make SIZE (\"4G\", \"512M\") of 2 MiB blocks free on\n"
	    "                               the host: free ones, host compaction, guest donations\n"
	    "  plan SIZE [--node N] [--deadline S] [--strict]\n"
	    "                               a dry run of prepare: what the planner would ask of\n"
	    "                               which donors now; nothing is done\n"
	    "  reservations                 list reservations\n"
	    "  reservation ID               one reservation: each step, what it gave and cost\n"
	    "  release ID                   cancel a reservation or release its memory; holds go\n"
	    "                               back to the guests\n"
	    "  consume ID                   the memory of a ready reservation is in use\n"
	    "  host                         the host's memory per NUMA node\n"
	    "  watch [GUEST]                what happens, live: requests, reservations, guests\n"
	    "  libvirt-xml DOMAIN [--vm-socket PATH]\n"
	    "                               the <qemu:commandline> a libvirt domain needs for\n"
	    "                               the virtio-hugeroom device\n"
	    "\n"
	    "--json works with every command: the daemon's JSON on stdout, and on failure\n"
	    "{\"error\": ...} there too.\n"
	    "\n"
	    "Exit codes: 0 done; 1 an error (the daemon refused, the request failed or was\n"
	    "lost); 2 a usage error; 3 hugeroomd did not answer (not running, --socket);\n"
	    "4 not satisfiable: --wait ended short (partial, budget, cancelled, timed out),\n"
	    "prepare --wait ready with part of it or failed, plan cannot make all of SIZE free.");
	g_option_context_add_main_entries(context, entries, NULL);
	if (!g_option_context_parse(context, &argc, &argv, &error)) {
		g_printerr("hugeroomctl: %s (see --help)\n", error->message);
		return HR_CTL_EXIT_USAGE;
	}
	if (opt_socket == NULL)
		opt_socket = g_strdup(HR_CONFIG_DEFAULT_API_SOCKET);
	if (argc < 2) {
		hr_ctl_usage("no command given; one of status, guests, guest, report, evacuate, "
			     "capture, return, cancel, requests, request, prepare, plan, "
			     "reservations, reservation, release, consume, host, libvirt-xml");
		return HR_CTL_EXIT_USAGE;
	}
	cmd = argv[1];
	plan = g_strcmp0(cmd, "plan") == 0;
	if ((opt_node != HR_CTL_UNSET || opt_deadline != HR_CTL_UNSET || opt_strict) &&
	    g_strcmp0(cmd, "prepare") != 0 && !plan) {
		hr_ctl_usage("--node, --deadline and --strict go with prepare or plan");
		return HR_CTL_EXIT_USAGE;
	}
	if (opt_requester != NULL && g_strcmp0(cmd, "prepare") != 0) {
		hr_ctl_usage("--requester goes with prepare");
		return HR_CTL_EXIT_USAGE;
	}
	if (opt_vm_socket != NULL && g_strcmp0(cmd, "libvirt-xml") != 0) {
		hr_ctl_usage("--vm-socket goes with libvirt-xml");
		return HR_CTL_EXIT_USAGE;
	}
	if (g_strcmp0(cmd, "libvirt-xml") == 0) {
		if (argc != 3) {
			hr_ctl_usage("libvirt-xml takes one DOMAIN name");
			return HR_CTL_EXIT_USAGE;
		}
		return hr_ctl_libvirt_xml(argv[2]);
	}
	if (g_strcmp0(cmd, "prepare") == 0 || plan) {
		if (argc != 3) {
			hr_ctl_usage("%s takes one SIZE, for example '%s 4G'", cmd, cmd);
			return HR_CTL_EXIT_USAGE;
		}
		if (!hr_ctl_check_options(cmd, FALSE, FALSE, FALSE, FALSE, FALSE, FALSE) ||
		    (opt_timeout != HR_CTL_UNSET &&
		     !hr_ctl_usage("%s takes --deadline, not --timeout", cmd)) ||
		    (plan && opt_wait && !hr_ctl_usage("plan does nothing to wait for")))
			return HR_CTL_EXIT_USAGE;
		return plan ? hr_ctl_plan(argv[2]) : hr_ctl_prepare(argv[2]);
	}
	if (g_strcmp0(cmd, "evacuate") == 0 || g_strcmp0(cmd, "capture") == 0 ||
	    g_strcmp0(cmd, "return") == 0) {
		if (argc != 3) {
			hr_ctl_usage("%s takes one GUEST", cmd);
			return HR_CTL_EXIT_USAGE;
		}
		return hr_ctl_submit(cmd, argv[2]);
	}
	if (!hr_ctl_check_options(cmd, FALSE, FALSE, FALSE, FALSE, FALSE, FALSE) ||
	    (opt_timeout != HR_CTL_UNSET && !hr_ctl_usage("%s does not take --timeout", cmd)))
		return HR_CTL_EXIT_USAGE;
	if (opt_wait && g_strcmp0(cmd, "cancel") != 0) {
		hr_ctl_usage("%s does not take --wait", cmd);
		return HR_CTL_EXIT_USAGE;
	}
	if (g_strcmp0(cmd, "cancel") == 0 && argc == 4)
		return hr_ctl_cancel(argv[2], argv[3]);
	if (g_strcmp0(cmd, "watch") == 0 && argc <= 3)
		return hr_ctl_watch(argv[2]);
	if (g_strcmp0(cmd, "status") == 0 && argc == 2)
		return hr_ctl_status();
	if (g_strcmp0(cmd, "pcp") == 0 && argc == 4)
		return hr_ctl_pcp(argv[2], argv[3]);
	if (g_strcmp0(cmd, "request") == 0 && argc == 4) {
		guint64 id;
		if (!hr_ctl_parse_id(argv[3], &id))
			return HR_CTL_EXIT_USAGE;
		escaped = g_uri_escape_string(argv[2], NULL, FALSE);
		path = g_strdup_printf("/v1/guests/%s/requests/%" G_GUINT64_FORMAT, escaped, id);
		return hr_ctl_run(SOUP_METHOD_GET, path, hr_ctl_render_request);
	}
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_calls); i++) {
		const HrCtlCall *c = &hr_ctl_calls[i];
		if (g_strcmp0(cmd, c->name) != 0 || argc != (c->suffix != NULL ? 3 : 2))
			continue;
		if (c->suffix != NULL) {
			escaped = g_uri_escape_string(argv[2], NULL, FALSE);
			path = g_strconcat(c->path, "/", escaped, c->suffix, NULL);
		}
		return hr_ctl_run(c->method, path != NULL ? path : c->path, c->render);
	}
	hr_ctl_usage("cannot understand '%s' with %d argument(s)", cmd, argc - 2);
	return HR_CTL_EXIT_USAGE;
}
