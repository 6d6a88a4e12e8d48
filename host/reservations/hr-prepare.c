/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The executor (hr-prepare.h): its lifecycle, its listeners, the tick and the
 * snapshot it decides on, and the API's create, release and consume. What it
 * decides is in hr-prepare-drive.c, the steps it runs in hr-prepare-steps.c,
 * who may donate in hr-prepare-donors.c, the holds in hr-prepare-holds.c.
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare.h"

#include "hr-prepare-private.h"

static void
snapshot_read_cb(GObject *source, GAsyncResult *result, gpointer user_data);

static gboolean
tick_cb(gpointer user_data);

/* a table keyed by guest id (guint64 *, owned) */
GHashTable *
prep_guest_table_new(GDestroyNotify value_free)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, value_free);
}

static void
guest_plan_state_free(GuestPlanState *gs)
{
	g_clear_pointer(&gs->map, hr_thpmap_free);
	g_free(gs);
}

static void
interrupted_free(Interrupted *it)
{
	g_free(it->res_id);
	g_free(it->guest_key);
	g_free(it);
}

static void
measure_free(Measure *m)
{
	g_free(m->res_id);
	g_free(m);
}

static void
run_free(Run *run)
{
	g_hash_table_unref(run->tried);
	g_hash_table_unref(run->strikes);
	g_free(run->why_not);
	if (run->pool_cancel != NULL) {
		g_cancellable_cancel(run->pool_cancel);
		g_object_unref(run->pool_cancel);
	}
	g_free(run->last_plan);
	g_free(run);
}

void
prep_op_free(Op *op)
{
	g_free(op->res_id);
	g_free(op->guest_key);
	g_clear_pointer(&op->request, hr_request_unref);
	g_clear_pointer(&op->returning, g_array_unref);
	g_free(op);
}

Run *
prep_get_run(HrPrepare *p, HrReservation *r)
{
	Run *run = g_hash_table_lookup(p->runs, r->id);
	if (run == NULL) {
		run = g_new0(Run, 1);
		run->tried = prep_guest_table_new((GDestroyNotify)g_hash_table_unref);
		run->strikes = prep_guest_table_new(NULL);
		g_hash_table_insert(p->runs, g_strdup(r->id), run);
	}
	return run;
}

GuestPlanState *
prep_get_gstate(HrPrepare *p, HrGuest *guest)
{
	GuestPlanState *gs = g_hash_table_lookup(p->gstates, &guest->id);
	if (gs == NULL) {
		gs = g_new0(GuestPlanState, 1);
		g_hash_table_insert(p->gstates, g_memdup2(&guest->id, sizeof(guest->id)), gs);
	}
	return gs;
}

static gboolean
kick_cb(gpointer user_data)
{
	HrPrepare *p = user_data;
	p->kick_id = 0;
	hr_prepare_tick(p);
	return G_SOURCE_REMOVE;
}

/* drive again soon, from the main loop */
void
prep_kick(HrPrepare *p)
{
	if (p->kick_id == 0)
		p->kick_id = g_idle_add(kick_cb, p);
}

/* something we did changed the host: decide on nothing read before it */
void
prep_host_changed(HrPrepare *p)
{
	p->epoch++;
}

void
hr_prepare_host_changed(HrPrepare *p)
{
	prep_host_changed(p);
}

typedef struct {
	HrPrepare *prepare;
	const HrPrepareEvent *event;
} Emission;

static void
invoke(GCallback func, gpointer func_data, gpointer invoke_data)
{
	Emission *e = invoke_data;
	((HrPrepareFunc)(void (*)(void))func)(e->prepare, e->event, func_data);
}

void
prep_emit(HrPrepare *p, HrPrepareEventKind kind, HrReservation *r, gint64 duration_us)
{
	HrPrepareEvent event = {.kind = kind, .reservation = r, .duration_us = duration_us};
	Emission e = {.prepare = p, .event = &event};
	hr_listeners_emit(p->listeners, invoke, &e);
}

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
	hr_reservation_store_ledger_add(p->store, guest->key, 0, request->id);
}

/* our own requests: the events they raise while submitted are not the API's */
HrRequest *
prep_submit(HrPrepare *p, HrGuest *guest, const HrRequestParams *params, GError **error)
{
	HrRequest *request;

	p->submitting++;
	request = hr_core_submit(p->core, guest, params, error);
	p->submitting--;
	return request;
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
	else if (event->kind == HR_EVENT_GUEST_CONNECTED && event->guest->prev_key != NULL) {
		/* a new QEMU of the VM took the entry over: a migration's, maybe */
		g_autofree gchar *prev = g_steal_pointer(&event->guest->prev_key);
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
		n += guest->blocks_returned_total[VIRTIO_HUGEROOM_RET_PRESSURE];
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
	p->runs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)run_free);
	p->gstates = prep_guest_table_new((GDestroyNotify)guest_plan_state_free);
	p->ops = g_ptr_array_new();
	p->interrupted = g_ptr_array_new_with_free_func((GDestroyNotify)interrupted_free);
	p->measures = g_ptr_array_new_with_free_func((GDestroyNotify)measure_free);
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
	g_hash_table_remove(p->gstates, &guest->id);
	g_hash_table_iter_init(&iter, p->runs);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&run)) {
		g_hash_table_remove(run->tried, &guest->id);
		g_hash_table_remove(run->strikes, &guest->id);
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

/* the guest entry of @id, or NULL */
HrGuest *
prep_find_guest(HrPrepare *p, guint64 id)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (guest->id == id)
			return guest;
	}
	return NULL;
}

/* a guest's host backing the snapshot reads: a donor's stale map, if not too large */
static gboolean
snapshot_scans(HrPrepare *p, HrGuest *guest, gint64 now)
{
	GuestPlanState *gs;
	HrGuestPolicy policy;

	if (p->config->backing != HR_BACKING_SCAN || guest->ram_size > THPMAP_SNAPSHOT_MAX_BYTES ||
	    !prep_guest_can_donate(guest))
		return FALSE;
	hr_config_guest_policy(p->config, guest->name, &policy);
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
		gboolean scan = guest->pid > 0 && snapshot_scans(p, guest, now);
		/* a donor's QEMU's RSS is what the pool got from it */
		if (scan ||
		    (guest->pid > 0 && ((p->config->hold_in_pool && prep_guest_can_donate(guest)) ||
					measuring(p, guest->id))))
			hr_snapshot_request_add_guest(request, guest->id, guest->pid,
						      (const HrRamRange *)guest->ram->data,
						      guest->ram->len, scan);
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
void
hr_prepare_tick(HrPrepare *p)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	gboolean work = p->measures->len > 0 || hr_reserve_wants_ticks(p->reserve);

	prep_reconcile_guests(p);
	prep_drop_holds(p, prep_hold_gone, NULL, "their QEMU is gone");
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
