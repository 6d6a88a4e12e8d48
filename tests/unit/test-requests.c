/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * EVACUATE, CAPTURE and RETURN requests end to end inside the daemon: the
 * API on its socket, the fake QEMU device on the VM socket playing the
 * guest driver's answers, and the held list they maintain.
 */

#define G_LOG_DOMAIN "TestRequests"

#include <fcntl.h>
#include <pty.h>
#include <string.h>
#include <unistd.h>

/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

typedef struct {
	Fixture *f;
	guint64 id;
	HrRequestState state;
} WaitState;

static HrRequest *
find_request(Fixture *f, guint64 id)
{
	return hr_guest_find_request(only_guest(f), id);
}

static gboolean
cond_request_state(gpointer data)
{
	WaitState *w = data;
	HrRequest *r = find_request(w->f, w->id);
	return r != NULL && r->state == w->state;
}

static void
wait_state(Fixture *f, guint64 id, HrRequestState state)
{
	WaitState w = {f, id, state};
	g_autofree gchar *what = g_strdup_printf("request %" G_GUINT64_FORMAT " to be %s", id,
						 hr_request_state_to_string(state));
	wait_for(cond_request_state, &w, what);
}

typedef struct {
	Fixture *f;
	guint value;
} WaitHeld;

static gboolean
cond_held(gpointer data)
{
	WaitHeld *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->ready && g_hash_table_size(g->held) == w->value;
}

static void
wait_held(Fixture *f, guint n)
{
	WaitHeld w = {f, n};
	wait_for(cond_held, &w, "the held count");
}

static gboolean
cond_ready(gpointer data)
{
	WaitHeld *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->ready == (gboolean)w->value;
}

static void
wait_ready(Fixture *f, gboolean ready)
{
	WaitHeld w = {f, ready};
	wait_for(cond_ready, &w, ready ? "the resync" : "the disconnect");
}

/* POST a request; returns its id */
static guint64
post(Fixture *f, const gchar *action, const gchar *body, const gchar *expect_state)
{
	g_autofree gchar *path = g_strdup_printf("/v1/guests/vm1/%s", action);
	g_autoptr(JsonNode) root = http_body(f, "POST", path, body, 202, NULL);
	JsonObject *obj = json_node_get_object(root);
	gint64 id = json_object_get_int_member(obj, "request_id");

	g_assert_cmpint(id, >, 0);
	g_assert_cmpstr(json_object_get_string_member(obj, "guest"), ==, "vm1");
	g_assert_cmpstr(json_object_get_string_member(obj, "state"), ==, expect_state);
	return id;
}

/* POST that must fail with @status and exactly @message */
static void
post_fails(Fixture *f, const gchar *action, const gchar *body, guint status,
	   const gchar *message)
{
	g_autofree gchar *path = g_strdup_printf("/v1/guests/vm1/%s", action);
	g_autoptr(JsonNode) root = http_body(f, "POST", path, body, status, NULL);
	const gchar *error = json_object_get_string_member(json_node_get_object(root), "error");
	if (message[0] == '~') {
		if (strstr(error, message + 1) == NULL)
			g_error("%s %s: '%s' does not contain '%s'", action, body, error,
				message + 1);
	} else {
		g_assert_cmpstr(error, ==, message);
	}
}

static JsonNode *
get_request(Fixture *f, guint64 id)
{
	g_autofree gchar *path = g_strdup_printf("/v1/guests/vm1/requests/%" G_GUINT64_FORMAT, id);
	return http(f, "GET", path, 200, NULL);
}

static void
send_msg(FakeDevice *dev, GBytes *msg)
{
	fake_send(dev, HR_CHAN_GUEST_MSG, msg);
	g_bytes_unref(msg);
}

/* ---------------------------------------------------------------------- */

typedef struct {
	GString *states;
} Trace;

static void
trace_notify(HrRequest *request, gpointer user_data)
{
	Trace *t = user_data;
	const gchar *name = hr_request_state_to_string(request->state);
	/* record transitions, not every progress update */
	if (!g_str_has_suffix(t->states->str, name))
		g_string_append_printf(t->states, "%s%s", t->states->len > 0 ? " " : "", name);
}

