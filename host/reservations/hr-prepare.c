/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The executor (hr-prepare.h): its lifecycle, its listeners, the tick and the
 * snapshot it decides on, and the API's create, release and consume. What it
 * decides is in hr-prepare-drive.c, the steps it runs in hr-prepare-steps.c,
 * who may donate in hr-prepare-donors.c, the holds in hr-prepare-holds.c,
 * the state they share in hr-prepare-state.c. Calls go down that list:
 * drive, steps, holds, donors, state; none of them calls this file.
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare.h"

#include "hr-prepare-private.h"

static void
snapshot_read_cb(GObject *source, GAsyncResult *result, gpointer user_data);

static gboolean
tick_cb(gpointer user_data);

void
hr_prepare_listen(HrPrepare *p, HrPrepareFunc func, gpointer user_data)
{
	hr_listeners_add(p->listeners, G_CALLBACK(func), user_data);
}

void
hr_prepare_unlisten(HrPrepare *p, HrPrepareFunc func, gpointer user_data)
{
	hr_listeners_remove(p->listeners, G_CALLBACK(func), user_data);
}

const gchar *
hr_prepare_event_kind_to_string(HrPrepareEventKind kind)
{
	static const gchar *const names[HR_PREPARE_N_KINDS] = {
	    [HR_PREPARE_RESERVATION_CHANGED] = "reservation",
	    [HR_PREPARE_PLAN_MADE] = "plan",
	};
	return kind < HR_PREPARE_N_KINDS ? names[kind] : "unknown";
}

static void
reservation_changed_cb(HrReservation *r, gpointer user_data)
{
	prep_emit(user_data, HR_PREPARE_RESERVATION_CHANGED, r, 0);
}

/*
 * An operator's evacuation or capture (the API's, not ours) owns what it
 * holds. It goes into the ledger as soon as it is sent, before the guest
 * holds anything, so that a daemon killed meanwhile finds it on restart
 * and the blocks the guest resyncs then stay the operator's.
 */
static void
note_api_request(HrPrepare *p, HrGuest *guest, HrRequest *request)
{
	if (guest == NULL || p->submitting > 0 || request->kind == HR_REQUEST_RETURN ||
	    (request->state != HR_REQUEST_SENT && request->state != HR_REQUEST_RUNNING) ||
	    prep_executor_request(p, request->id))
		return;
	hr_reservation_store_ledger_add(p->store, hr_guest_get_key(guest), 0, request->id);
}

/* the core tells us of held sets that change and of guests it forgets */
static void
core_event_cb(HrCore *core, const HrEvent *event, gpointer user_data)
{
	HrPrepare *p = user_data;
	(void)core;
	if (event->kind == HR_EVENT_HELD_CHANGED)
		hr_prepare_held_changed(p, event->guest);
	else if (event->kind == HR_EVENT_REQUEST_CHANGED)
		note_api_request(p, event->guest, event->request);
	else if (event->kind == HR_EVENT_GUEST_REMOVED)
		hr_prepare_forget_guest(p, event->guest);
	else if (event->kind == HR_EVENT_GUEST_CONNECTED &&
		 hr_guest_get_prev_key(event->guest) != NULL) {
		/* a new QEMU of the VM took the entry over: a migration's, maybe */
		g_autofree gchar *prev = hr_guest_take_prev_key(event->guest);
		prep_rekey_owner(p, prev, event->guest);
	}
}

/* the standing reserve's view of the executor (HrReserveExecutor) */
static HrReservation *
reserve_create(gpointer executor, guint64 bytes, gint node, GError **error)
{
	return hr_prepare_create(executor, bytes, node, 0, FALSE, HR_RESERVE_REQUESTER, error);
}

static gboolean
reserve_release(gpointer executor, const gchar *id, GError **error)
{
	return hr_prepare_release(executor, id, error);
}

static gboolean
reserve_consume(gpointer executor, const gchar *id, GError **error)
{
	return hr_prepare_consume(executor, id, error);
}

static guint64
reserve_pressure_returns(gpointer executor)
{
	HrPrepare *p = executor;
	GPtrArray *guests = hr_core_get_guests(p->core);
	guint64 n = 0;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		n += hr_guest_get_blocks_returned(guest, VIRTIO_HUGEROOM_RET_PRESSURE);
	}
	return n;
}

