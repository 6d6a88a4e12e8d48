/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * hugeroomctl: hugeroomd's API for people and scripts. Every command is a
 * row of hr_ctl_commands[] (its arguments, the options it takes, its help
 * page); main() checks the command line against that row and what it can
 * check locally (sizes and counts against their limits, a node the host
 * has, a guest the daemon knows) before anything is sent, so that a
 * mistake is told in the command line's own terms.
 */

#define G_LOG_DOMAIN "Hugeroomctl"

#include <libsoup/soup.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hr-client.h"
#include "hr-config.h"
#include "hr-ctl.h"
#include "hr-libvirt.h"
#include "hr-safefile.h"

/* the exit codes, as hugeroomctl(8) and --help document them */
typedef enum {
	HR_CTL_EXIT_OK = 0,
	HR_CTL_EXIT_ERROR = 1,	     /* the daemon refused, a request failed, a bad answer */
	HR_CTL_EXIT_USAGE = 2,	     /* a bad command line */
	HR_CTL_EXIT_UNREACHABLE = 3, /* no answer from hugeroomd */
	HR_CTL_EXIT_SHORT = 4,	     /* not satisfiable: ended short, timed out, a plan short */
} HrCtlExit;

/* numbers the user did not give */
#define HR_CTL_UNSET G_MININT64

/* the bounds the API puts on what the command line sends (host/API.md) */
#define HR_CTL_BLOCKS_MAX (G_MAXUINT32 - 1)
#define HR_CTL_BUDGET_MS_MAX G_MAXUINT32
#define HR_CTL_TIMEOUT_MAX 86400
#define HR_CTL_DEADLINE_MAX 86400
#define HR_CTL_NODE_MAX 1023
#define HR_CTL_REQUESTER_MAX 256
/* a guest's name comes from its HELLO (SPEC: 63 bytes and a NUL) */
#define HR_CTL_GUEST_MAX 63
#define HR_CTL_ID_MAX 64
/* a bearer token file holds one token */
#define HR_CTL_TOKEN_FILE_MAX 4096

static gchar *opt_socket;
static gchar *opt_url;
static gchar *opt_token_file;
static gchar *opt_ca_file;
static gboolean opt_json;
static gchar *opt_output;
static gboolean opt_noheadings;
static gboolean opt_raw;
static gboolean opt_version;
static gboolean opt_help;
static gint64 opt_blocks = HR_CTL_UNSET;
static gchar **opt_gpas;
static gchar **opt_ranges;
static gint64 opt_budget_pages = HR_CTL_UNSET;
static gint64 opt_budget_ms = HR_CTL_UNSET;
static gint64 opt_timeout = HR_CTL_UNSET;
static gboolean opt_all;
static gboolean opt_wait;
static gboolean opt_force;
static gint64 opt_node = HR_CTL_UNSET;
static gint64 opt_deadline = HR_CTL_UNSET;
static gboolean opt_strict;
static gchar *opt_requester;
static gchar *opt_vm_socket;

static HrClient *hr_ctl_client;

/* how often --wait asks for the request without the event stream */
#define HR_CTL_POLL_MS 250
/* with it: a read after every event, and at least this often */
#define HR_CTL_REREAD_MS 5000

/* ---------------------------------------------------------------------- */
/* The options, and which command takes which */

typedef enum {
	HR_CTL_OPT_BLOCKS = 1 << 0,
	HR_CTL_OPT_GPA = 1 << 1,
	HR_CTL_OPT_RANGE = 1 << 2,
	HR_CTL_OPT_BUDGET_PAGES = 1 << 3,
	HR_CTL_OPT_BUDGET_MS = 1 << 4,
	HR_CTL_OPT_TIMEOUT = 1 << 5,
	HR_CTL_OPT_ALL = 1 << 6,
	HR_CTL_OPT_WAIT = 1 << 7,
	HR_CTL_OPT_NODE = 1 << 8,
	HR_CTL_OPT_DEADLINE = 1 << 9,
	HR_CTL_OPT_STRICT = 1 << 10,
	HR_CTL_OPT_REQUESTER = 1 << 11,
	HR_CTL_OPT_VM_SOCKET = 1 << 12,
	HR_CTL_OPT_TABLE = 1 << 13, /* --output, --noheadings, --raw */
	HR_CTL_OPT_FORCE = 1 << 15,
	HR_CTL_OPT_GLOBAL = 1 << 14,
} HrCtlOpt;

typedef struct {
	HrCtlOpt bit;
	GOptionEntry entry;
} HrCtlOption;

static const HrCtlOption hr_ctl_options[] = {
    {HR_CTL_OPT_GLOBAL,
     {"socket", 's', 0, G_OPTION_ARG_FILENAME, &opt_socket,
      "hugeroomd's API socket (default " HR_CONFIG_DEFAULT_API_SOCKET ")", "PATH"}},
    {HR_CTL_OPT_GLOBAL,
     {"url", 'u', 0, G_OPTION_ARG_STRING, &opt_url,
      "hugeroomd on the network (its api_listen), with --token-file", "https://HOST:PORT"}},
    {HR_CTL_OPT_GLOBAL,
     {"token-file", 0, 0, G_OPTION_ARG_FILENAME, &opt_token_file,
      "--url: a file with the bearer token, readable only by you", "FILE"}},
    {HR_CTL_OPT_GLOBAL,
     {"ca-file", 0, 0, G_OPTION_ARG_FILENAME, &opt_ca_file,
      "--url: the CA that signed the daemon's certificate (default: the system's)", "FILE"}},
    {HR_CTL_OPT_GLOBAL,
     {"json", 'j', 0, G_OPTION_ARG_NONE, &opt_json,
      "Print the daemon's JSON; a failure is {\"error\": ...} on stdout too", NULL}},
    {HR_CTL_OPT_GLOBAL,
     {"version", 'V', 0, G_OPTION_ARG_NONE, &opt_version, "Print hugeroomctl's version", NULL}},
    {HR_CTL_OPT_GLOBAL,
     {"help", 'h', 0, G_OPTION_ARG_NONE, &opt_help,
      "This help; with a command, the command's (also: help COMMAND)", NULL}},
    {HR_CTL_OPT_TABLE,
     {"output", 'o', 0, G_OPTION_ARG_STRING, &opt_output,
      "Tables: these columns, in this order (help COMMAND lists them)", "COL,..."}},
    {HR_CTL_OPT_TABLE,
     {"noheadings", 0, 0, G_OPTION_ARG_NONE, &opt_noheadings,
      "Tables: no heading line, no notes", NULL}},
    {HR_CTL_OPT_TABLE,
     {"raw", 0, 0, G_OPTION_ARG_NONE, &opt_raw,
      "Tables: one space between columns, spaces and escapes encoded as \\xHH", NULL}},
    {HR_CTL_OPT_BLOCKS,
     {"blocks", 'n', 0, G_OPTION_ARG_INT64, &opt_blocks, "Number of 2 MiB blocks", "N"}},
    {HR_CTL_OPT_GPA,
     {"gpa", 'g', 0, G_OPTION_ARG_STRING_ARRAY, &opt_gpas,
      "A guest-physical block address (repeat, or separate with commas)", "ADDR"}},
    {HR_CTL_OPT_RANGE,
     {"range", 'r', 0, G_OPTION_ARG_STRING_ARRAY, &opt_ranges,
      "Pick blocks only inside START:END (repeat)", "START:END"}},
    {HR_CTL_OPT_BUDGET_PAGES,
     {"budget-pages", 0, 0, G_OPTION_ARG_INT64, &opt_budget_pages,
      "Stop after migrating this many 4 KiB pages", "P"}},
    {HR_CTL_OPT_BUDGET_MS,
     {"budget-ms", 0, 0, G_OPTION_ARG_INT64, &opt_budget_ms,
      "Stop after this many ms in the guest", "MS"}},
    {HR_CTL_OPT_TIMEOUT,
     {"timeout", 't', 0, G_OPTION_ARG_INT64, &opt_timeout,
      "Give up after S seconds, queue included (default: the daemon's)", "S"}},
    {HR_CTL_OPT_ALL,
     {"all", 'a', 0, G_OPTION_ARG_NONE, &opt_all, "Every held block", NULL}},
    {HR_CTL_OPT_WAIT,
     {"wait", 'w', 0, G_OPTION_ARG_NONE, &opt_wait,
      "Wait for it to end, showing progress, then summarize it", NULL}},
    {HR_CTL_OPT_NODE,
     {"node", 0, 0, G_OPTION_ARG_INT64, &opt_node, "The host NUMA node (default any)", "N"}},
    {HR_CTL_OPT_DEADLINE,
     {"deadline", 'd', 0, G_OPTION_ARG_INT64, &opt_deadline,
      "Stop working after S seconds and keep what was made free", "S"}},
    {HR_CTL_OPT_STRICT,
     {"strict", 0, 0, G_OPTION_ARG_NONE, &opt_strict,
      "All or nothing (fail rather than keep part)", NULL}},
    {HR_CTL_OPT_REQUESTER,
     {"requester", 0, 0, G_OPTION_ARG_STRING, &opt_requester,
      "Who asks, shown in the reservation (default hugeroomctl)", "NAME"}},
    {HR_CTL_OPT_FORCE,
     {"force", 0, 0, G_OPTION_ARG_NONE, &opt_force,
      "An admin ends a reservation another client made, or for another requester", NULL}},
    {HR_CTL_OPT_VM_SOCKET,
     {"vm-socket", 0, 0, G_OPTION_ARG_FILENAME, &opt_vm_socket,
      "The daemon's VM socket (default: vm_socket of " HR_CONFIG_DEFAULT_PATH ")", "PATH"}},
};

