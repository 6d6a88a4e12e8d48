/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * hugeroomd against hostile peers and at its bounds: who may connect, how
 * guests are told apart, what each per-guest and global structure is
 * bounded by, and how the state file survives old versions and a full
 * disk. The daemon's library in-process on real sockets (test-fake).
 */

#define G_LOG_DOMAIN "TestRobust"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hr-peer.h"
#include "hr-prepare.h"

/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

#define ZERO_UUID "00000000-0000-0000-0000-000000000000"

typedef struct {
	Fixture *f;
	guint64 value;
} Wait;

static gboolean
cond_guests(gpointer data)
{
	Wait *w = data;
	return hr_core_get_guests(hr_daemon_get_core(w->f->daemon))->len == w->value;
}

static gboolean
cond_unidentified(gpointer data)
{
	Wait *w = data;
	return hr_core_get_rejected_unidentified(hr_daemon_get_core(w->f->daemon)) == w->value;
}

static gboolean
cond_ready(gpointer data)
{
	Wait *w = data;
	GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(w->f->daemon));
	guint ready = 0;
	for (guint i = 0; i < guests->len; i++)
		ready += ((HrGuest *)g_ptr_array_index(guests, i))->ready;
	return ready == w->value;
}

static void
wait_ready(Fixture *f, guint n)
{
	Wait w = {f, n};
	wait_for(cond_ready, &w, "guests ready");
}

/* a fixture whose config @setup changes before the daemon starts */
typedef void (*ConfigFunc)(HrConfig *config);

static void
robust_setup(Fixture *f, gconstpointer data)
{
	ConfigFunc func = (ConfigFunc)data;
	fixture_config(f, "hugeroom-robust-XXXXXX");
	if (func != NULL)
		func(f->config);
	fixture_start(f);
}

/* a connection the daemon must drop before any guest exists, saying @needle */
static void
assert_refused(Fixture *f, FakeDevice *dev, const gchar *needle)
{
	Wait w = {f, hr_core_get_rejected_unidentified(hr_daemon_get_core(f->daemon)) + 1};
	fake_wait_eof(dev);
	wait_for(cond_unidentified, &w, "the refusal");
	g_assert_cmpuint(hr_core_get_guests(hr_daemon_get_core(f->daemon))->len, ==, 0);
	g_test_message("refused: %s",
		       hr_core_get_last_unidentified_reason(hr_daemon_get_core(f->daemon)));
	g_assert_nonnull(
	    strstr(hr_core_get_last_unidentified_reason(hr_daemon_get_core(f->daemon)), needle));
}

/* ---------------------------------------------------------------------- */
/* Identity */

/* VMs without -uuid are not one guest, nor found by the zero UUID */
static void
test_zero_uuid(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) a = fake_device_up(f, "alpha", 0);
	g_autoptr(FakeDevice) b = fake_device_up(f, "", 0);
	g_autofree gchar *pid_name = g_strdup_printf("pid-%d", getpid());
	GPtrArray *guests;
	HrGuest *ga, *gb;
	(void)data;

	wait_ready(f, 2);
	guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
	g_assert_cmpuint(guests->len, ==, 2);
	ga = g_ptr_array_index(guests, 0);
	gb = g_ptr_array_index(guests, 1);
	g_assert_cmpstr(ga->name, ==, "alpha");
	/* no -name either: named by its QEMU process */
	g_assert_cmpstr(gb->name, ==, pid_name);
	g_assert_false(ga->uuid_known);
	g_assert_false(gb->uuid_known);
	g_assert_cmpuint(ga->id, !=, gb->id);
	g_assert_cmpstr(ga->key, !=, gb->key);
	g_assert_null(hr_core_find_guest(hr_daemon_get_core(f->daemon), ZERO_UUID));
	g_assert_true(hr_core_find_guest(hr_daemon_get_core(f->daemon), "alpha") == ga);
	g_assert_true(hr_core_find_guest(hr_daemon_get_core(f->daemon), pid_name) == gb);
}

/* a second running guest saying the same UUID does not get to own it */
static void
test_duplicate_uuid(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) a = fake_device_up(f, "vm1", 0x10);
	g_autoptr(FakeDevice) b = NULL;
	GPtrArray *guests;
	HrGuest *ga, *gb;
	(void)data;

	wait_ready(f, 1);
	b = fake_device_up(f, "impostor", 0x10);
	wait_ready(f, 2);
	guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
	ga = g_ptr_array_index(guests, 0);
	gb = g_ptr_array_index(guests, 1);
	g_assert_true(ga->uuid_known);
	g_assert_false(gb->uuid_known);
	g_assert_true(hr_core_find_guest(hr_daemon_get_core(f->daemon), ga->uuid) == ga);
}

static gint
spawn_sleeper(void)
{
	gint pid = fork();
	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		execlp("sleep", "sleep", "60", NULL);
		_exit(127);
	}
	return pid;
}

static void
reap(gint pid)
{
	gint status;
	kill(pid, SIGKILL);
	g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
}

/*
 * A HELLO with a disconnected guest's UUID from another process takes
 * nothing over while that guest's QEMU runs; once it is gone, a new QEMU
 * of the VM takes the entry over with nothing held.
 */
