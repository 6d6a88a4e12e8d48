/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's library in-process, on real Unix sockets in a temporary
 * directory: a fake QEMU device speaks the channel protocol to it, and a
 * libsoup client queries its API.
 */

#define G_LOG_DOMAIN "TestDaemon"

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>
#include <time.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hr-api.h"
#include "hr-daemon.h"
#include "hr-loopwatch.h"

/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

typedef struct {
	Fixture *f;
	guint64 value;
} Wait;

static gboolean
cond_have_guest(gpointer data)
{
	Wait *w = data;
	return hr_core_get_guests(hr_daemon_get_core(w->f->daemon))->len > 0;
}

static gboolean
cond_status_seq(gpointer data)
{
	Wait *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->status != NULL && g->status->seq == w->value;
}

static gboolean
cond_have_state(gpointer data)
{
	Wait *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->have_state;
}

static void
send_status(Fixture *f, FakeDevice *dev, guint64 seq)
{
	g_autoptr(GBytes) status = make_status(seq, 0, MiB(2));
	Wait w = {f, seq};
	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	wait_for(cond_status_seq, &w, "the status");
}

/* ---------------------------------------------------------------------- */

static void
test_hello(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	Wait w = {f, 0};
	HrGuest *guest;
	(void)data;

	wait_for(cond_have_state, &w, "the device state");
	guest = only_guest(f);
	g_assert_cmpstr(guest->name, ==, "vm1");
	g_assert_cmpstr(guest->uuid, ==, "10111213-1415-1617-1819-1a1b1c1d1e1f");
	/* SO_PEERCRED: the fake device is this very process */
	g_assert_cmpint(guest->pid, ==, getpid());
	g_assert_true(hr_guest_is_connected(guest));
	g_assert_cmpuint(guest->ram->len, ==, 1);
	g_assert_cmpuint(guest->state.guest_features, ==, 0xf);
	g_assert_true(guest->state.driver_ok);
	g_assert_cmpuint(guest->rejected, ==, 0);
}

static void
test_status(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	HrGuest *guest;
	(void)data;

	send_status(f, dev, 7);
	guest = only_guest(f);
	g_assert_cmpuint(guest->status->nr_zones, ==, 2);
	g_assert_cmpuint(guest->status->nr_candidates, ==, 3);
	g_assert_cmpuint(guest->status->mem_free_pages, ==, 200000);
	g_assert_cmpuint(guest->guest_msgs, ==, 1);
	g_assert_cmpuint(guest->frames, ==, 2);
	g_assert_cmpint(hr_guest_status_age_ms(guest), >=, 0);
	/* the next report replaces it */
	send_status(f, dev, 8);
	g_assert_cmpuint(guest->guest_msgs, ==, 2);
}

static void
count_event_cb(HrCore *core, const HrEvent *event, gpointer user_data)
{
	guint *counts = user_data;
	(void)core;
	g_assert_nonnull(event->guest);
	counts[event->kind]++;
}

/* the core tells its listeners of a guest's connection, status and end */
static void
test_core_events(Fixture *f, gconstpointer data)
{
	HrCore *core = hr_daemon_get_core(f->daemon);
	guint counts[HR_EVENT_N_KINDS] = {0};
	FakeDevice *dev;
	(void)data;

	hr_core_listen(core, count_event_cb, counts);
	dev = fake_device_up(f, "vm1", 0x10);
	send_status(f, dev, 7);
	send_status(f, dev, 8);
	g_assert_cmpuint(counts[HR_EVENT_GUEST_ADDED], ==, 1);
	g_assert_cmpuint(counts[HR_EVENT_GUEST_CONNECTED], ==, 1);
	g_assert_cmpuint(counts[HR_EVENT_STATUS_CHANGED], ==, 2);
	/* the resync's end replaced the held set */
	g_assert_cmpuint(counts[HR_EVENT_HELD_CHANGED], ==, 1);
	g_assert_cmpuint(counts[HR_EVENT_GUEST_DISCONNECTED], ==, 0);
	fake_free(dev);
	while (counts[HR_EVENT_GUEST_DISCONNECTED] == 0)
		g_main_context_iteration(NULL, TRUE);
	/* a reconnection is a connection, not a new guest */
	dev = fake_device_up(f, "vm1", 0x10);
	g_assert_cmpuint(counts[HR_EVENT_GUEST_ADDED], ==, 1);
	g_assert_cmpuint(counts[HR_EVENT_GUEST_CONNECTED], ==, 2);
	hr_core_unlisten(core, count_event_cb, counts);
	fake_free(dev);
}

static gboolean
cond_disconnected(gpointer data)
{
	Wait *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && !hr_guest_is_connected(g);
}

/* a connected guest sends @bytes and must be dropped with @needle */
static void
assert_garbage_drops(Fixture *f, const guint8 *bytes, gsize len, const gchar *needle)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	Wait w = {f, 0};
	HrGuest *guest;

	send_status(f, dev, 1);
	fake_send_raw(dev, bytes, len);
	fake_wait_eof(dev);
	wait_for(cond_disconnected, &w, "the disconnect");
	guest = only_guest(f);
	g_assert_cmpuint(guest->rejected, ==, 1);
	g_assert_nonnull(guest->last_reject_reason);
	if (strstr(guest->last_reject_reason, needle) == NULL)
		g_error("reason '%s' does not mention '%s'", guest->last_reject_reason, needle);
	/* what it knew before stays */
	g_assert_nonnull(guest->status);
	g_assert_cmpuint(guest->status->seq, ==, 1);
}

static void
test_garbage_magic(Fixture *f, gconstpointer data)
{
	const guint8 junk[] = "this is not a frame, really.";
	(void)data;
	assert_garbage_drops(f, junk, sizeof(junk), "magic 0x73696874 is not 0x48524348");
}

