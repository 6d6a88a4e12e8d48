/* SPDX-License-Identifier: GPL-2.0-only */
/* hugeroomctl's tables, from fixtures in the API's JSON shape */

#define G_LOG_DOMAIN "TestCtl"

#include <string.h>

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>

#include "hr-api-view-request.h"
#include "hr-client.h"
#include "hr-ctl.h"
#include "hr-request.h"

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
			"NAME UUID                                  PID CONNECTED SEQ   AGE MEM-FREE "
			"HELD REJECTED");
	g_assert_cmpstr(lines[1], ==,
			"web1 6b1e3c2a-51c4-4c1e-9a43-0f6f1b0d7e11 4242 yes       118 412ms  1.0 GiB "
			"  12        0");
	g_assert_cmpstr(lines[2], ==,
			"db2  0f0e0d0c-0b0a-0908-0706-050403020100 5151 no          -     -        - "
			"   0        3");
}

/* --output, --noheadings, --raw: what a script picks, without the headings */
static void
test_guests_options(void)
{
	g_autoptr(JsonNode) root = load_fixture("guests.json");
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_auto(GStrv) columns = g_strsplit("name,held,Connected", ",", -1);
	g_auto(GStrv) bad = g_strsplit("name,colour", ",", -1);
	HrCtlTableOptions options = {.columns = columns, .noheadings = TRUE};

	g_assert_true(hr_ctl_check_output("guests", columns, &error));
	g_assert_false(hr_ctl_check_output("guests", bad, &error));
	g_assert_cmpstr(error->message, ==,
			"--output colour: the guests table has no such column; it has NAME,UUID,PID,"
			"CONNECTED,SEQ,AGE,MEM-FREE,HELD,REJECTED");
	g_clear_error(&error);
	g_assert_false(hr_ctl_check_output("status", NULL, &error));
	g_clear_error(&error);

	hr_ctl_set_table_options(&options);
	g_assert_true(hr_ctl_render_guests(root, out, &error));
	g_assert_cmpstr(out->str, ==, "web1   12 yes\ndb2     0 no\n");
	g_string_truncate(out, 0);
	options.noheadings = FALSE;
	options.raw = TRUE;
	hr_ctl_set_table_options(&options);
	g_assert_true(hr_ctl_render_guests(root, out, &error));
	g_assert_cmpstr(out->str, ==, "NAME HELD CONNECTED\nweb1 12 yes\ndb2 0 no\n");
	/* an empty list is no line at all for a script */
	{
		g_autoptr(JsonNode) empty = json_from_string("{\"guests\":[]}", NULL);
		g_string_truncate(out, 0);
		g_assert_true(hr_ctl_render_guests(empty, out, &error));
		g_assert_cmpstr(out->str, ==, "");
	}
	hr_ctl_set_table_options(&(HrCtlTableOptions){0});
}

/*
 * A guest names itself: a newline or ESC in its name must not reach the
 * terminal raw, nor split a row in two.
 */