static void
test_no_takeover(void)
{
	g_autoptr(GPtrArray) guests = g_ptr_array_new_with_free_func((GDestroyNotify)hr_guest_free);
	g_autoptr(HrChanHello) hello = make_hello("vm1", 0x10);
	gint victim_pid = spawn_sleeper();
	gint other_pid = spawn_sleeper();
	g_autoptr(GError) error = NULL;
	HrPeer *victim = hr_peer_new_from_pid(victim_pid, 0, &error);
	g_autoptr(HrPeer) other = hr_peer_new_from_pid(other_pid, 0, &error);
	g_autoptr(HrPeer) same = NULL;
	HrGuest *guest;

	g_assert_no_error(error);
	g_assert_nonnull(victim);
	guest = hr_guest_new(1, hello, victim);
	g_ptr_array_add(guests, guest);
	hr_guest_settle_uuid(guests, guest);
	g_assert_true(guest->uuid_known);
	hr_guest_held_add(guest->held, MiB(64), 7);

	/* disconnected, its QEMU alive: another process gets nothing */
	g_assert_null(hr_guest_find_for_hello(guests, hello, other));
	/* the same process reconnecting gets its entry back */
	same = hr_peer_new_from_pid(victim_pid, 0, &error);
	g_assert_no_error(error);
	g_assert_true(hr_guest_find_for_hello(guests, hello, same) == guest);
	/* a pid that is reused never passes for the process */
	g_assert_true(hr_peer_same_process(victim, same));

	reap(victim_pid);
	g_assert_false(hr_peer_is_alive(victim));
	/* the old QEMU is gone: a new one of the VM may take over */
	g_assert_true(hr_guest_find_for_hello(guests, hello, other) == guest);
	reap(other_pid);
}

/* the process key is the pid and its start time */
static void
test_peer_self(void)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrPeer) peer = hr_peer_new_from_pid(getpid(), getuid(), &error);
	g_autofree gchar *want = NULL;

	g_assert_no_error(error);
	g_assert_cmpuint(peer->starttime, >, 0);
	want = g_strdup_printf("pid:%d:%" G_GUINT64_FORMAT, getpid(), peer->starttime);
	g_assert_cmpstr(peer->key, ==, want);
	g_assert_true(hr_peer_is_alive(peer));
	g_assert_nonnull(peer->exe);
	g_assert_true(g_str_has_suffix(peer->exe, "/test-robust"));
	g_assert_null(hr_peer_new_from_pid(0, 0, &error));
}

static void
config_other_uid(HrConfig *config)
{
	guint uid = 4242;
	g_free(config->qemu_user);
	config->qemu_user = g_strdup("4242");
	g_array_set_size(config->qemu_uids, 0);
	g_array_append_val(config->qemu_uids, uid);
}

/* a peer that does not run as QEMU's user is refused before a frame */
static void
test_peer_uid(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	(void)data;
	assert_refused(f, dev, "not as QEMU's user (qemu_user=4242");
}

static void
config_qemu_only(HrConfig *config)
{
	g_strfreev(config->qemu_executables);
	config->qemu_executables = g_strsplit(HR_CONFIG_DEFAULT_QEMU_EXECUTABLES, ";", -1);
}

/* a peer whose executable is not QEMU is refused */
static void
test_peer_exe(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	(void)data;
	assert_refused(f, dev, "which is not one of qemu_executables");
}

static void
config_three_per_uid(HrConfig *config)
{
	config->max_guests_per_uid = 3;
}

static gboolean
cond_guest_gone(gpointer data)
{
	return !hr_guest_is_connected(data);
}

/*
 * The QEMUs of one uid have at most max_guests_per_uid guest entries
 * (issue 18: a peer saying HELLO under a new name each time took an entry
 * and an fd each): at the bound a gone entry holding nothing makes room;
 * with none, the HELLO is refused, saying the bound, and counted.
 */
static void
test_guests_per_uid(Fixture *f, gconstpointer data)
{
	HrCore *core = hr_daemon_get_core(f->daemon);
	g_autoptr(FakeDevice) a = fake_device_up(f, "a", 0x10);
	g_autoptr(FakeDevice) b = fake_device_up(f, "b", 0x20);
	g_autoptr(FakeDevice) c = fake_device_up(f, "c", 0x30);
	g_autoptr(FakeDevice) d = fake_connect(f);
	g_autoptr(FakeDevice) e = NULL;
	g_autoptr(HrChanHello) hello = make_hello("d", 0x40);
	g_autoptr(GBytes) payload = hr_chan_hello_encode(hello);
	g_autoptr(JsonNode) metrics = NULL;
	g_autofree gchar *text = NULL;
	HrGuest *ga;
	Wait w = {f, hr_core_get_rejected_unidentified(core) + 1};
	(void)data;

	g_assert_cmpuint(hr_core_get_guests(core)->len, ==, 3);
	fake_send(d, HR_CHAN_HELLO, payload);
	fake_wait_eof(d);
	wait_for(cond_unidentified, &w, "the refusal");
	g_assert_nonnull(strstr(hr_core_get_last_unidentified_reason(core),
				"has 3 guest entries already, 3 of them connected "
				"(max_guests_per_uid=3"));
	g_assert_cmpuint(hr_core_get_refused_per_uid(core), ==, 1);
	g_assert_cmpuint(hr_core_get_guests(core)->len, ==, 3);
	metrics = http(f, "GET", "/metrics", 200, &text);
	g_assert_nonnull(strstr(text, "hugeroom_guests_refused_per_uid_total 1\n"));

	/* a goes: its entry, holding nothing, makes room for the next */
	ga = hr_core_find_guest(core, "a");
	g_clear_pointer(&a, fake_free);
	wait_for(cond_guest_gone, ga, "a disconnected");
	e = fake_device_up(f, "e", 0x50);
	g_assert_cmpuint(hr_core_get_guests(core)->len, ==, 3);
	g_assert_null(hr_core_find_guest(core, "a"));
	g_assert_nonnull(hr_core_find_guest(core, "e"));
	g_assert_cmpuint(hr_core_get_refused_per_uid(core), ==, 1);
}