/* was the option of @bit given? */
static gboolean
hr_ctl_option_given(HrCtlOpt bit)
{
	switch (bit) {
	case HR_CTL_OPT_BLOCKS:
		return opt_blocks != HR_CTL_UNSET;
	case HR_CTL_OPT_GPA:
		return opt_gpas != NULL;
	case HR_CTL_OPT_RANGE:
		return opt_ranges != NULL;
	case HR_CTL_OPT_BUDGET_PAGES:
		return opt_budget_pages != HR_CTL_UNSET;
	case HR_CTL_OPT_BUDGET_MS:
		return opt_budget_ms != HR_CTL_UNSET;
	case HR_CTL_OPT_TIMEOUT:
		return opt_timeout != HR_CTL_UNSET;
	case HR_CTL_OPT_ALL:
		return opt_all;
	case HR_CTL_OPT_WAIT:
		return opt_wait;
	case HR_CTL_OPT_NODE:
		return opt_node != HR_CTL_UNSET;
	case HR_CTL_OPT_DEADLINE:
		return opt_deadline != HR_CTL_UNSET;
	case HR_CTL_OPT_STRICT:
		return opt_strict;
	case HR_CTL_OPT_REQUESTER:
		return opt_requester != NULL;
	case HR_CTL_OPT_VM_SOCKET:
		return opt_vm_socket != NULL;
	case HR_CTL_OPT_FORCE:
		return opt_force;
	case HR_CTL_OPT_TABLE:
		return opt_output != NULL || opt_noheadings || opt_raw;
	case HR_CTL_OPT_GLOBAL:
		break;
	}
	return FALSE;
}

/* "--blocks", or "--output, --noheadings, --raw" */
static gchar *
hr_ctl_option_names(HrCtlOpt bit)
{
	g_autoptr(GString) str = g_string_new(NULL);
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_options); i++) {
		if (hr_ctl_options[i].bit == bit)
			g_string_append_printf(str, "%s--%s", str->len > 0 ? ", " : "",
					       hr_ctl_options[i].entry.long_name);
	}
	return g_string_free(g_steal_pointer(&str), FALSE);
}

/* ---------------------------------------------------------------------- */
/* Output and errors */

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

/* a failure: on stderr, and as JSON with --json; @code back */
static HrCtlExit G_GNUC_PRINTF(2, 3)
hr_ctl_fail(HrCtlExit code, const gchar *format, ...)
{
	va_list args;
	g_autofree gchar *text = NULL;
	g_autofree gchar *shown = NULL;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	if (opt_json)
		hr_ctl_print_json_error(text);
	shown = hr_client_escape(text);
	g_printerr("hugeroomctl: %s\n", shown);
	return code;
}

static const gchar *hr_ctl_command_name = "COMMAND";

/* a bad command line: exit 2, pointing at the command's help */
static HrCtlExit G_GNUC_PRINTF(1, 2)
hr_ctl_usage(const gchar *format, ...)
{
	va_list args;
	g_autofree gchar *text = NULL;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	if (g_strcmp0(hr_ctl_command_name, "COMMAND") == 0)
		return hr_ctl_fail(HR_CTL_EXIT_USAGE, "%s (see --help)", text);
	return hr_ctl_fail(HR_CTL_EXIT_USAGE, "%s (see 'hugeroomctl help %s')", text,
			   hr_ctl_command_name);
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
		hr_ctl_fail(HR_CTL_EXIT_ERROR, "%s", error->message);
		return FALSE;
	}
	g_print("%s", out->str);
	return TRUE;
}

/*
 * The daemon names the fields of its JSON ("blocks: 0 is out of range");
 * the user typed flags. The API field an error starts with, as the flag
 * or argument that set it.
 */
static gchar *
hr_ctl_cli_terms(const gchar *message)
{
	static const struct {
		const gchar *field;
		const gchar *cli;
	} terms[] = {
	    {"budget_pages", "--budget-pages"}, {"budget_ms", "--budget-ms"},
	    {"timeout_s", "--timeout"},	      {"deadline_s", "--deadline"},
	    {"request_id", "REQUEST_ID"},	      {"requester", "--requester"},
	    {"blocks", "--blocks"},	      {"gpas", "--gpa"},
	    {"ranges", "--range"},	      {"all", "--all"},
	    {"node", "--node"},		      {"strict", "--strict"},
	    {"bytes", "SIZE"},		      {"size", "SIZE"},
	    {"policy", "POLICY"},		      {"high", "POLICY explicit:HIGH"},
	};
	const gchar *force = strstr(message, "\"force\": true");

	/* not_owner says how to override it in the API's terms */
	if (force != NULL)
		return g_strdup_printf("%.*s--force%s", (gint)(force - message), message,
				       force + strlen("\"force\": true"));
	for (guint i = 0; i < G_N_ELEMENTS(terms); i++) {
		gsize len = strlen(terms[i].field);
		if (g_str_has_prefix(message, terms[i].field) && message[len] != '\0' &&
		    strchr(":[.", message[len]) != NULL)
			return g_strconcat(terms[i].cli, message + len, NULL);
	}
	return g_strdup(message);
}

/* did @error come without any answer from the daemon? */
static gboolean
hr_ctl_no_answer(const GError *error)
{
	return (error->domain == G_IO_ERROR &&
		!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT)) ||
	       error->domain == G_TLS_ERROR || error->domain == G_RESOLVER_ERROR;
}

