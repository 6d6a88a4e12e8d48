/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A live migration between two QEMU processes of one host, one daemon:
 * the destination's resync brings the source's held blocks, and whatever
 * order the daemon sees the events in (the destination's reconnect after
 * it loaded the state, the source's disconnect and exit, the pruning of
 * the source's entry), nothing a reservation or the API owns is given
 * back as an orphan and nothing held is forgotten. Each QEMU is a child
 * process (FakeQemu), so that the daemon sees two peers.
 */

#define G_LOG_DOMAIN "TestMigration"

#include "hr-prepare.h"

/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

#define VM_NAME "vm"
#define VM_SEED 0x20
/* the blocks the source holds, and one more its evacuation holds later */
#define FIRST MiB(64)
#define N_HELD 2

typedef struct {
	Fixture *f;
	FakeQemu *qemu;
	guint64 value;
} Wait;

static HrCore *
core(Fixture *f)
{
	return hr_daemon_get_core(f->daemon);
}

static HrReservationStore *
store(Fixture *f)
{
	return hr_prepare_get_store(hr_daemon_get_prepare(f->daemon));
}

/* the guest entry of @qemu's process, or NULL */
static HrGuest *
guest_of(Fixture *f, FakeQemu *qemu)
{
	GPtrArray *guests = hr_core_get_guests(core(f));
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g->pid == qemu->pid)
			return g;
	}
	return NULL;
}