static const HrReserveExecutor reserve_executor = {
    .create = reserve_create,
    .release = reserve_release,
    .consume = reserve_consume,
    .pressure_returns = reserve_pressure_returns,
};

HrPrepare *
hr_prepare_new(HrCore *core)
{
	HrPrepare *p = g_new0(HrPrepare, 1);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *path = NULL;

	p->core = core;
	p->tick = hr_prepare_tick;
	p->config = hr_core_get_config(core);
	p->listeners = hr_listeners_new();
	path = g_build_filename(p->config->state_dir, "reservations.json", NULL);
	p->store = hr_reservation_store_new(path);
	hr_reservation_store_set_changed_func(p->store, reservation_changed_cb, p);
	hr_reservation_store_set_max(p->store, p->config->max_reservations);
	if (!hr_reservation_store_load(p->store, &error))
		g_warning("%s", error->message);
	else if (hr_reservation_store_list(p->store)->len > 0)
		g_info("%u reservations loaded from %s", hr_reservation_store_list(p->store)->len,
		       path);
	hr_planner_params_init(&p->params);
	p->runs =
	    g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)prep_run_free);
	p->gstates = prep_guest_table_new((GDestroyNotify)prep_guest_plan_state_free);
	p->ops = g_ptr_array_new();
	p->interrupted = g_ptr_array_new_with_free_func((GDestroyNotify)prep_interrupted_free);
	p->measures = g_ptr_array_new_with_free_func((GDestroyNotify)prep_measure_free);
	prep_find_interrupted(p);
	p->reserve = hr_reserve_new(p->config, p->store, &reserve_executor, p);
	p->reconcile_all = TRUE;
	p->cancellable = g_cancellable_new();
	p->tick_id = g_timeout_add(p->config->reservation_tick_ms, tick_cb, p);
	hr_core_listen(core, core_event_cb, p);
	return p;
}

void
hr_prepare_free(HrPrepare *p)
{
	if (p == NULL)
		return;
	hr_core_unlisten(p->core, core_event_cb, p);
	g_clear_handle_id(&p->tick_id, g_source_remove);
	g_clear_handle_id(&p->kick_id, g_source_remove);
	prep_reconcile_stop(p);
	g_cancellable_cancel(p->cancellable);
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		if (op->request != NULL) {
			/* the guest outlives us: stop it telling us */
			hr_request_remove_listener(op->request, prep_donate_notify, op);
			hr_request_remove_listener(op->request, prep_return_notify, op);
			prep_op_free(op);
		} else {
			/* a compaction thread: its callback frees the op */
			op->prepare = NULL;
		}
	}
	g_ptr_array_unref(p->ops);
	g_ptr_array_unref(p->interrupted);
	g_ptr_array_unref(p->measures);
	hr_snapshot_free(p->snap);
	hr_reserve_free(p->reserve);
	g_object_unref(p->cancellable);
	g_hash_table_unref(p->runs);
	g_hash_table_unref(p->gstates);
	hr_reservation_store_free(p->store);
	hr_listeners_free(p->listeners);
	g_free(p);
}

void
hr_prepare_forget_guest(HrPrepare *p, HrGuest *guest)
{
	GHashTableIter iter;
	Run *run;

	/* what its process owned outlives the entry when the VM runs on elsewhere */
	if (!hr_guest_is_connected(guest))
		prep_follow_migration(p, guest);
	g_hash_table_remove(p->gstates, &(guint64){hr_guest_get_id(guest)});
	g_hash_table_iter_init(&iter, p->runs);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&run)) {
		g_hash_table_remove(run->tried, &(guint64){hr_guest_get_id(guest)});
		g_hash_table_remove(run->strikes, &(guint64){hr_guest_get_id(guest)});
	}
}

guint
hr_prepare_n_guest_states(HrPrepare *p)
{
	return g_hash_table_size(p->gstates);
}

HrReservationStore *
hr_prepare_get_store(HrPrepare *p)
{
	return p->store;
}

const gchar *
hr_prepare_get_last_plan(HrPrepare *p, const gchar *id)
{
	Run *run = g_hash_table_lookup(p->runs, id);
	return run != NULL ? run->last_plan : NULL;
}

