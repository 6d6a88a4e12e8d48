/* SPDX-License-Identifier: GPL-2.0-only */
/* hugeroomctl's tables, from fixtures in the API's JSON shape */

#define G_LOG_DOMAIN "TestCtl"

#include <string.h>

#include "hr-ctl.h"

static JsonNode *
load_fixture(const gchar *name)
{
	g_autofree gchar *path = g_test_build_filename(G_TEST_DIST, "fixtures", name, NULL);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_file(parser, path, &error));
	g_assert_no_error(error);
	return json_node_copy(json_parser_get_root(parser));
}

static void
assert_contains(const gchar *haystack, const gchar *needle)
{
	if (strstr(haystack, needle) == NULL)
		g_error("output does not contain '%s':\n%s", needle, haystack);
}

static void
test_guests_table(void)
{
	g_autoptr(JsonNode) root = load_fixture("guests.json");
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_auto(GStrv) lines = NULL;

	g_assert_true(hr_ctl_render_guests(root, out, &error));
	g_assert_no_error(error);
	lines = g_strsplit(out->str, "\n", -1);
	g_assert_cmpuint(g_strv_length(lines), ==, 4); /* header, 2 rows, "" */
	g_assert_cmpstr(lines[0], ==,
			"NAME                 UUID                                      PID "
			"CONNECTED      SEQ     AGE   MEM-FREE   HELD REJECTED");
	g_assert_cmpstr(lines[1], ==,
			"web1                 6b1e3c2a-51c4-4c1e-9a43-0f6f1b0d7e11     4242 "
			"yes            118   412ms    1.0 GiB     12        0");
	g_assert_cmpstr(lines[2], ==,
			"db2                  0f0e0d0c-0b0a-0908-0706-050403020100     5151 "
			"no               -       -          -      0        3");
}

static void
test_guests_empty(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_data(parser, "{\"guests\":[]}", -1, &error));
	g_assert_true(hr_ctl_render_guests(json_parser_get_root(parser), out, &error));
	g_assert_cmpstr(out->str, ==, "no guests have connected to hugeroomd yet\n");
}

static void
test_guests_bad(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_data(parser, "{\"error\":\"x\"}", -1, &error));
	g_assert_false(hr_ctl_render_guests(json_parser_get_root(parser), out, &error));
	g_assert_nonnull(strstr(error->message, "has no guests"));
}

static void
test_guest_detail(void)
{
	g_autoptr(JsonNode) root = load_fixture("guest.json");
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;

	g_assert_true(hr_ctl_render_guest(root, out, &error));
	g_assert_no_error(error);
	assert_contains(out->str, "Guest:        web1\n");
	assert_contains(out->str, "QEMU pid:     4242\n");
	assert_contains(out->str, "Held blocks:  12 (2 MiB each)\n");
	assert_contains(out->str, "driver_ok yes, discard disabled no, relayed 120");
	assert_contains(out->str, "Status:       seq 118, 412ms old\n");
	assert_contains(out->str, "Memory:       total 3.9 GiB, free 1.0 GiB, available 1.1 GiB\n");
	/* the per-order table: header then DMA32 with its 11 counts */
	assert_contains(out->str, "NODE ZONE        MANAGED       FREE       0       1");
	assert_contains(out->str, "0    DMA32       2.9 GiB  781.2 MiB     100      90      80      "
				  "70      60      50      40      30      20      17      33\n");
	assert_contains(out->str, "0    DMA32          50       20       30       40      300     "
				  "1000      31     186      63\n");
	assert_contains(out->str, "  compact_stall                    3\n");
	assert_contains(out->str, "  thp_split_page                   2\n");
}

static void
test_guest_no_status(void)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_data(
	    parser, "{\"name\":\"x\",\"uuid\":\"u\",\"status\":null,\"device\":null}", -1, &error));
	g_assert_true(hr_ctl_render_guest(json_parser_get_root(parser), out, &error));
	assert_contains(out->str, "Status:       none received yet\n");
}

static void
test_format_pages(void)
{
	g_autofree gchar *a = hr_ctl_format_pages(262144);
	g_autofree gchar *b = hr_ctl_format_pages(1);
	g_assert_cmpstr(a, ==, "1.0 GiB");
	g_assert_cmpstr(b, ==, "4.0 KiB");
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/ctl/guests/table", test_guests_table);
	g_test_add_func("/ctl/guests/empty", test_guests_empty);
	g_test_add_func("/ctl/guests/bad", test_guests_bad);
	g_test_add_func("/ctl/guest/detail", test_guest_detail);
	g_test_add_func("/ctl/guest/no-status", test_guest_no_status);
	g_test_add_func("/ctl/format-pages", test_format_pages);
	return g_test_run();
}