static const gchar *
hr_ctl_reach_hint(void)
{
	if (hr_client_is_remote(hr_ctl_client))
		return "is hugeroomd's api_listen at that address, and is --ca-file its CA?";
	return "is hugeroomd running? start it with 'systemctl start hugeroomd', or pass "
	       "--socket PATH";
}

/*
 * A request to the daemon; NULL after telling the user why, with the exit
 * code in @code: UNREACHABLE when hugeroomd did not answer, else ERROR.
 * @status, when not NULL, gets the HTTP status of an error answer.
 */
static JsonNode *
hr_ctl_call_status(const gchar *method, const gchar *path, const gchar *body, HrCtlExit *code,
		   guint *status_out)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint status = 0;

	*code = HR_CTL_EXIT_ERROR;
	root = hr_client_call(hr_ctl_client, method, path, body, 30, &status, &error);
	if (root == NULL) {
		/* a connection or a timeout, not an answer we could not read or a bad path */
		if (hr_ctl_no_answer(error)) {
			*code = HR_CTL_EXIT_UNREACHABLE;
			hr_ctl_fail(*code, "%s (%s)", error->message, hr_ctl_reach_hint());
		} else {
			hr_ctl_fail(*code, "%s", error->message);
		}
		return NULL;
	}
	if (status_out != NULL)
		*status_out = status;
	if (!SOUP_STATUS_IS_SUCCESSFUL(status)) {
		g_autofree gchar *msg = hr_client_error_message(root, status);
		g_autofree gchar *terms = hr_ctl_cli_terms(msg);
		g_autofree gchar *shown = hr_client_escape(terms);
		if (opt_json)
			hr_ctl_print_json(root);
		if (status == SOUP_STATUS_UNAUTHORIZED)
			g_printerr("hugeroomctl: %s (check --token-file)\n", shown);
		else
			g_printerr("hugeroomctl: %s\n", shown);
		return NULL;
	}
	return g_steal_pointer(&root);
}