static void
test_lifecycle(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(JsonNode) guest_json = NULL;
	g_autofree gchar *metrics = NULL;
	JsonObject *req, *progress, *result, *params, *held;
	guint64 id;
	(void)data;

	wait_ready(f, TRUE);
	id = post(f, "evacuate", "{\"blocks\":3,\"budget_pages\":1000,\"budget_ms\":500}", "sent");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->hdr.request_id, ==, id);
	g_assert_cmpuint(cmd->hdr.flags, ==, VIRTIO_HUGEROOM_EVAC_F_CHEAPEST);
	g_assert_cmpuint(cmd->count, ==, 3);
	g_assert_cmpuint(cmd->nr_gpas, ==, 0);
	g_assert_cmpuint(cmd->budget_pages, ==, 1000);
	g_assert_cmpuint(cmd->budget_ms, ==, 500);

	/* the first PROGRESS makes it running */
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_PROGRESS, id, 0, 1, 0, 120));
	wait_state(f, id, HR_REQUEST_RUNNING);
	root = get_request(f, id);
	req = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(req, "kind"), ==, "evacuate");
	g_assert_cmpstr(json_object_get_string_member(req, "state"), ==, "running");
	progress = json_object_get_object_member(req, "progress");
	g_assert_cmpint(json_object_get_int_member(progress, "blocks_tried"), ==, 1);
	g_assert_cmpint(json_object_get_int_member(progress, "pages_migrated"), ==, 120);
	g_assert_true(json_object_get_null_member(req, "result"));
	g_assert_true(json_object_get_null_member(req, "finished_at"));
	g_assert_nonnull(json_object_get_string_member(req, "sent_at"));

	/* HOLDs name the blocks; the RESULT ends it */
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, id, 0, MiB(200), 2));
	wait_held(f, 2);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, id, VIRTIO_HUGEROOM_S_PARTIAL, 3, 2,
				  700));
	wait_state(f, id, HR_REQUEST_PARTIAL);

	g_clear_pointer(&root, json_node_unref);
	root = get_request(f, id);
	req = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(req, "state"), ==, "partial");
	params = json_object_get_object_member(req, "params");
	g_assert_cmpint(json_object_get_int_member(params, "blocks"), ==, 3);
	g_assert_cmpint(json_object_get_int_member(params, "budget_pages"), ==, 1000);
	g_assert_cmpint(json_object_get_int_member(params, "timeout_s"), ==, 300);
	result = json_object_get_object_member(req, "result");
	g_assert_cmpstr(json_object_get_string_member(result, "status"), ==, "partial");
	g_assert_cmpint(json_object_get_int_member(result, "blocks_freed"), ==, 2);
	g_assert_cmpint(json_object_get_int_member(result, "pages_migrated"), ==, 700);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(result, "failed"),
						   "unmovable"),
			==, 1);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(req, "progress"),
						   "blocks_freed"),
			==, 2);
	g_assert_cmpuint(json_array_get_length(json_object_get_array_member(req, "blocks")), ==, 2);
	g_assert_cmpstr(json_array_get_string_element(json_object_get_array_member(req, "blocks"), 1),
			==, "0xca00000");
	g_assert_nonnull(json_object_get_string_member(req, "finished_at"));

	/* the guest detail: held blocks and the request summary */
	guest_json = http(f, "GET", "/v1/guests/vm1", 200, NULL);
	held = json_object_get_object_member(json_node_get_object(guest_json), "held");
	g_assert_cmpint(json_object_get_int_member(held, "blocks"), ==, 2);
	g_assert_cmpstr(json_array_get_string_element(json_object_get_array_member(held, "gpas"), 0),
			==, "0xc800000");
	g_assert_cmpint(json_object_get_int_member(held, "blocks_freed_total"), ==, 2);
	{
		JsonArray *reqs = json_object_get_array_member(json_node_get_object(guest_json),
							       "requests");
		JsonObject *summary = json_array_get_object_element(reqs, 0);
		g_assert_cmpuint(json_array_get_length(reqs), ==, 1);
		g_assert_cmpint(json_object_get_int_member(summary, "request_id"), ==, id);
		g_assert_cmpstr(json_object_get_string_member(summary, "state"), ==, "partial");
		g_assert_cmpint(json_object_get_int_member(summary, "blocks_freed"), ==, 2);
	}

	http(f, "GET", "/metrics", 200, &metrics);
	g_assert_nonnull(strstr(metrics, "hugeroom_guest_blocks_freed_total{name=\"vm1\","
					 "uuid=\"10111213-1415-1617-1819-1a1b1c1d1e1f\"} 2\n"));
	g_assert_nonnull(strstr(metrics, "hugeroom_guest_pages_migrated_total{name=\"vm1\","
					 "uuid=\"10111213-1415-1617-1819-1a1b1c1d1e1f\"} 700\n"));
	g_assert_nonnull(strstr(metrics, "hugeroom_guest_requests_finished_total{name=\"vm1\","
					 "uuid=\"10111213-1415-1617-1819-1a1b1c1d1e1f\","
					 "state=\"partial\"} 1\n"));
	g_assert_nonnull(strstr(metrics, "hugeroom_guest_requests{name=\"vm1\",uuid=\"10111213-"
					 "1415-1617-1819-1a1b1c1d1e1f\",state=\"running\"} 0\n"));
	g_assert_nonnull(strstr(metrics, "hugeroom_guest_held_blocks{name=\"vm1\",uuid=\"10111213-"
					 "1415-1617-1819-1a1b1c1d1e1f\"} 2\n"));
}

