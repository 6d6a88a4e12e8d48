/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "Hugeroomctl"

#include <gio/gunixsocketaddress.h>
#include <libsoup/soup.h>
#include <locale.h>

#include "hr-config.h"
#include "hr-ctl.h"

typedef enum {
	HR_CTL_EXIT_OK = 0,
	HR_CTL_EXIT_ERROR = 1,
	HR_CTL_EXIT_USAGE = 2,
} HrCtlExit;

static gchar *opt_socket;
static gboolean opt_json;

/* a CLI may block: there is no main loop to keep responsive */
static JsonNode *
hr_ctl_request(const gchar *method, const gchar *path, guint *status, GError **error)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(opt_socket);
	g_autoptr(SoupSession) session =
	    soup_session_new_with_options("remote-connectable", addr, "timeout", 30, NULL);
	g_autofree gchar *uri = g_strdup_printf("http://localhost%s", path);
	g_autoptr(SoupMessage) msg = soup_message_new(method, uri);
	g_autoptr(GBytes) body = NULL;
	g_autoptr(JsonParser) parser = json_parser_new();
	gsize len = 0;
	const gchar *data;

	if (msg == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "'%s' cannot be part of a request path", path);
		return NULL;
	}
	body = soup_session_send_and_read(session, msg, NULL, error);
	if (body == NULL) {
		g_prefix_error(error, "cannot connect to hugeroomd at %s: ", opt_socket);
		return NULL;
	}
	*status = soup_message_get_status(msg);
	data = g_bytes_get_data(body, &len);
	if (!json_parser_load_from_data(parser, data, len, error)) {
		g_prefix_error(error, "hugeroomd at %s answered HTTP %u with bad JSON: ", opt_socket,
			       *status);
		return NULL;
	}
	return json_node_copy(json_parser_get_root(parser));
}

static gboolean
hr_ctl_print(JsonNode *root, gboolean (*render)(JsonNode *, GString *, GError **),
	     GError **error)
{
	g_autoptr(GString) out = g_string_new(NULL);
	if (opt_json) {
		g_autofree gchar *text = json_to_string(root, TRUE);
		g_print("%s\n", text);
		return TRUE;
	}
	if (!render(root, out, error))
		return FALSE;
	g_print("%s", out->str);
	return TRUE;
}

static gboolean
hr_ctl_render_report(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	if (obj == NULL || !json_object_has_member(obj, "request_id")) {
		g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
				    "the daemon's answer has no request_id");
		return FALSE;
	}
	g_string_append_printf(out, "report requested from %s (request %" G_GINT64_FORMAT ")\n",
			       json_object_get_string_member(obj, "guest"),
			       json_object_get_int_member(obj, "request_id"));
	return TRUE;
}

static HrCtlExit
hr_ctl_run(const gchar *method, const gchar *path,
	   gboolean (*render)(JsonNode *, GString *, GError **))
{
	g_autoptr(GError) error = NULL;
	g_autoptr(JsonNode) root = NULL;
	guint status = 0;

	root = hr_ctl_request(method, path, &status, &error);
	if (root == NULL) {
		g_printerr("hugeroomctl: %s (is hugeroomd running? start it with "
			   "'systemctl start hugeroomd', or pass --socket PATH)\n",
			   error->message);
		return HR_CTL_EXIT_ERROR;
	}
	if (!SOUP_STATUS_IS_SUCCESSFUL(status)) {
		JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
		if (opt_json) {
			g_autofree gchar *text = json_to_string(root, TRUE);
			g_print("%s\n", text);
		}
		g_printerr("hugeroomctl: %s\n",
			   obj != NULL && json_object_has_member(obj, "error")
			       ? json_object_get_string_member(obj, "error")
			       : "the daemon refused the request");
		return HR_CTL_EXIT_ERROR;
	}
	if (!hr_ctl_print(root, render, &error)) {
		g_printerr("hugeroomctl: %s\n", error->message);
		return HR_CTL_EXIT_ERROR;
	}
	return HR_CTL_EXIT_OK;
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GOptionContext) context = g_option_context_new("COMMAND [NAME]");
	const GOptionEntry entries[] = {
	    {"socket", 's', 0, G_OPTION_ARG_FILENAME, &opt_socket,
	     "hugeroomd's API socket (default " HR_CONFIG_DEFAULT_API_SOCKET ")", "PATH"},
	    {"json", 'j', 0, G_OPTION_ARG_NONE, &opt_json, "Print the daemon's JSON", NULL},
	    {NULL},
	};
	g_autofree gchar *escaped = NULL;
	g_autofree gchar *path = NULL;

	setlocale(LC_ALL, "");
	g_option_context_set_summary(context,
				     "Commands:\n"
				     "  guests         list the guests hugeroomd knows\n"
				     "  guest NAME     show one guest (name or UUID) in detail\n"
				     "  report NAME    ask a guest for a status report now");
	g_option_context_add_main_entries(context, entries, NULL);
	if (!g_option_context_parse(context, &argc, &argv, &error)) {
		g_printerr("hugeroomctl: %s (see --help)\n", error->message);
		return HR_CTL_EXIT_USAGE;
	}
	if (opt_socket == NULL)
		opt_socket = g_strdup(HR_CONFIG_DEFAULT_API_SOCKET);
	if (argc < 2) {
		g_printerr("hugeroomctl: no command given; one of guests, guest NAME, report NAME "
			   "(see --help)\n");
		return HR_CTL_EXIT_USAGE;
	}
	if (g_strcmp0(argv[1], "guests") == 0 && argc == 2)
		return hr_ctl_run(SOUP_METHOD_GET, "/v1/guests", hr_ctl_render_guests);
	if ((g_strcmp0(argv[1], "guest") == 0 || g_strcmp0(argv[1], "report") == 0) &&
	    argc == 3) {
		escaped = g_uri_escape_string(argv[2], NULL, FALSE);
		if (g_strcmp0(argv[1], "guest") == 0) {
			path = g_strdup_printf("/v1/guests/%s", escaped);
			return hr_ctl_run(SOUP_METHOD_GET, path, hr_ctl_render_guest);
		}
		path = g_strdup_printf("/v1/guests/%s/report", escaped);
		return hr_ctl_run(SOUP_METHOD_POST, path, hr_ctl_render_report);
	}
	g_printerr("hugeroomctl: cannot understand '%s' with %d argument(s); use guests, "
		   "guest NAME or report NAME (see --help)\n",
		   argv[1], argc - 2);
	return HR_CTL_EXIT_USAGE;
}