static JsonNode *
hr_ctl_call(const gchar *method, const gchar *path, const gchar *body, HrCtlExit *code)
{
	return hr_ctl_call_status(method, path, body, code, NULL);
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

/* ---------------------------------------------------------------------- */
/* What the command line can check itself */

/* GUEST: a name as a guest's HELLO gives it, or a UUID */
static gboolean
hr_ctl_check_guest_arg(const gchar *guest)
{
	if (guest[0] == '\0') {
		hr_ctl_usage("GUEST is empty: give a name or UUID from 'hugeroomctl guests'");
		return FALSE;
	}
	if (strlen(guest) > HR_CTL_GUEST_MAX) {
		hr_ctl_usage("GUEST is %" G_GSIZE_FORMAT " bytes, more than the %d a guest's name "
			     "can be",
			     strlen(guest), HR_CTL_GUEST_MAX);
		return FALSE;
	}
	return TRUE;
}

/* the guest exists: before a command that would change it, say so in our words */
static HrCtlExit
hr_ctl_check_guest(const gchar *guest)
{
	g_autofree gchar *escaped = g_uri_escape_string(guest, NULL, FALSE);
	g_autofree gchar *path = g_strconcat("/v1/guests/", escaped, NULL);
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint status = 0;

	root = hr_client_call(hr_ctl_client, SOUP_METHOD_GET, path, NULL, 30, &status, &error);
	if (root == NULL) {
		if (hr_ctl_no_answer(error))
			return hr_ctl_fail(HR_CTL_EXIT_UNREACHABLE, "%s (%s)", error->message,
					   hr_ctl_reach_hint());
		return hr_ctl_fail(HR_CTL_EXIT_ERROR, "%s", error->message);
	}
	if (status == SOUP_STATUS_NOT_FOUND)
		return hr_ctl_fail(HR_CTL_EXIT_ERROR,
				   "no guest '%s' is known to %s; 'hugeroomctl guests' lists them",
				   guest, hr_client_describe(hr_ctl_client));
	if (!SOUP_STATUS_IS_SUCCESSFUL(status)) {
		g_autofree gchar *msg = hr_client_error_message(root, status);
		return hr_ctl_fail(HR_CTL_EXIT_ERROR, "%s", msg);
	}
	return HR_CTL_EXIT_OK;
}

/* --node N: a node of this host, as GET /v1/host lists them */
static HrCtlExit
hr_ctl_check_node(void)
{
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(GString) have = g_string_new(NULL);
	JsonObject *obj;
	JsonArray *nodes;
	HrCtlExit code;

	if (opt_node == HR_CTL_UNSET)
		return HR_CTL_EXIT_OK;
	root = hr_ctl_call(SOUP_METHOD_GET, "/v1/host", NULL, &code);
	if (root == NULL)
		return code;
	obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	nodes = obj != NULL && json_object_has_member(obj, "nodes")
		    ? json_object_get_array_member(obj, "nodes")
		    : NULL;
	for (guint i = 0; nodes != NULL && i < json_array_get_length(nodes); i++) {
		gint64 n = json_object_get_int_member_with_default(
		    json_array_get_object_element(nodes, i), "node", -1);
		if (n == opt_node)
			return HR_CTL_EXIT_OK;
		g_string_append_printf(have, "%s%" G_GINT64_FORMAT, have->len > 0 ? ", " : "", n);
	}
	return hr_ctl_fail(HR_CTL_EXIT_ERROR,
			   "--node %" G_GINT64_FORMAT ": the host has no such node; its nodes are "
			   "%s ('hugeroomctl host')",
			   opt_node, have->len > 0 ? have->str : "none");
}

/* a number option within [@min, @max] */
static gboolean
hr_ctl_check_range(const gchar *flag, gint64 value, gint64 min, gint64 max, const gchar *what)
{
	if (value == HR_CTL_UNSET || (value >= min && value <= max))
		return TRUE;
	hr_ctl_usage("%s %" G_GINT64_FORMAT ": give %s from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT,
		     flag, value, what, min, max);
	return FALSE;
}

/* the numbers and lists of the options, against the API's bounds */
static gboolean
hr_ctl_check_bounds(void)
{
	guint n_gpas = 0;

	if (!hr_ctl_check_range("--blocks", opt_blocks, 1, HR_CTL_BLOCKS_MAX, "a number of blocks") ||
	    !hr_ctl_check_range("--budget-pages", opt_budget_pages, 0, G_MAXINT64,
				"a number of pages") ||
	    !hr_ctl_check_range("--budget-ms", opt_budget_ms, 0, HR_CTL_BUDGET_MS_MAX,
				"milliseconds") ||
	    !hr_ctl_check_range("--timeout", opt_timeout, 1, HR_CTL_TIMEOUT_MAX, "seconds") ||
	    !hr_ctl_check_range("--deadline", opt_deadline, 0, HR_CTL_DEADLINE_MAX, "seconds") ||
	    !hr_ctl_check_range("--node", opt_node, 0, HR_CTL_NODE_MAX, "a node"))
		return FALSE;
	for (guint i = 0; opt_gpas != NULL && opt_gpas[i] != NULL; i++) {
		g_auto(GStrv) parts = g_strsplit(opt_gpas[i], ",", -1);
		for (guint j = 0; parts[j] != NULL; j++)
			n_gpas += g_strstrip(parts[j])[0] != '\0';
	}
	if (n_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
		hr_ctl_usage("--gpa: %u addresses, more than the %d one command takes", n_gpas,
			     VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
		return FALSE;
	}
	if (opt_ranges != NULL && g_strv_length(opt_ranges) > VIRTIO_HUGEROOM_MAX_CMD_RANGES) {
		hr_ctl_usage("--range: %u ranges, more than the %d one command takes",
			     g_strv_length(opt_ranges), VIRTIO_HUGEROOM_MAX_CMD_RANGES);
		return FALSE;
	}
	if (opt_requester != NULL &&
	    (strlen(opt_requester) > HR_CTL_REQUESTER_MAX ||
	     !g_utf8_validate(opt_requester, -1, NULL))) {
		hr_ctl_usage("--requester: give UTF-8 of at most %d bytes", HR_CTL_REQUESTER_MAX);
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_ctl_parse_id(const gchar *str, guint64 *id)
{
	if (!g_ascii_string_to_unsigned(str, 10, 1, G_MAXINT64, id, NULL)) {
		hr_ctl_usage("REQUEST_ID '%s' is not a request id (a number hugeroomctl printed)",
			     str);
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_ctl_check_reservation_id(const gchar *id)
{
	if (id[0] == '\0' || strlen(id) > HR_CTL_ID_MAX) {
		hr_ctl_usage("ID: give a reservation id from 'hugeroomctl reservations' (at most %d "
			     "bytes)",
			     HR_CTL_ID_MAX);
		return FALSE;
	}
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Requests in guests */

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
	g_autofree gchar *guest = NULL;
	if (obj == NULL)
		return FALSE;
	guest = hr_client_escape(json_object_get_string_member_with_default(obj, "guest", "?"));
	g_string_append_printf(out, "report requested from %s (request %" G_GINT64_FORMAT ")\n",
			       guest, json_object_get_int_member(obj, "request_id"));
	return TRUE;
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
	HrClientEvents *events = hr_client_events_open(hr_ctl_client, query, &error);
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
 * Read the request again on each of its events until it ends: a bar
 * redrawn in place on a terminal, a line per change otherwise (logs stay
 * readable). Progress goes to stderr so that stdout holds only the summary
 * or the JSON.
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
	g_autofree gchar *guest = NULL;
	if (obj == NULL)
		return FALSE;
	guest = hr_client_escape(json_object_get_string_member_with_default(obj, "guest", "?"));
	g_string_append_printf(out, "%s request %" G_GINT64_FORMAT " for %s: %s\n",
			       json_object_get_string_member_with_default(obj, "kind", "?"),
			       json_object_get_int_member(obj, "request_id"), guest,
			       json_object_get_string_member_with_default(obj, "state", "?"));
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
		if (g_strv_length(ends) != 2 || ends[0][0] == '\0' || ends[1][0] == '\0') {
			hr_ctl_usage("--range %s: give START:END, for example "
				     "0x100000000:0x140000000",
				     opt_ranges[i]);
			return FALSE;
		}
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

/* evacuate, capture, return */
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

	if (capture && opt_blocks == HR_CTL_UNSET)
		return hr_ctl_usage("capture needs --blocks N");
	if (evacuate && ways == 0)
		return hr_ctl_usage("evacuate needs --blocks N or --gpa ADDR");
	if (ret && ways != 1)
		return hr_ctl_usage("return takes exactly one of --blocks N, --gpa ADDR, --all");
	if ((opt_ranges != NULL && opt_blocks == HR_CTL_UNSET))
		return hr_ctl_usage("--range goes with --blocks N: the guest picks the N "
				    "cheapest blocks inside the ranges");

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

	code = hr_ctl_check_guest(guest);
	if (code != HR_CTL_EXIT_OK)
		return code;
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

static HrCtlExit
hr_ctl_cmd_submit(const gchar *command, gchar **args)
{
	return hr_ctl_submit(command, args[0]);
}

static HrCtlExit
hr_ctl_cmd_cancel(const gchar *command, gchar **args)
{
	g_autofree gchar *escaped = g_uri_escape_string(args[0], NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/cancel", escaped);
	g_autofree gchar *body = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint64 id;
	HrCtlExit code;

	(void)command;
	if (!hr_ctl_parse_id(args[1], &id))
		return HR_CTL_EXIT_USAGE;
	code = hr_ctl_check_guest(args[0]);
	if (code != HR_CTL_EXIT_OK)
		return code;
	body = g_strdup_printf("{\"request_id\":%" G_GUINT64_FORMAT "}", id);
	root = hr_ctl_call(SOUP_METHOD_POST, path, body, &code);
	if (root == NULL)
		return code;
	if (opt_wait)
		return hr_ctl_wait(args[0], id);
	if (!hr_ctl_print(root, hr_ctl_render_accepted))
		return HR_CTL_EXIT_ERROR;
	return HR_CTL_EXIT_OK;
}

static HrCtlExit
hr_ctl_cmd_request(const gchar *command, gchar **args)
{
	g_autofree gchar *escaped = g_uri_escape_string(args[0], NULL, FALSE);
	g_autofree gchar *path = NULL;
	guint64 id;

	(void)command;
	if (!hr_ctl_parse_id(args[1], &id))
		return HR_CTL_EXIT_USAGE;
	path = g_strdup_printf("/v1/guests/%s/requests/%" G_GUINT64_FORMAT, escaped, id);
	return hr_ctl_run(SOUP_METHOD_GET, path, hr_ctl_render_request);
}

static gboolean
hr_ctl_render_pcp(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	g_autofree gchar *guest = NULL;
	(void)error;
	if (obj == NULL)
		return FALSE;
	guest = hr_client_escape(json_object_get_string_member_with_default(obj, "guest", "?"));
	g_string_append_printf(out, "%s: PCP policy %s %s\n", guest,
			       json_object_get_string_member_with_default(obj, "policy", "?"),
			       json_object_get_boolean_member_with_default(obj, "applied", FALSE)
				   ? "applied"
				   : "stored; sent when its driver is up and not donating");
	return TRUE;
}

/* PUT the policy; the daemon answers once the guest has (or stores it) */
static HrCtlExit
hr_ctl_cmd_pcp(const gchar *command, gchar **args)
{
	g_autofree gchar *escaped = g_uri_escape_string(args[0], NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/pcp", escaped);
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) body = NULL;
	g_autofree gchar *text = NULL;
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(GError) error = NULL;
	HrPcpPolicy policy;
	HrCtlExit code;

	(void)command;
	if (!hr_pcp_policy_parse(args[1], &policy, &error))
		return hr_ctl_usage("POLICY '%s': %s", args[1], error->message);
	/*
	 * The daemon keeps a policy for a name it does not know yet (the
	 * libvirt hook sets one before its guest connects); from here, a name
	 * nobody knows is a typo.
	 */
	code = hr_ctl_check_guest(args[0]);
	if (code != HR_CTL_EXIT_OK)
		return code;
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "policy");
	json_builder_add_string_value(b, args[1]);
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

static HrCtlExit
hr_ctl_cmd_report(const gchar *command, gchar **args)
{
	g_autofree gchar *escaped = g_uri_escape_string(args[0], NULL, FALSE);
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/report", escaped);
	HrCtlExit code;

	(void)command;
	code = hr_ctl_check_guest(args[0]);
	if (code != HR_CTL_EXIT_OK)
		return code;
	return hr_ctl_run(SOUP_METHOD_POST, path, hr_ctl_render_report);
}

/* ---------------------------------------------------------------------- */
/* Reservations */

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
hr_ctl_reservation_body(guint64 bytes, gboolean requester)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) body_node = NULL;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "bytes");
	json_builder_add_int_value(b, (gint64)bytes);
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

/* SIZE and --node, checked before prepare or plan sends anything */
static HrCtlExit
hr_ctl_check_size_node(const gchar *size, guint64 *bytes)
{
	g_autoptr(GError) error = NULL;

	if (!hr_ctl_parse_size(size, bytes, &error))
		return hr_ctl_usage("%s", error->message);
	return hr_ctl_check_node();
}

static HrCtlExit
hr_ctl_cmd_prepare(const gchar *command, gchar **args)
{
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = NULL;
	g_autofree gchar *shown = NULL;
	const gchar *id;
	guint64 bytes = 0;
	HrCtlExit code;

	(void)command;
	code = hr_ctl_check_size_node(args[0], &bytes);
	if (code != HR_CTL_EXIT_OK)
		return code;
	body = hr_ctl_reservation_body(bytes, TRUE);
	root = hr_ctl_call(SOUP_METHOD_POST, "/v1/reservations", body, &code);
	if (root == NULL)
		return code;
	id = json_object_get_string_member_with_default(json_node_get_object(root), "id", "?");
	shown = hr_client_escape(id);
	if (opt_wait) {
		if (!opt_json)
			g_printerr("reservation %s accepted\n", shown);
		return hr_ctl_wait_reservation(id);
	}
	if (opt_json)
		hr_ctl_print_json(root);
	else
		g_print("reservation %s accepted; follow it with 'hugeroomctl reservation %s'\n",
			shown, shown);
	return HR_CTL_EXIT_OK;
}

/* a dry run: exit 0 when the plan makes all of SIZE free, 4 when it falls short */
static HrCtlExit
hr_ctl_cmd_plan(const gchar *command, gchar **args)
{
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = NULL;
	JsonObject *plan;
	guint64 bytes = 0;
	HrCtlExit code;

	(void)command;
	code = hr_ctl_check_size_node(args[0], &bytes);
	if (code != HR_CTL_EXIT_OK)
		return code;
	body = hr_ctl_reservation_body(bytes, FALSE);
	root = hr_ctl_call(SOUP_METHOD_POST, "/v1/plan", body, &code);
	if (root == NULL)
		return code;
	if (!hr_ctl_print(root, hr_ctl_render_plan))
		return HR_CTL_EXIT_ERROR;
	plan = json_object_get_object_member(json_node_get_object(root), "plan");
	return plan != NULL && json_object_get_boolean_member_with_default(plan, "complete", FALSE)
		   ? HR_CTL_EXIT_OK
		   : HR_CTL_EXIT_SHORT;
}

/* the host, the reservations and the guests: three calls, one view */
static HrCtlExit
hr_ctl_cmd_status(const gchar *command, gchar **args)
{
	const gchar *parts[][2] = {
	    {"host", "/v1/host"},
	    {"reservations", "/v1/reservations"},
	    {"guests", "/v1/guests"},
	};
	g_autoptr(JsonObject) status = json_object_new();
	g_autoptr(JsonNode) root = json_node_new(JSON_NODE_OBJECT);
	HrCtlExit code;

	(void)command;
	(void)args;
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

/* vm_socket of hugeroomd.conf, read on its own: the CLI is not the daemon */
static gchar *
hr_ctl_config_vm_socket(GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) local = NULL;
	gchar *path;

	if (!g_key_file_load_from_file(kf, HR_CONFIG_DEFAULT_PATH, G_KEY_FILE_NONE, &local)) {
		if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			return g_strdup(HR_CONFIG_DEFAULT_VM_SOCKET);
		g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ",
					   HR_CONFIG_DEFAULT_PATH);
		return NULL;
	}
	path = g_key_file_get_string(kf, "hugeroomd", "vm_socket", NULL);
	if (path == NULL || g_strstrip(path)[0] == '\0') {
		g_free(path);
		return g_strdup(HR_CONFIG_DEFAULT_VM_SOCKET);
	}
	return path;
}

/*
 * What a libvirt domain needs for the device: QEMU's chardev to the
 * daemon's VM socket (--vm-socket, else vm_socket of hugeroomd.conf).
 */
static HrCtlExit
hr_ctl_cmd_libvirt_xml(const gchar *command, gchar **args)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *xml = NULL;
	g_autofree gchar *vm_socket = NULL;
	const gchar *domain = args[0];

	(void)command;
	vm_socket = opt_vm_socket != NULL ? g_strdup(opt_vm_socket) : hr_ctl_config_vm_socket(&error);
	if (vm_socket == NULL)
		return hr_ctl_fail(HR_CTL_EXIT_ERROR, "%s; pass --vm-socket PATH", error->message);
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
	{
		g_autofree gchar *shown = hr_client_escape(domain);
		g_print("<!-- hugeroom for domain %s: add inside <domain> with 'virsh edit %s'.\n"
			"     QEMU runs as libvirt's qemu user: it needs write access to %s\n"
			"     (see HOOK.md, \"The VM socket\"). -->\n%s",
			shown, shown, vm_socket, xml);
	}
	return HR_CTL_EXIT_OK;
}

/* ---------------------------------------------------------------------- */
/* watch */

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
		    json_object_get_string_member_with_default(r, "kind", "?"),
		    json_object_get_int_member_with_default(r, "request_id", 0),
		    json_object_get_string_member_with_default(r, "state", "?"),
		    p != NULL ? json_object_get_int_member_with_default(p, "blocks_freed", 0) : 0,
		    json_object_get_int_member_with_default(r, "target_blocks", 0));
	} else if (json_object_has_member(obj, "reservation")) {
		JsonObject *r = json_object_get_object_member(obj, "reservation");
		g_string_append_printf(line, "%s %s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
					     " blocks",
				       json_object_get_string_member_with_default(r, "id", "?"),
				       json_object_get_string_member_with_default(r, "state", "?"),
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
	/* a guest's name is whatever its QEMU said: one line, no escapes for the terminal */
	return hr_client_escape(line->str);
}

/* the event stream live, a line per event (JSON Lines with --json), until interrupted */
static HrCtlExit
hr_ctl_cmd_watch(const gchar *command, gchar **args)
{
	g_autoptr(GError) error = NULL;
	const gchar *guest = args[0];
	g_autofree gchar *escaped = guest != NULL ? g_uri_escape_string(guest, NULL, FALSE) : NULL;
	g_autofree gchar *query = escaped != NULL ? g_strdup_printf("guest=%s", escaped) : NULL;
	g_autoptr(HrClientEvents) events = NULL;

	(void)command;
	events = hr_client_events_open(hr_ctl_client, query, &error);
	if (events == NULL) {
		if (hr_ctl_no_answer(error))
			return hr_ctl_fail(HR_CTL_EXIT_UNREACHABLE, "%s (%s)", error->message,
					   hr_ctl_reach_hint());
		return hr_ctl_fail(HR_CTL_EXIT_ERROR, "%s", error->message);
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
			/* the daemon went away: it no longer answers */
			return hr_ctl_fail(hr_ctl_no_answer(error) ? HR_CTL_EXIT_UNREACHABLE
								   : HR_CTL_EXIT_ERROR,
					   "%s", error->message);
		}
		if (opt_json) {
			g_print("%s\n", data);
			fflush(stdout);
			continue;
		}
		if (!json_parser_load_from_data(parser, data, -1, &error) ||
		    !JSON_NODE_HOLDS_OBJECT(root = json_parser_get_root(parser)))
			return hr_ctl_fail(HR_CTL_EXIT_ERROR, "a %s event without a JSON object: %s",
					   type, error != NULL ? error->message : data);
		line = hr_ctl_watch_line(type, json_node_get_object(root));
		g_print("%s\n", line);
		fflush(stdout);
	}
}

/* ---------------------------------------------------------------------- */
/* The commands */

typedef HrCtlExit (*HrCtlRun)(const gchar *command, gchar **args);

typedef struct {
	const gchar *name;
	const gchar *args;    /* the synopsis after the name */
	const gchar *summary; /* its line in --help */
	const gchar *help;    /* its page: help COMMAND */
	guint min_args, max_args;
	guint options; /* HrCtlOpt it takes beyond the global ones */
	/* one GET of @path/ARG@suffix rendered by @render, or @run */
	const gchar *path;
	const gchar *suffix;
	gboolean (*render)(JsonNode *, GString *, GError **);
	HrCtlRun run;
	gboolean guest_arg;	  /* the first argument is a GUEST */
	gboolean reservation_arg; /* the first argument is a reservation ID */
} HrCtlCommand;

#define HR_CTL_ASK (HR_CTL_OPT_NODE | HR_CTL_OPT_DEADLINE | HR_CTL_OPT_STRICT)

static const HrCtlCommand hr_ctl_commands[] = {
    {"status", "", "the host's nodes, the reservations and the guests in one view",
     "The host's NUMA nodes with their free memory and free 2 MiB blocks (all,\n"
     "above the high watermark, promised to reservations), the reservations and\n"
     "the guests, in one view. With --json: {\"host\", \"reservations\", \"guests\"}.\n",
     0, 0, 0, NULL, NULL, NULL, hr_ctl_cmd_status, FALSE, FALSE},
    {"guests", "", "the guests hugeroomd knows",
     "The guests hugeroomd knows: name, UUID, QEMU pid, connection, status age,\n"
     "free memory, held blocks. Names are shown as their QEMU gave them, what a\n"
     "terminal must not get raw encoded as \\xHH.\n",
     0, 0, HR_CTL_OPT_TABLE, "/v1/guests", NULL, hr_ctl_render_guests, NULL, FALSE, FALSE},
    {"guest", "GUEST", "one guest (name or UUID) in detail",
     "One guest (name or UUID) in detail: device, holds, recent requests, its\n"
     "latest status with zones and counters.\n",
     1, 1, 0, "/v1/guests", "", hr_ctl_render_guest, NULL, TRUE, FALSE},
    {"report", "GUEST", "ask a guest for a status report now", "Ask a guest for a status report now.\n",
     1, 1, 0, NULL, NULL, NULL, hr_ctl_cmd_report, TRUE, FALSE},
    {"evacuate",
     "GUEST (--blocks N | --gpa ADDR...) [--range START:END...] [--budget-pages P]\n"
     "         [--budget-ms MS] [--timeout S] [--wait]",
     "free and hold 2 MiB blocks in a guest",
     "Free and hold 2 MiB blocks in the guest: the N cheapest (--blocks), or the\n"
     "named ones (--gpa; with --blocks too: stop after N of them). --range keeps\n"
     "the guest's choice of the N cheapest inside START:END. --wait follows the\n"
     "request to its end: exit 0 when done, 4 when it ended short (partial,\n"
     "budget, cancelled, timed out).\n",
     1, 1,
     HR_CTL_OPT_BLOCKS | HR_CTL_OPT_GPA | HR_CTL_OPT_RANGE | HR_CTL_OPT_BUDGET_PAGES |
	 HR_CTL_OPT_BUDGET_MS | HR_CTL_OPT_TIMEOUT | HR_CTL_OPT_WAIT,
     NULL, NULL, NULL, hr_ctl_cmd_submit, TRUE, FALSE},
    {"capture", "GUEST --blocks N [--budget-ms MS] [--timeout S] [--wait]",
     "hold N blocks the guest's own compaction finds",
     "Hold N blocks that the guest's own compaction finds (a high-order\n"
     "allocation in the guest). --wait as for evacuate.\n",
     1, 1, HR_CTL_OPT_BLOCKS | HR_CTL_OPT_BUDGET_MS | HR_CTL_OPT_TIMEOUT | HR_CTL_OPT_WAIT,
     NULL, NULL, NULL, hr_ctl_cmd_submit, TRUE, FALSE},
    {"return", "GUEST (--blocks N | --gpa ADDR... | --all) [--timeout S] [--wait]",
     "give held blocks back to a guest", "Give held blocks back to the guest.\n", 1, 1,
     HR_CTL_OPT_BLOCKS | HR_CTL_OPT_GPA | HR_CTL_OPT_ALL | HR_CTL_OPT_TIMEOUT | HR_CTL_OPT_WAIT,
     NULL, NULL, NULL, hr_ctl_cmd_submit, TRUE, FALSE},
    {"cancel", "GUEST REQUEST_ID [--wait]", "cancel a request",
     "Cancel a request; with --wait until it has ended.\n", 2, 2, HR_CTL_OPT_WAIT, NULL,
     NULL, NULL, hr_ctl_cmd_cancel, TRUE, FALSE},
    {"pcp", "GUEST POLICY", "tune a guest's per-CPU page lists",
     "Set the guest's per-CPU page list policy: default, latency, balanced,\n"
     "density or explicit:HIGH (pages per CPU in the largest zone). Answered once\n"
     "the guest has; a guest whose driver is not up, or that is donating, gets\n"
     "it when it can. The guest must be one hugeroomd knows (the libvirt hook\n"
     "sets <hugeroom:pcp> for a domain before it starts).\n",
     2, 2, 0, NULL, NULL, NULL, hr_ctl_cmd_pcp, TRUE, FALSE},
    {"requests", "GUEST", "a guest's recent requests",
     "The guest's recent requests, newest last.\n", 1, 1, HR_CTL_OPT_TABLE, "/v1/guests",
     "/requests", hr_ctl_render_requests, NULL, TRUE, FALSE},
    {"request", "GUEST REQUEST_ID", "one request in detail",
     "One request in detail: what was asked, what it did, what failed.\n", 2, 2, 0, NULL,
     NULL, NULL, hr_ctl_cmd_request, TRUE, FALSE},
    {"prepare", "SIZE [--node N] [--deadline S] [--strict] [--requester NAME] [--wait]",
     "make SIZE of 2 MiB blocks free on the host",
     "Make SIZE (\"4G\", \"512M\"; K, M, G, T, P, E are powers of 1024; at most\n"
     "8 EiB - 1) of 2 MiB blocks free on the host: free ones, host compaction,\n"
     "guest donations. --node must be a node the host has. --wait follows the\n"
     "reservation: exit 0 when ready with all of it, 4 when ready with part of\n"
     "it or failed, 1 when it expired or was cancelled.\n",
     1, 1, HR_CTL_ASK | HR_CTL_OPT_REQUESTER | HR_CTL_OPT_WAIT, NULL, NULL, NULL,
     hr_ctl_cmd_prepare, FALSE, FALSE},
    {"plan", "SIZE [--node N] [--deadline S] [--strict]", "a dry run of prepare",
     "What the planner would take from the host's free blocks, host compaction\n"
     "and which donors, how much it would migrate and how long it would take.\n"
     "Nothing is done. Exit 0 when the plan makes all of SIZE free, 4 when not.\n",
     1, 1, HR_CTL_ASK, NULL, NULL, NULL, hr_ctl_cmd_plan, FALSE, FALSE},
    {"reservations", "", "list reservations",
     "The reservations, with their state and what they obtained.\n", 0, 0, HR_CTL_OPT_TABLE,
     "/v1/reservations", NULL, hr_ctl_render_reservations, NULL, FALSE, FALSE},
    {"reservation", "ID", "one reservation: each step, what it gave and cost",
     "One reservation: each step, what it gave and what it cost.\n", 1, 1, 0,
     "/v1/reservations", "", hr_ctl_render_reservation, NULL, FALSE, TRUE},
    {"release", "ID [--requester NAME] [--force]", "cancel a reservation or release its memory",
     "Cancel a reservation or release its memory; its holds go back to the\n"
     "guests. Only the client that made it may, for its requester (--requester,\n"
     "or none); an admin may end another's with --force.\n",
     1, 1, HR_CTL_OPT_REQUESTER | HR_CTL_OPT_FORCE, "/v1/reservations", "/release",
     hr_ctl_render_reservation, NULL, FALSE, TRUE},
    {"consume", "ID [--requester NAME] [--force]", "the memory of a ready reservation is in use",
     "The memory of a ready reservation is in use now. Only the client that made\n"
     "it may say so, for its requester (--requester, or none); an admin may for\n"
     "another's with --force.\n",
     1, 1, HR_CTL_OPT_REQUESTER | HR_CTL_OPT_FORCE, "/v1/reservations", "/consume",
     hr_ctl_render_reservation, NULL, FALSE, TRUE},
    {"host", "", "the host's memory per NUMA node",
     "The host's memory per NUMA node, compaction counters and THP settings.\n", 0, 0,
     HR_CTL_OPT_TABLE, "/v1/host", NULL, hr_ctl_render_host, NULL, FALSE, FALSE},
    {"watch", "[GUEST]", "what happens, live",
     "What happens, live, from the daemon's event stream: requests,\n"
     "reservations and guests as they change; with GUEST, that guest's only.\n"
     "Runs until interrupted. With --json, one event's JSON per line. Exit 3\n"
     "when hugeroomd does not answer or goes away.\n",
     0, 1, 0, NULL, NULL, NULL, hr_ctl_cmd_watch, TRUE, FALSE},
    {"libvirt-xml", "DOMAIN [--vm-socket PATH]",
     "the <qemu:commandline> a libvirt domain needs",
     "The <qemu:commandline> a libvirt domain needs for the virtio-hugeroom\n"
     "device (see hugeroom-hook(8)). Reads vm_socket from " HR_CONFIG_DEFAULT_PATH "\n"
     "unless --vm-socket names it; asks nothing of hugeroomd.\n",
     1, 1, HR_CTL_OPT_VM_SOCKET, NULL, NULL, NULL, hr_ctl_cmd_libvirt_xml, FALSE, FALSE},
    {"help", "[COMMAND]", "this help, or a command's", "This help, or COMMAND's.\n", 0, 1, 0,
     NULL, NULL, NULL, NULL, FALSE, FALSE},
};

static const HrCtlCommand *
hr_ctl_find_command(const gchar *name)
{
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_commands); i++) {
		if (g_strcmp0(hr_ctl_commands[i].name, name) == 0)
			return &hr_ctl_commands[i];
	}
	return NULL;
}