/* what a planner does: submit from C and follow the request by callback */
static void
test_planner_api(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GError) error = NULL;
	guint64 gpas[] = {MiB(10), MiB(12), MiB(14)};
	HrRange ranges[] = {{MiB(0), MiB(64)}};
	Trace t = {g_string_new(NULL)};
	HrRequestParams p = {
	    .kind = HR_REQUEST_EVACUATE,
	    .count = 2,
	    .gpas = gpas,
	    .nr_gpas = G_N_ELEMENTS(gpas),
	    .timeout_s = 60,
	    .notify = trace_notify,
	    .notify_data = &t,
	};
	HrRequest *request;
	(void)data;

	wait_ready(f, TRUE);
	request = hr_core_submit(hr_daemon_get_core(f->daemon), only_guest(f), &p, &error);
	g_assert_no_error(error);
	hr_request_ref(request);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	/* explicit: try these, stop after 2 */
	g_assert_cmpuint(cmd->hdr.flags, ==, 0);
	g_assert_cmpuint(cmd->count, ==, 2);
	g_assert_cmpuint(cmd->nr_gpas, ==, 3);
	g_assert_cmpuint(cmd->gpas[2], ==, MiB(14));
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, request->id, 0, MiB(10), 2));
	send_msg(dev,
		 make_result(VIRTIO_HUGEROOM_MSG_RESULT, request->id, VIRTIO_HUGEROOM_S_OK, 2, 2, 9));
	wait_state(f, request->id, HR_REQUEST_DONE);
	g_assert_cmpstr(t.states->str, ==, "sent running done");
	g_assert_cmpuint(request->blocks->len, ==, 2);
	g_assert_cmpuint(request->result.pages_migrated, ==, 9);
	hr_request_unref(request);

	/* ranges go with the cheapest form only */
	p.gpas = NULL;
	p.nr_gpas = 0;
	p.ranges = ranges;
	p.nr_ranges = 1;
	p.notify = NULL;
	request = hr_core_submit(hr_daemon_get_core(f->daemon), only_guest(f), &p, &error);
	g_assert_no_error(error);
	g_clear_pointer(&cmd, hr_cmd_free);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->hdr.flags, ==,
			 VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES);
	g_assert_cmpuint(cmd->nr_ranges, ==, 1);
	g_assert_cmpuint(cmd->ranges[0].end, ==, MiB(64));

	/* a range past the guest's 1 GiB is refused before anything is sent */
	ranges[0].end = MiB(2048);
	g_assert_null(hr_core_submit(hr_daemon_get_core(f->daemon), only_guest(f), &p, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
	g_assert_cmpstr(error->message, ==,
			"ranges[0]: 0x0-0x80000000 is not inside one range of the guest's RAM "
			"(0x0-0x40000000)");
	g_string_free(t.states, TRUE);
}

static void
test_queue(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) a_cmd = NULL;
	g_autoptr(HrCmd) b_cmd = NULL;
	g_autoptr(HrCmd) c_cmd = NULL;
	g_autoptr(HrCmd) c_again = NULL;
	g_autoptr(JsonNode) list = NULL;
	JsonArray *reqs;
	guint64 a, b, c;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":2}", "sent");
	b = post(f, "capture", "{\"blocks\":4,\"budget_ms\":2000}", "queued");
	g_assert_cmpuint(b, >, a);
	a_cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(a_cmd->hdr.request_id, ==, a);
	/* the capture waits for the evacuation's result */
	fake_expect_silence(dev, 200);
	g_assert_cmpint(find_request(f, b)->state, ==, HR_REQUEST_QUEUED);

	list = http(f, "GET", "/v1/guests/vm1/requests", 200, NULL);
	reqs = json_object_get_array_member(json_node_get_object(list), "requests");
	g_assert_cmpuint(json_array_get_length(reqs), ==, 2);
	g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(reqs, 0), "state"),
			==, "sent");
	g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(reqs, 1), "state"),
			==, "queued");

	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_OK, 2, 2, 10));
	b_cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CAPTURE);
	g_assert_cmpuint(b_cmd->hdr.request_id, ==, b);
	g_assert_cmpuint(b_cmd->count, ==, 4);
	g_assert_cmpuint(b_cmd->budget_ms, ==, 2000);
	g_assert_cmpint(find_request(f, a)->state, ==, HR_REQUEST_DONE);
	g_assert_cmpint(find_request(f, b)->state, ==, HR_REQUEST_SENT);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, b, VIRTIO_HUGEROOM_S_OK, 4, 4, 0));
	wait_state(f, b, HR_REQUEST_DONE);

	/* a driver busy with a command we do not know (a restart): try again */
	c = post(f, "evacuate", "{\"gpas\":[\"0x200000\",4194304]}", "sent");
	c_cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(c_cmd->gpas[1], ==, MiB(4));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, c, VIRTIO_HUGEROOM_S_BUSY, 0, 0, 0));
	wait_state(f, c, HR_REQUEST_QUEUED);
	g_assert_cmpuint(find_request(f, c)->busy_retries, ==, 1);
	c_again = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(c_again->hdr.request_id, ==, c);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, c, VIRTIO_HUGEROOM_S_OK, 2, 2, 3));
	wait_state(f, c, HR_REQUEST_DONE);
}

static void
test_timeout(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) cancel = NULL;
	g_autoptr(HrCmd) next = NULL;
	g_autoptr(JsonNode) root = NULL;
	JsonObject *req;
	guint64 a, b;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":1,\"timeout_s\":1}", "sent");
	b = post(f, "return", "{\"all\":true,\"timeout_s\":30}", "queued");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_PROGRESS, a, 0, 0, 0, 5));
	wait_state(f, a, HR_REQUEST_RUNNING);
	/* no result: after 1 s it times out and the guest is told to stop */
	wait_state(f, a, HR_REQUEST_TIMED_OUT);
	cancel = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CANCEL);
	g_assert_cmpuint(cancel->hdr.request_id, ==, a);
	/* and the next one goes */
	next = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(next->hdr.request_id, ==, b);
	g_assert_cmpuint(next->count, ==, HR_REQUEST_RETURN_ALL);
	g_assert_cmpuint(next->nr_gpas, ==, 0);

	/* a late result is recorded, the state stays */
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_CANCELLED, 1, 0,
				  40));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, b, VIRTIO_HUGEROOM_S_OK, 0, 0, 0));
	wait_state(f, b, HR_REQUEST_DONE);
	root = get_request(f, a);
	req = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(req, "state"), ==, "timed-out");
	g_assert_cmpstr(json_object_get_string_member(req, "error"), ==,
			"no result within its 1 s timeout; cancel sent");
	g_assert_true(json_object_get_boolean_member(req, "cancel_requested"));
	g_assert_cmpstr(json_object_get_string_member(json_object_get_object_member(req, "result"),
						      "status"),
			==, "cancelled");
}

static void
test_timeout_queued(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	guint64 a, b;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":1}", "sent");
	b = post(f, "capture", "{\"blocks\":1,\"timeout_s\":1}", "queued");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	wait_state(f, b, HR_REQUEST_TIMED_OUT);
	g_assert_nonnull(strstr(find_request(f, b)->error, "not sent within its 1 s timeout"));
	/* the running one is untouched, and the timed-out one is never sent */
	g_assert_cmpint(find_request(f, a)->state, ==, HR_REQUEST_SENT);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_OK, 1, 1, 0));
	wait_state(f, a, HR_REQUEST_DONE);
	fake_expect_silence(dev, 200);
}