/* ---------------------------------------------------------------------- */
/* Limits */

static void
config_hello_timeout(HrConfig *config)
{
	config->hello_timeout_ms = 200;
}

static void
test_hello_timeout(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	gint64 t0 = g_get_monotonic_time();
	(void)data;
	assert_refused(f, dev, "no HELLO within 200 ms");
	g_assert_cmpint(g_get_monotonic_time() - t0, >=, 150 * 1000);
}

static void
config_frame_rate(HrConfig *config)
{
	config->max_frames_per_s = 10;
}

static gboolean
cond_disconnected(gpointer data)
{
	Wait *w = data;
	GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(w->f->daemon));
	return guests->len > 0 && !hr_guest_is_connected(g_ptr_array_index(guests, 0));
}

static void
test_frame_rate(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "chatty", 0x10);
	Wait w = {f, 0};
	HrGuest *guest;
	(void)data;

	wait_ready(f, 1);
	for (guint i = 0; i < 20; i++) {
		g_autoptr(GBytes) status = make_status(i + 1, 0, MiB(2));
		fake_send(dev, HR_CHAN_GUEST_MSG, status);
	}
	fake_wait_eof(dev);
	wait_for(cond_disconnected, &w, "the disconnect");
	guest = only_guest(f);
	g_assert_nonnull(strstr(guest->last_reject_reason, "more than 10 frames in a second"));
	/* what came within the rate counted */
	g_assert_cmpuint(guest->guest_msgs, <=, 10);
}

static void
config_two_connections(HrConfig *config)
{
	config->max_connections = 2;
}

static void
test_max_connections(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) a = fake_device_up(f, "a", 0x10);
	g_autoptr(FakeDevice) b = fake_device_up(f, "b", 0x20);
	g_autoptr(FakeDevice) c = NULL;
	(void)data;

	wait_ready(f, 2);
	c = fake_connect(f);
	fake_wait_eof(c);
	g_assert_cmpuint(hr_core_get_rejected_unidentified(hr_daemon_get_core(f->daemon)), ==, 1);
	/* the two in are served on */
	g_clear_pointer(&b, fake_free);
	{
		Wait w = {f, 1};
		g_autoptr(FakeDevice) d = NULL;
		wait_for(cond_ready, &w, "b gone");
		d = fake_device_up(f, "d", 0x30);
		wait_ready(f, 2);
	}
}

static void
config_small_ram(HrConfig *config)
{
	config->max_guest_ram_mb = 512;
}

/* what a guest may hold is bounded by the RAM its HELLO announced, capped */
static void
test_hello_ram_cap(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_connect(f);
	g_autoptr(HrChanHello) hello = make_hello("huge", 0x10);
	g_autoptr(GBytes) payload = hr_chan_hello_encode(hello);
	(void)data;

	/* 1024 MiB of RAM */
	fake_send(dev, HR_CHAN_HELLO, payload);
	assert_refused(f, dev, "more than max_guest_ram_mb 512");
}

static void
config_two_queued(HrConfig *config)
{
	config->max_queued_requests = 2;
}

static void
test_queue_bound(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "busy", 0x10);
	g_autoptr(GError) error = NULL;
	HrRequestParams params = {.kind = HR_REQUEST_EVACUATE, .count = 1};
	HrGuest *guest;
	(void)data;

	wait_ready(f, 1);
	guest = only_guest(f);
	g_assert_nonnull(hr_core_submit(hr_daemon_get_core(f->daemon), guest, &params, &error));
	g_assert_nonnull(hr_core_submit(hr_daemon_get_core(f->daemon), guest, &params, &error));
	g_assert_no_error(error);
	g_assert_null(hr_core_submit(hr_daemon_get_core(f->daemon), guest, &params, &error));
	g_assert_error(error, G_IO_ERROR, G_IO_ERROR_BUSY);
	g_assert_nonnull(strstr(error->message, "max_queued_requests"));
}

/* raising RLIMIT_NOFILE for 1000 guests */
static void
test_nofile(void)
{
	struct rlimit rl, low;
	g_autoptr(GError) error = NULL;

	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &rl), ==, 0);
	low.rlim_cur = 256;
	low.rlim_max = rl.rlim_max;
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
	g_assert_cmpuint(hr_peer_raise_nofile(4096, &error), >=, 4096);
	g_assert_no_error(error);
	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &low), ==, 0);
	g_assert_cmpuint(low.rlim_cur, >=, 4096);
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* ---------------------------------------------------------------------- */
/* Bounds */

static void
config_prune(HrConfig *config)
{
	config->guest_prune_s = 1;
}