static gchar *
hr_ctl_command_list(void)
{
	g_autoptr(GString) str = g_string_new(NULL);
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_commands); i++)
		g_string_append_printf(str, "%s%s", i > 0 ? ", " : "", hr_ctl_commands[i].name);
	return g_string_free(g_steal_pointer(&str), FALSE);
}

static const gchar hr_ctl_exit_help[] =
    "Exit codes: 0 done; 1 an error (the daemon refused, the request failed or was\n"
    "lost, an unknown guest or node); 2 a usage error (an unknown command or\n"
    "option, a missing argument, a value out of its bounds); 3 hugeroomd did not\n"
    "answer (not running, --socket, --url); 4 not satisfiable: --wait ended short\n"
    "(partial, budget, cancelled, timed out), prepare --wait ready with part of it\n"
    "or failed, plan cannot make all of SIZE free.";

/* the global page: what g_option_context_get_help() gives, with the commands */
static gchar *
hr_ctl_global_help(GOptionContext *context)
{
	return g_option_context_get_help(context, TRUE, NULL);
}

static void
hr_ctl_print_command_help(const HrCtlCommand *c)
{
	g_autoptr(GString) out = g_string_new(NULL);

	g_string_append_printf(out, "Usage:\n  hugeroomctl [OPTION...] %s%s%s\n\n%s", c->name,
			       c->args[0] != '\0' ? " " : "", c->args, c->help);
	if (c->options != 0) {
		g_string_append(out, "\nOptions:\n");
		for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_options); i++) {
			const GOptionEntry *e = &hr_ctl_options[i].entry;
			g_autofree gchar *flag = NULL;
			if ((c->options & hr_ctl_options[i].bit) == 0)
				continue;
			flag = g_strdup_printf("%s%c%s--%s%s%s", e->short_name ? "-" : "",
					       e->short_name ? e->short_name : ' ',
					       e->short_name ? ", " : "", e->long_name,
					       e->arg_description != NULL ? " " : "",
					       e->arg_description != NULL ? e->arg_description : "");
			g_string_append_printf(out, "  %-24s %s\n", g_strstrip(flag), e->description);
		}
	}
	if (c->options & HR_CTL_OPT_TABLE) {
		g_autofree gchar *cols = hr_ctl_table_help(c->name);
		g_string_append_printf(out, "\nColumns (--output):\n%s", cols);
	}
	g_string_append_printf(out, "\nGlobal options (--socket, --url, --token-file, --json, ...): "
				    "hugeroomctl --help\n\n%s\n",
			       hr_ctl_exit_help);
	g_print("%s", out->str);
}