static void
test_garbage_oversize(Fixture *f, gconstpointer data)
{
	struct hr_chan_hdr hdr = {
	    .magic = GUINT32_TO_LE(HR_CHAN_MAGIC),
	    .version = GUINT16_TO_LE(1),
	    .type = GUINT16_TO_LE(HR_CHAN_GUEST_MSG),
	    .len = GUINT32_TO_LE(70000),
	};
	(void)data;
	assert_garbage_drops(f, (const guint8 *)&hdr, sizeof(hdr), "len 70000 exceeds 65536");
}

static void
test_garbage_bad_status(Fixture *f, gconstpointer data)
{
	g_autoptr(GBytes) status = make_status(2, 0, MiB(2));
	g_autoptr(GByteArray) a = g_bytes_unref_to_array(g_steal_pointer(&status));
	g_autoptr(GBytes) bad = NULL;
	g_autoptr(GBytes) frame = NULL;
	guint16 nr = GUINT16_TO_LE(3000);
	(void)data;
	memcpy(a->data + offsetof(struct virtio_hugeroom_status, nr_candidates), &nr, sizeof(nr));
	bad = g_bytes_new(a->data, a->len);
	frame = hr_chan_frame_encode(HR_CHAN_GUEST_MSG, bad);
	assert_garbage_drops(f, g_bytes_get_data(frame, NULL), g_bytes_get_size(frame),
			     "status: nr_candidates 3000 exceeds 2048");
}

static void
test_garbage_outside_ram(Fixture *f, gconstpointer data)
{
	/* valid on its own, but the HELLO gave only 1 GiB of RAM */
	g_autoptr(GBytes) status = make_status(2, 0, MiB(1020));
	g_autoptr(GBytes) frame = hr_chan_frame_encode(HR_CHAN_GUEST_MSG, status);
	(void)data;
	assert_garbage_drops(f, g_bytes_get_data(frame, NULL), g_bytes_get_size(frame),
			     "status: gpa 0x40000000 is outside guest RAM");
}

static void
test_garbage_direction(Fixture *f, gconstpointer data)
{
	g_autoptr(HrCmd) cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 1);
	g_autoptr(GBytes) payload = hr_cmd_encode(cmd);
	g_autoptr(GBytes) frame = hr_chan_frame_encode(HR_CHAN_HOST_CMD, payload);
	(void)data;
	assert_garbage_drops(f, g_bytes_get_data(frame, NULL), g_bytes_get_size(frame),
			     "host-cmd flows from the daemon to the device");
}

static gboolean
cond_unidentified(gpointer data)
{
	Wait *w = data;
	return hr_core_get_rejected_unidentified(hr_daemon_get_core(w->f->daemon)) == w->value;
}

static void
test_garbage_before_hello(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	g_autoptr(FakeDevice) dev2 = fake_connect(f);
	HrChanDeviceState state = {0};
	g_autoptr(GBytes) payload = hr_chan_device_state_encode(&state);
	Wait w = {f, 2};
	(void)data;

	fake_send_raw(dev, (const guint8 *)"GET / HTTP/1.0\r\n\r\n", 18);
	fake_wait_eof(dev);
	/* well framed, but not a HELLO */
	fake_send(dev2, HR_CHAN_DEVICE_STATE, payload);
	fake_wait_eof(dev2);
	wait_for(cond_unidentified, &w, "two rejected connections");
	g_assert_cmpuint(hr_core_get_guests(hr_daemon_get_core(f->daemon))->len, ==, 0);
	g_assert_nonnull(strstr(hr_core_get_last_unidentified_reason(hr_daemon_get_core(f->daemon)),
				"device-state before HELLO"));
}

static void
test_reconnect(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(FakeDevice) dev2 = NULL;
	Wait w = {f, 0};
	HrGuest *guest;
	(void)data;

	send_status(f, dev, 5);
	g_clear_pointer(&dev, fake_free);
	wait_for(cond_disconnected, &w, "the disconnect");
	guest = only_guest(f);
	g_assert_nonnull(guest->disconnected_at);
	g_assert_cmpuint(guest->rejected, ==, 0);

	/* a restarted QEMU of the same VM: same UUID */
	dev2 = fake_device_up(f, "vm1", 0x10);
	wait_for(cond_have_guest, &w, "the guest");
	g_assert_true(only_guest(f) == guest);
	g_assert_true(hr_guest_is_connected(guest));
	g_assert_cmpuint(guest->connections, ==, 2);
	/* state kept until the new connection reports */
	g_assert_cmpuint(guest->status->seq, ==, 5);
	send_status(f, dev2, 1);

	/* a different VM gets its own entry */
	{
		g_autoptr(FakeDevice) dev3 = fake_device_up(f, "vm2", 0x20);
		GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
		while (guests->len < 2)
			g_main_context_iteration(NULL, TRUE);
		g_assert_cmpstr(((HrGuest *)g_ptr_array_index(guests, 1))->name, ==, "vm2");
		g_assert_true(hr_core_find_guest(hr_daemon_get_core(f->daemon), "vm2") ==
			      g_ptr_array_index(guests, 1));
		g_assert_true(hr_core_find_guest(hr_daemon_get_core(f->daemon),
						   "10111213-1415-1617-1819-1A1B1C1D1E1F") == guest);
		g_assert_null(hr_core_find_guest(hr_daemon_get_core(f->daemon), "vm3"));
	}
}

static gboolean
cond_held(gpointer data)
{
	Wait *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->have_state && g_hash_table_size(g->held) == w->value;
}