/* guests that left are forgotten, and their metrics with them */
static void
test_prune(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) gone = fake_device_up(f, "gone-vm", 0x10);
	g_autoptr(FakeDevice) holder = fake_device_up(f, "holder-vm", 0x20);
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 55, 0, MiB(64), 2);
	g_autofree gchar *metrics = NULL;
	g_autoptr(JsonNode) ignored = NULL;
	Wait w = {f, 1};
	HrGuest *left;
	(void)data;

	wait_ready(f, 2);
	fake_send(holder, HR_CHAN_GUEST_MSG, hold);
	while (((HrGuest *)g_ptr_array_index(hr_core_get_guests(hr_daemon_get_core(f->daemon)), 1))
		       ->held == NULL ||
	       g_hash_table_size(((HrGuest *)g_ptr_array_index(
				      hr_core_get_guests(hr_daemon_get_core(f->daemon)), 1))
				     ->held) < 2)
		g_main_context_iteration(NULL, TRUE);
	g_clear_pointer(&gone, fake_free);
	g_clear_pointer(&holder, fake_free);
	wait_for(cond_guests, &w, "the guest that left to be forgotten");
	left = only_guest(f);
	/* one that holds blocks for somebody stays while its QEMU runs */
	g_assert_cmpstr(left->name, ==, "holder-vm");
	g_assert_false(hr_guest_is_connected(left));
	ignored = http(f, "GET", "/metrics", 200, &metrics);
	g_assert_null(strstr(metrics, "gone-vm"));
	g_assert_nonnull(strstr(metrics, "holder-vm"));
}

static gboolean
cond_held(gpointer data)
{
	Wait *w = data;
	HrGuest *g =
	    hr_core_get_guests(hr_daemon_get_core(w->f->daemon))->len > 0
		? g_ptr_array_index(hr_core_get_guests(hr_daemon_get_core(w->f->daemon)), 0)
		: NULL;
	return g != NULL && g_hash_table_size(g->held) == w->value;
}

/* HOLDs nobody asked for and RETURNs of blocks never held are counted */
static void
test_unknown_blocks(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "odd", 0x10);
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 999, 0, MiB(64), 3);
	g_autoptr(GBytes) ret =
	    make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, 0, VIRTIO_HUGEROOM_RET_PRESSURE, MiB(68), 2);
	Wait w = {f, 3};
	HrGuest *guest;
	(void)data;

	wait_ready(f, 1);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	wait_for(cond_held, &w, "three held");
	guest = only_guest(f);
	g_assert_cmpuint(guest->holds_unknown, ==, 3);
	/* 68 MiB was held, 70 MiB was not */
	fake_send(dev, HR_CHAN_GUEST_MSG, ret);
	w.value = 2;
	wait_for(cond_held, &w, "two held");
	g_assert_cmpuint(guest->returns_unknown, ==, 1);
	g_assert_cmpuint(guest->blocks_returned_total[VIRTIO_HUGEROOM_RET_PRESSURE], ==, 1);
}

/* a HOLD nobody asked for is an orphan: reconciled by giving it back */
static void
test_orphans_returned(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "odd", 0x10);
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 999, 0, MiB(64), 3);
	g_autoptr(HrCmd) ret = NULL;
	(void)data;

	wait_ready(f, 1);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 3);
	for (guint i = 0; i < 3; i++)
		g_assert_cmpuint(ret->gpas[i] % MiB(2), ==, 0);
	g_assert_cmpuint(only_guest(f)->orphans_returned, ==, 3);
	/* not asked twice */
	fake_expect_silence(dev, 400);
}

/* what an operator's own evacuation holds is the API's, kept across a restart */
static void
test_api_holds_kept(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = fake_device_up(f, "ops", 0x10);
	g_autoptr(FakeDevice) dev2 = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) hold = NULL;
	g_autoptr(GBytes) late = NULL;
	g_autoptr(GError) error = NULL;
	HrRequestParams params = {.kind = HR_REQUEST_EVACUATE, .count = 4};
	HrRequest *request;
	Wait w = {f, 2};
	guint64 id;
	(void)data;

	wait_ready(f, 1);
	request = hr_core_submit(hr_daemon_get_core(f->daemon), only_guest(f), &params, &error);
	g_assert_no_error(error);
	id = request->id;
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, id, 0, MiB(64), 2);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	wait_for(cond_held, &w, "two held");
	fake_expect_silence(dev, 300);
	g_assert_cmpuint(hr_reservation_store_ledger_size(
			     hr_prepare_get_store(hr_daemon_get_prepare(f->daemon))),
			 ==, 3);

	/* the daemon dies mid-request; the device resyncs; late HOLDs follow */
	hr_daemon_free(f->daemon);
	fake_wait_eof(dev);
	fixture_start(f);
	dev2 = fake_device_resync(f, "ops", 0x10, MiB(64), 2);
	wait_ready(f, 1);
	late = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, id, 0, MiB(68), 1);
	fake_send(dev2, HR_CHAN_GUEST_MSG, late);
	w.value = 3;
	wait_for(cond_held, &w, "three held");
	fake_expect_silence(dev2, 400);
	g_assert_cmpuint(only_guest(f)->orphans_returned, ==, 0);
}

/* after a restart, resynced blocks no reservation or request recorded go back */
static void
test_restart_orphans(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) ret = NULL;
	(void)data;

	dev = fake_device_resync(f, "vm1", 0x10, MiB(100), 2);
	ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 2);
	g_assert_cmpuint(only_guest(f)->orphans_returned, ==, 2);
}

/*
 * a hold whose QEMU process is gone is dropped: its memory went with it
 * (at once with no migration_grace_s; test-migration waits one out)
 */