/* run the daemon's main loop for @ms */
static void
run_loop(guint ms)
{
	gint64 until = g_get_monotonic_time() + ms * 1000;
	while (g_get_monotonic_time() < until) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

static gboolean
cond_ready(gpointer data)
{
	Wait *w = data;
	HrGuest *g = guest_of(w->f, w->qemu);
	return g != NULL && g->ready && g_hash_table_size(g->held) == w->value;
}

/* @qemu's guest is up with @n held (the resync done, or HOLDs seen) */
static HrGuest *
wait_held(Fixture *f, FakeQemu *qemu, guint n)
{
	Wait w = {f, qemu, n};
	wait_for(cond_ready, &w, "the guest ready with its held blocks");
	return guest_of(f, qemu);
}

static gboolean
cond_gone(gpointer data)
{
	HrGuest *g = data;
	return !hr_guest_is_connected(g) && g_hash_table_size(g->held) == 0;
}

/* the source's connection closes and its process exits; the daemon drops its held set */
static void
source_exits(Fixture *f, FakeDevice **dev, HrGuest *guest)
{
	FakeQemu *qemu = (*dev)->qemu;
	(void)f;
	g_clear_pointer(dev, fake_free);
	fake_qemu_exit(qemu);
	wait_for(cond_gone, guest, "the source's held set dropped (its QEMU exited)");
}

static gboolean
cond_disconnected(gpointer data)
{
	return !hr_guest_is_connected(data);
}

/* the destination loaded the state: its device drops the connection (it reconnects) */
static void
destination_drops(FakeDevice **dev, HrGuest *guest)
{
	g_clear_pointer(dev, fake_free);
	wait_for(cond_disconnected, guest, "the destination disconnected");
}

/* the guest of id @value is forgotten */
static gboolean
cond_pruned(gpointer data)
{
	Wait *w = data;
	GPtrArray *guests = hr_core_get_guests(core(w->f));
	for (guint i = 0; i < guests->len; i++) {
		if (((HrGuest *)g_ptr_array_index(guests, i))->id == w->value)
			return FALSE;
	}
	return TRUE;
}

/* the two QEMUs of the VM, their connections and guest entries */
typedef struct {
	FakeQemu *src_qemu, *dst_qemu;
	FakeDevice *src, *dst;
	HrGuest *sg, *dg;
} Mig;

/* both QEMUs run; the source is connected, holding nothing yet */
static void
mig_start(Fixture *f, Mig *m)
{
	m->src_qemu = fake_qemu_new();
	m->dst_qemu = fake_qemu_new();
	m->src = fake_device_resync_from(f, m->src_qemu, VM_NAME, VM_SEED, 0, 0);
	m->sg = wait_held(f, m->src_qemu, 0);
}

/* the destination (re)connects, its resync listing @n blocks from FIRST */
static void
mig_dest_up(Fixture *f, Mig *m, guint n)
{
	m->dst = fake_device_resync_from(f, m->dst_qemu, VM_NAME, VM_SEED, FIRST, n);
	m->dg = wait_held(f, m->dst_qemu, n);
}

static void
mig_clear(Mig *m)
{
	g_clear_pointer(&m->src, fake_free);
	g_clear_pointer(&m->dst, fake_free);
	g_clear_pointer(&m->src_qemu, fake_qemu_free);
	g_clear_pointer(&m->dst_qemu, fake_qemu_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Mig, mig_clear)

/* the destination is asked for nothing back, nothing counts as an orphan */
static void
assert_nothing_returned(Mig *m)
{
	fake_expect_silence(m->dst, 500);
	g_assert_cmpuint(m->dg->orphans_returned, ==, 0);
}

static void
reservation_add(Fixture *f, FakeDevice *dev, HrReservation *r, HrGuest *guest, guint n);

/* a consumed reservation that owns @n blocks @guest holds from FIRST */
static HrReservation *
reservation_of(Fixture *f, FakeDevice *dev, HrGuest *guest, guint n)
{
	g_autoptr(GError) error = NULL;
	HrReservation *r =
	    hr_reservation_store_create(store(f), MiB(2) * n, 0, 0, FALSE, "vm2", &error);
	g_assert_no_error(error);
	g_assert_true(
	    hr_reservation_set_state(store(f), r, HR_RESERVATION_IN_PROGRESS, NULL, NULL));
	g_assert_true(hr_reservation_set_state(store(f), r, HR_RESERVATION_READY, NULL, NULL));
	g_assert_true(hr_reservation_set_state(store(f), r, HR_RESERVATION_CONSUMED, NULL, NULL));
	reservation_add(f, dev, r, guest, n);
	return r;
}

/*
 * The reservation's holds go in when the HOLD has come, in the turn that
 * handles it, as the executor adds a donation's: added before it, a tick
 * between could drop them ("the guest does not hold them any more"); added
 * after, the HOLD of a request nobody knows could be returned as orphans.
 */
typedef struct {
	Fixture *f;
	HrReservation *r;
	HrGuest *guest;
	guint n;
	gboolean added;
} AddHolds;

static void
add_holds_when_held(HrCore *c, const HrEvent *event, gpointer data)
{
	AddHolds *a = data;
	(void)c;

	if (a->added || event->kind != HR_EVENT_HELD_CHANGED || event->guest != a->guest)
		return;
	for (guint i = 0; i < a->n; i++) {
		guint64 gpa = FIRST + MiB(2) * i;
		if (!g_hash_table_contains(a->guest->held, &gpa))
			return;
	}
	for (guint i = 0; i < a->n; i++)
		hr_reservation_add_hold(a->r, a->guest->key, a->guest->name, FIRST + MiB(2) * i);
	hr_reservation_touch(store(a->f), a->r);
	a->added = TRUE;
}

static gboolean
holds_added(gpointer data)
{
	return ((AddHolds *)data)->added;
}

/* @r's holds of @n blocks @guest holds from FIRST, and the donation's HOLDs */
static void
reservation_add(Fixture *f, FakeDevice *dev, HrReservation *r, HrGuest *guest, guint n)
{
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 4242, 0, FIRST, n);
	AddHolds a = {f, r, guest, n, FALSE};

	hr_core_listen(core(f), add_holds_when_held, &a);
	/* the donation's HOLDs (its request is before the test) */
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	wait_for(holds_added, &a, "the donation's HOLDs and the reservation's holds");
	hr_core_unlisten(core(f), add_holds_when_held, &a);
}

/* the reservation still owns its @n blocks, as @guest's */
static void
assert_holds(HrReservation *r, HrGuest *guest, guint n)
{
	g_assert_cmpuint(r->holds->len, ==, n);
	for (guint i = 0; i < r->holds->len; i++) {
		HrReservationHold *h = g_ptr_array_index(r->holds, i);
		g_assert_cmpstr(h->guest_key, ==, guest->key);
		g_assert_true(g_hash_table_contains(guest->held, &h->gpa));
	}
}

/* an operator's evacuation on @guest holding @n blocks from FIRST; its id */
static guint64
api_evacuation(Fixture *f, FakeDevice *dev, HrGuest *guest, guint n)
{
	g_autoptr(GError) error = NULL;
	HrRequestParams params = {.kind = HR_REQUEST_EVACUATE, .count = 8};
	HrRequest *request = hr_core_submit(core(f), guest, &params, &error);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) hold = NULL;

	g_assert_no_error(error);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, request->id, 0, FIRST, n);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	return request->id;
}