static void
test_guests_escaped(void)
{
	g_autoptr(JsonNode) root = json_from_string(
	    "{\"guests\":[{\"name\":\"ev\\nil\\u001b[2J\\u202eexe.txt\",\"uuid\":\"u\\u001b\","
	    "\"pid\":1,\"connected\":true,\"seq\":null,\"held_blocks\":0,\"rejected\":0}]}",
	    NULL);
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_auto(GStrv) lines = NULL;

	g_assert_nonnull(root);
	g_assert_true(hr_ctl_render_guests(root, out, &error));
	g_assert_null(strchr(out->str, '\033'));
	g_assert_null(strstr(out->str, "\u202e"));
	lines = g_strsplit(out->str, "\n", -1);
	g_assert_cmpuint(g_strv_length(lines), ==, 3); /* header, 1 row, "" */
	g_assert_true(g_str_has_prefix(lines[1], "ev\\x0ail\\x1b[2J\\xe2\\x80\\xaeexe.txt u\\x1b "));
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
	assert_contains(out->str, "Freed:        6 blocks in all, 1200 pages migrated\n");
	assert_contains(out->str, "Returned:     3 to the host's request, 1 under guest pressure, "
				  "0 on driver unload\n");
	assert_contains(out->str, "Requests:     1796017892627952 evacuate partial, 2/3 blocks\n");
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

/* SIZE is checked before anything is sent, against the API's limit */
static void
test_parse_size(void)
{
	static const struct {
		const gchar *text;
		guint64 bytes;
		const gchar *error;
	} cases[] = {
	    {"4G", G_GUINT64_CONSTANT(4) << 30, NULL},
	    {"512MiB", G_GUINT64_CONSTANT(512) << 20, NULL},
	    {"2mb", G_GUINT64_CONSTANT(2) << 20, NULL},
	    {"64T", G_GUINT64_CONSTANT(64) << 40, NULL},
	    {"7E", G_GUINT64_CONSTANT(7) << 60, NULL},
	    {"9223372036854775807", G_MAXINT64, NULL},
	    {"18446744073709551615", 0, "is more than 9223372036854775807 bytes (8 EiB - 1)"},
	    {"9223372036854775808", 0, "the most a reservation can be"},
	    {"99999999999999999999999", 0, "is more than 9223372036854775807 bytes"},
	    {"8E", 0, "is more than"},
	    {"0", 0, "give more than 0"},
	    {"12X", 0, "SIZE '12X' is not a size"},
	    {"-1G", 0, "is not a size"},
	    {"1.5G", 0, "is not a size"},
	    {"4Gx", 0, "is not a size"},
	    {"", 0, "is not a size"},
	};

	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GError) error = NULL;
		guint64 bytes = 0;
		gboolean ok = hr_ctl_parse_size(cases[i].text, &bytes, &error);

		g_test_message("%s", cases[i].text);
		if (cases[i].error == NULL) {
			g_assert_no_error(error);
			g_assert_true(ok);
			g_assert_cmpuint(bytes, ==, cases[i].bytes);
		} else {
			g_assert_false(ok);
			g_assert_nonnull(strstr(error->message, cases[i].error));
		}
	}
}

static void
test_format_pages(void)
{
	g_autofree gchar *a = hr_ctl_format_pages(262144);
	g_autofree gchar *b = hr_ctl_format_pages(1);
	g_assert_cmpstr(a, ==, "1.0 GiB");
	g_assert_cmpstr(b, ==, "4.0 KiB");
}

/* the JSON the daemon gives for a request, made by the daemon's own code */
static JsonNode *
request_json(HrRequest *r)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	hr_api_request_add_json(r, b);
	return json_builder_get_root(b);
}

static HrRequest *
make_request(void)
{
	g_autoptr(GError) error = NULL;
	HrRequestParams p = {
	    .kind = HR_REQUEST_EVACUATE, .count = 8, .budget_pages = 4000, .timeout_s = 60};
	HrRequest *r = hr_request_new(42, &p, NULL, 0, &error);
	g_assert_no_error(error);
	return r;
}

static void
test_progress_line(void)
{
	g_autoptr(HrRequest) r = make_request();
	g_autoptr(JsonNode) queued = request_json(r);
	g_autoptr(JsonNode) running = NULL;
	g_autofree gchar *line0 = hr_ctl_progress_line(queued, 0, FALSE);
	g_autofree gchar *plain = NULL;
	g_autofree gchar *bar = NULL;
	const gchar *tail = "2/8 blocks, 3 tried, 1 failed, 300 pages, 1.5 s, running";
	HrResult prog = {.blocks_tried = 3,
			 .blocks_freed = 2,
			 .pages_migrated = 300,
			 .elapsed_us = 1500000};
	guint room;

	g_assert_cmpstr(line0, ==, "0/8 blocks, 0 tried, 0 failed, 0 pages, 0 us, queued");
	prog.failed[VIRTIO_HUGEROOM_R_UNMOVABLE] = 1;
	hr_request_sent(r);
	g_assert_true(hr_request_progress(r, &prog));
	running = request_json(r);
	plain = hr_ctl_progress_line(running, 0, FALSE);
	g_assert_cmpstr(plain, ==, tail);

	/* on a terminal: a bar filled to 2/8 of the room the text leaves */
	bar = hr_ctl_progress_line(running, 100, TRUE);
	room = 100 - strlen(tail) - 3;
	g_assert_cmpuint(strlen(bar), ==, 100);
	g_assert_true(g_str_has_suffix(bar, tail));
	g_assert_cmpint(bar[0], ==, '[');
	g_assert_cmpuint(strspn(bar + 1, "#"), ==, 2 * room / 8);
	g_assert_cmpuint(strspn(bar + 1 + 2 * room / 8, "."), ==, room - 2 * room / 8);
	g_assert_true(g_str_has_prefix(bar + 1 + room, "] "));
	/* a narrow terminal drops the bar, never the numbers */
	g_free(bar);
	bar = hr_ctl_progress_line(running, strlen(tail) + 5, TRUE);
	g_assert_cmpstr(bar, ==, tail);
}