static void
test_gone_holds_dropped(Fixture *f, gconstpointer data)
{
	HrPrepare *p = hr_daemon_get_prepare(f->daemon);
	HrReservationStore *store = hr_prepare_get_store(p);
	gint pid = spawn_sleeper();
	g_autoptr(GError) error = NULL;
	g_autoptr(HrPeer) peer = hr_peer_new_from_pid(pid, 0, &error);
	g_autoptr(HrPeer) self = hr_peer_new_from_pid(getpid(), 0, &error);
	g_autofree gchar *dead = NULL;
	g_autofree gchar *alive = NULL;
	HrReservation *r;
	(void)data;

	g_assert_no_error(error);
	dead = g_strdup_printf("name:gone@%s", peer->key);
	alive = g_strdup_printf("name:here@%s", self->key);
	r = hr_reservation_store_create(store, MiB(4), 0, 0, FALSE, NULL, NULL);
	hr_reservation_set_state(store, r, HR_RESERVATION_CANCELLED, NULL, NULL);
	hr_reservation_add_hold(r, dead, "gone", MiB(64));
	g_assert_true(hr_peer_key_alive(dead));
	reap(pid);
	g_assert_false(hr_peer_key_alive(dead));
	g_assert_true(hr_peer_key_alive(alive));
	g_assert_false(hr_peer_key_alive("name:x"));
	f->config->migration_grace_s = 0;
	hr_prepare_tick(p);
	g_assert_cmpuint(r->holds->len, ==, 0);
	/* one whose QEMU runs but is away stays, to be given back */
	hr_reservation_add_hold(r, alive, "here", MiB(66));
	hr_prepare_tick(p);
	g_assert_cmpuint(r->holds->len, ==, 1);
}

/* ---------------------------------------------------------------------- */
/* The reservation store */

static gchar *
tmp_state_dir(void)
{
	g_autoptr(GError) error = NULL;
	gchar *dir = g_dir_make_tmp("hugeroom-store-XXXXXX", &error);
	g_assert_no_error(error);
	return dir;
}

static void
rm_rf(const gchar *dir)
{
	g_autofree gchar *cmd = g_strdup_printf("rm -rf '%s'", dir);
	g_assert_cmpint(system(cmd), ==, 0);
}

/* a temporary state directory and its state file's path; removed (and unmounted) after */
typedef struct {
	gchar *dir;
	gchar *path;
	gchar *filler; /* small_disk_mount() */
	gboolean mounted;
} StateDir;

static void
state_dir_init(StateDir *d)
{
	d->dir = tmp_state_dir();
	d->path = g_build_filename(d->dir, "reservations.json", NULL);
}

static void
state_dir_clear(StateDir *d)
{
	if (d->mounted)
		g_assert_cmpint(umount(d->dir), ==, 0);
	rm_rf(d->dir);
	g_free(d->dir);
	g_free(d->path);
	g_free(d->filler);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(StateDir, state_dir_clear)

static void
test_store_max(void)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(NULL);
	g_autoptr(GError) error = NULL;
	HrReservation *r[3];
	g_autofree gchar *gone = NULL;

	hr_reservation_store_set_max(store, 3);
	for (guint i = 0; i < 3; i++)
		r[i] = hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, NULL, &error);
	g_assert_no_error(error);
	/* all three still to do: nothing may go */
	g_assert_null(hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, NULL, &error));
	g_assert_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID);
	g_assert_nonnull(strstr(error->message, "max_reservations"));
	g_clear_error(&error);
	/* a settled one holding blocks stays too */
	hr_reservation_set_state(store, r[0], HR_RESERVATION_CANCELLED, NULL, NULL);
	hr_reservation_add_hold(r[0], "k", "vm", MiB(64));
	hr_reservation_set_state(store, r[1], HR_RESERVATION_FAILED, NULL, NULL);
	gone = g_strdup(r[1]->id);
	g_assert_nonnull(hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, NULL, &error));
	g_assert_no_error(error);
	g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 3);
	g_assert_nonnull(hr_reservation_store_find(store, r[0]->id));
	/* r[1], settled and holding nothing, made the room */
	g_assert_null(hr_reservation_store_find(store, gone));
}

/* a version 1 file (holds by guest UUID) is read and written back as the current version */
static void
test_store_migrate(void)
{
	g_auto(StateDir) d = {0};
	g_autofree gchar *text = NULL;
	g_autoptr(GError) error = NULL;
	const gchar *v1 =
	    "{\"version\":1,\"next_id\":2,\"reservations\":[{\"id\":\"r1\",\"bytes\":4194304,"
	    "\"need_blocks\":2,\"node\":0,\"planned_node\":0,\"strict\":false,\"requester\":null,"
	    "\"state\":\"consumed\",\"reason\":null,\"partial\":false,\"obtained\":2,"
	    "\"created_us\":1,\"deadline_us\":0,\"updated_us\":1,\"finished_us\":1,"
	    "\"blocks_returned\":0,\"steps\":[],\"holds\":[{\"guest_uuid\":"
	    "\"10111213-1415-1617-1819-1a1b1c1d1e1f\",\"guest\":\"vm1\",\"gpa\":\"0x4000000\","
	    "\"held_us\":5}]}]}";
	HrReservationHold *h;
	HrReservation *r;

	state_dir_init(&d);
	g_assert_true(g_file_set_contents(d.path, v1, -1, NULL));
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(d.path);
		g_assert_true(hr_reservation_store_load(store, &error));
		g_assert_no_error(error);
		r = hr_reservation_store_find(store, "r1");
		g_assert_nonnull(r);
		g_assert_cmpuint(r->holds->len, ==, 1);
		h = g_ptr_array_index(r->holds, 0);
		g_assert_null(h->guest_key);
		g_assert_cmpstr(h->guest_uuid, ==, "10111213-1415-1617-1819-1a1b1c1d1e1f");
		g_assert_cmpuint(h->gpa, ==, MiB(64));
	}
	/* nothing set aside; the file on disk is the current version now */
	g_assert_true(g_file_get_contents(d.path, &text, NULL, NULL));
	g_assert_nonnull(strstr(text, "\"version\" : 3"));
	g_assert_nonnull(strstr(text, "\"guest_key\" : null"));
	{
		g_autoptr(HrReservationStore) again = hr_reservation_store_new(d.path);
		g_assert_true(hr_reservation_store_load(again, &error));
		g_assert_no_error(error);
		h = g_ptr_array_index(hr_reservation_store_find(again, "r1")->holds, 0);
		g_assert_cmpstr(h->guest_uuid, ==, "10111213-1415-1617-1819-1a1b1c1d1e1f");
	}
}

