/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * host/openapi.json against the server's route table: the same paths, the
 * same methods on each, and on each operation the statuses its handler
 * answers plus those the dispatcher answers for every route (401, 403,
 * 408, 413), and the operationId the table gives it. tests/api checks the
 * statuses a running daemon really sends.
 */

#include <json-glib/json-glib.h>
#include <string.h>

#include "hr-api.h"

static JsonObject *
load_paths(JsonParser *parser)
{
	g_autofree gchar *path =
	    g_test_build_filename(G_TEST_DIST, "..", "..", "host", "openapi.json", NULL);
	g_autoptr(GError) error = NULL;
	JsonObject *root;

	g_assert_true(json_parser_load_from_file(parser, path, &error));
	g_assert_no_error(error);
	root = json_node_get_object(json_parser_get_root(parser));
	g_assert_cmpstr(json_object_get_string_member(root, "openapi"), ==, "3.1.0");
	return json_object_get_object_member(root, "paths");
}

static gchar *
sorted_statuses(GList *keys)
{
	g_autoptr(GList) sorted = g_list_sort(g_list_copy(keys), (GCompareFunc)g_strcmp0);
	g_autoptr(GString) out = g_string_new(NULL);
	for (GList *l = sorted; l != NULL; l = l->next)
		g_string_append_printf(out, "%s%s", out->len > 0 ? " " : "", (gchar *)l->data);
	return g_strdup(out->str);
}

/* every route of the server is in the document, with exactly its statuses */
static void
test_routes_documented(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	JsonObject *paths = load_paths(parser);
	guint n = 0;

	for (const HrApiRoute *route; (route = hr_api_get_route(n)) != NULL; n++) {
		g_autofree gchar *method = g_ascii_strdown(route->method, -1);
		g_auto(GStrv) codes = g_strsplit(route->statuses, " ", -1);
		g_autoptr(GHashTable) want = g_hash_table_new(g_str_hash, g_str_equal);
		g_autoptr(GList) have = NULL;
		g_autofree gchar *want_str = NULL;
		g_autofree gchar *have_str = NULL;
		JsonObject *item, *op;

		g_test_message("%s %s", route->method, route->path);
		g_assert_true(json_object_has_member(paths, route->path));
		item = json_object_get_object_member(paths, route->path);
		g_assert_true(json_object_has_member(item, method));
		op = json_object_get_object_member(item, method);
		g_assert_cmpstr(json_object_get_string_member(op, "x-hugeroom-role"), ==,
				route->admin ? "admin" : "read");
		g_assert_nonnull(route->operation);
		g_assert_cmpstr(json_object_get_string_member_with_default(op, "operationId", NULL),
				==, route->operation);
		for (guint i = 0; codes[i] != NULL; i++)
			g_hash_table_add(want, codes[i]);
		g_hash_table_add(want, "401");
		g_hash_table_add(want, "403");
		g_hash_table_add(want, "408");
		g_hash_table_add(want, "413");
		have = json_object_get_members(json_object_get_object_member(op, "responses"));
		{
			g_autoptr(GList) keys = g_hash_table_get_keys(want);
			want_str = sorted_statuses(keys);
		}
		have_str = sorted_statuses(have);
		g_assert_cmpstr(have_str, ==, want_str);
	}
	g_assert_cmpuint(n, >, 10);
}

/* every operation has an operationId, a distinct one, as code generators need */
static void
test_operation_ids(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	JsonObject *paths = load_paths(parser);
	g_autoptr(GList) names = json_object_get_members(paths);
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);

	for (GList *l = names; l != NULL; l = l->next) {
		JsonObject *item = json_object_get_object_member(paths, l->data);
		g_autoptr(GList) methods = json_object_get_members(item);
		for (GList *m = methods; m != NULL; m = m->next) {
			JsonObject *op = json_object_get_object_member(item, m->data);
			const gchar *id =
			    json_object_get_string_member_with_default(op, "operationId", NULL);
			if (id == NULL || !g_regex_match_simple("^[a-z][A-Za-z]+$", id, 0, 0))
				g_error("%s %s: operationId %s is missing or not camelCase",
					(const gchar *)m->data, (const gchar *)l->data, id);
			if (!g_hash_table_add(seen, (gpointer)id))
				g_error("operationId %s is given twice", id);
		}
	}
	g_assert_cmpuint(g_hash_table_size(seen), >, 10);
}

/* and the document has no route the server does not serve */
static void
test_no_extra_routes(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	JsonObject *paths = load_paths(parser);
	g_autoptr(GList) names = json_object_get_members(paths);

	for (GList *l = names; l != NULL; l = l->next) {
		JsonObject *item = json_object_get_object_member(paths, l->data);
		g_autoptr(GList) methods = json_object_get_members(item);
		for (GList *m = methods; m != NULL; m = m->next) {
			g_autofree gchar *upper = g_ascii_strup(m->data, -1);
			gboolean found = FALSE;
			const HrApiRoute *route;
			for (guint i = 0; (route = hr_api_get_route(i)) != NULL; i++) {
				if (g_strcmp0(route->path, l->data) == 0 &&
				    g_strcmp0(route->method, upper) == 0)
					found = TRUE;
			}
			if (!found)
				g_error("openapi.json has %s %s, the server does not", upper,
					(const gchar *)l->data);
		}
	}
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/openapi/routes-documented", test_routes_documented);
	g_test_add_func("/openapi/no-extra-routes", test_no_extra_routes);
	g_test_add_func("/openapi/operation-ids", test_operation_ids);
	return g_test_run();
}