static void
test_resync(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	g_autoptr(HrChanHello) hello = make_hello("vm1", 0x10);
	g_autoptr(GBytes) hp = hr_chan_hello_encode(hello);
	g_autoptr(HrChanFrame) welcome = NULL;
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 0, 0, MiB(100), 3);
	HrChanDeviceState state = {.driver_ok = 1, .num_held = 3};
	g_autoptr(GBytes) sp = hr_chan_device_state_encode(&state);
	g_autoptr(GBytes) returned = NULL;
	Wait w = {f, 3};
	HrGuest *guest;
	(void)data;

	fake_send(dev, HR_CHAN_HELLO, hp);
	welcome = fake_recv(dev);
	g_assert_cmpuint(welcome->type, ==, HR_CHAN_WELCOME);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	fake_send(dev, HR_CHAN_DEVICE_STATE, sp);
	wait_for(cond_held, &w, "the resync");
	guest = only_guest(f);
	g_assert_cmpuint(g_hash_table_size(guest->held), ==, 3);

	/* a RETURNED takes one back */
	{
		g_autoptr(HrBlocks) r = hr_blocks_new(VIRTIO_HUGEROOM_MSG_RETURNED, 1);
		r->reason = VIRTIO_HUGEROOM_RET_PRESSURE;
		r->gpas[0] = MiB(102);
		returned = hr_blocks_encode(r);
	}
	fake_send(dev, HR_CHAN_GUEST_MSG, returned);
	w.value = 2;
	wait_for(cond_held, &w, "the return");

	/* a resync HOLD after the resync is malformed */
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	fake_wait_eof(dev);
	w.value = 0;
	wait_for(cond_disconnected, &w, "the disconnect");
	g_assert_nonnull(strstr(guest->last_reject_reason, "request_id 0 outside the resync"));
}

/* ---------------------------------------------------------------------- */
/* API */

static void
test_api_guests(Fixture *f, gconstpointer data)
{
	g_autoptr(JsonNode) empty = http(f, "GET", "/v1/guests", 200, NULL);
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(JsonNode) root = NULL;
	JsonArray *guests;
	JsonObject *g;
	(void)data;

	g_assert_cmpuint(
	    json_array_get_length(json_object_get_array_member(json_node_get_object(empty), "guests")),
	    ==, 0);
	dev = fake_device_up(f, "vm1", 0x10);
	send_status(f, dev, 42);
	root = http(f, "GET", "/v1/guests", 200, NULL);
	guests = json_object_get_array_member(json_node_get_object(root), "guests");
	g_assert_cmpuint(json_array_get_length(guests), ==, 1);
	g = json_array_get_object_element(guests, 0);
	g_assert_cmpstr(json_object_get_string_member(g, "name"), ==, "vm1");
	g_assert_cmpstr(json_object_get_string_member(g, "uuid"), ==,
			"10111213-1415-1617-1819-1a1b1c1d1e1f");
	g_assert_cmpint(json_object_get_int_member(g, "pid"), ==, getpid());
	g_assert_true(json_object_get_boolean_member(g, "connected"));
	g_assert_cmpint(json_object_get_int_member(g, "seq"), ==, 42);
	g_assert_cmpint(json_object_get_int_member(g, "age_ms"), >=, 0);
	g_assert_cmpint(json_object_get_int_member(g, "mem_total_pages"), ==, 262144);
	g_assert_cmpint(json_object_get_int_member(g, "mem_free_pages"), ==, 200000);
	g_assert_cmpint(json_object_get_int_member(g, "held_blocks"), ==, 0);
	g_assert_cmpint(json_object_get_int_member(g, "rejected"), ==, 0);
}

static void
test_api_guest(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(JsonNode) by_uuid = NULL;
	g_autoptr(JsonNode) missing = NULL;
	JsonObject *g, *s, *z, *c, *d;
	(void)data;

	send_status(f, dev, 9);
	root = http(f, "GET", "/v1/guests/vm1", 200, NULL);
	g = json_node_get_object(root);
	g_assert_cmpstr(json_object_get_string_member(g, "name"), ==, "vm1");
	g_assert_nonnull(json_object_get_string_member(g, "connected_at"));
	g_assert_cmpuint(json_array_get_length(json_object_get_array_member(g, "ram")), ==, 1);
	g_assert_cmpint(json_object_get_int_member(
			    json_array_get_object_element(json_object_get_array_member(g, "ram"), 0),
			    "size"),
			==, MiB(1024));
	d = json_object_get_object_member(g, "device");
	g_assert_true(json_object_get_boolean_member(d, "driver_ok"));
	g_assert_false(json_object_get_boolean_member(d, "discard_disabled"));
	g_assert_cmpint(json_object_get_int_member(d, "guest_features"), ==, 0xf);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(g, "daemon_counters"),
						   "frames"),
			==, 2);

	s = json_object_get_object_member(g, "status");
	g_assert_cmpint(json_object_get_int_member(s, "seq"), ==, 9);
	g_assert_cmpint(json_object_get_int_member(s, "uptime_ns"), ==, 5000000000LL);
	g_assert_cmpint(json_object_get_int_member(s, "mem_available_pages"), ==, 210000);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(s, "vmstat"),
						   "compact_stall"),
			==, 100);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(s, "vmstat"),
						   "thp_split_page"),
			==, 115);
	g_assert_cmpuint(json_array_get_length(json_object_get_array_member(s, "flags")), ==, 0);
	z = json_array_get_object_element(json_object_get_array_member(s, "zones"), 0);
	g_assert_cmpstr(json_object_get_string_member(z, "zone"), ==, "DMA32");
	g_assert_cmpuint(json_array_get_length(json_object_get_array_member(z, "nr_free")), ==, 11);
	g_assert_cmpint(json_array_get_int_element(json_object_get_array_member(z, "nr_free"), 10),
			==, 101);
	g_assert_cmpint(json_object_get_int_member(
			    json_object_get_object_member(z, "pageblock_histogram"), "512"),
			==, 40);
	g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(z, "pcp"), "high"),
			==, 186);
	g_assert_true(json_object_has_member(json_object_get_object_member(z, "free_pageblock_by_mt"),
					     "movable"));
	g_assert_true(json_object_has_member(json_object_get_object_member(z, "watermarks"), "low"));
	c = json_array_get_object_element(json_object_get_array_member(s, "candidates"), 2);
	g_assert_cmpint(json_object_get_int_member(c, "gpa"), ==, MiB(6));
	g_assert_cmpint(json_object_get_int_member(c, "free_pages"), ==, 498);
	g_assert_cmpstr(json_object_get_string_member(c, "migratetype"), ==, "movable");
	g_assert_cmpint(json_object_get_int_member(c, "zone"), ==, 1);

	by_uuid = http(f, "GET", "/v1/guests/10111213-1415-1617-1819-1a1b1c1d1e1f", 200, NULL);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(by_uuid), "name"), ==,
			"vm1");

	/* an unknown name says which ones exist */
	missing = http(f, "GET", "/v1/guests/nosuchvm", 404, NULL);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(missing), "error"), ==,
			"no guest named or with UUID 'nosuchvm'; known guests: vm1");
}