/* a file of version 2: a hold named by its guest key, no gone times */
#define V2_FILE                                                                                \
	"{\"version\":2,\"next_id\":2,\"reservations\":[{\"id\":\"r1\",\"bytes\":4194304,"     \
	"\"need_blocks\":2,\"node\":0,\"planned_node\":0,\"strict\":false,\"requester\":null," \
	"\"state\":\"consumed\",\"reason\":null,\"partial\":false,\"obtained\":2,"             \
	"\"created_us\":1,\"deadline_us\":0,\"updated_us\":1,\"finished_us\":1,"               \
	"\"blocks_returned\":0,\"steps\":[],\"holds\":[{\"guest_key\":\"" V2_KEY "\","         \
	"\"guest_uuid\":null,\"guest\":\"vm1\",\"gpa\":\"0x4000000\",\"held_us\":5}]}],"       \
	"\"ledger\":[]}"
#define V2_UUID "10111213-1415-1617-1819-1a1b1c1d1e1f"
#define V2_KEY V2_UUID "@pid:1:1"

/* a version 2 file loads as before; its hold gets the UUID its key was made with */
static void
test_store_v2(void)
{
	g_auto(StateDir) d = {0};
	g_autofree gchar *text = NULL;
	g_autoptr(GError) error = NULL;
	HrReservationHold *h;

	state_dir_init(&d);
	g_assert_true(g_file_set_contents(d.path, V2_FILE, -1, NULL));
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(d.path);
		g_assert_true(hr_reservation_store_load(store, &error));
		g_assert_no_error(error);
		h = g_ptr_array_index(hr_reservation_store_find(store, "r1")->holds, 0);
		g_assert_cmpstr(h->guest_key, ==, V2_KEY);
		g_assert_cmpstr(h->guest_uuid, ==, V2_UUID);
		g_assert_cmpstr(h->guest_name, ==, "vm1");
		g_assert_cmpuint(h->gpa, ==, MiB(64));
		/* no gone time in it: the clock starts now */
		g_assert_cmpint(hr_reservation_store_gone_for(store, V2_KEY), <, G_USEC_PER_SEC);
	}
	g_assert_true(g_file_get_contents(d.path, &text, NULL, NULL));
	g_assert_nonnull(strstr(text, "\"version\" : 3"));
	g_assert_nonnull(strstr(text, "\"guest_uuid\" : \"" V2_UUID "\""));
}

/*
 * When a QEMU was seen gone is saved: a store loaded again goes on
 * counting from then, not from the load; one of another boot is over.
 */
static void
test_store_gone_persisted(void)
{
	g_auto(StateDir) d = {0};
	g_autofree gchar *text = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(GRegex) boot = g_regex_new("\"boot_id\" : \"[^\"]*\"", 0, 0, NULL);
	g_autofree gchar *other_boot = NULL;

	state_dir_init(&d);
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(d.path);
		HrReservation *r =
		    hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, "t", NULL);
		hr_reservation_add_hold(r, V2_KEY, "vm1", MiB(64));
		hr_reservation_touch(store, r);
		g_assert_cmpint(hr_reservation_store_gone_for(store, V2_KEY), <, G_USEC_PER_SEC);
		g_usleep(300000);
	}
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(d.path);
		gint64 gone;
		g_assert_true(hr_reservation_store_load(store, &error));
		g_assert_no_error(error);
		gone = hr_reservation_store_gone_for(store, V2_KEY);
		g_test_message("gone for %" G_GINT64_FORMAT " us after a reload", gone);
		g_assert_cmpint(gone, >=, 300000);
		g_assert_cmpint(gone, <, 5 * G_USEC_PER_SEC);
		g_assert_cmpstr(
		    ((HrReservationHold *)g_ptr_array_index(
			 ((HrReservation *)g_ptr_array_index(hr_reservation_store_list(store), 0))
			     ->holds,
			 0))
			->guest_uuid,
		    ==, V2_UUID);
	}
	/* the same file from another boot */
	g_assert_true(g_file_get_contents(d.path, &text, NULL, NULL));
	other_boot = g_regex_replace_literal(
	    boot, text, -1, 0, "\"boot_id\" : \"00000000-0000-0000-0000-000000000000\"", 0, NULL);
	g_assert_cmpstr(other_boot, !=, text);
	g_assert_true(g_file_set_contents(d.path, other_boot, -1, NULL));
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(d.path);
		g_assert_true(hr_reservation_store_load(store, &error));
		g_assert_cmpint(hr_reservation_store_gone_for(store, V2_KEY), ==, G_MAXINT64);
		/* and no hold names it: it is forgotten */
		g_ptr_array_set_size(
		    ((HrReservation *)g_ptr_array_index(hr_reservation_store_list(store), 0))
			->holds,
		    0);
		hr_reservation_store_gone_prune(store);
		g_assert_cmpint(hr_reservation_store_gone_for(store, V2_KEY), <, G_USEC_PER_SEC);
	}
}