static void
test_lost(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(FakeDevice) dev2 = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autofree gchar *metrics = NULL;
	guint64 a, b;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":8}", "sent");
	b = post(f, "capture", "{\"blocks\":1}", "queued");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_PROGRESS, a, 0, 2, 1, 50));
	wait_state(f, a, HR_REQUEST_RUNNING);
	g_clear_pointer(&dev, fake_free);
	wait_state(f, a, HR_REQUEST_LOST);
	g_assert_cmpint(find_request(f, b)->state, ==, HR_REQUEST_LOST);
	g_assert_cmpstr(find_request(f, a)->error, ==, "the device disconnected before the result");
	g_assert_cmpstr(find_request(f, b)->error, ==, "the device disconnected before it was sent");
	/* what it had done is kept */
	g_assert_cmpuint(find_request(f, a)->progress.pages_migrated, ==, 50);

	/* not connected: refused; back again: nothing old is sent */
	post_fails(f, "evacuate", "{\"blocks\":1}", 409, "~guest vm1 is not connected");
	dev2 = fake_device_up(f, "vm1", 0x10);
	wait_ready(f, TRUE);
	fake_expect_silence(dev2, 200);
	http(f, "GET", "/metrics", 200, &metrics);
	g_assert_nonnull(strstr(metrics, "state=\"lost\"} 2\n"));
}

static void
test_cmds_dropped(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .msgs_relayed = 1,
				   .cmds_dropped = 1};
	guint64 a;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":1}", "sent");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	fake_send_state(dev, &state);
	wait_state(f, a, HR_REQUEST_FAILED);
	g_assert_nonnull(strstr(find_request(f, a)->error, "the device dropped the command"));
}

static void
test_cancel(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) cancel = NULL;
	g_autoptr(JsonNode) root = NULL;
	g_autofree gchar *body = NULL;
	JsonObject *obj;
	guint64 a, b;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":5}", "sent");
	b = post(f, "evacuate", "{\"blocks\":1}", "queued");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);

	/* a queued one never reaches the device */
	body = g_strdup_printf("{\"request_id\":%" G_GUINT64_FORMAT "}", b);
	root = http_body(f, "POST", "/v1/guests/vm1/cancel", body, 202, NULL);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(root), "state"), ==,
			"cancelled");
	fake_expect_silence(dev, 100);

	/* the running one: CANCEL goes to the guest, its RESULT ends it */
	g_free(body);
	body = g_strdup_printf("{\"request_id\":%" G_GUINT64_FORMAT "}", a);
	g_clear_pointer(&root, json_node_unref);
	root = http_body(f, "POST", "/v1/guests/vm1/cancel", body, 202, NULL);
	obj = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(obj, "state"), ==, "sent");
	g_assert_true(json_object_get_boolean_member(obj, "cancel_requested"));
	cancel = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CANCEL);
	g_assert_cmpuint(cancel->hdr.request_id, ==, a);
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, a, 0, MiB(20), 1));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_CANCELLED, 2, 1,
				  30));
	wait_state(f, a, HR_REQUEST_CANCELLED);
	/* blocks freed before the cancel stay held */
	wait_held(f, 1);

	post_fails(f, "cancel", body, 409, "~already ended: cancelled");

	/* cancelled while the driver answers busy: it is not sent again */
	{
		g_autoptr(HrCmd) c_cmd = NULL;
		g_autoptr(HrCmd) c_cancel = NULL;
		g_autoptr(JsonNode) c_root = NULL;
		g_autofree gchar *c_body = NULL;
		guint64 c = post(f, "capture", "{\"blocks\":1}", "sent");
		c_cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CAPTURE);
		c_body = g_strdup_printf("{\"request_id\":%" G_GUINT64_FORMAT "}", c);
		c_root = http_body(f, "POST", "/v1/guests/vm1/cancel", c_body, 202, NULL);
		c_cancel = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CANCEL);
		send_msg(dev,
			 make_result(VIRTIO_HUGEROOM_MSG_RESULT, c, VIRTIO_HUGEROOM_S_BUSY, 0, 0, 0));
		wait_state(f, c, HR_REQUEST_CANCELLED);
		fake_expect_silence(dev, 1300);
	}
	post_fails(f, "cancel", "{\"request_id\":12345}", 404, "~guest vm1 has no request 12345");
	post_fails(f, "cancel", "{}", 400, "request_id: missing; cancel names the request to stop");
	post_fails(f, "cancel", "{\"request_id\":\"x\"}", 400,
		   "request_id: \"x\" is not a whole number from 1 to 9223372036854775807");
}

static void
test_held(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(HrCmd) evac = NULL;
	g_autoptr(HrCmd) ret = NULL;
	g_autoptr(JsonNode) guest_json = NULL;
	JsonObject *held, *returned;
	HrHeldBlock *block;
	guint64 a, r;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":6}", "sent");
	evac = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, a, 0, MiB(100), 4));
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, a, 0, MiB(200), 2));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_OK, 6, 6, 0));
	wait_state(f, a, HR_REQUEST_DONE);
	wait_held(f, 6);
	block = g_hash_table_lookup(only_guest(f)->held, &(guint64){MiB(102)});
	g_assert_nonnull(block);
	g_assert_cmpuint(block->request_id, ==, a);

	/* guest memory pressure takes one back on its own */
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, 0, VIRTIO_HUGEROOM_RET_PRESSURE,
				  MiB(100), 1));
	wait_held(f, 5);

	/* the host gives two named ones back */
	r = post(f, "return", "{\"gpas\":[\"0x6600000\",\"0xc800000\"]}", "sent");
	ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 2);
	g_assert_cmpuint(ret->count, ==, 2);
	g_assert_cmpuint(ret->gpas[0], ==, MiB(102));
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, r, VIRTIO_HUGEROOM_RET_HOST,
				  MiB(102), 1));
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, r, VIRTIO_HUGEROOM_RET_HOST,
				  MiB(200), 1));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, r, VIRTIO_HUGEROOM_S_OK, 2, 2, 0));
	wait_state(f, r, HR_REQUEST_DONE);
	g_assert_cmpuint(find_request(f, r)->blocks->len, ==, 2);

	guest_json = http(f, "GET", "/v1/guests/vm1", 200, NULL);
	held = json_object_get_object_member(json_node_get_object(guest_json), "held");
	g_assert_cmpint(json_object_get_int_member(held, "blocks"), ==, 3);
	g_assert_cmpstr(json_array_get_string_element(json_object_get_array_member(held, "gpas"), 0),
			==, "0x6800000");
	g_assert_cmpstr(json_array_get_string_element(json_object_get_array_member(held, "gpas"), 2),
			==, "0xca00000");
	returned = json_object_get_object_member(held, "returned");
	g_assert_cmpint(json_object_get_int_member(returned, "host"), ==, 2);
	g_assert_cmpint(json_object_get_int_member(returned, "pressure"), ==, 1);
	g_assert_cmpint(json_object_get_int_member(returned, "unload"), ==, 0);
	/* return takes blocks of the guest's choice too */
	post(f, "return", "{\"blocks\":2}", "sent");
}