/*
 * The bash completion's questions, so that it never reads a table meant for
 * people: "commands", "options COMMAND".
 */
static HrCtlExit
hr_ctl_complete(gint argc, gchar **argv)
{
	const HrCtlCommand *c;

	if (argc >= 1 && g_strcmp0(argv[0], "commands") == 0) {
		for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_commands); i++)
			g_print("%s\n", hr_ctl_commands[i].name);
		return HR_CTL_EXIT_OK;
	}
	if (argc >= 1 && g_strcmp0(argv[0], "options") == 0) {
		c = argc >= 2 ? hr_ctl_find_command(argv[1]) : NULL;
		for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_options); i++) {
			if (hr_ctl_options[i].bit == HR_CTL_OPT_GLOBAL ||
			    (c != NULL && (c->options & hr_ctl_options[i].bit) != 0))
				g_print("--%s\n", hr_ctl_options[i].entry.long_name);
		}
		return HR_CTL_EXIT_OK;
	}
	return HR_CTL_EXIT_USAGE;
}

/* --url, --token-file, --ca-file or --socket: who hugeroomctl talks to */
static HrCtlExit
hr_ctl_connect(void)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *text = NULL;
	g_auto(GStrv) lines = NULL;
	const gchar *token = NULL;

	if (opt_url == NULL) {
		if (opt_token_file != NULL || opt_ca_file != NULL)
			return hr_ctl_usage("--token-file and --ca-file go with --url");
		hr_ctl_client = hr_client_new_unix(opt_socket != NULL ? opt_socket
								      : HR_CONFIG_DEFAULT_API_SOCKET);
		return HR_CTL_EXIT_OK;
	}
	if (opt_socket != NULL)
		return hr_ctl_usage("give --socket or --url, not both");
	if (opt_token_file == NULL)
		return hr_ctl_usage("--url needs --token-file FILE: the API on the network takes a "
				    "bearer token (an api_tokens line of the daemon)");
	/* a token others may read is anyone's: as ssh does with a private key */
	if (!hr_safefile_get_contents(opt_token_file, getuid(), HR_SAFEFILE_SECRET,
				      HR_CTL_TOKEN_FILE_MAX, &text, NULL, &error))
		return hr_ctl_usage("--token-file: %s", error->message);
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i] != NULL && token == NULL; i++) {
		gchar *line = g_strstrip(lines[i]);
		if (line[0] != '\0' && line[0] != '#')
			token = line;
	}
	if (token == NULL)
		return hr_ctl_usage("--token-file %s holds no token", opt_token_file);
	hr_ctl_client = hr_client_new_url(opt_url, token, opt_ca_file, &error);
	if (hr_ctl_client == NULL)
		return hr_ctl_usage("--url: %s", error->message);
	return HR_CTL_EXIT_OK;
}