static void
test_api_report(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(JsonNode) root = NULL;
	g_autoptr(HrChanFrame) frame = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) answer = NULL;
	gint64 request_id;
	Wait w = {f, 77};
	HrGuest *guest;
	(void)data;

	root = http(f, "POST", "/v1/guests/vm1/report", 202, NULL);
	request_id = json_object_get_int_member(json_node_get_object(root), "request_id");
	g_assert_cmpint(request_id, !=, 0);
	guest = only_guest(f);
	g_assert_cmpuint(hr_inflight_count(guest->commands, HR_INFLIGHT_REPORT), ==, 1);

	/* the device gets a HOST_CMD with CMD_REPORT and that id */
	frame = fake_recv(dev);
	g_assert_cmpuint(frame->type, ==, HR_CHAN_HOST_CMD);
	cmd = hr_chan_host_cmd_decode(frame->payload, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(cmd->hdr.type, ==, VIRTIO_HUGEROOM_CMD_REPORT);
	g_assert_cmpuint(cmd->hdr.request_id, ==, (guint64)request_id);

	/* the answering status clears it */
	answer = make_status(77, request_id, MiB(2));
	fake_send(dev, HR_CHAN_GUEST_MSG, answer);
	wait_for(cond_status_seq, &w, "the answer");
	g_assert_cmpuint(hr_inflight_count(guest->commands, HR_INFLIGHT_REPORT), ==, 0);

	/* a disconnected guest cannot be asked */
	g_clear_pointer(&dev, fake_free);
	wait_for(cond_disconnected, &w, "the disconnect");
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "POST", "/v1/guests/vm1/report", 409, NULL);
	g_assert_nonnull(strstr(json_object_get_string_member(json_node_get_object(root), "error"),
				"guest vm1 is not connected"));
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "GET", "/v1/guests/vm1/report", 405, NULL);
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "DELETE", "/v1/guests", 405, NULL);
	g_clear_pointer(&root, json_node_unref);
	root = http(f, "GET", "/v2/other", 404, NULL);
}

/* ---------------------------------------------------------------------- */
/* PUT /v1/guests/NAME/pcp: answered once the guest answered SET_PCP */

/* PUT @body; the device answers the SET_PCP it gets with @status */
static JsonNode *
put_pcp(Fixture *f, FakeDevice *dev, const gchar *guest, const gchar *body, guint32 policy,
	guint32 high, guint32 status, guint expect_status)
{
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s/pcp", guest);
	HttpCall *call = http_start(f, "PUT", path, body);
	g_autoptr(HrCmd) cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_SET_PCP);
	g_autoptr(GBytes) answer = NULL;

	g_assert_cmpuint(cmd->policy, ==, policy);
	g_assert_cmpuint(cmd->high, ==, high);
	/* not answered before the guest has */
	g_assert_false(http_done(call));
	answer = make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id, status, 0, 0, 0);
	fake_send(dev, HR_CHAN_GUEST_MSG, answer);
	return http_finish(call, expect_status, NULL);
}