/* a guest's host backing the snapshot reads: a donor's stale map, if not too large */
static gboolean
snapshot_scans(HrPrepare *p, HrGuest *guest, gint64 now)
{
	GuestPlanState *gs;
	HrGuestPolicy policy;

	if (p->config->backing != HR_BACKING_SCAN ||
	    hr_guest_get_ram_size(guest) > THPMAP_SNAPSHOT_MAX_BYTES ||
	    !prep_guest_can_donate(guest))
		return FALSE;
	hr_config_guest_policy(p->config, hr_guest_get_name(guest), &policy);
	if (!policy.donor)
		return FALSE;
	gs = prep_get_gstate(p, guest);
	return !gs->scanning && (gs->map_at == 0 || now - gs->map_at >= THPMAP_MAX_AGE_US);
}

static gboolean
measuring(HrPrepare *p, guint64 guest_id)
{
	for (guint i = 0; i < p->measures->len; i++) {
		if (((Measure *)g_ptr_array_index(p->measures, i))->guest_id == guest_id)
			return TRUE;
	}
	return FALSE;
}

/* read the host and the guests the decision needs, in a thread */
static void
request_snapshot(HrPrepare *p)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	HrSnapshotRequest *request;
	gint64 now = g_get_monotonic_time();

	if (p->reading)
		return;
	request = hr_snapshot_request_new(p->config->host_root, p->epoch);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		gboolean scan = hr_guest_get_pid(guest) > 0 && snapshot_scans(p, guest, now);
		guint n_ram;
		const HrRamRange *ram = hr_guest_get_ram(guest, &n_ram);
		/* a donor's QEMU's RSS is what the pool got from it */
		if (scan || (hr_guest_get_pid(guest) > 0 &&
			     ((p->config->hold_in_pool && prep_guest_can_donate(guest)) ||
			      measuring(p, hr_guest_get_id(guest)))))
			hr_snapshot_request_add_guest(request, hr_guest_get_id(guest),
						      hr_guest_get_pid(guest), ram, n_ram, scan);
	}
	p->reading = TRUE;
	hr_snapshot_read_async(request, p->cancellable, snapshot_read_cb, p);
}

/* the guests' maps the snapshot read */
static void
snapshot_install_maps(HrPrepare *p, HrSnapshot *snap)
{
	for (guint i = 0; i < snap->guests->len; i++) {
		HrSnapshotGuest *sg = &g_array_index(snap->guests, HrSnapshotGuest, i);
		GuestPlanState *gs = g_hash_table_lookup(p->gstates, &sg->id);
		if (gs == NULL || !sg->scanned)
			continue;
		g_clear_pointer(&gs->map, hr_thpmap_free);
		gs->map_at = g_get_monotonic_time();
		gs->map = g_steal_pointer(&sg->map);
		if (gs->map == NULL)
			prep_thpmap_failed(gs, prep_find_guest(p, sg->id), sg->error);
		else
			gs->map_failed = FALSE;
	}
}

static void
snapshot_read_cb(GObject *source, GAsyncResult *result, gpointer user_data)
{
	g_autoptr(GError) error = NULL;
	HrSnapshot *snap = hr_snapshot_read_finish(result, &error);
	HrPrepare *p = user_data;
	(void)source;

	if (snap == NULL)
		return; /* cancelled: the executor is gone */
	p->reading = FALSE;
	hr_snapshot_free(p->snap);
	p->snap = snap;
	if (snap->epoch != p->epoch) {
		/* read before something we did ended: it may not show it */
		request_snapshot(p);
		return;
	}
	snapshot_install_maps(p, snap);
	if (snap->host == NULL) {
		g_warning("cannot read the host's memory state: %s", snap->host_error->message);
		return;
	}
	prep_decide(p, snap->host);
}

/*
 * What needs no snapshot runs now; a decision, once the snapshot the
 * tick asks for is in (or the one being read, which began recently).
 */
#define GONE_WALK_SLICE_US 5000

void
hr_prepare_tick(HrPrepare *p)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	gboolean work = p->measures->len > 0 || hr_reserve_wants_ticks(p->reserve);

	prep_reconcile_guests(p);
	/* a few ms a tick: a walk over 1 M holds is not one turn of the main loop */
	prep_drop_holds_walk(p, &p->gone_walk, prep_hold_gone, NULL, "their QEMU is gone",
			     g_get_monotonic_time() + GONE_WALK_SLICE_US);
	hr_reservation_store_gone_prune(p->store);
	for (guint i = 0; i < list->len && !work; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		work = r->state != HR_RESERVATION_CANCELLED && r->state != HR_RESERVATION_FAILED &&
			       r->state != HR_RESERVATION_EXPIRED
			   ? (r->state != HR_RESERVATION_CONSUMED || r->holds->len > 0)
			   : r->holds->len > 0;
	}
	if (work)
		request_snapshot(p);
}