/* HELLO, WELCOME, a resync of @n blocks from @first, DEVICE_STATE */
static FakeDevice *
device_with_resync(Fixture *f, guint64 first, guint n)
{
	return fake_device_resync(f, "vm1", 0x10, first, n);
}

static void
test_resync_replaces(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = device_with_resync(f, MiB(100), 3);
	g_autoptr(FakeDevice) dev2 = NULL;
	HrHeldBlock *block;
	gint64 first_seen;
	(void)data;

	wait_held(f, 3);
	block = g_hash_table_lookup(only_guest(f)->held, &(guint64){MiB(102)});
	first_seen = block->held_at;
	/* a hold for a request this daemon never sent still counts */
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 999, 0, MiB(300), 1));
	wait_held(f, 4);

	g_clear_pointer(&dev, fake_free);
	wait_ready(f, FALSE);
	/* the device's set is the truth: 102, 104, 106 now */
	dev2 = device_with_resync(f, MiB(102), 3);
	wait_ready(f, TRUE);
	wait_held(f, 3);
	g_assert_false(g_hash_table_contains(only_guest(f)->held, &(guint64){MiB(100)}));
	g_assert_false(g_hash_table_contains(only_guest(f)->held, &(guint64){MiB(300)}));
	g_assert_true(g_hash_table_contains(only_guest(f)->held, &(guint64){MiB(106)}));
	/* what we knew of a block survives the resync */
	block = g_hash_table_lookup(only_guest(f)->held, &(guint64){MiB(102)});
	g_assert_cmpint(block->held_at, ==, first_seen);
}

static void
test_daemon_restart(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(FakeDevice) dev2 = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(GArray) before = NULL;
	g_autoptr(GArray) after = NULL;
	guint64 a;
	(void)data;

	wait_ready(f, TRUE);
	a = post(f, "evacuate", "{\"blocks\":4}", "sent");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, a, 0, MiB(40), 3));
	wait_held(f, 3);
	before = hr_guest_held_sorted(only_guest(f));

	/* the daemon dies mid-request; a new one starts on the same sockets */
	hr_daemon_free(f->daemon);
	fake_wait_eof(dev);
	f->daemon = hr_daemon_new(f->config);
	g_assert_true(hr_daemon_start(f->daemon, &error));
	g_assert_no_error(error);

	/* QEMU reconnects and resyncs what the device holds */
	dev2 = device_with_resync(f, MiB(40), 3);
	wait_held(f, 3);
	after = hr_guest_held_sorted(only_guest(f));
	g_assert_cmpuint(after->len, ==, before->len);
	g_assert_cmpmem(after->data, after->len * 8, before->data, before->len * 8);
	/* the old request's late messages are logged and ignored, holds still count */
	send_msg(dev2, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, a, 0, MiB(46), 1));
	send_msg(dev2, make_result(VIRTIO_HUGEROOM_MSG_RESULT, a, VIRTIO_HUGEROOM_S_OK, 4, 4, 0));
	wait_held(f, 4);
	g_assert_null(find_request(f, a));
	g_assert_cmpuint(only_guest(f)->rejected, ==, 0);
}

static void
test_gate(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	g_autoptr(HrChanHello) hello = make_hello("vm1", 0x10);
	g_autoptr(GBytes) hp = hr_chan_hello_encode(hello);
	g_autoptr(HrChanFrame) welcome = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	/* STATUS and HOLD only */
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0x5};
	(void)data;

	fake_send(dev, HR_CHAN_HELLO, hp);
	welcome = fake_recv(dev);
	fake_send_state(dev, &state);
	wait_ready(f, TRUE);
	post_fails(f, "evacuate", "{\"blocks\":1}", 409,
		   "the driver of guest vm1 did not negotiate F_EVACUATE (features 0x5), so it "
		   "cannot evacuate");
	post(f, "return", "{\"blocks\":1}", "sent");
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);

	state.driver_ok = 0;
	state.guest_features = 0;
	fake_send_state(dev, &state);
	while (only_guest(f)->state.driver_ok)
		g_main_context_iteration(NULL, TRUE);
	post_fails(f, "capture", "{\"blocks\":1}", 409, "~DRIVER_OK not set");

	state.driver_ok = 1;
	state.guest_features = 0xf;
	state.discard_disabled = 1;
	fake_send_state(dev, &state);
	while (!only_guest(f)->state.discard_disabled)
		g_main_context_iteration(NULL, TRUE);
	post_fails(f, "capture", "{\"blocks\":1}", 409, "~cannot discard memory now");
}