/* a state directory on a tmpfs of 256 KiB (only ours: 0750), and a file that can fill it */
static void
small_disk_mount(StateDir *d)
{
	state_dir_init(d);
	d->filler = g_build_filename(d->dir, "filler", NULL);
	if (mount("hugeroom-test", d->dir, "tmpfs", 0, "size=256k,mode=0750") != 0)
		g_error("cannot mount a small tmpfs on %s (the test needs root): %s", d->dir,
			g_strerror(errno));
	d->mounted = TRUE;
}

/* fill the file system to the last byte */
static void
small_disk_fill(StateDir *d)
{
	g_autofree gchar *cmd =
	    g_strdup_printf("dd if=/dev/zero of='%s' bs=4k 2>/dev/null", d->filler);
	g_assert_cmpint(system(cmd), !=, 0);
}

/* on a full disk: 20 changes of @r, each too big to be written */
static void
grow_on_full_disk(HrReservationStore *store, HrReservation *r)
{
	for (guint i = 0; i < 20; i++) {
		HrReservationStep *s = hr_reservation_add_step(r, HR_STEP_COMPACT, 0);
		s->detail = g_strnfill(200, 'x');
		hr_reservation_touch(store, r);
	}
	hr_reservation_store_flush(store);
	g_assert_cmpuint(hr_reservation_store_save_failures(store), >, 0);
}

/* the state file at @path holds its one reservation with its 20 steps */
static void
assert_saved_whole(const gchar *path)
{
	g_autoptr(HrReservationStore) again = hr_reservation_store_new(path);
	g_autoptr(GError) error = NULL;
	g_assert_true(hr_reservation_store_load(again, &error));
	g_assert_no_error(error);
	g_assert_cmpuint(hr_reservation_store_list(again)->len, ==, 1);
	g_assert_cmpuint(
	    ((HrReservation *)g_ptr_array_index(hr_reservation_store_list(again), 0))->steps->len,
	    ==, 20);
}

/* a full state disk: a clear error, the previous file intact, and recovery */
static void
test_store_full_disk(void)
{
	g_auto(StateDir) d = {0};
	g_autofree gchar *before = NULL;
	g_autofree gchar *after = NULL;
	g_autofree gchar *why = NULL;
	g_autoptr(HrReservationStore) store = NULL;
	HrReservation *r;

	small_disk_mount(&d);
	store = hr_reservation_store_new(d.path);
	r = hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, "before", NULL);
	hr_reservation_store_flush(store);
	g_assert_true(g_file_get_contents(d.path, &before, NULL, NULL));
	g_assert_cmpuint(hr_reservation_store_save_failures(store), ==, 0);

	small_disk_fill(&d);
	grow_on_full_disk(store, r);
	why = hr_reservation_store_dup_save_error(store);
	g_test_message("%s", why);
	g_assert_nonnull(strstr(why, "cannot save reservations"));
	g_assert_nonnull(strstr(why, "free space"));
	g_assert_true(g_file_get_contents(d.path, &after, NULL, NULL));
	g_assert_cmpstr(after, ==, before);

	/* room again: the next change is written whole */
	g_assert_cmpint(g_unlink(d.filler), ==, 0);
	hr_reservation_touch(store, r);
	hr_reservation_store_flush(store);
	g_clear_pointer(&why, g_free);
	why = hr_reservation_store_dup_save_error(store);
	g_assert_null(why);
	assert_saved_whole(d.path);
	g_clear_pointer(&store, hr_reservation_store_free);
}

/*
 * A write that failed is tried again on its own, while the disk is full
 * (1 s after the last failure, then 2 s after that) and once there is room
 * again: with no further change the file holds the latest state, and the
 * failures stop.
 */
static void
test_store_full_disk_retry(void)
{
	g_auto(StateDir) d = {0};
	g_autoptr(HrReservationStore) store = NULL;
	g_autofree gchar *why = NULL;
	HrReservation *r;
	guint64 failures;
	gint64 until;

	small_disk_mount(&d);
	store = hr_reservation_store_new(d.path);
	r = hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, "before", NULL);
	hr_reservation_store_flush(store);
	small_disk_fill(&d);
	grow_on_full_disk(store, r);
	/* nothing changes from here on */
	failures = hr_reservation_store_save_failures(store);
	g_usleep(1500000);
	g_assert_cmpuint(hr_reservation_store_save_failures(store), ==, failures + 1);
	g_assert_cmpint(g_unlink(d.filler), ==, 0);

	until = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
	while ((why = hr_reservation_store_dup_save_error(store)) != NULL &&
	       g_get_monotonic_time() < until) {
		g_clear_pointer(&why, g_free);
		g_usleep(50000);
	}
	g_assert_null(why);
	assert_saved_whole(d.path);
	failures = hr_reservation_store_save_failures(store);
	g_usleep(1500000);
	g_assert_cmpuint(hr_reservation_store_save_failures(store), ==, failures);
	g_clear_pointer(&store, hr_reservation_store_free);
}

/*
 * The main loop never waits on work that grows with the product of two
 * inputs (issue 18): a resync of many held blocks with many gone guest
 * entries is reconciled at a cost of the blocks plus the guests. Before,
 * each block nobody owned scanned every guest for a migration twin, twice:
 * 200k blocks with 1000 gone entries froze the loop for 13.6 s.
 * HR_RECONCILE_BLOCKS and HR_RECONCILE_GONE set the sizes (a benchmark).
 */