static gboolean
tick_cb(gpointer user_data)
{
	hr_prepare_tick(user_data);
	return G_SOURCE_CONTINUE;
}

/* ---------------------------------------------------------------------- */
/* Requests from the API */

/*
 * A new reservation takes what the standing reserve holds ready at once: a
 * step of its own, and ready now when that is all it needs.
 */
static void
take_from_reserve(HrPrepare *p, HrReservation *r)
{
	guint64 moved = hr_reserve_take(p->reserve, r);
	HrReservationStep *s;
	g_autofree gchar *why = NULL;

	if (moved == 0)
		return;
	s = hr_reservation_add_step(r, HR_STEP_RESERVE, r->planned_node);
	s->gained = (gint64)moved;
	s->expect_milli = moved * 1000;
	hr_reservation_step_set_state(s, HR_STEP_DONE, "taken from the standing reserve");
	hr_reservation_set_obtained(p->store, r, r->pool_blocks);
	hr_reservation_set_state(p->store, r, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	if (r->pool_blocks < r->need_blocks) {
		hr_reservation_touch(p->store, r);
		return;
	}
	why = g_strdup_printf("%" G_GUINT64_FORMAT " 2 MiB blocks held in node %d's hugetlb pool, "
			      "taken from the standing reserve",
			      r->pool_blocks, r->planned_node);
	prep_settle(p, r, HR_RESERVATION_READY, FALSE, why);
}

HrReservation *
hr_prepare_create(HrPrepare *p, guint64 bytes, gint node, guint deadline_s, gboolean strict,
		  const gchar *requester, GError **error)
{
	gint64 deadline_at =
	    deadline_s > 0 ? g_get_real_time() + (gint64)deadline_s * G_USEC_PER_SEC : 0;
	HrReservation *r = hr_reservation_store_create(p->store, bytes, node, deadline_at, strict,
						       requester, error);
	if (r == NULL)
		return NULL;
	g_info("reservation %s: %" G_GUINT64_FORMAT " bytes on node %d, deadline %u s%s, for %s",
	       r->id, bytes, node, deadline_s, strict ? ", strict" : "",
	       requester != NULL ? requester : "(anonymous)");
	take_from_reserve(p, r);
	prep_kick(p);
	return r;
}

HrReserve *
hr_prepare_get_reserve(HrPrepare *p)
{
	return p->reserve;
}

gboolean
hr_prepare_release(HrPrepare *p, const gchar *id, GError **error)
{
	HrReservation *r = hr_reservation_store_find(p->store, id);
	g_autofree gchar *why = NULL;

	if (r == NULL) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_NOT_FOUND,
			    "no reservation %s (GET /v1/reservations lists them)", id);
		return FALSE;
	}
	switch (r->state) {
	case HR_RESERVATION_CREATED:
	case HR_RESERVATION_IN_PROGRESS:
		why = g_strdup_printf("released before it was ready, with %" G_GUINT64_FORMAT
				      " of %" G_GUINT64_FORMAT " blocks",
				      r->obtained, r->need_blocks);
		prep_settle(p, r, HR_RESERVATION_CANCELLED, r->obtained < r->need_blocks, why);
		return TRUE;
	case HR_RESERVATION_READY:
		prep_settle(p, r, HR_RESERVATION_CANCELLED, r->partial, "released");
		return TRUE;
	case HR_RESERVATION_CONSUMED:
		/* the memory is not needed any more: give the holds back now */
		prep_return_holds(p, r, G_MAXUINT, "released after use");
		return TRUE;
	default:
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
			    "reservation %s is %s already", id,
			    hr_reservation_state_to_string(r->state));
		return FALSE;
	}
}

gboolean
hr_prepare_consume(HrPrepare *p, const gchar *id, GError **error)
{
	HrReservation *r = hr_reservation_store_find(p->store, id);
	if (r == NULL) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_NOT_FOUND,
			    "no reservation %s (GET /v1/reservations lists them)", id);
		return FALSE;
	}
	if (r->state == HR_RESERVATION_READY && !prep_release_pool(p, r, error))
		return FALSE;
	return hr_reservation_set_state(p->store, r, HR_RESERVATION_CONSUMED, "consumed", error);
}