static void
assert_error(JsonNode *root, const gchar *needle)
{
	const gchar *error = json_object_get_string_member(json_node_get_object(root), "error");
	if (strstr(error, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error, needle);
}

static void
test_api_pcp(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autoptr(FakeDevice) dev9 = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) state_payload = NULL;
	HrChanDeviceState nopcp = {.driver_ok = 1, .guest_features = 0x7, .msgs_relayed = 2};
	JsonNode *root;
	HrGuest *guest;
	(void)data;

	/* nothing wanted: nothing sent when the driver comes up */
	fake_expect_silence(dev, 300);
	g_assert_cmpuint(dev->pcp->len, ==, 0);
	guest = only_guest(f);

	root = http_body(f, "PUT", "/v1/guests/vm1/pcp", "{\"policy\":\"fast\"}", 400, NULL);
	assert_error(root, "PCP policy 'fast' is unknown; use default, latency");
	json_node_unref(root);
	root = http_body(f, "PUT", "/v1/guests/vm1/pcp", "{\"policy\":\"latency\",\"batch\":7}",
			 400, NULL);
	assert_error(root, "batch: no guest kernel");
	json_node_unref(root);
	root = http_body(f, "PUT", "/v1/guests/vm1/pcp", "{\"policy\":\"density\",\"high\":9}",
			 400, NULL);
	assert_error(root, "only the explicit policy takes one");
	json_node_unref(root);
	fake_expect_silence(dev, 100);
	g_assert_cmpuint(dev->pcp->len, ==, 0);

	root = put_pcp(f, dev, "vm1", "{\"policy\":\"latency\"}", VIRTIO_HUGEROOM_PCP_LATENCY, 0,
		       VIRTIO_HUGEROOM_S_OK, 200);
	g_assert_true(json_object_get_boolean_member(json_node_get_object(root), "applied"));
	json_node_unref(root);
	g_assert_true(guest->pcp_want_set && guest->pcp_applied_set);
	g_assert_cmpuint(guest->pcp_want.policy, ==, VIRTIO_HUGEROOM_PCP_LATENCY);

	/* the guest's kernel refuses: a clear error, the wanted policy stays */
	root = put_pcp(f, dev, "vm1", "{\"policy\":\"explicit\",\"high\":100}",
		       VIRTIO_HUGEROOM_PCP_EXPLICIT, 100, VIRTIO_HUGEROOM_S_INVALID, 400);
	assert_error(root, "guest vm1 refused PCP policy explicit:100");
	json_node_unref(root);
	g_assert_cmpuint(guest->pcp_want.policy, ==, VIRTIO_HUGEROOM_PCP_LATENCY);
	g_assert_cmpuint(guest->pcp_applied.policy, ==, VIRTIO_HUGEROOM_PCP_LATENCY);
	root = http(f, "GET", "/v1/guests/vm1", 200, NULL);
	g_assert_cmpstr(json_object_get_string_member(
			    json_object_get_object_member(json_node_get_object(root), "pcp"),
			    "wanted"),
			==, "latency");
	json_node_unref(root);

	/* the driver comes up again (a reconnect): the wanted policy follows */
	g_clear_pointer(&dev, fake_free);
	dev = fake_device_up(f, "vm1", 0x10);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_SET_PCP);
	g_assert_cmpuint(cmd->policy, ==, VIRTIO_HUGEROOM_PCP_LATENCY);

	/* a guest not seen yet gets it when it connects */
	root = http_body(f, "PUT", "/v1/guests/vm9/pcp", "{\"policy\":\"explicit:2000\"}", 202,
			 NULL);
	g_assert_false(json_object_get_boolean_member(json_node_get_object(root), "applied"));
	json_node_unref(root);
	dev9 = fake_device_up(f, "vm9", 0x19);
	g_clear_pointer(&cmd, hr_cmd_free);
	cmd = fake_expect_cmd(dev9, VIRTIO_HUGEROOM_CMD_SET_PCP);
	g_assert_cmpuint(cmd->policy, ==, VIRTIO_HUGEROOM_PCP_EXPLICIT);
	g_assert_cmpuint(cmd->high, ==, 2000);

	/* a driver without F_PCP: 409, nothing sent */
	state_payload = hr_chan_device_state_encode(&nopcp);
	fake_send(dev9, HR_CHAN_DEVICE_STATE, state_payload);
	fake_expect_silence(dev9, 200);
	root = http_body(f, "PUT", "/v1/guests/vm9/pcp", "{\"policy\":\"density\"}", 409, NULL);
	assert_error(root, "did not negotiate F_PCP");
	json_node_unref(root);
	fake_expect_silence(dev9, 100);
	g_assert_cmpuint(dev9->pcp->len, ==, 0);
}

static void
test_api_metrics(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "vm1", 0x10);
	g_autofree gchar *text = NULL;
	(void)data;

	send_status(f, dev, 3);
	http(f, "GET", "/metrics", 200, &text);
	g_assert_nonnull(strstr(text, "# TYPE hugeroom_guest_free_pages gauge\n"));
	g_assert_nonnull(strstr(text, "hugeroom_guest_free_pages{name=\"vm1\",uuid=\"10111213-1415-"
				      "1617-1819-1a1b1c1d1e1f\"} 200000\n"));
	g_assert_nonnull(strstr(text, "hugeroom_guest_held_blocks{name=\"vm1\""));
	g_assert_nonnull(strstr(text, "hugeroom_guest_status_age_seconds{name=\"vm1\""));
	g_assert_nonnull(strstr(text, "hugeroom_guest_rejected_messages_total{name=\"vm1\","));
	g_assert_nonnull(strstr(text, "hugeroom_rejected_connections_total 0\n"));
}

static gint64
thread_cpu_us(void)
{
	struct timespec ts;
	g_assert_cmpint(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts), ==, 0);
	return (gint64)ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

/* 20 ms of this thread's CPU in one dispatch */
static gboolean
burn_cb(gpointer data)
{
	gint64 until = thread_cpu_us() + 20000;
	while (thread_cpu_us() < until)
		;
	*(gboolean *)data = TRUE;
	return G_SOURCE_REMOVE;
}

static gboolean
quick_cb(gpointer data)
{
	*(guint *)data += 1;
	return G_SOURCE_REMOVE;
}

static guint64
stall_count(HrLoopWatch *watch, const gchar *series)
{
	g_autoptr(GString) out = g_string_new(NULL);
	const gchar *line;

	hr_loop_watch_append(out, watch);
	line = strstr(out->str, series);
	g_assert_nonnull(line);
	return g_ascii_strtoull(line + strlen(series), NULL, 10);
}

/* every turn of a main loop is timed: a dispatch that burns 20 ms shows, quick ones do not */
static void
test_loop_watch(void)
{
	g_autoptr(GMainContext) ctx = g_main_context_new();
	HrLoopWatch *watch;
	gboolean burnt = FALSE;
	guint quick = 0;
	GSource *source;
	guint64 turns;

	g_main_context_push_thread_default(ctx);
	watch = hr_loop_watch_new();
	for (guint i = 0; i < 5; i++) {
		source = g_idle_source_new();
		g_source_set_callback(source, quick_cb, &quick, NULL);
		g_source_attach(source, ctx);
		g_source_unref(source);
		g_main_context_iteration(ctx, FALSE);
	}
	g_assert_cmpuint(quick, ==, 5);
	g_assert_cmpint(hr_loop_watch_cpu_max_us(watch), <, 20000);
	turns = stall_count(watch, "hugeroom_main_loop_stall_seconds_count ");
	/* a turn counts once the next begins */
	g_assert_cmpuint(turns, >=, 4);
	g_assert_cmpuint(stall_count(watch, "hugeroom_main_loop_stall_seconds_bucket{le=\"0.01\"} "),
			 ==, turns);

	source = g_idle_source_new();
	g_source_set_callback(source, burn_cb, &burnt, NULL);
	g_source_attach(source, ctx);
	g_source_unref(source);
	g_main_context_iteration(ctx, FALSE);
	g_assert_true(burnt);
	g_main_context_iteration(ctx, FALSE);
	g_assert_cmpint(hr_loop_watch_cpu_max_us(watch), >=, 20000);
	g_assert_cmpuint(stall_count(watch, "hugeroom_main_loop_stall_seconds_count "), >, turns);
	/* at least 20 ms of wall-clock time too: past the 10 ms bucket */
	g_assert_cmpuint(stall_count(watch, "hugeroom_main_loop_stall_seconds_bucket{le=\"0.01\"} "),
			 <, stall_count(watch, "hugeroom_main_loop_stall_seconds_count "));
	{
		g_autoptr(GString) out = g_string_new(NULL);
		const gchar *gauge = "# TYPE hugeroom_main_loop_stall_cpu_max_seconds gauge\n"
				     "hugeroom_main_loop_stall_cpu_max_seconds ";
		const gchar *line;
		gdouble max_s;

		hr_loop_watch_append(out, watch);
		line = strstr(out->str, gauge);
		g_assert_nonnull(line);
		max_s = g_ascii_strtod(line + strlen(gauge), NULL);
		g_assert_cmpfloat(max_s, >=, 0.02);
		g_assert_cmpfloat(max_s, <, 1);
	}
	hr_loop_watch_free(watch);
	g_main_context_pop_thread_default(ctx);
}