static void
test_request_summary(void)
{
	g_autoptr(HrRequest) r = make_request();
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	HrResult res = {.hdr.type = VIRTIO_HUGEROOM_MSG_RESULT,
			.status = VIRTIO_HUGEROOM_S_BUDGET,
			.blocks_tried = 8,
			.blocks_freed = 6,
			.pages_migrated = 1200,
			.elapsed_us = 4200000};

	res.failed[VIRTIO_HUGEROOM_R_UNMOVABLE] = 1;
	res.failed[VIRTIO_HUGEROOM_R_BUDGET] = 1;
	hr_request_sent(r);
	hr_request_result(r, &res);
	g_assert_cmpint(r->state, ==, HR_REQUEST_BUDGET);
	root = request_json(r);
	g_assert_true(hr_ctl_render_request(root, out, &error));
	g_assert_no_error(error);
	assert_contains(out->str, "Request:      42 (evacuate)\n");
	assert_contains(out->str, "State:        budget (guest status budget)\n");
	assert_contains(out->str, "Asked:        8 blocks, budget 4000 pages, timeout 60 s\n");
	assert_contains(out->str, "Blocks:       6 freed of 8 tried\n");
	assert_contains(out->str, "Failures:     unmovable 1, budget 1\n");
	assert_contains(out->str, "Pages:        1200 migrated, 200.0 per freed block\n");
	assert_contains(out->str, "Elapsed:      4.2 s in the guest\n");
	g_assert_null(strstr(out->str, "Why:"));
}

static void
test_request_failed(void)
{
	g_autoptr(GError) error = NULL;
	HrRequestParams p = {.kind = HR_REQUEST_RETURN, .all = TRUE, .timeout_s = 5};
	g_autoptr(HrRequest) r = hr_request_new(7, &p, NULL, 0, &error);
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GString) table = g_string_new(NULL);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *line = NULL;
	g_autofree gchar *list = NULL;
	g_auto(GStrv) rows = NULL;

	hr_request_set_state(r, HR_REQUEST_LOST, "the device disconnected before it was sent");
	root = request_json(r);
	g_assert_true(hr_ctl_render_request(root, out, &error));
	assert_contains(out->str, "Request:      7 (return)\nState:        lost\n");
	assert_contains(out->str, "Why:          the device disconnected before it was sent\n");
	assert_contains(out->str, "Asked:        every held block, timeout 5 s\n");
	assert_contains(out->str, "Blocks:       0 returned of 0 tried\n");
	assert_contains(out->str, "Failures:     none\n");
	/* no target: no bar */
	line = hr_ctl_progress_line(root, 80, TRUE);
	g_assert_cmpstr(line, ==, "0 blocks, 0 tried, 0 failed, 0 pages, 0 us, lost");

	/* the table of GET .../requests */
	{
		g_autofree gchar *one = json_to_string(root, FALSE);
		list = g_strdup_printf("{\"guest\":\"vm1\",\"requests\":[%s]}", one);
	}
	g_assert_true(json_parser_load_from_data(parser, list, -1, &error));
	g_assert_true(hr_ctl_render_requests(json_parser_get_root(parser), table, &error));
	rows = g_strsplit(table->str, "\n", -1);
	g_assert_cmpuint(g_strv_length(rows), ==, 3);
	g_test_message("%s", table->str);
	g_assert_true(g_str_has_prefix(rows[0], "ID KIND   STATE TARGET TRIED FREED FAILED PAGES "
						"ELAPSED CREATED"));
	g_assert_true(g_str_has_prefix(rows[1], "7  return lost     all     0     0      0     0 "
						"   0 us 20"));
}