static void
test_validation(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(GString) many = g_string_new("{\"gpas\":[");
	g_autoptr(JsonNode) root = NULL;
	(void)data;

	wait_ready(f, TRUE);
	post_fails(f, "evacuate", NULL, 400,
		   "the request needs a JSON object body, for example {\"blocks\":4}");
	post_fails(f, "evacuate", "blocks=3", 400, "~the body is not JSON: ");
	post_fails(f, "evacuate", "[3]", 400,
		   "the body must be a JSON object, for example {\"blocks\":4}");
	post_fails(f, "evacuate", "{}", 400,
		   "blocks: missing; give the number of blocks or a list of gpas");
	post_fails(f, "evacuate", "{\"blocks\":0}", 400, "blocks: 0 is out of range 1-4294967294");
	post_fails(f, "evacuate", "{\"blocks\":-2}", 400,
		   "blocks: -2 is out of range 1-4294967294");
	post_fails(f, "evacuate", "{\"blocks\":\"3\"}", 400,
		   "blocks: \"3\" is not a whole number from 1 to 4294967294");
	post_fails(f, "evacuate", "{\"blocks\":1.5}", 400,
		   "blocks: 1.5 is not a whole number from 1 to 4294967294");
	post_fails(f, "evacuate", "{\"blocks\":1,\"foo\":1}", 400,
		   "foo: unknown field; evacuate takes blocks, gpas, ranges, budget_pages, "
		   "budget_ms, timeout_s");
	post_fails(f, "evacuate", "{\"gpas\":[\"0x200000\",\"0x400000\",\"0x1234\"]}", 400,
		   "gpas[2]: 0x1234 is not 2 MiB aligned");
	post_fails(f, "evacuate", "{\"gpas\":[2097152,\"0x200000\"]}", 400,
		   "gpas[1]: 0x200000 repeats gpas[0]");
	post_fails(f, "evacuate", "{\"gpas\":[\"zz\"]}", 400,
		   "gpas[0]: \"zz\" is not an address (a whole number, or a string such as "
		   "\"0x40000000\")");
	post_fails(f, "evacuate", "{\"gpas\":[-4]}", 400, "~gpas[0]: -4 is not an address");
	post_fails(f, "evacuate", "{\"gpas\":\"0x200000\"}", 400,
		   "gpas: must be an array of addresses");
	post_fails(f, "evacuate", "{\"gpas\":[]}", 400, "gpas: the list is empty");
	post_fails(f, "evacuate", "{\"gpas\":[\"0x80000000\"]}", 400,
		   "gpas[0]: 0x80000000 is outside the guest's RAM (0x0-0x40000000)");
	post_fails(f, "evacuate", "{\"blocks\":5,\"gpas\":[\"0x200000\"]}", 400,
		   "blocks: 5 exceeds the 1 gpas given");
	post_fails(f, "evacuate",
		   "{\"blocks\":2,\"ranges\":[{\"start\":\"0x400000\",\"end\":\"0x200000\"}]}", 400,
		   "ranges[0].end: 0x200000 is not above start 0x400000");
	post_fails(f, "evacuate",
		   "{\"blocks\":2,\"ranges\":[{\"start\":0,\"end\":\"0x400000\"},"
		   "{\"start\":\"0x200000\",\"end\":\"0x800000\"}]}",
		   400,
		   "ranges[1].start: 0x200000 is below the end of ranges[0]; ranges must be sorted "
		   "and must not overlap");
	post_fails(f, "evacuate", "{\"blocks\":2,\"ranges\":[{\"start\":0}]}", 400,
		   "ranges[0].end: missing");
	post_fails(f, "evacuate",
		   "{\"gpas\":[\"0x200000\"],\"ranges\":[{\"start\":0,\"end\":\"0x400000\"}]}", 400,
		   "ranges: only with blocks (the guest picks the cheapest), not with gpas");
	post_fails(f, "evacuate", "{\"blocks\":1,\"timeout_s\":0}", 400,
		   "timeout_s: 0 is out of range 1-86400");
	for (guint i = 0; i < 501; i++)
		g_string_append_printf(many, "%s%u", i > 0 ? "," : "", i * 2 * 1024 * 1024);
	g_string_append(many, "]}");
	post_fails(f, "evacuate", many->str, 400,
		   "gpas: 501 blocks exceed the limit of 500 per command");
	post_fails(f, "capture", "{\"blocks\":1,\"budget_pages\":5}", 400,
		   "budget_pages: unknown field; capture takes blocks, budget_ms, timeout_s");
	post_fails(f, "capture", "{\"budget_ms\":5}", 400,
		   "blocks: missing; give the number of blocks");
	post_fails(f, "return", "{}", 400, "blocks: return needs blocks, gpas or \"all\":true");
	post_fails(f, "return", "{\"blocks\":1,\"all\":true}", 400,
		   "blocks: return takes exactly one of blocks, gpas or all");
	post_fails(f, "return", "{\"all\":1}", 400, "all: must be true or false");
	post_fails(f, "return", "{\"blocks\":1,\"gpas\":[0]}", 400,
		   "blocks: return takes blocks or gpas, not both");
	/* none of that reached the device */
	fake_expect_silence(dev, 100);
	g_assert_cmpuint(hr_inflight_count(only_guest(f)->commands, HR_INFLIGHT_REQUEST), ==, 0);

	root = http_body(f, "POST", "/v1/guests/nosuch/evacuate", "{\"blocks\":1}", 404, NULL);
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "GET", "/v1/guests/vm1/evacuate", 405, NULL);
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "GET", "/v1/guests/vm1/requests/77", 404, NULL);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(root), "error"), ==,
			"guest vm1 has no request '77' (the daemon keeps the last 32 finished "
			"requests per guest, and none across a restart)");
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "GET", "/v1/guests/vm1/requests/abc", 404, NULL);
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "POST", "/v1/guests/vm1/frobnicate", 404, NULL);
}

static void
test_history(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	guint64 ids[5];
	(void)data;

	wait_ready(f, TRUE);
	only_guest(f)->history = 3;
	for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
		g_autoptr(HrCmd) cmd = NULL;
		ids[i] = post(f, "capture", "{\"blocks\":1}", "sent");
		cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CAPTURE);
		send_msg(dev,
			 make_result(VIRTIO_HUGEROOM_MSG_RESULT, ids[i], VIRTIO_HUGEROOM_S_OK, 1, 1, 0));
		wait_state(f, ids[i], HR_REQUEST_DONE);
	}
	/* the last three are kept */
	g_assert_null(find_request(f, ids[0]));
	g_assert_null(find_request(f, ids[1]));
	g_assert_nonnull(find_request(f, ids[2]));
	g_assert_cmpuint(g_queue_get_length(&only_guest(f)->finished), ==, 3);
	g_assert_cmpuint(only_guest(f)->requests_final[HR_REQUEST_DONE], ==, 5);
}