/* the destination holds @n blocks from FIRST, every one the API's */
static void
assert_ledger(Fixture *f, HrGuest *guest, guint n)
{
	g_assert_cmpuint(g_hash_table_size(guest->held), ==, n);
	for (guint i = 0; i < n; i++)
		g_assert_true(
		    hr_reservation_store_ledger_has(store(f), guest->key, FIRST + MiB(2) * i, 0));
}

/*
 * Source: holds N_HELD blocks for a reservation. Destination: connects
 * before the migration (empty resync), and reconnects once it loaded the
 * state (SPEC 1.7), its resync listing them. source_first: the source
 * exits before that reconnect (else after the resync was reconciled);
 * dest_drops_first: the destination's device drops its connection
 * before the source exits (else while its pre-migration view stands).
 */
typedef struct {
	gboolean source_first;
	gboolean dest_drops_first;
} Order;

static const Order resync_then_source_exits = {FALSE, FALSE};
static const Order source_exits_while_dest_reconnects = {TRUE, TRUE};
static const Order source_exits_before_dest_loads = {TRUE, FALSE};

static void
test_reservation_order(Fixture *f, gconstpointer data)
{
	const Order *order = data;
	g_auto(Mig) m = {0};
	HrReservation *r;

	mig_start(f, &m);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	assert_holds(r, m.sg, N_HELD);

	mig_dest_up(f, &m, 0);
	g_assert_true(m.dg != m.sg);
	if (!order->source_first) {
		destination_drops(&m.dst, m.dg);
		mig_dest_up(f, &m, N_HELD);
		fake_expect_silence(m.dst, 300);
		source_exits(f, &m.src, m.sg);
	} else {
		if (order->dest_drops_first)
			destination_drops(&m.dst, m.dg);
		source_exits(f, &m.src, m.sg);
		/* ticks run meanwhile (every 50 ms) */
		if (m.dst != NULL) {
			fake_expect_silence(m.dst, 300);
			destination_drops(&m.dst, m.dg);
		} else {
			run_loop(300);
		}
		mig_dest_up(f, &m, N_HELD);
	}
	/* and the reservation owns the blocks where they are */
	assert_nothing_returned(&m);
	assert_holds(r, m.dg, N_HELD);
}

/*
 * An operator's evacuation runs on the source when it migrates: what it
 * held before, and what it holds on the destination (in the resync with
 * id 0, and relayed later with its id), stay the operator's though the
 * source exited and its entry was pruned (guest_prune_s 1) before the
 * destination reconnected.
 */
static void
test_source_pruned_before_resync(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	g_autoptr(GBytes) late = NULL;
	Wait w = {f, NULL, 0};
	guint64 id;
	(void)data;

	mig_start(f, &m);
	w.value = m.sg->id;
	id = api_evacuation(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);

	mig_dest_up(f, &m, 0);
	destination_drops(&m.dst, m.dg);
	source_exits(f, &m.src, m.sg);
	wait_for(cond_pruned, &w, "the source's entry pruned");

	/* held on the destination before it reconnected: one more, id 0 */
	mig_dest_up(f, &m, N_HELD + 1);
	late = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, id, 0, FIRST + MiB(2) * (N_HELD + 1), 1);
	fake_send(m.dst, HR_CHAN_GUEST_MSG, late);
	wait_held(f, m.dst_qemu, N_HELD + 2);
	assert_nothing_returned(&m);
	assert_ledger(f, m.dg, N_HELD + 2);
}

/*
 * The destination connects for the first time only after the source is
 * gone: it takes the guest's entry over (a new QEMU of the VM) and its
 * resync lists what the source held for the operator.
 */