static void
test_format_us(void)
{
	g_autofree gchar *a = hr_ctl_format_us(999);
	g_autofree gchar *b = hr_ctl_format_us(1500);
	g_autofree gchar *c = hr_ctl_format_us(61000000);
	g_assert_cmpstr(a, ==, "999 us");
	g_assert_cmpstr(b, ==, "1.5 ms");
	g_assert_cmpstr(c, ==, "61.0 s");
}

static JsonNode *
parse(const gchar *json)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_data(parser, json, -1, &error));
	return json_node_copy(json_parser_get_root(parser));
}

/* POST /v1/plan's answer: the header lines, a row per step */
static void
test_plan(void)
{
	g_autoptr(JsonNode) root = parse(
	    "{\"plan\": {\"node\": 0, \"need_blocks\": 2048, \"gain_milli\": 1900500,"
	    " \"cost_pages\": 51000, \"est_ms\": 820, \"complete\": false,"
	    " \"summary\": \"node 0: short\", \"guests_considered\": 3, \"guests_deferred\": 1,"
	    " \"steps\": [{\"kind\": \"free\", \"node\": 0, \"blocks\": 1500,"
	    " \"gain_milli\": 1500000, \"cost_pages\": 0, \"est_ms\": 0},"
	    " {\"kind\": \"donate\", \"node\": 0, \"guest_id\": 2, \"guest\": \"vm2\","
	    " \"blocks\": 250, \"thp\": 240, \"small\": 10, \"gain_milli\": 240500,"
	    " \"cost_pages\": 51000, \"est_ms\": 800}]},"
	    " \"guests\": 3, \"input_us\": 1200, \"decision_us\": 300}");
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;
	g_auto(GStrv) lines = NULL;

	g_assert_true(hr_ctl_render_plan(root, out, &error));
	g_assert_no_error(error);
	lines = g_strsplit(out->str, "\n", -1);
	g_assert_cmpstr(lines[0], ==,
			"Plan:         4.0 GiB (2048 blocks of 2 MiB) on node 0: cannot make all "
			"of it free now");
	g_assert_cmpstr(lines[1], ==,
			"Expected:     1900.5 blocks, 51000 pages to migrate, about 820 ms");
	g_assert_cmpstr(lines[3], ==,
			"Guests:       3 considered, 1 deferred (input 1.2 ms, decision 300 us)");
	g_assert_cmpstr(lines[5], ==,
			"STEP KIND   NODE DONOR BLOCKS THP SMALL EXPECTED MIGRATE     TIME");
	g_assert_cmpstr(lines[6], ==,
			"   1 free      0 -       1500   -     -   1500.0       0     0 us");
	g_assert_cmpstr(lines[7], ==,
			"   2 donate    0 vm2      250 240    10    240.5   51000 800.0 ms");
}

/* status: the three answers in one object, each list unwrapped */
static void
test_status(void)
{
	g_autoptr(JsonNode) root = parse(
	    "{\"host\": {\"nodes\": [{\"node\": 0, \"free_pages\": 262144, \"free_blocks\": 500,"
	    " \"available_blocks\": 420, \"promised_blocks\": 8, \"unusable_index\": 125}]},"
	    " \"reservations\": [], \"guests\": []}");
	g_autoptr(JsonNode) bad = parse("{\"host\": {\"nodes\": []}, \"guests\": []}");
	g_autoptr(GString) out = g_string_new(NULL);
	g_autoptr(GError) error = NULL;

	g_assert_true(hr_ctl_render_status(root, out, &error));
	g_assert_no_error(error);
	g_assert_cmpstr(out->str, ==,
			"Host:\n"
			"NODE    FREE FREE-2M AVAILABLE PROMISED  FRAG\n"
			"0    1.0 GiB     500       420        8 0.125\n"
			"(FREE-2M, AVAILABLE, PROMISED in 2 MiB blocks; AVAILABLE: above the high "
			"watermark)\n"
			"\nReservations:\nno reservations\n"
			"\nGuests:\nno guests have connected to hugeroomd yet\n");
	g_assert_false(hr_ctl_render_status(bad, out, &error));
	g_assert_nonnull(strstr(error->message, "has no status"));
}

/* the event stream's server side: headers, then silence until told to send */
typedef struct {
	GSocket *listener;
	GMutex lock;
	GCond cond;
	gboolean send;
} QuietServer;