typedef struct {
	gboolean done;
	gchar *out;
	gchar *err;
	GError *error;
} Proc;

static void
proc_done_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	Proc *p = user_data;
	g_subprocess_communicate_utf8_finish(G_SUBPROCESS(source), res, &p->out, &p->err,
					     &p->error);
	p->done = TRUE;
}

static gboolean
cond_proc_done(gpointer data)
{
	return ((Proc *)data)->done;
}

/*
 * start hugeroomctl against the test's daemon; its output comes in @p, or
 * its stderr goes to @tty_fd (a terminal) when that is not -1
 */
static GSubprocess *
ctl_start_full(Fixture *f, Proc *p, const gchar *const *args, gint tty_fd)
{
	const gchar *ctl = g_getenv("HUGEROOMCTL");
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(GSubprocessLauncher) launcher = NULL;
	GSubprocess *proc;

	g_ptr_array_add(argv, (gpointer)ctl);
	g_ptr_array_add(argv, (gpointer) "--socket");
	g_ptr_array_add(argv, f->config->api_socket);
	for (guint i = 0; args[i] != NULL; i++)
		g_ptr_array_add(argv, (gpointer)args[i]);
	g_ptr_array_add(argv, NULL);
	launcher = g_subprocess_launcher_new(
	    G_SUBPROCESS_FLAGS_STDOUT_PIPE |
	    (tty_fd >= 0 ? G_SUBPROCESS_FLAGS_NONE : G_SUBPROCESS_FLAGS_STDERR_PIPE));
	if (tty_fd >= 0)
		g_subprocess_launcher_take_stderr_fd(launcher, tty_fd);
	proc = g_subprocess_launcher_spawnv(launcher, (const gchar *const *)argv->pdata, &error);
	g_assert_no_error(error);
	g_subprocess_communicate_utf8_async(proc, NULL, NULL, proc_done_cb, p);
	return proc;
}

static GSubprocess *
ctl_start(Fixture *f, Proc *p, const gchar *const *args)
{
	return ctl_start_full(f, p, args, -1);
}

/* what the terminal got so far */
static void
pty_read(gint master, GString *into)
{
	gchar buf[1024];
	gssize n;
	while ((n = read(master, buf, sizeof(buf))) > 0)
		g_string_append_len(into, buf, n);
}

static void
proc_clear(Proc *p)
{
	g_free(p->out);
	g_free(p->err);
	g_clear_error(&p->error);
	memset(p, 0, sizeof(*p));
}

static void
assert_has(const gchar *text, const gchar *needle)
{
	if (strstr(text, needle) == NULL)
		g_error("'%s' not in:\n%s", needle, text);
}

/* the real hugeroomctl binary, polling the daemon while the device answers */
static void
test_cli_wait(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(GSubprocess) proc = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	const gchar *evacuate[] = {"evacuate", "vm1", "--blocks", "2", "--wait", "--json", NULL};
	const gchar *capture[] = {"capture", "vm1", "--blocks", "3", "--wait", NULL};
	const gchar *requests[] = {"requests", "vm1", NULL};
	JsonObject *req;
	Proc p = {0};
	(void)data;

	if (g_getenv("HUGEROOMCTL") == NULL) {
		g_test_skip("HUGEROOMCTL is not set (run through meson test)");
		return;
	}
	dev = fake_device_up(f, "vm1", 0x10);
	wait_ready(f, TRUE);

	proc = ctl_start(f, &p, evacuate);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_PROGRESS, cmd->hdr.request_id, 0, 1, 1, 10));
	/* let it see the running state */
	fake_expect_silence(dev, 600);
	send_msg(dev, make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, cmd->hdr.request_id, 0, MiB(8), 2));
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
				  VIRTIO_HUGEROOM_S_OK, 2, 2, 30));
	wait_for(cond_proc_done, &p, "hugeroomctl evacuate --wait");
	g_assert_no_error(p.error);
	g_assert_cmpint(g_subprocess_get_exit_status(proc), ==, 0);
	/* stdout: the final request as JSON; stderr: a line per state */
	g_assert_true(json_parser_load_from_data(parser, p.out, -1, &error));
	req = json_node_get_object(json_parser_get_root(parser));
	g_assert_cmpint(json_object_get_int_member(req, "request_id"), ==, cmd->hdr.request_id);
	g_assert_cmpstr(json_object_get_string_member(req, "state"), ==, "done");
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(req, "result"),
						   "blocks_freed"),
			==, 2);
	assert_has(p.err, ": 1/2 blocks, 1 tried, 0 failed, 10 pages, 1.0 ms, running\n");
	assert_has(p.err, ": 2/2 blocks, 2 tried, 0 failed, 30 pages, 2.0 ms, done\n");
	proc_clear(&p);
	g_clear_object(&proc);
	g_clear_pointer(&cmd, hr_cmd_free);

	/* a partial capture: the summary, and exit 4 (ended short) */
	proc = ctl_start(f, &p, capture);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CAPTURE);
	send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
				  VIRTIO_HUGEROOM_S_PARTIAL, 3, 1, 0));
	wait_for(cond_proc_done, &p, "hugeroomctl capture --wait");
	g_assert_cmpint(g_subprocess_get_exit_status(proc), ==, 4);
	assert_has(p.err, "capture request ");
	assert_has(p.out, "State:        partial (guest status partial)\n");
	assert_has(p.out, "Blocks:       1 freed of 3 tried\n");
	assert_has(p.out, "Failures:     unmovable 2\n");
	proc_clear(&p);
	g_clear_object(&proc);

	/* on a terminal: a bar redrawn in place */
	{
		const gchar *tty_args[] = {"evacuate", "vm1", "--blocks", "4", "--wait", NULL};
		g_autoptr(GString) screen = g_string_new(NULL);
		gint master = -1, slave = -1;
		g_assert_cmpint(openpty(&master, &slave, NULL, NULL, NULL), ==, 0);
		g_assert_cmpint(fcntl(master, F_SETFL, O_NONBLOCK), ==, 0);
		proc = ctl_start_full(f, &p, tty_args, slave);
		g_clear_pointer(&cmd, hr_cmd_free);
		cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
		send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_PROGRESS, cmd->hdr.request_id, 0, 2, 2,
					  40));
		fake_expect_silence(dev, 600);
		send_msg(dev, make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
					  VIRTIO_HUGEROOM_S_OK, 4, 4, 80));
		wait_for(cond_proc_done, &p, "hugeroomctl evacuate --wait on a terminal");
		pty_read(master, screen);
		close(master);
		g_assert_cmpint(g_subprocess_get_exit_status(proc), ==, 0);
		/* half full while running, full at the end; the summary on stdout */
		assert_has(screen->str, "\r\033[K[");
		g_assert_nonnull(g_strstr_len(screen->str, -1, "] 2/4 blocks, 2 tried, 0 failed, "
								"40 pages, 2.0 ms, running"));
		g_assert_nonnull(strstr(screen->str, "] 4/4 blocks, 4 tried, 0 failed, 80 pages, "
						     "4.0 ms, done\r\n"));
		{
			/* the last bar is full */
			const gchar *end = strstr(screen->str, "] 4/4 blocks");
			const gchar *start = end;
			while (start > screen->str && *start != '[')
				start--;
			g_assert_cmpint(*start, ==, '[');
			g_assert_cmpuint(strspn(start + 1, "#"), ==, end - start - 1);
		}
		assert_has(p.out, "State:        done (guest status ok)\n");
		proc_clear(&p);
		g_clear_object(&proc);
	}

	proc = ctl_start(f, &p, requests);
	wait_for(cond_proc_done, &p, "hugeroomctl requests");
	g_assert_cmpint(g_subprocess_get_exit_status(proc), ==, 0);
	assert_has(p.out, " evacuate done         2     2     2      0    30  2.0 ms 20");
	assert_has(p.out, " capture  partial      3     3     1      2     0  3.0 ms 20");
	proc_clear(&p);
}