static void
test_dest_connects_after_source_gone(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	g_autoptr(GBytes) result = NULL;
	guint64 id;
	(void)data;

	mig_start(f, &m);
	id = api_evacuation(f, m.src, m.sg, N_HELD);
	result =
	    make_result(VIRTIO_HUGEROOM_MSG_RESULT, id, VIRTIO_HUGEROOM_S_PARTIAL, 8, N_HELD, 10);
	fake_send(m.src, HR_CHAN_GUEST_MSG, result);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);

	mig_dest_up(f, &m, N_HELD);
	g_assert_true(m.dg == m.sg);
	assert_nothing_returned(&m);
	assert_ledger(f, m.dg, N_HELD);
}

/*
 * The destination connects for the first time only after the source,
 * holding blocks for a reservation, is gone (it connects late, or the
 * daemon restarted mid-migration): the ticks in between keep the holds
 * (migration_grace_s), and the destination, taking the entry over or, once
 * the source's entry is pruned, as a new one, adopts them.
 */
static void
test_dest_late(Fixture *f, gconstpointer data)
{
	gboolean pruned = GPOINTER_TO_INT(data);
	g_auto(Mig) m = {0};
	Wait w = {f, NULL, 0};
	HrReservation *r;

	mig_start(f, &m);
	w.value = m.sg->id;
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);
	if (pruned)
		wait_for(cond_pruned, &w, "the source's entry pruned");
	else
		run_loop(300);
	g_assert_cmpuint(r->holds->len, ==, N_HELD);

	mig_dest_up(f, &m, N_HELD);
	g_assert_true(pruned || m.dg == m.sg);
	assert_nothing_returned(&m);
	assert_holds(r, m.dg, N_HELD);
}

static gboolean
cond_no_holds(gpointer data)
{
	return ((HrReservation *)data)->holds->len == 0;
}

/* a VM's destination as it connects: what it is called and says it is */
typedef struct {
	const gchar *name;
	guint8 uuid_seed;
	gboolean adopts; /* the gone source's holds */
} Dest;

static const Dest other_uuid = {VM_NAME, VM_SEED + 0x40, FALSE};
static const Dest renamed = {"vm-renamed", VM_SEED, TRUE};

/*
 * A QEMU connects after the source, holding blocks for a reservation, is
 * gone and its entry pruned, listing blocks at the same addresses: it
 * adopts the holds when it is the same VM by UUID (whatever its name),
 * never when its UUID is another's though its name is the same (a name
 * reused, or copied): those blocks are nobody's, and given back.
 */
static void
test_dest_other_vm(Fixture *f, gconstpointer data)
{
	const Dest *dest = data;
	g_auto(Mig) m = {0};
	Wait w = {f, NULL, 0};
	g_autofree gchar *src_key = NULL;
	HrReservation *r;

	mig_start(f, &m);
	w.value = m.sg->id;
	src_key = g_strdup(m.sg->key);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);
	wait_for(cond_pruned, &w, "the source's entry pruned");
	g_assert_cmpuint(r->holds->len, ==, N_HELD);

	m.dst = fake_device_resync_from(f, m.dst_qemu, dest->name, dest->uuid_seed, FIRST, N_HELD);
	m.dg = wait_held(f, m.dst_qemu, N_HELD);
	if (dest->adopts) {
		assert_nothing_returned(&m);
		assert_holds(r, m.dg, N_HELD);
		return;
	}
	{
		g_autoptr(HrCmd) ret = fake_expect_cmd(m.dst, VIRTIO_HUGEROOM_CMD_RETURN);
		g_assert_cmpuint(ret->nr_gpas, ==, N_HELD);
	}
	g_assert_cmpuint(m.dg->orphans_returned, ==, N_HELD);
	for (guint i = 0; i < r->holds->len; i++)
		g_assert_cmpstr(((HrReservationHold *)g_ptr_array_index(r->holds, i))->guest_key,
				==, src_key);
}

/*
 * The daemon restarts during a gone source's grace: the grace goes on
 * from when the previous daemon saw the source gone (the state file keeps
 * it), neither dropped at the restart nor counted again from it.
 */