static gpointer
quiet_server(gpointer data)
{
	QuietServer *qs = data;
	static const gchar head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
	static const gchar event[] = ": ping\n\nevent: request\ndata: {\"id\":\"r-1\"}\n\n";
	g_autoptr(GSocket) conn = g_socket_accept(qs->listener, NULL, NULL);
	gchar req[1024];

	g_assert_nonnull(conn);
	g_assert_cmpint(g_socket_receive(conn, req, sizeof(req), NULL, NULL), >, 0);
	g_assert_cmpint(g_socket_send(conn, head, strlen(head), NULL, NULL), ==, strlen(head));
	g_mutex_lock(&qs->lock);
	while (!qs->send)
		g_cond_wait(&qs->cond, &qs->lock);
	g_mutex_unlock(&qs->lock);
	g_assert_cmpint(g_socket_send(conn, event, strlen(event), NULL, NULL), ==, strlen(event));
	g_usleep(200 * 1000);
	return NULL;
}

/*
 * `prepare --wait` reads events with a timeout and rereads the request when
 * none came: a quiet stream is "no event yet", with no error and nothing
 * logged (a would-block error was once left set under the wait's timeout).
 */
static void
test_events_quiet(void)
{
	g_autofree gchar *dir = g_dir_make_tmp("test-ctl-XXXXXX", NULL);
	g_autofree gchar *path = g_build_filename(dir, "api.sock", NULL);
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrClientEvents) events = NULL;
	g_autofree gchar *type = NULL;
	g_autofree gchar *data = NULL;
	QuietServer qs = {0};
	HrClient *client;
	GThread *thread;

	qs.listener = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
				   G_SOCKET_PROTOCOL_DEFAULT, &error);
	g_assert_no_error(error);
	g_assert_true(g_socket_bind(qs.listener, addr, TRUE, &error));
	g_assert_true(g_socket_listen(qs.listener, &error));
	g_mutex_init(&qs.lock);
	g_cond_init(&qs.cond);
	thread = g_thread_new("quiet-server", quiet_server, &qs);

	client = hr_client_new_unix(path);
	events = hr_client_events_open(client, NULL, &error);
	g_assert_no_error(error);
	g_assert_nonnull(events);
	for (guint i = 0; i < 3; i++) {
		g_assert_false(hr_client_events_next(events, 50, &type, &data, &error));
		g_assert_no_error(error);
	}
	g_mutex_lock(&qs.lock);
	qs.send = TRUE;
	g_cond_signal(&qs.cond);
	g_mutex_unlock(&qs.lock);
	g_assert_true(hr_client_events_next(events, 5000, &type, &data, &error));
	g_assert_no_error(error);
	g_assert_cmpstr(type, ==, "request");
	g_assert_cmpstr(data, ==, "{\"id\":\"r-1\"}");

	g_thread_join(thread);
	g_clear_pointer(&events, hr_client_events_close);
	hr_client_free(client);
	g_object_unref(qs.listener);
	g_mutex_clear(&qs.lock);
	g_cond_clear(&qs.cond);
	g_unlink(path);
	g_rmdir(dir);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/ctl/guests/table", test_guests_table);
	g_test_add_func("/ctl/guests/options", test_guests_options);
	g_test_add_func("/ctl/guests/escaped", test_guests_escaped);
	g_test_add_func("/ctl/plan", test_plan);
	g_test_add_func("/ctl/status", test_status);
	g_test_add_func("/ctl/guests/empty", test_guests_empty);
	g_test_add_func("/ctl/guests/bad", test_guests_bad);
	g_test_add_func("/ctl/guest/detail", test_guest_detail);
	g_test_add_func("/ctl/guest/no-status", test_guest_no_status);
	g_test_add_func("/ctl/format-pages", test_format_pages);
	g_test_add_func("/ctl/parse-size", test_parse_size);
	g_test_add_func("/ctl/format-us", test_format_us);
	g_test_add_func("/ctl/request/progress-line", test_progress_line);
	g_test_add_func("/ctl/request/summary", test_request_summary);
	g_test_add_func("/ctl/request/failed-and-table", test_request_failed);
	g_test_add_func("/ctl/events/quiet", test_events_quiet);
	return g_test_run();
}