static gboolean
inflight_end_other_cb(HrInflightCmd *cmd, gpointer user_data)
{
	HrInflight *table = user_data;
	/* the first one it sees ends the other (a SET_PCP's end may end others) */
	hr_inflight_remove(table, cmd->request_id == 1 ? 3 : 1);
	return cmd->kind == HR_INFLIGHT_REPORT;
}

static void
free_counted(gpointer data)
{
	(*(guint *)data)++;
}

/*
 * The one table of a guest's commands (hr-inflight.h): every kind by its
 * request id, looked up with or without a kind, counted per kind, and
 * safe against a callback that ends other commands while it walks them.
 */
static void
test_inflight_table(void)
{
	HrInflight *table = hr_inflight_new();
	guint freed = 0;

	hr_inflight_add(table, 1, HR_INFLIGHT_REPORT, VIRTIO_HUGEROOM_CMD_REPORT, NULL, NULL);
	hr_inflight_add(table, 2, HR_INFLIGHT_SET_PCP, VIRTIO_HUGEROOM_CMD_SET_PCP, NULL, NULL);
	hr_inflight_add(table, 3, HR_INFLIGHT_REPORT, VIRTIO_HUGEROOM_CMD_REPORT, &freed,
			free_counted);
	hr_inflight_add(table, 4, HR_INFLIGHT_REQUEST, VIRTIO_HUGEROOM_CMD_EVACUATE, &freed,
			free_counted);
	g_assert_cmpuint(hr_inflight_count(table, HR_INFLIGHT_REPORT), ==, 2);
	g_assert_cmpuint(hr_inflight_count(table, HR_INFLIGHT_N_KINDS), ==, 4);
	/* one id, one command, whatever kind is asked for */
	g_assert_nonnull(hr_inflight_lookup(table, 2, HR_INFLIGHT_N_KINDS));
	g_assert_null(hr_inflight_lookup(table, 2, HR_INFLIGHT_REPORT));
	g_assert_cmpuint(hr_inflight_lookup(table, 4, HR_INFLIGHT_REQUEST)->type, ==,
			 VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_null(hr_inflight_lookup(table, 5, HR_INFLIGHT_N_KINDS));

	/* the walk's callback ends the other REPORT: each is seen at most once, none freed twice */
	hr_inflight_foreach_remove(table, HR_INFLIGHT_REPORT, inflight_end_other_cb, table);
	g_assert_cmpuint(hr_inflight_count(table, HR_INFLIGHT_REPORT), ==, 0);
	g_assert_cmpuint(freed, ==, 1);
	g_assert_false(hr_inflight_remove(table, 1));
	g_assert_true(hr_inflight_remove(table, 2));
	g_assert_cmpuint(hr_inflight_count(table, HR_INFLIGHT_SET_PCP), ==, 0);
	hr_inflight_free(table);
	/* the request's data went with the table */
	g_assert_cmpuint(freed, ==, 2);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);

	g_test_add_func("/requests/inflight-table", test_inflight_table);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/requests/lifecycle", test_lifecycle);
	ADD("/requests/planner-api", test_planner_api);
	ADD("/requests/queue", test_queue);
	ADD("/requests/timeout", test_timeout);
	ADD("/requests/timeout-queued", test_timeout_queued);
	ADD("/requests/lost", test_lost);
	ADD("/requests/cmds-dropped", test_cmds_dropped);
	ADD("/requests/cancel", test_cancel);
	ADD("/requests/held", test_held);
	ADD("/requests/resync-replaces", test_resync_replaces);
	ADD("/requests/daemon-restart", test_daemon_restart);
	ADD("/requests/gate", test_gate);
	ADD("/requests/validation", test_validation);
	ADD("/requests/history", test_history);
	ADD("/requests/cli-wait", test_cli_wait);
#undef ADD
	return g_test_run();
}