static void
test_grace_survives_restart(Fixture *f, gconstpointer data)
{
	const gint64 grace = 4 * G_USEC_PER_SEC;
	g_auto(Mig) m = {0};
	HrReservation *r;
	g_autofree gchar *id = NULL;
	gint64 exited, restarted, dropped;
	(void)data;

	f->config->migration_grace_s = grace / G_USEC_PER_SEC;
	mig_start(f, &m);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	exited = g_get_monotonic_time();
	source_exits(f, &m.src, m.sg);
	run_loop(1500);
	g_assert_cmpuint(r->holds->len, ==, N_HELD);
	id = g_strdup(r->id);

	hr_daemon_free(f->daemon);
	fixture_start(f);
	restarted = g_get_monotonic_time();
	r = hr_reservation_store_find(store(f), id);
	g_assert_nonnull(r);
	g_assert_cmpuint(r->holds->len, ==, N_HELD);
	wait_for(cond_no_holds, r, "the holds dropped after migration_grace_s");
	dropped = g_get_monotonic_time();
	g_test_message("dropped %.1f s after the source exited, %.1f s after the restart",
		       (dropped - exited) / 1e6, (dropped - restarted) / 1e6);
	/* the grace went on: neither cut short nor counted again from the restart */
	g_assert_cmpint(dropped - exited, >=, grace);
	g_assert_cmpint(dropped - restarted, <, grace - G_USEC_PER_SEC);
}

/* after migration_grace_s a gone QEMU's holds are dropped: their memory went with it */
static void
test_grace_ends(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	HrReservation *r;
	(void)data;

	f->config->migration_grace_s = 2;
	mig_start(f, &m);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);
	run_loop(1000);
	g_assert_cmpuint(r->holds->len, ==, N_HELD);
	wait_for(cond_no_holds, r, "the holds dropped after migration_grace_s");
}

/*
 * A cancelled reservation's holds in a source that is gone are not
 * dropped while no QEMU can be asked for them: the late destination
 * brings them and is asked for them back as the reservation's, not as
 * orphans.
 */
static void
test_ended_returns_to_dest(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	g_autoptr(HrCmd) ret = NULL;
	g_autoptr(GError) error = NULL;
	HrReservation *r;
	(void)data;

	mig_start(f, &m);
	r = hr_reservation_store_create(store(f), MiB(2) * N_HELD, 0, 0, FALSE, "vm2", &error);
	g_assert_no_error(error);
	reservation_add(f, m.src, r, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);
	g_assert_true(hr_reservation_set_state(store(f), r, HR_RESERVATION_CANCELLED, NULL, NULL));
	run_loop(500);
	g_assert_cmpuint(r->holds->len, ==, N_HELD);

	mig_dest_up(f, &m, N_HELD);
	ret = fake_expect_cmd(m.dst, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, N_HELD);
	g_assert_cmpuint(m.dg->orphans_returned, ==, 0);
}

/*
 * A VM restarted in a new QEMU (no migration) brings nothing: the holds
 * of the old process go, and the new one is asked for nothing.
 */
static void
test_restart_drops(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	HrReservation *r;
	(void)data;

	mig_start(f, &m);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);
	source_exits(f, &m.src, m.sg);
	mig_dest_up(f, &m, 0);
	g_assert_true(m.dg == m.sg);
	fake_expect_silence(m.dst, 300);
	g_assert_cmpuint(r->holds->len, ==, 0);
}

/* the guest entry GET /v1/guests/@name answers with: its pid */
static gint64
api_guest_pid(Fixture *f, const gchar *name)
{
	g_autofree gchar *path = g_strdup_printf("/v1/guests/%s", name);
	g_autoptr(JsonNode) node = http(f, "GET", path, 200, NULL);
	return json_object_get_int_member(json_node_get_object(node), "pid");
}

/*
 * A second QEMU process says the UUID and name of a VM whose QEMU runs,
 * holding blocks for a reservation, and its resync lists the same blocks
 * (issue 18: 179 of 256 holds moved to such a process and were dropped
 * at its device reset): it takes nothing while the VM's process runs
 * (SPEC 2.10 item 6). The name and the UUID still mean the VM's process,
 * in the registry and through the API, and the newcomer is asked for
 * nothing back. Once the first process exits, the second is the VM (a
 * migration's destination): it adopts the holds and answers to the UUID.
 */