static guint
count_fds(void)
{
	g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
	guint n = 0;
	while (g_dir_read_name(dir) != NULL)
		n++;
	return n;
}

static void
drain(guint ms)
{
	gint64 until = g_get_monotonic_time() + ms * 1000;
	while (g_get_monotonic_time() < until) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

/* every API connection is closed and freed (libsoup 3.2's listener leaks) */
static void
test_api_no_fd_leak(Fixture *f, gconstpointer data)
{
	guint before, after;
	(void)data;

	g_clear_pointer(&(JsonNode *){http(f, "GET", "/v1/guests", 200, NULL)}, json_node_unref);
	drain(100);
	before = count_fds();
	for (guint i = 0; i < 40; i++) {
		JsonNode *root = http(f, "GET", "/v1/guests", 200, NULL);
		json_node_unref(root);
	}
	drain(200);
	after = count_fds();
	g_assert_cmpuint(after, <=, before + 2);
}

/* the child: connect as another uid, expect a 403 naming it */
static int
refused_child(const gchar *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	const char req[] = "GET /v1/guests HTTP/1.1\r\nHost: localhost\r\n\r\n";
	char buf[4096];
	size_t off = 0;
	ssize_t n;
	int fd;

	alarm(10);
	if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
		return 2;
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strncpy(sun.sun_path, path, sizeof(sun.sun_path) - 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
		return 3;
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		return 4;
	while (off < sizeof(buf) - 1 && (n = read(fd, buf + off, sizeof(buf) - 1 - off)) > 0)
		off += n;
	buf[off] = '\0';
	if (strstr(buf, "HTTP/1.1 403 Forbidden\r\n") == NULL ||
	    strstr(buf, "uid 65534 may not use this API") == NULL)
		return 5;
	return 0;
}

static void
test_api_refuses_other_uid(Fixture *f, gconstpointer data)
{
	int status = 0;
	pid_t pid;
	(void)data;

	if (getuid() != 0) {
		g_test_skip("needs root to connect as another user");
		return;
	}
	/* let the other user reach the socket: only the peer check stops it */
	g_assert_cmpint(g_chmod(f->tmpdir, 0711), ==, 0);
	g_assert_cmpint(g_chmod(f->config->api_socket, 0666), ==, 0);
	pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0)
		_exit(refused_child(f->config->api_socket));
	while (waitpid(pid, &status, WNOHANG) == 0) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

static void
test_second_daemon_refused(Fixture *f, gconstpointer data)
{
	g_autoptr(HrDaemon) other = hr_daemon_new(f->config);
	g_autoptr(GError) error = NULL;
	(void)data;
	/* the sockets are live: a second daemon must not steal them */
	g_assert_false(hr_daemon_start(other, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE);
	g_assert_true(g_file_test(f->config->vm_socket, G_FILE_TEST_EXISTS));
}

/* [guest:PATTERN] pcp=: parsed with the codec's text form, errors name the group */
static void
test_config_pcp(void)
{
	g_autofree gchar *dir = g_dir_make_tmp("hugeroom-conf-XXXXXX", NULL);
	g_autofree gchar *path = g_build_filename(dir, "hugeroomd.conf", NULL);
	g_autoptr(HrConfig) config = hr_config_new();
	g_autoptr(HrConfig) bad = hr_config_new();
	g_autoptr(GError) error = NULL;
	HrGuestPolicy p;

	g_assert_true(g_file_set_contents(path,
					  "[hugeroomd]\n[guest:db-*]\npcp = explicit:1500\n"
					  "[guest:web]\ndonor=false\n",
					  -1, NULL));
	g_assert_true(hr_config_load(config, path, TRUE, &error));
	g_assert_no_error(error);
	hr_config_guest_policy(config, "db-1", &p);
	g_assert_true(p.pcp_set);
	g_assert_cmpuint(p.pcp.policy, ==, VIRTIO_HUGEROOM_PCP_EXPLICIT);
	g_assert_cmpuint(p.pcp.high, ==, 1500);
	hr_config_guest_policy(config, "web", &p);
	g_assert_false(p.pcp_set);
	hr_config_guest_policy(config, "other", &p);
	g_assert_false(p.pcp_set);

	g_assert_true(g_file_set_contents(path, "[guest:web]\npcp=throughput\n", -1, NULL));
	g_assert_false(hr_config_load(bad, path, TRUE, &error));
	g_assert_nonnull(strstr(error->message, "[guest:web] pcp: PCP policy 'throughput' is "
						"unknown"));
	g_unlink(path);
	g_rmdir(dir);
}

/* ---------------------------------------------------------------------- */
/* LAYOUT (SPEC 2.5.1) */

/*
 * A device of protocol version @version with 1 GiB of RAM that holds the two
 * blocks at 2 MiB and 600 MiB and takes up @chan_features; the WELCOME must
 * have offered @offered.
 */
static FakeDevice *
layout_device_up(Fixture *f, guint32 version, guint32 offered, guint32 chan_features)
{
	FakeDevice *dev = fake_connect(f);
	g_autoptr(HrChanHello) hello = make_hello("vm1", 0x10);
	g_autoptr(GBytes) hp = NULL;
	g_autoptr(HrChanFrame) frame = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(GBytes) a = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 0, 0, MiB(2), 1);
	g_autoptr(GBytes) b = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 0, 0, MiB(600), 1);
	HrChanWelcome welcome = {0};
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .num_held = 2,
				   .chan_features = chan_features};
	Wait w = {f, 2};

	hello->proto_version = version;
	hp = hr_chan_hello_encode(hello);
	fake_send(dev, HR_CHAN_HELLO, hp);
	frame = fake_recv(dev);
	g_assert_cmpuint(frame->type, ==, HR_CHAN_WELCOME);
	g_assert_true(hr_chan_welcome_decode(frame->payload, &welcome, &error));
	g_assert_cmpuint(welcome.proto_version, ==, version);
	g_assert_cmpuint(g_bytes_get_size(frame->payload), ==, version == 1 ? 8 : 16);
	g_assert_cmphex(welcome.chan_features, ==, offered);
	fake_send(dev, HR_CHAN_GUEST_MSG, a);
	fake_send(dev, HR_CHAN_GUEST_MSG, b);
	fake_send_state(dev, &state);
	if (chan_features == 0 || (chan_features & ~offered) == 0)
		wait_for(cond_held, &w, "the resync");
	return dev;
}