/* the command line against @c: its arguments, its options and their bounds */
static HrCtlExit
hr_ctl_check_command(const HrCtlCommand *c, gint nargs, gchar **args)
{
	g_autoptr(GError) error = NULL;

	if ((guint)nargs < c->min_args || (guint)nargs > c->max_args) {
		if (c->max_args == 0)
			return hr_ctl_usage("%s takes no arguments", c->name);
		return hr_ctl_usage("%s takes %s%s, not %d argument(s): hugeroomctl %s %s",
				    c->name, c->min_args == c->max_args ? "" : "at most ",
				    c->max_args == 1 ? "one argument" : "two arguments", nargs,
				    c->name, c->args);
	}
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_options); i++) {
		HrCtlOpt bit = hr_ctl_options[i].bit;
		if (bit != HR_CTL_OPT_GLOBAL && (c->options & bit) == 0 && hr_ctl_option_given(bit)) {
			g_autofree gchar *names = hr_ctl_option_names(bit);
			return hr_ctl_usage("%s does not take %s", c->name, names);
		}
	}
	if ((c->options & HR_CTL_OPT_TABLE) != 0 && hr_ctl_option_given(HR_CTL_OPT_TABLE)) {
		g_auto(GStrv) columns = NULL;
		if (opt_json)
			return hr_ctl_usage("--json prints the daemon's JSON: it takes no --output, "
					    "--noheadings or --raw");
		if (opt_output != NULL) {
			columns = g_strsplit(opt_output, ",", -1);
			for (guint i = 0; columns[i] != NULL; i++)
				g_strstrip(columns[i]);
		}
		if (!hr_ctl_check_output(c->name, columns, &error))
			return hr_ctl_usage("%s", error->message);
	}
	if (!hr_ctl_check_bounds())
		return HR_CTL_EXIT_USAGE;
	if (c->guest_arg && nargs > 0 && !hr_ctl_check_guest_arg(args[0]))
		return HR_CTL_EXIT_USAGE;
	if (c->reservation_arg && !hr_ctl_check_reservation_id(args[0]))
		return HR_CTL_EXIT_USAGE;
	return HR_CTL_EXIT_OK;
}