static void
test_claim_while_running(Fixture *f, gconstpointer data)
{
	g_auto(Mig) m = {0};
	HrChanDeviceState reset = {0};
	HrReservation *r;
	(void)data;

	mig_start(f, &m);
	r = reservation_of(f, m.src, m.sg, N_HELD);
	wait_held(f, m.src_qemu, N_HELD);
	fake_expect_silence(m.src, 200);

	mig_dest_up(f, &m, N_HELD);
	g_assert_true(m.dg != m.sg);
	fake_expect_silence(m.dst, 500);
	assert_holds(r, m.sg, N_HELD);
	g_assert_cmpuint(m.dg->orphans_returned, ==, 0);
	g_assert_true(hr_core_find_guest(core(f), VM_NAME) == m.sg);
	g_assert_true(hr_core_find_guest(core(f), m.sg->uuid) == m.sg);
	g_assert_cmpint(api_guest_pid(f, VM_NAME), ==, m.src_qemu->pid);
	g_assert_cmpint(api_guest_pid(f, m.sg->uuid), ==, m.src_qemu->pid);

	/* the newcomer's device resets: what it listed was never its to drop */
	fake_send_state(m.dst, &reset);
	fake_expect_silence(m.dst, 500);
	g_assert_cmpuint(g_hash_table_size(m.dg->held), ==, 0);
	assert_holds(r, m.sg, N_HELD);
	g_assert_true(hr_core_find_guest(core(f), VM_NAME) == m.sg);

	/* it reconnects with the blocks (it loaded the VM's state); the source exits */
	destination_drops(&m.dst, m.dg);
	mig_dest_up(f, &m, N_HELD);
	fake_expect_silence(m.dst, 300);
	assert_holds(r, m.sg, N_HELD);
	source_exits(f, &m.src, m.sg);
	assert_nothing_returned(&m);
	assert_holds(r, m.dg, N_HELD);
	g_assert_true(hr_core_find_guest(core(f), VM_NAME) == m.dg);
	g_assert_true(hr_core_find_guest(core(f), m.dg->uuid) == m.dg);
	g_assert_cmpint(api_guest_pid(f, m.dg->uuid), ==, m.dst_qemu->pid);
}

static void
mig_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	fixture_config(f, "hugeroom-mig-XXXXXX");
	f->config->reservation_tick_ms = 50;
	f->config->guest_prune_s = 1;
	/* the reservations here own guest blocks only: never give them back on our own */
	f->config->return_high_mark_mb = 0;
	fixture_start(f);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	/* two QEMUs saying one UUID is a warning, and expected here */
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	g_log_set_fatal_mask("HrGuest", G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);

#define ADD(path, data, fn) g_test_add(path, Fixture, data, mig_setup, fn, fixture_teardown)
	ADD("/migration/reservation/resync-then-source-exits", &resync_then_source_exits,
	    test_reservation_order);
	ADD("/migration/reservation/source-exits-while-dest-reconnects",
	    &source_exits_while_dest_reconnects, test_reservation_order);
	ADD("/migration/reservation/source-exits-before-dest-loads",
	    &source_exits_before_dest_loads, test_reservation_order);
	ADD("/migration/api/source-pruned-before-resync", NULL, test_source_pruned_before_resync);
	ADD("/migration/api/dest-connects-after-source-gone", NULL,
	    test_dest_connects_after_source_gone);
	ADD("/migration/reservation/dest-connects-after-source-gone", GINT_TO_POINTER(FALSE),
	    test_dest_late);
	ADD("/migration/reservation/dest-connects-after-source-pruned", GINT_TO_POINTER(TRUE),
	    test_dest_late);
	ADD("/migration/reservation/grace-ends", NULL, test_grace_ends);
	ADD("/migration/reservation/grace-survives-restart", NULL, test_grace_survives_restart);
	ADD("/migration/reservation/same-name-other-uuid", &other_uuid, test_dest_other_vm);
	ADD("/migration/reservation/same-uuid-renamed", &renamed, test_dest_other_vm);
	ADD("/migration/reservation/ended-returns-to-dest", NULL, test_ended_returns_to_dest);
	ADD("/migration/restart-drops", NULL, test_restart_drops);
	ADD("/migration/identity/claim-while-running", NULL, test_claim_while_running);
#undef ADD
	return g_test_run();
}