/* [0, 512 MiB) and the plugged [4 GiB, 4 GiB + 1 GiB) */
static HrChanLayout *
make_layout(void)
{
	HrChanLayout *l = g_new0(HrChanLayout, 1);
	l->nr_ram = 2;
	l->ram_size = MiB(1536);
	l->ram = g_new0(HrRamRange, 2);
	l->ram[0] = (HrRamRange){.gpa = 0, .size = MiB(512), .hva = 0x7f0000000000ULL};
	l->ram[1] = (HrRamRange){.gpa = MiB(4096), .size = MiB(1024), .hva = 0x7e0000000000ULL};
	return l;
}

static gboolean
cond_two_ranges(gpointer data)
{
	Wait *w = data;
	HrGuest *g = first_guest(w->f);
	return g != NULL && g->ram->len == 2;
}

/* the daemon takes the new layout on the same connection, and keeps what it held */
static void
test_layout(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = layout_device_up(f, VIRTIO_HUGEROOM_VERSION, HR_CHAN_F_LAYOUT,
						     HR_CHAN_F_LAYOUT);
	g_autoptr(HrChanLayout) layout = make_layout();
	g_autoptr(GBytes) payload = hr_chan_layout_encode(layout);
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 9, 0, MiB(4096), 1);
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .num_held = 1,
				   .chan_features = HR_CHAN_F_LAYOUT, .msgs_relayed = 1};
	guint64 plugged = MiB(4096);
	Wait w = {f, 0};
	HrGuest *guest;
	guint64 gpa = MiB(2);
	(void)data;

	guest = only_guest(f);
	g_assert_cmpuint(guest->state.chan_features, ==, HR_CHAN_F_LAYOUT);
	fake_send(dev, HR_CHAN_LAYOUT, payload);
	wait_for(cond_two_ranges, &w, "the new layout");
	g_assert_cmphex(g_array_index(guest->ram, HrRamRange, 1).gpa, ==, MiB(4096));
	g_assert_cmpuint(guest->ram_size, ==, MiB(1536));
	/* 600 MiB is no RAM any more: dropped; 2 MiB stays held */
	g_assert_cmpuint(g_hash_table_size(guest->held), ==, 1);
	g_assert_nonnull(g_hash_table_lookup(guest->held, &gpa));
	/* the same connection, and guest messages may name the plugged RAM */
	fake_send_state(dev, &state);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	send_status(f, dev, 3);
	g_assert_nonnull(g_hash_table_lookup(guest->held, &plugged));
	g_assert_cmpuint(g_hash_table_size(guest->held), ==, 2);
	g_assert_true(hr_guest_is_connected(guest));
	g_assert_cmpuint(guest->rejected, ==, 0);
}

/* a bad LAYOUT closes the connection with a clear reason and changes nothing */
static void
assert_layout_refused(Fixture *f, guint32 chan_features, const HrChanLayout *layout,
		      GBytes *raw, const gchar *needle)
{
	g_autoptr(FakeDevice) dev = layout_device_up(f, VIRTIO_HUGEROOM_VERSION, HR_CHAN_F_LAYOUT,
						     chan_features);
	g_autoptr(GBytes) payload = raw != NULL ? g_bytes_ref(raw) : hr_chan_layout_encode(layout);
	Wait w = {f, 0};
	HrGuest *guest = only_guest(f);
	guint64 gpas[] = {MiB(2), MiB(600)};

	fake_send(dev, HR_CHAN_LAYOUT, payload);
	fake_wait_eof(dev);
	wait_for(cond_disconnected, &w, "the disconnect");
	g_assert_cmpuint(guest->rejected, ==, 1);
	if (strstr(guest->last_reject_reason, needle) == NULL)
		g_error("reason '%s' does not mention '%s'", guest->last_reject_reason, needle);
	/* nothing lost: the layout and both held blocks stay */
	g_assert_cmpuint(guest->ram->len, ==, 1);
	g_assert_cmpuint(g_array_index(guest->ram, HrRamRange, 0).size, ==, MiB(1024));
	g_assert_cmpuint(guest->ram_size, ==, MiB(1024));
	g_assert_cmpuint(g_hash_table_size(guest->held), ==, 2);
	for (guint i = 0; i < G_N_ELEMENTS(gpas); i++)
		g_assert_nonnull(g_hash_table_lookup(guest->held, &gpas[i]));
}