static gdouble
reconcile_ms(guint n_gone, guint n_blocks)
{
	g_autofree gchar *dir = g_dir_make_tmp("hugeroom-reconcile-XXXXXX", NULL);
	g_autofree gchar *cmd = NULL;
	HrConfig *config = hr_config_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanHello) hello = make_hello("big", 0x77);
	GPtrArray *guests;
	HrPrepare *prepare;
	HrCore *core;
	HrGuest *big;
	gint64 t0, t1;

	g_assert_nonnull(dir);
	g_free(config->state_dir);
	config->state_dir = g_strdup(dir);
	config->return_orphans = FALSE; /* so that nothing is sent to the fake device */
	config->reservation_tick_ms = 3600 * 1000;
	core = hr_core_new(config);
	prepare = hr_prepare_new(core);
	guests = hr_core_get_guests(core);
	for (guint i = 0; i < n_gone; i++) {
		g_autofree gchar *name = g_strdup_printf("gone-%u", i);
		g_autoptr(HrChanHello) h = make_hello(name, 1 + i % 200);
		HrPeer *peer = hr_peer_new_from_pid(getpid(), getuid(), &error);
		HrGuest *g;

		g_assert_no_error(error);
		g = hr_guest_new(i + 1, h, peer);
		g->gone_at = g_get_monotonic_time();
		g_ptr_array_add(guests, g);
	}
	big = hr_guest_new(n_gone + 1, hello, hr_peer_new_from_pid(getpid(), getuid(), &error));
	g_assert_no_error(error);
	g_ptr_array_add(guests, big);
	/* connected (nothing is sent to it: no reservation, no orphan returned) and resynced */
	big->device = (HrDevice *)big;
	big->ready = TRUE;
	for (guint b = 0; b < n_blocks; b++)
		hr_guest_held_add(big->held, MiB(2) * (b + 1), 0);
	big->held_gen++;
	hr_prepare_held_changed(prepare, big);

	t0 = g_get_monotonic_time();
	hr_prepare_tick(prepare);
	t1 = g_get_monotonic_time();

	big->device = NULL;
	hr_prepare_free(prepare);
	hr_core_free(core);
	hr_config_free(config);
	cmd = g_strdup_printf("rm -rf '%s'", dir);
	g_assert_cmpint(system(cmd), ==, 0);
	return (t1 - t0) / 1000.0;
}

static void
test_reconcile_scales(void)
{
	const gchar *env_blocks = g_getenv("HR_RECONCILE_BLOCKS");
	const gchar *env_gone = g_getenv("HR_RECONCILE_GONE");
	guint n_blocks = env_blocks != NULL ? (guint)g_ascii_strtoull(env_blocks, NULL, 10) : 50000;
	guint n_gone = env_gone != NULL ? (guint)g_ascii_strtoull(env_gone, NULL, 10) : 1000;
	gdouble alone = reconcile_ms(0, n_blocks);
	gdouble many = reconcile_ms(n_gone, n_blocks);

	g_test_message("reconciling %u held blocks took %.1f ms with no other guest entry, "
		       "%.1f ms with %u gone ones",
		       n_blocks, alone, many, n_gone);
	/* the gone entries add their own count, not one scan of them per block */
	g_assert_cmpfloat(many, <, 3 * alone + 50);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	/* refused peers and dropped devices are warnings, and expected here */
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrDevice", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrGuest", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrDaemon", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrReservation", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);

#define ADD(path, cfg, fn) \
	g_test_add(path, Fixture, (gconstpointer)(cfg), robust_setup, fn, fixture_teardown)
	ADD("/robust/identity/zero-uuid", NULL, test_zero_uuid);
	ADD("/robust/identity/duplicate-uuid", NULL, test_duplicate_uuid);
	g_test_add_func("/robust/identity/no-takeover", test_no_takeover);
	g_test_add_func("/robust/peer/self", test_peer_self);
	g_test_add_func("/robust/loop/reconcile-scales", test_reconcile_scales);
	ADD("/robust/peer/uid", config_other_uid, test_peer_uid);
	ADD("/robust/peer/exe", config_qemu_only, test_peer_exe);
	ADD("/robust/peer/guests-per-uid", config_three_per_uid, test_guests_per_uid);
	ADD("/robust/limits/hello-timeout", config_hello_timeout, test_hello_timeout);
	ADD("/robust/limits/frame-rate", config_frame_rate, test_frame_rate);
	ADD("/robust/limits/connections", config_two_connections, test_max_connections);
	ADD("/robust/limits/hello-ram", config_small_ram, test_hello_ram_cap);
	ADD("/robust/limits/queue", config_two_queued, test_queue_bound);
	g_test_add_func("/robust/limits/nofile", test_nofile);
	ADD("/robust/bounds/prune", config_prune, test_prune);
	ADD("/robust/bounds/unknown-blocks", NULL, test_unknown_blocks);
	ADD("/robust/reconcile/orphans-returned", NULL, test_orphans_returned);
	ADD("/robust/reconcile/api-holds-kept", NULL, test_api_holds_kept);
	ADD("/robust/reconcile/restart-orphans", NULL, test_restart_orphans);
	ADD("/robust/reconcile/gone-holds-dropped", NULL, test_gone_holds_dropped);
	g_test_add_func("/robust/store/max", test_store_max);
	g_test_add_func("/robust/store/migrate-v1", test_store_migrate);
	g_test_add_func("/robust/store/v2", test_store_v2);
	g_test_add_func("/robust/store/gone-persisted", test_store_gone_persisted);
	g_test_add_func("/robust/store/full-disk", test_store_full_disk);
	g_test_add_func("/robust/store/full-disk-retry", test_store_full_disk_retry);
#undef ADD
	return g_test_run();
}