static HrCtlExit
hr_ctl_dispatch(const HrCtlCommand *c, gchar **args)
{
	g_autofree gchar *path = NULL;
	g_autofree gchar *escaped = NULL;
	g_auto(GStrv) columns = NULL;
	HrCtlTableOptions table = {.noheadings = opt_noheadings, .raw = opt_raw};
	const gchar *method = c->suffix != NULL && c->suffix[0] == '/' &&
				      g_strcmp0(c->suffix, "/requests") != 0
				  ? SOUP_METHOD_POST
				  : SOUP_METHOD_GET;

	if (opt_output != NULL) {
		columns = g_strsplit(opt_output, ",", -1);
		for (guint i = 0; columns[i] != NULL; i++)
			g_strstrip(columns[i]);
		table.columns = columns;
	}
	hr_ctl_set_table_options(&table);
	if (c->run != NULL)
		return c->run(c->name, args);
	if (c->suffix == NULL)
		return hr_ctl_run(method, c->path, c->render);
	escaped = g_uri_escape_string(args[0], NULL, FALSE);
	path = g_strconcat(c->path, "/", escaped, c->suffix, NULL);
	/* consume, release: who acts, and an admin's override (hr-api-reservations.c) */
	if (c->options & (HR_CTL_OPT_REQUESTER | HR_CTL_OPT_FORCE)) {
		g_autoptr(GString) query = g_string_new(path);
		if (opt_requester != NULL) {
			g_autofree gchar *r = g_uri_escape_string(opt_requester, NULL, FALSE);
			g_string_append_printf(query, "?requester=%s", r);
		}
		if (opt_force)
			g_string_append_printf(query, "%sforce=true",
					       opt_requester != NULL ? "&" : "?");
		g_free(path);
		path = g_string_free(g_steal_pointer(&query), FALSE);
	}
	return hr_ctl_run(method, path, c->render);
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GOptionContext) context = g_option_context_new("COMMAND [ARGUMENT...]");
	g_autoptr(GString) summary = g_string_new("Commands:\n");
	g_autoptr(HrClient) client = NULL;
	GOptionEntry entries[G_N_ELEMENTS(hr_ctl_options) + 1];
	const HrCtlCommand *c;
	HrCtlExit code;

	setlocale(LC_ALL, "");
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_options); i++)
		entries[i] = hr_ctl_options[i].entry;
	entries[G_N_ELEMENTS(hr_ctl_options)] = (GOptionEntry){NULL};
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_commands); i++)
		g_string_append_printf(summary, "  %-14s %s\n", hr_ctl_commands[i].name,
				       hr_ctl_commands[i].summary);
	g_string_append(summary,
			"\n'hugeroomctl help COMMAND' or 'hugeroomctl COMMAND --help' tells what a "
			"command takes.\n--json works with every command: the daemon's JSON on "
			"stdout, and on failure\n{\"error\": ...} there too.\n\n");
	g_string_append(summary, hr_ctl_exit_help);
	g_option_context_set_summary(context, summary->str);
	/* our own --help, so that "COMMAND --help" can be the command's */
	g_option_context_set_help_enabled(context, FALSE);
	g_option_context_add_main_entries(context, entries, NULL);
	if (!g_option_context_parse(context, &argc, &argv, &error))
		return hr_ctl_usage("%s", error->message);
	if (opt_version) {
		g_print("hugeroomctl %s\n", PACKAGE_VERSION);
		return HR_CTL_EXIT_OK;
	}
	if (argc >= 2 && g_strcmp0(argv[1], "__complete") == 0)
		return hr_ctl_complete(argc - 2, argv + 2);
	c = argc >= 2 ? hr_ctl_find_command(argv[1]) : NULL;
	if (c != NULL && g_strcmp0(c->name, "help") == 0) {
		const HrCtlCommand *of = argc >= 3 ? hr_ctl_find_command(argv[2]) : NULL;
		if (argc >= 3 && of == NULL) {
			g_autofree gchar *list = hr_ctl_command_list();
			return hr_ctl_usage("help: no command '%s'; the commands are %s", argv[2],
					    list);
		}
		if (of != NULL && g_strcmp0(of->name, "help") != 0) {
			hr_ctl_print_command_help(of);
		} else {
			g_autofree gchar *help = hr_ctl_global_help(context);
			g_print("%s", help);
		}
		return HR_CTL_EXIT_OK;
	}
	if (opt_help) {
		if (c != NULL) {
			hr_ctl_print_command_help(c);
		} else {
			g_autofree gchar *help = hr_ctl_global_help(context);
			g_print("%s", help);
		}
		return HR_CTL_EXIT_OK;
	}
	if (argc < 2) {
		g_autofree gchar *list = hr_ctl_command_list();
		return hr_ctl_usage("no command given; one of %s", list);
	}
	if (c == NULL) {
		g_autofree gchar *shown = hr_client_escape(argv[1]);
		g_autofree gchar *list = hr_ctl_command_list();
		return hr_ctl_usage("no command '%s'; the commands are %s", shown, list);
	}
	hr_ctl_command_name = c->name;
	code = hr_ctl_check_command(c, argc - 2, argv + 2);
	if (code != HR_CTL_EXIT_OK)
		return code;
	code = hr_ctl_connect();
	if (code != HR_CTL_EXIT_OK)
		return code;
	client = hr_ctl_client;
	return hr_ctl_dispatch(c, argv + 2);
}