static void
test_layout_refused(Fixture *f, gconstpointer data)
{
	const gchar *which = data;
	g_autoptr(HrChanLayout) l = make_layout();
	g_autoptr(GBytes) raw = NULL;
	guint32 features = HR_CHAN_F_LAYOUT;
	const gchar *needle = NULL;

	if (g_str_equal(which, "not-offered")) {
		features = 0;
		needle = "layout: HR_CHAN_F_LAYOUT is not in use";
	} else if (g_str_equal(which, "overlap")) {
		l->ram[1].gpa = MiB(256);
		needle = "layout: ram[1] gpa 0x10000000 is below the end of ram[0]";
	} else if (g_str_equal(which, "unsorted")) {
		HrRamRange r = l->ram[0];
		l->ram[0] = l->ram[1];
		l->ram[1] = r;
		needle = "layout: ram[1] gpa 0x0 is below the end of ram[0]";
	} else if (g_str_equal(which, "unaligned")) {
		l->ram[1].hva += 512;
		needle = "is not a multiple of 4096";
	} else if (g_str_equal(which, "overflow")) {
		l->ram[1].gpa = G_MAXUINT64 - MiB(1) + 1;
		needle = "layout: ram[1] gpa 0xfffffffffff00000 + size 0x40000000 overflows";
	} else if (g_str_equal(which, "empty-range")) {
		l->ram[1].size = 0;
		needle = "layout: ram[1] size is 0";
	} else if (g_str_equal(which, "too-much-ram")) {
		l->ram[1].size = G_GUINT64_CONSTANT(32) << 40;
		needle = "MiB of RAM is more than max_guest_ram_mb 16777216";
	} else if (g_str_equal(which, "too-many-ranges") || g_str_equal(which, "no-ranges")) {
		guint32 nr = g_str_equal(which, "no-ranges") ? 0 : HR_CHAN_MAX_RAM + 1;
		struct hr_chan_layout w = {.nr_ram = GUINT32_TO_LE(nr)};
		g_autofree guint8 *buf = g_malloc0(sizeof(w) + nr * sizeof(struct hr_chan_ram_range));
		memcpy(buf, &w, sizeof(w));
		raw = g_bytes_new(buf, sizeof(w) + nr * sizeof(struct hr_chan_ram_range));
		needle = nr == 0 ? "layout: nr_ram is 0" : "layout: nr_ram 65 exceeds 64";
	} else if (g_str_equal(which, "short")) {
		g_autoptr(GBytes) whole = hr_chan_layout_encode(l);
		raw = g_bytes_new_from_bytes(whole, 0, g_bytes_get_size(whole) - 1);
		needle = "layout: payload of 63 bytes differs from the 64 bytes nr_ram 2 needs";
	} else {
		g_assert_not_reached();
	}
	assert_layout_refused(f, features, l, raw, needle);
}

/* a version 1 device is offered no features and may not take any up */
static void
test_layout_version1(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = layout_device_up(f, 1, 0, 0);
	g_autoptr(FakeDevice) dev2 = NULL;
	Wait w = {f, 0};
	(void)data;

	g_assert_cmpuint(only_guest(f)->proto_version, ==, 1);
	g_clear_pointer(&dev, fake_free);
	wait_for(cond_disconnected, &w, "the disconnect");
	/* a features word it was not offered closes the connection */
	dev2 = layout_device_up(f, 1, 0, HR_CHAN_F_LAYOUT);
	fake_wait_eof(dev2);
	wait_for(cond_disconnected, &w, "the disconnect");
	g_assert_nonnull(strstr(only_guest(f)->last_reject_reason,
				"device-state: chan_features 0x1 is not within 0x0 offered"));
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	/* a device dropped for garbage is a warning, and expected here */
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrDevice", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrApi", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);

#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/daemon/hello", test_hello);
	ADD("/daemon/status", test_status);
	ADD("/daemon/core-events", test_core_events);
	ADD("/daemon/garbage/bad-magic", test_garbage_magic);
	ADD("/daemon/garbage/oversize", test_garbage_oversize);
	ADD("/daemon/garbage/bad-status", test_garbage_bad_status);
	ADD("/daemon/garbage/outside-ram", test_garbage_outside_ram);
	ADD("/daemon/garbage/wrong-direction", test_garbage_direction);
	ADD("/daemon/garbage/before-hello", test_garbage_before_hello);
	ADD("/daemon/reconnect", test_reconnect);
	ADD("/daemon/resync", test_resync);
	ADD("/daemon/second-daemon-refused", test_second_daemon_refused);
	ADD("/daemon/layout", test_layout);
	ADD("/daemon/layout/version1", test_layout_version1);
	{
		static const gchar *const bad[] = {"not-offered", "overlap", "unsorted",
						   "unaligned", "overflow", "empty-range",
						   "too-much-ram", "too-many-ranges", "no-ranges",
						   "short"};
		for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
			g_autofree gchar *path = g_strdup_printf("/daemon/layout/refused/%s", bad[i]);
			g_test_add(path, Fixture, bad[i], fixture_setup, test_layout_refused,
				   fixture_teardown);
		}
	}
	ADD("/api/guests", test_api_guests);
	ADD("/api/guest", test_api_guest);
	ADD("/api/report", test_api_report);
	ADD("/api/metrics", test_api_metrics);
	g_test_add_func("/api/metrics/loop-watch", test_loop_watch);
	ADD("/api/pcp", test_api_pcp);
	g_test_add_func("/config/guest-pcp", test_config_pcp);
	ADD("/api/no-fd-leak", test_api_no_fd_leak);
	ADD("/api/refuses-other-uid", test_api_refuses_other_uid);
#undef ADD
	return g_test_run();
}
