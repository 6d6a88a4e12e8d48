/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare.h"

#include <gio/gio.h>
#include <string.h>

#include "hr-compact.h"
#include "hr-json.h"
#include "hr-listeners.h"
#include "hr-pcp.h"
#include "hr-peer.h"
#include "hr-snapshot.h"
#include "hr-thpmap.h"

#define BLOCK_PAGES 512
#define THPMAP_MAX_AGE_US (10 * G_USEC_PER_SEC)
#define POOL_RETRY_US G_USEC_PER_SEC
#define FLOOR_SLACK_PAGES BLOCK_PAGES
#define POOL_MAX_EMPTY_GROWS 3
#define MAPS_WAIT_US (5 * G_USEC_PER_SEC)
/*
 * Guests up to this size have a stale host THP map read again with the
 * snapshot a decision waits for; larger ones (about 1.5 us per 2 MiB
 * block) in a thread of their own, their previous map serving meanwhile.
 */
#define THPMAP_SNAPSHOT_MAX_BYTES (G_GUINT64_CONSTANT(8) << 30)

/* What the executor remembers of a guest across reservations. */
typedef struct {
	guint failures;
	gint64 next_allowed_ms;
	HrThpMap *map;
	gint64 map_at; /* monotonic us */
	gboolean map_warned;
	gboolean map_failed; /* the last scan failed: backing unknown */
	gboolean scanning;
	guint64 reconciled_gen; /* HrGuest.held_gen its held set was last reconciled at */
} GuestPlanState;

/* A donation a previous daemon left running: what it freed comes in unasked. */
typedef struct {
	gchar *res_id;
	guint step_index;
	guint64 request_id;
	gchar *guest_key;
	guint64 left; /* blocks it may still account for */
} Interrupted;

typedef struct {
	HrPrepare *prepare; /* valid unless the scan was cancelled */
	guint64 guest_id;
} ScanCtx;

/* A donation that ended: what the host got back, the next snapshot tells. */
typedef struct {
	gchar *res_id;
	guint step_index;
	guint64 guest_id;
	gint node;
	gboolean pool_mode;
	guint held;
	gint64 blocks_before;
	gint64 rss_before_kb;
} Measure;

/* The work in hand for one live reservation; not persisted. */
typedef struct {
	GHashTable *tried; /* guest id -> set of gpas (guint64 *) offered once */
	gboolean compacted;
	gboolean compact_after;
	gboolean free_recorded;
	guint in_flight;
	guint plans;
	guint64 held_total; /* blocks guests handed over for it */
	guint64 donate_cap; /* without the pool: ask no more after twice the first shortfall */
	gchar *last_plan;
	/* holding in the node's hugetlb pool (hr_pool_grow()) */
	gboolean pool_mode;
	gboolean pool_decided;
	gboolean pool_busy;	   /* a grow runs */
	guint64 pool_asked;	   /* by the grow that runs */
	gboolean pool_stuck;	   /* the last grow got less than asked: wait for a donation */
	gint64 pool_retry_at;	   /* monotonic us: or try again then (compaction defers) */
	guint pool_empty_grows;	   /* grows in a row that got nothing */
	GCancellable *pool_cancel; /* stops the grow between chunks when it ends */
	guint pool_step;	   /* 1 + index of the step grows add to; 0: none */
	guint pool_grows;	   /* grows in it */
	GHashTable *strikes;	   /* guest id -> donations that freed little host memory */
	gchar *why_not;		   /* why the guests that were not asked were not */
	gint64 maps_wait_until;	   /* monotonic us: plan without the maps still being read */
} Run;

/* One compaction or evacuation in flight. */
typedef struct {
	HrPrepare *prepare; /* NULL once the executor is gone */
	gchar *res_id;
	guint step_index;
	guint64 guest_id;
	gchar *guest_key; /* DONATE: the holds' owner */
	HrRequest *request;
	gint node;
	gint64 started; /* monotonic us */
	gint64 blocks_before;
	gint64 rss_before_kb; /* DONATE: the donor's QEMU, -1 unknown */
	gboolean submitting;
	gboolean ended_early;
	GArray *returning; /* a RETURN: the gpas it gives back (guint64) */
} Op;

struct _HrPrepare {
	HrCore *core;
	guint submitting; /* inside submit(): our requests' events */
	const HrConfig *config;
	HrReservationStore *store;
	HrListeners *listeners; /* HrPrepareFunc */
	HrPlannerParams params;
	GHashTable *runs;	 /* reservation id -> Run */
	GHashTable *gstates;	 /* guest id -> GuestPlanState */
	GPtrArray *ops;		 /* Op in flight */
	GPtrArray *interrupted;	 /* Interrupted */
	GHashTable *guest_index; /* HrGuest.key -> HrGuest, while a pass over all holds runs */
	gboolean reconcile_all;	 /* a held set changed: reconcile at the next tick */
	GCancellable *cancellable;
	guint tick_id;
	guint kick_id;
	/*
	 * Decisions are made on a snapshot of the host and of the guests'
	 * host backing (hr-snapshot), read in a worker thread, one at a time,
	 * so that no tick reads /proc or pagemap on the main loop. Only the
	 * main loop touches these fields; the thread gets a copy of what it
	 * reads from and hands back a new snapshot, so no lock is needed.
	 * @epoch counts what the executor did to the host (an operation that
	 * ended, a pool given back): a snapshot read from an older epoch may
	 * predate it and is read again rather than decided on.
	 */
	HrSnapshot *snap; /* the one being decided on, else the latest; or NULL */
	guint64 epoch;
	gboolean reading;    /* a snapshot read runs */
	GPtrArray *measures; /* Measure: donations whose gain the next snapshot measures */
};

/* a table keyed by guest id (guint64 *, owned) */
static GHashTable *
guest_table_new(GDestroyNotify value_free)
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

static void
op_free(Op *op)
{
	g_free(op->res_id);
	g_free(op->guest_key);
	g_clear_pointer(&op->request, hr_request_unref);
	g_clear_pointer(&op->returning, g_array_unref);
	g_free(op);
}

static Run *
get_run(HrPrepare *p, HrReservation *r)
{
	Run *run = g_hash_table_lookup(p->runs, r->id);
	if (run == NULL) {
		run = g_new0(Run, 1);
		run->tried = guest_table_new((GDestroyNotify)g_hash_table_unref);
		run->strikes = guest_table_new(NULL);
		g_hash_table_insert(p->runs, g_strdup(r->id), run);
	}
	return run;
}

static GuestPlanState *
get_gstate(HrPrepare *p, HrGuest *guest)
{
	GuestPlanState *gs = g_hash_table_lookup(p->gstates, &guest->id);
	if (gs == NULL) {
		gs = g_new0(GuestPlanState, 1);
		g_hash_table_insert(p->gstates, g_memdup2(&guest->id, sizeof(guest->id)), gs);
	}
	return gs;
}

static gboolean
tick_cb(gpointer user_data);

static gboolean
kick_cb(gpointer user_data)
{
	HrPrepare *p = user_data;
	p->kick_id = 0;
	hr_prepare_tick(p);
	return G_SOURCE_REMOVE;
}

/* drive again soon, from the main loop */
static void
kick(HrPrepare *p)
{
	if (p->kick_id == 0)
		p->kick_id = g_idle_add(kick_cb, p);
}

/* something we did changed the host: decide on nothing read before it */
static void
host_changed(HrPrepare *p)
{
	p->epoch++;
}

void
hr_prepare_host_changed(HrPrepare *p)
{
	host_changed(p);
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

static void
emit(HrPrepare *p, HrPrepareEventKind kind, HrReservation *r, gint64 duration_us)
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
	emit(user_data, HR_PREPARE_RESERVATION_CHANGED, r, 0);
}

static gboolean
executor_request(HrPrepare *p, guint64 request_id);

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
	    executor_request(p, request->id))
		return;
	hr_reservation_store_ledger_add(p->store, guest->key, 0, request->id);
}

/* our own requests: the events they raise while submitted are not the API's */
static HrRequest *
submit(HrPrepare *p, HrGuest *guest, const HrRequestParams *params, GError **error)
{
	HrRequest *request;

	p->submitting++;
	request = hr_core_submit(p->core, guest, params, error);
	p->submitting--;
	return request;
}

static void
rekey_owner(HrPrepare *p, const gchar *from, HrGuest *to);
static gboolean
follow_migration(HrPrepare *p, HrGuest *gone);

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
		rekey_owner(p, prev, event->guest);
	}
}

static void
find_interrupted(HrPrepare *p);
static void
reconcile_guests(HrPrepare *p);

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
	p->gstates = guest_table_new((GDestroyNotify)guest_plan_state_free);
	p->ops = g_ptr_array_new();
	p->interrupted = g_ptr_array_new_with_free_func((GDestroyNotify)interrupted_free);
	p->measures = g_ptr_array_new_with_free_func((GDestroyNotify)measure_free);
	find_interrupted(p);
	p->reconcile_all = TRUE;
	p->cancellable = g_cancellable_new();
	p->tick_id = g_timeout_add(p->config->reservation_tick_ms, tick_cb, p);
	hr_core_listen(core, core_event_cb, p);
	return p;
}

static void
donate_notify(HrRequest *request, gpointer user_data);
static void
return_notify(HrRequest *request, gpointer user_data);

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
			hr_request_remove_listener(op->request, donate_notify, op);
			hr_request_remove_listener(op->request, return_notify, op);
			op_free(op);
		} else {
			/* a compaction thread: its callback frees the op */
			op->prepare = NULL;
		}
	}
	g_ptr_array_unref(p->ops);
	g_ptr_array_unref(p->interrupted);
	g_ptr_array_unref(p->measures);
	hr_snapshot_free(p->snap);
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
		follow_migration(p, guest);
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

/* ---------------------------------------------------------------------- */
/* Host and guests as the planner sees them */

/* free 2 MiB blocks above the high watermark, as the planner's FREE step counts */
static guint64
node_available(const HrNodeState *ns)
{
	guint64 headroom = ns->free_pages > ns->wmark_high ? ns->free_pages - ns->wmark_high : 0;
	return MIN(ns->free_blocks, headroom / BLOCK_PAGES);
}

static HrGuest *
find_guest(HrPrepare *p, guint64 id);

static gboolean
guest_can_donate(HrGuest *guest)
{
	guint64 need = (1 << VIRTIO_HUGEROOM_F_EVACUATE) | (1 << VIRTIO_HUGEROOM_F_HOLD);
	return hr_guest_is_connected(guest) && guest->ready && guest->status != NULL &&
	       guest->have_state && guest->state.driver_ok && !guest->state.discard_disabled &&
	       (guest->state.guest_features & need) == need;
}

typedef struct {
	HrPlanInput input;
	GArray *nodes;	      /* HrPlanNode */
	GArray *guests;	      /* HrPlanGuest */
	GPtrArray *refs;      /* HrGuest *, parallel to guests */
	GPtrArray *cand_bufs; /* HrPlanCandidate arrays to free */
	guint maps_pending;   /* donors whose host backing is being scanned */
} Input;

static void
input_free(Input *in)
{
	g_array_unref(in->nodes);
	g_array_unref(in->guests);
	g_ptr_array_unref(in->refs);
	g_ptr_array_unref(in->cand_bufs);
	g_free(in);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Input, input_free)

static guint8
candidate_backing(HrPrepare *p, HrGuest *guest, GuestPlanState *gs, guint64 gpa)
{
	HrThpBlock block = HR_THP_BLOCK_ABSENT;

	switch (p->config->backing) {
	case HR_BACKING_THP:
		return HR_THP_BLOCK_THP;
	case HR_BACKING_SMALL:
		return HR_THP_BLOCK_SMALL;
	case HR_BACKING_SCAN:
		break;
	}
	if (gs->map == NULL) {
		/*
		 * Not scanned yet: worth nothing until it is (the scan's end
		 * kicks a re-plan). Unreadable (no CAP_SYS_ADMIN): 4 KiB pages.
		 */
		return gs->map_failed ? HR_THP_BLOCK_SMALL : HR_THP_BLOCK_ABSENT;
	}
	(void)guest;
	if (!hr_thpmap_lookup(gs->map, gpa, &block))
		return HR_THP_BLOCK_ABSENT;
	return block;
}

static void
thpmap_failed(GuestPlanState *gs, HrGuest *guest, const GError *error)
{
	gs->map_failed = TRUE;
	if (!gs->map_warned) {
		gs->map_warned = TRUE;
		g_warning("%s: cannot read the host backing of its RAM (%s); its blocks count as "
			  "4 KiB-backed",
			  guest != NULL ? guest->name : "a guest", error->message);
	}
}

static void
thpmap_scanned_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	ScanCtx *ctx = user_data;
	g_autoptr(GError) error = NULL;
	HrThpMap *map = hr_thpmap_scan_finish(res, &error);
	GuestPlanState *gs;
	(void)source;

	if (map == NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
		/* the executor is gone */
		g_free(ctx);
		return;
	}
	gs = g_hash_table_lookup(ctx->prepare->gstates, &ctx->guest_id);
	if (gs != NULL) {
		gs->scanning = FALSE;
		gs->map_at = g_get_monotonic_time();
		if (map != NULL) {
			g_clear_pointer(&gs->map, hr_thpmap_free);
			gs->map = g_steal_pointer(&map);
			gs->map_failed = FALSE;
		} else {
			thpmap_failed(gs, find_guest(ctx->prepare, ctx->guest_id), error);
		}
		kick(ctx->prepare);
	}
	g_clear_pointer(&map, hr_thpmap_free);
	g_free(ctx);
}

static void
refresh_thpmap(HrPrepare *p, HrGuest *guest, GuestPlanState *gs)
{
	gint64 now = g_get_monotonic_time();
	ScanCtx *ctx;

	if (p->config->backing != HR_BACKING_SCAN || guest->pid <= 0 || gs->scanning)
		return;
	if (gs->map_at != 0 && now - gs->map_at < THPMAP_MAX_AGE_US)
		return;
	/*
	 * Not in the snapshot (a large guest, one that came since, POST
	 * /v1/plan): the previous map serves until the new one is in.
	 */
	ctx = g_new0(ScanCtx, 1);
	ctx->prepare = p;
	ctx->guest_id = guest->id;
	gs->scanning = TRUE;
	hr_thpmap_scan_async(guest->pid, (const HrRamRange *)guest->ram->data, guest->ram->len,
			     p->cancellable, thpmap_scanned_cb, ctx);
}

/* why the planner may get nothing from a donor, for the reason a reservation ends with */
static void
why_not_donor(GString *why, HrGuest *guest, GuestPlanState *gs, const HrPlanGuest *pg,
	      gint64 now_ms)
{
	guint thp = 0;

	if (hr_planner_guest_deferred(pg, now_ms)) {
		g_string_append_printf(why,
				       "; %s: deferred for %" G_GINT64_FORMAT " ms after %u failed "
				       "evacuations",
				       guest->name, pg->next_allowed_ms - now_ms, pg->failures);
		return;
	}
	if (pg->free_pages < pg->floor_pages + BLOCK_PAGES) {
		g_string_append_printf(why,
				       "; %s: at its floor (%" G_GUINT64_FORMAT
				       " MiB free, floor %" G_GUINT64_FORMAT " MiB)",
				       guest->name, pg->free_pages / 256,
				       (pg->floor_pages - FLOOR_SLACK_PAGES) / 256);
		return;
	}
	if (pg->held_blocks >= pg->budget_blocks) {
		g_string_append_printf(why, "; %s: holds its budget of %u blocks already",
				       guest->name, pg->budget_blocks);
		return;
	}
	for (guint c = 0; c < pg->n_candidates; c++)
		thp += pg->candidates[c].backing == HR_THP_BLOCK_THP && !pg->candidates[c].tried;
	if (thp == 0)
		g_string_append_printf(why, "; %s: %s", guest->name,
				       gs->map == NULL && !gs->map_failed
					   ? "its host backing is being scanned"
					   : "no free memory inside host THP-backed blocks");
}

static Input *
build_input(HrPrepare *p, const HrHostState *host, HrReservation *r, Run *run, gboolean guests_too)
{
	Input *in = g_new0(Input, 1);
	GPtrArray *guests = hr_core_get_guests(p->core);
	guint first_node = 0;
	GString *why;

	in->nodes = g_array_new(FALSE, TRUE, sizeof(HrPlanNode));
	in->guests = g_array_new(FALSE, TRUE, sizeof(HrPlanGuest));
	in->refs = g_ptr_array_new();
	in->cand_bufs = g_ptr_array_new_with_free_func(g_free);
	in->input.now_ms = g_get_monotonic_time() / 1000;

	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		HrPlanNode pn = {0};
		guint64 promised = hr_reservation_store_promised(p->store, ns->node, r);
		hr_plan_node_from_state(&pn, ns);
		/* what others were promised is not ours to count */
		pn.free_blocks -= MIN(pn.free_blocks, promised);
		pn.free_pages -= MIN(pn.free_pages, promised * BLOCK_PAGES);
		pn.compacted = run != NULL && run->compacted;
		if (run != NULL && run->pool_mode) {
			/* free memory goes into the pool: the planner plans donations only */
			pn.free_blocks = 0;
			pn.free_pages = MIN(pn.free_pages, pn.wmark_high);
			pn.compacted = TRUE;
		}
		if (n == 0)
			first_node = ns->node;
		g_array_append_val(in->nodes, pn);
	}
	why = g_string_new(NULL);

	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		GuestPlanState *gs;
		HrGuestPolicy policy;
		HrPlanGuest pg = {0};
		HrPlanCandidate *cands;
		GHashTable *tried = NULL;
		guint n_ranged_max, n_named = 0;

		if (!guests_too)
			continue;
		if (!guest_can_donate(guest)) {
			if (hr_guest_is_connected(guest))
				g_string_append_printf(
				    why,
				    "; %s: cannot donate (driver not ready, "
				    "no evacuate/hold feature or discard disabled)",
				    guest->name);
			continue;
		}
		if (run != NULL &&
		    GPOINTER_TO_UINT(g_hash_table_lookup(run->strikes, &guest->id)) >= 2) {
			g_string_append_printf(why, "; %s: its donations freed little host memory",
					       guest->name);
			continue;
		}
		gs = get_gstate(p, guest);
		hr_config_guest_policy(p->config, guest->name, &policy);
		if (!policy.donor) {
			g_string_append_printf(why, "; %s: not a donor (policy)", guest->name);
		} else {
			refresh_thpmap(p, guest, gs);
			/* not known yet: wait for the scan rather than give up on it */
			if (gs->map == NULL && gs->scanning)
				in->maps_pending++;
		}
		if (run != NULL)
			tried = g_hash_table_lookup(run->tried, &guest->id);
		pg.id = guest->id;
		/* the node most of its host THPs are on (else the first node) */
		pg.node = gs->map != NULL && gs->map->thp_node >= 0 ? (guint)gs->map->thp_node
								    : first_node;
		pg.donor = policy.donor;
		/*
		 * The status may predate blocks the guest handed over since: each
		 * one took 512 pages of its free memory (its own free pages and
		 * the free pages its used pages moved to).
		 */
		pg.free_pages = guest->status->mem_free_pages;
		if (g_hash_table_size(guest->held) > guest->status->held_blocks)
			pg.free_pages -=
			    MIN(pg.free_pages, (guint64)(g_hash_table_size(guest->held) -
							 guest->status->held_blocks) *
						   BLOCK_PAGES);
		/*
		 * A block of slack above the floor: the guest allocates on its
		 * own between its report and the last hold.
		 */
		pg.floor_pages = policy.floor_mb * 256 + FLOOR_SLACK_PAGES;
		pg.held_blocks = g_hash_table_size(guest->held);
		pg.budget_blocks = policy.budget_blocks > 0
				       ? policy.budget_blocks
				       : (guint)(guest->ram_size / HR_PLAN_BLOCK_BYTES / 2);
		pg.failures = gs->failures;
		pg.next_allowed_ms = gs->next_allowed_ms;
		/*
		 * Ranged candidates are all alike: no more than the plan could
		 * take from this guest (its budget, the reservation's need), not
		 * one per THP-backed block (32768 for a 64 GiB guest, every tick).
		 */
		n_ranged_max = policy.donor && gs->map != NULL ? (guint)gs->map->n_thp : 0;
		n_ranged_max =
		    MIN(n_ranged_max,
			pg.budget_blocks > pg.held_blocks ? pg.budget_blocks - pg.held_blocks : 0);
		if (r != NULL)
			n_ranged_max =
			    (guint)MIN((guint64)n_ranged_max,
				       r->need_blocks - MIN(r->need_blocks, r->pool_blocks));
		cands =
		    g_new0(HrPlanCandidate, MAX(guest->status->nr_candidates + n_ranged_max, 1));
		for (guint c = 0; c < guest->status->nr_candidates; c++) {
			const HrCandidate *hc = &guest->status->candidates[c];
			cands[c].gpa = hc->gpa;
			cands[c].free_pages = hc->free_pages;
			cands[c].backing = policy.donor ? candidate_backing(p, guest, gs, hc->gpa)
							: HR_THP_BLOCK_ABSENT;
			cands[c].tried = tried != NULL && g_hash_table_contains(tried, &hc->gpa);
			/* a block the guest holds already is not a candidate any more */
			if (g_hash_table_contains(guest->held, &hc->gpa))
				cands[c].tried = TRUE;
			n_named += cands[c].backing == HR_THP_BLOCK_THP;
		}
		pg.n_candidates = guest->status->nr_candidates;
		/* the backed blocks its report does not name, which it picks itself */
		if (n_ranged_max > 0 && p->config->backing == HR_BACKING_SCAN) {
			pg.n_candidates += hr_plan_ranged_candidates(
			    cands + pg.n_candidates, n_ranged_max, gs->map, pg.free_pages,
			    pg.held_blocks, n_named);
			hr_planner_sort_candidates(cands, pg.n_candidates);
		}
		pg.candidates = cands;
		g_ptr_array_add(in->cand_bufs, cands);
		if (policy.donor)
			why_not_donor(why, guest, gs, &pg, in->input.now_ms);
		g_array_append_val(in->guests, pg);
		g_ptr_array_add(in->refs, guest);
	}
	if (run != NULL) {
		g_free(run->why_not);
		run->why_not = why->len > 2 ? g_strdup(why->str + 2) : NULL;
	}
	g_string_free(why, TRUE);
	in->input.nodes = (HrPlanNode *)in->nodes->data;
	in->input.n_nodes = in->nodes->len;
	in->input.guests = (HrPlanGuest *)in->guests->data;
	in->input.n_guests = in->guests->len;
	in->input.now_ms = g_get_monotonic_time() / 1000;
	return in;
}

static HrGuest *
input_guest(Input *in, const HrPlanStep *step)
{
	if (step->guest >= in->refs->len)
		return NULL;
	return g_ptr_array_index(in->refs, step->guest);
}

static void
plan_add_json_named(const HrPlan *plan, Input *in, JsonBuilder *b)
{
	json_builder_begin_object(b);
	hr_json_add_int(b, "node", plan->node);
	hr_json_add_int(b, "need_blocks", plan->need_blocks);
	hr_json_add_int(b, "gain_milli", plan->gain_milli);
	hr_json_add_int(b, "cost_pages", plan->cost_pages);
	hr_json_add_int(b, "est_ms", plan->est_ms);
	json_builder_set_member_name(b, "complete");
	json_builder_add_boolean_value(b, plan->complete);
	json_builder_set_member_name(b, "summary");
	json_builder_add_string_value(b, plan->summary != NULL ? plan->summary : "");
	hr_json_add_int(b, "guests_considered", plan->guests_considered);
	hr_json_add_int(b, "guests_deferred", plan->guests_deferred);
	json_builder_set_member_name(b, "steps");
	json_builder_begin_array(b);
	for (guint i = 0; i < plan->steps->len; i++) {
		const HrPlanStep *s = g_ptr_array_index(plan->steps, i);
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "kind");
		json_builder_add_string_value(b, hr_plan_step_kind_to_string(s->kind));
		hr_json_add_int(b, "node", s->node);
		if (s->kind == HR_PLAN_STEP_DONATE) {
			HrGuest *guest = in != NULL ? input_guest(in, s) : NULL;
			hr_json_add_int(b, "guest_id", s->guest_id);
			json_builder_set_member_name(b, "guest");
			if (guest != NULL)
				json_builder_add_string_value(b, guest->name);
			else
				json_builder_add_null_value(b);
			hr_json_add_int(b, "blocks", s->picks->len);
			hr_json_add_int(b, "thp", s->n_thp);
			hr_json_add_int(b, "small", s->n_small);
		} else {
			hr_json_add_int(b, "blocks", s->blocks);
		}
		if (s->kind == HR_PLAN_STEP_COMPACT) {
			json_builder_set_member_name(b, "after_donations");
			json_builder_add_boolean_value(b, s->after_donations);
		}
		hr_json_add_int(b, "gain_milli", s->gain_milli);
		hr_json_add_int(b, "cost_pages", s->cost_pages);
		hr_json_add_int(b, "est_ms", s->est_ms);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
}

void
hr_plan_add_json(const HrPlan *plan, JsonBuilder *b)
{
	plan_add_json_named(plan, NULL, b);
}

JsonNode *
hr_prepare_plan_json(HrPrepare *p, const HrHostState *host, const HrPlanRequest *request)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(Input) in = NULL;
	g_autoptr(HrPlan) plan = NULL;
	gint64 t0, t1, t2;

	t0 = g_get_monotonic_time();
	in = build_input(p, host, NULL, NULL, TRUE);
	t1 = g_get_monotonic_time();
	plan = hr_planner_plan(request, &in->input, &p->params);
	t2 = g_get_monotonic_time();
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "plan");
	plan_add_json_named(plan, in, b);
	hr_json_add_int(b, "guests", in->input.n_guests);
	hr_json_add_int(b, "input_us", t1 - t0);
	hr_json_add_int(b, "decision_us", t2 - t1);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

/* ---------------------------------------------------------------------- */
/* Giving holds back */

static HrGuest *
find_guest(HrPrepare *p, guint64 id)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (guest->id == id)
			return guest;
	}
	return NULL;
}

static void
guest_index_begin(HrPrepare *p);
static void
guest_index_end(HrPrepare *p);

/*
 * The guest that holds @h: the one bound to the same QEMU process. A hold
 * from a version 1 state file names its guest by UUID only: a guest with
 * that UUID known adopts it.
 */
static HrGuest *
find_hold_guest(HrPrepare *p, HrReservationHold *h)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	if (p->guest_index != NULL && h->guest_key != NULL)
		return g_hash_table_lookup(p->guest_index, h->guest_key);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (h->guest_key != NULL
			? g_strcmp0(guest->key, h->guest_key) == 0
			: guest->uuid_known && h->guest_uuid != NULL &&
			      g_ascii_strcasecmp(guest->uuid, h->guest_uuid) == 0) {
			if (h->guest_key == NULL)
				h->guest_key = g_strdup(guest->key);
			return guest;
		}
	}
	return NULL;
}

/*
 * The QEMU process that held @h is gone (killed, or the VM shut down):
 * the block went back to the host with its memory, nobody is to return it.
 */
static gboolean
hold_process_gone(HrGuest *guest, HrReservationHold *h)
{
	if (guest != NULL)
		return !hr_guest_is_connected(guest) && !hr_peer_is_alive(guest->peer);
	/* a version 1 hold names no process: it waits for its guest */
	return h->guest_key != NULL && !hr_peer_key_alive(h->guest_key);
}

/*
 * @h's QEMU is gone but less than migration_grace_s ago (counted from when
 * a daemon first saw it gone: the store keeps that across restarts): the VM may run on in a migration's
 * destination that has not connected yet (it connects late, or the daemon
 * restarted mid-migration), whose resync will bring the block. Until then
 * the hold is the reservation's still, but nobody can be asked to RETURN
 * it, and its memory is not in any running QEMU (the host counts it free
 * already): it is neither returned nor dropped, nor given return room.
 */
static gboolean
hold_in_grace(HrPrepare *p, HrGuest *guest, HrReservationHold *h)
{
	if (h->guest_key == NULL || !hold_process_gone(guest, h))
		return FALSE;
	return hr_reservation_store_gone_for(p->store, h->guest_key) <
	       (gint64)p->config->migration_grace_s * G_USEC_PER_SEC;
}

/* a RETURN that did not give everything back: the rest are still holds */
static void
return_notify(HrRequest *request, gpointer user_data)
{
	Op *op = user_data;
	HrPrepare *p = op->prepare;
	HrReservation *r;
	HrGuest *guest;
	g_autoptr(GHashTable) back = NULL;
	guint kept = 0;

	if (p == NULL || !hr_request_state_is_final(request->state))
		return;
	hr_request_remove_listener(request, return_notify, op);
	if (op->submitting) {
		op->ended_early = TRUE;
		return;
	}
	host_changed(p);
	r = hr_reservation_store_find(p->store, op->res_id);
	guest = find_guest(p, op->guest_id);
	back = g_hash_table_new(g_int64_hash, g_int64_equal);
	for (guint i = 0; request->blocks != NULL && i < request->blocks->len; i++)
		g_hash_table_add(back, &g_array_index(request->blocks, guint64, i));
	for (guint i = 0; r != NULL && guest != NULL && i < op->returning->len; i++) {
		guint64 *gpa = &g_array_index(op->returning, guint64, i);
		if (g_hash_table_contains(back, gpa) || !g_hash_table_contains(guest->held, gpa))
			continue;
		hr_reservation_add_hold(r, guest->key, guest->name, *gpa);
		kept++;
	}
	if (kept > 0) {
		r->blocks_returned -= MIN(r->blocks_returned, kept);
		g_message("reservation %s: %s kept %u blocks its RETURN ended %s without; "
			  "trying again later",
			  r->id, guest->name, kept, hr_request_state_to_string(request->state));
		hr_reservation_touch(p->store, r);
	}
	g_ptr_array_remove(p->ops, op);
	op_free(op);
}

/*
 * RETURN up to @max of @r's holds, oldest first, to guests that are
 * connected now; holds of a guest that no longer holds the block (it took
 * it back under pressure, or its QEMU restarted) are dropped. Returns how
 * many were sent back.
 */
static guint
return_holds(HrPrepare *p, HrReservation *r, guint max, const gchar *why)
{
	g_autoptr(GHashTable) per_guest = guest_table_new((GDestroyNotify)g_array_unref);
	GPtrArray *keep = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_hold_free);
	GHashTableIter iter;
	gpointer key, value;
	guint sent = 0, dropped = 0;

	for (guint i = 0; i < r->holds->len; i++) {
		HrReservationHold *h = g_ptr_array_index(r->holds, i);
		HrGuest *guest = find_hold_guest(p, h);
		GArray *gpas;

		g_ptr_array_index(r->holds, i) = NULL;
		if (hold_in_grace(p, guest, h)) {
			g_ptr_array_add(keep, h);
			continue;
		}
		if ((guest != NULL && guest->ready &&
		     !g_hash_table_contains(guest->held, &h->gpa)) ||
		    hold_process_gone(guest, h)) {
			dropped++;
			hr_reservation_hold_free(h);
			continue;
		}
		if (sent >= max || guest == NULL || !hr_guest_is_connected(guest) ||
		    !guest->ready) {
			g_ptr_array_add(keep, h);
			continue;
		}
		gpas = g_hash_table_lookup(per_guest, &guest->id);
		if (gpas == NULL) {
			gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
			g_hash_table_insert(per_guest, g_memdup2(&guest->id, sizeof(guest->id)),
					    gpas);
		}
		g_array_append_val(gpas, h->gpa);
		sent++;
		hr_reservation_hold_free(h);
	}
	g_ptr_array_set_free_func(r->holds, NULL);
	g_ptr_array_unref(r->holds);
	r->holds = keep;

	g_hash_table_iter_init(&iter, per_guest);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		HrGuest *guest = find_guest(p, *(guint64 *)key);
		GArray *gpas = value;
		for (guint off = 0; off < gpas->len; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
			g_autoptr(GError) error = NULL;
			HrRequestParams params = {0};
			HrRequest *request;
			Op *op = g_new0(Op, 1);

			params.kind = HR_REQUEST_RETURN;
			params.gpas = &g_array_index(gpas, guint64, off);
			params.nr_gpas = MIN(gpas->len - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
			params.notify = return_notify;
			params.notify_data = op;
			op->prepare = p;
			op->res_id = g_strdup(r->id);
			op->guest_id = guest->id;
			op->returning = g_array_new(FALSE, FALSE, sizeof(guint64));
			g_array_append_vals(op->returning, params.gpas, params.nr_gpas);
			op->submitting = TRUE;
			request = submit(p, guest, &params, &error);
			op->submitting = FALSE;
			if (request == NULL) {
				/* they stay holds: the next tick tries again */
				for (guint i = 0; i < params.nr_gpas; i++)
					hr_reservation_add_hold(r, guest->key, guest->name,
								params.gpas[i]);
				sent -= params.nr_gpas;
				g_warning("reservation %s: cannot return %u blocks to %s: %s",
					  r->id, params.nr_gpas, guest->name, error->message);
				op_free(op);
				continue;
			}
			op->request = hr_request_ref(request);
			g_ptr_array_add(p->ops, op);
			if (op->ended_early)
				return_notify(request, op);
		}
		g_info("reservation %s: returning %u blocks to %s (%s)", r->id, gpas->len,
		       guest->name, why);
	}
	r->blocks_returned += sent;
	if (sent > 0 || dropped > 0)
		hr_reservation_touch(p->store, r);
	return sent;
}

/* consumed reservations: holds go back once a node has room again, oldest first */
static void
return_by_high_mark(HrPrepare *p, const HrHostState *host)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	guint64 mark_pages = p->config->return_high_mark_mb * 256;
	g_autoptr(GPtrArray) holds = g_ptr_array_new();
	g_autoptr(GHashTable) count = g_hash_table_new(g_direct_hash, g_direct_equal);
	guint64 room = 0;

	if (mark_pages == 0)
		return;
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		if (ns->free_pages > mark_pages)
			room += (ns->free_pages - mark_pages) / BLOCK_PAGES;
	}
	if (room == 0)
		return;
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		if (r->state != HR_RESERVATION_CONSUMED)
			continue;
		guest_index_begin(p);
		for (guint h = 0; h < r->holds->len; h++) {
			HrReservationHold *hold = g_ptr_array_index(r->holds, h);
			if (!hold_in_grace(p, find_hold_guest(p, hold), hold))
				g_ptr_array_add(holds, r);
		}
		guest_index_end(p);
	}
	if (holds->len == 0)
		return;
	/* per reservation holds are oldest first; across them, oldest reservation first */
	for (guint i = 0; i < holds->len && i < room; i++) {
		gpointer r = g_ptr_array_index(holds, i);
		g_hash_table_insert(
		    count, r,
		    GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(count, r)) + 1));
	}
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint n = GPOINTER_TO_UINT(g_hash_table_lookup(count, r));
		if (n > 0)
			return_holds(p, r, n, "the host has room again");
	}
}

/* ---------------------------------------------------------------------- */
/* Steps */

/* the free 2 MiB blocks of @node in the snapshot decided on */
static gint64
node_free_blocks(HrPrepare *p, gint node)
{
	const HrNodeState *ns;
	if (node < 0 || p->snap == NULL || p->snap->host == NULL)
		return 0;
	ns = hr_host_state_get_node(p->snap->host, node);
	return ns != NULL ? (gint64)ns->free_blocks : 0;
}

/* the resident memory of a guest's QEMU in the snapshot decided on, -1 unknown */
static gint64
guest_rss_kb(HrPrepare *p, guint64 guest_id)
{
	HrSnapshotGuest *sg = p->snap != NULL ? hr_snapshot_find_guest(p->snap, guest_id) : NULL;
	return sg != NULL ? sg->rss_kb : -1;
}

static void
set_step_state(HrReservationStep *s, const gchar *state, const gchar *detail)
{
	g_free(s->state);
	s->state = g_strdup(state);
	g_free(s->detail);
	s->detail = g_strdup(detail);
}

static void
op_end(HrPrepare *p, Op *op)
{
	Run *run = g_hash_table_lookup(p->runs, op->res_id);
	if (run != NULL && run->in_flight > 0)
		run->in_flight--;
	g_ptr_array_remove(p->ops, op);
	op_free(op);
	host_changed(p);
	kick(p);
}

static void
compact_done_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	Op *op = user_data;
	HrPrepare *p = op->prepare;
	g_autoptr(GError) error = NULL;
	g_autofree HrCompactResult *result = hr_compact_node_finish(res, &error);
	HrReservation *r;
	(void)source;

	if (p == NULL) {
		op_free(op);
		return;
	}
	r = hr_reservation_store_find(p->store, op->res_id);
	if (r != NULL && op->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, op->step_index);
		s->elapsed_ms = (g_get_monotonic_time() - op->started) / 1000;
		if (result == NULL) {
			set_step_state(s, "failed", error->message);
		} else {
			g_autofree gchar *detail = NULL;
			s->gained = hr_compact_result_blocks_gained(result);
			s->pages_migrated = result->migrated;
			s->pages_scanned = result->migrate_scanned + result->free_scanned;
			s->elapsed_ms = result->wall_us / 1000;
			detail = g_strdup_printf(
			    "node %u: %" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT
			    " free 2 MiB blocks, unusable index %u -> %u",
			    result->node, result->free_blocks_before, result->free_blocks_after,
			    result->unusable_index_before, result->unusable_index_after);
			set_step_state(
			    s,
			    (guint64)MAX(s->gained, 0) * 1000 >= s->expect_milli ? "done" : "short",
			    detail);
		}
		g_info("reservation %s: compaction of node %d %s: %" G_GINT64_FORMAT
		       " blocks in %" G_GUINT64_FORMAT " ms",
		       r->id, op->node, s->state, s->gained, s->elapsed_ms);
		hr_reservation_touch(p->store, r);
	}
	op_end(p, op);
}

static void
start_compact(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 expect_milli)
{
	HrReservationStep *s = hr_reservation_add_step(r, "compact", node);
	Op *op = g_new0(Op, 1);

	s->expect_milli = expect_milli;
	op->prepare = p;
	op->res_id = g_strdup(r->id);
	op->step_index = r->steps->len - 1;
	op->node = node;
	op->started = g_get_monotonic_time();
	g_ptr_array_add(p->ops, op);
	run->compacted = TRUE;
	run->in_flight++;
	g_info("reservation %s: compacting node %d", r->id, node);
	hr_compact_node_async(p->config->host_root, node, p->cancellable, compact_done_cb, op);
}

/* a pool step that took more than the node's free blocks: the kernel compacted */
static void
pool_step_assembled(HrReservationStep *s)
{
	if (g_strcmp0(s->kind, "free") != 0)
		return;
	g_free(s->kind);
	s->kind = g_strdup("compact");
}

static void
pool_done_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	Op *op = user_data;
	HrPrepare *p = op->prepare;
	g_autoptr(GError) error = NULL;
	g_autofree HrCompactResult *result = hr_pool_grow_finish(res, &error);
	HrReservation *r;
	Run *run;
	(void)source;

	if (p == NULL) {
		/* the executor is gone; what the pool got is ours: give it back */
		if (result != NULL && result->pool_got > 0) {
			guint64 freed;
			hr_pool_shrink(NULL, result->node, result->pool_got, &freed, NULL);
		}
		op_free(op);
		return;
	}
	r = hr_reservation_store_find(p->store, op->res_id);
	run = g_hash_table_lookup(p->runs, op->res_id);
	if (run != NULL) {
		run->pool_busy = FALSE;
		run->pool_stuck = result == NULL || result->pool_got < result->pool_asked;
		/*
		 * The kernel defers compaction after failures: what it could not
		 * assemble now it may later. Try again after a second, while
		 * grows still get something (three empty ones in a row: done).
		 */
		run->pool_empty_grows =
		    result != NULL && result->pool_got > 0 ? 0 : run->pool_empty_grows + 1;
		run->pool_retry_at = g_get_monotonic_time() + POOL_RETRY_US;
	}
	if (r != NULL && result != NULL && result->pool_got > 0 &&
	    !hr_reservation_state_is_live(r->state)) {
		/* it ended while the kernel assembled: straight back */
		guint64 freed;
		hr_pool_shrink(p->config->host_root, result->node, result->pool_got, &freed, NULL);
	} else if (r != NULL && result != NULL) {
		r->pool_blocks += result->pool_got;
	}
	if (r != NULL && op->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, op->step_index);
		guint grows = run != NULL ? run->pool_grows : 1;
		s->elapsed_ms += (g_get_monotonic_time() - op->started) / 1000;
		if (result == NULL) {
			set_step_state(s, "failed", error->message);
		} else {
			g_autofree gchar *detail = NULL;
			g_autofree gchar *how =
			    grows > 1 ? g_strdup_printf(" in %u grows as blocks came free", grows)
				      : g_strdup("");
			s->gained += (gint64)result->pool_got;
			s->pages_migrated += result->migrated;
			s->pages_scanned += result->migrate_scanned + result->free_scanned;
			detail = g_strdup_printf(
			    "held %" G_GINT64_FORMAT " of %" G_GUINT64_FORMAT
			    " blocks in node %u's "
			    "hugetlb pool%s (last: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
			    ", %" G_GUINT64_FORMAT " free 2 MiB blocks before)%s",
			    s->gained, s->expect_milli / 1000, result->node, how, result->pool_got,
			    result->pool_asked, result->free_blocks_before,
			    result->pool_got < result->pool_asked
				? "; the kernel could assemble no more from the node's free memory"
				: "");
			/* blocks that were free already cost nothing: the rest was assembled */
			if (s->pages_scanned > 0)
				pool_step_assembled(s);
			set_step_state(s,
				       (guint64)s->gained * 1000 >= s->expect_milli ? "done"
				       : s->gained > 0				    ? "short"
										    : "failed",
				       detail);
		}
		g_info("reservation %s: pool of node %d %s: %" G_GINT64_FORMAT
		       " blocks in %" G_GUINT64_FORMAT " ms, %" G_GUINT64_FORMAT " pages scanned",
		       r->id, op->node, s->state, s->gained, s->elapsed_ms, s->pages_scanned);
		hr_reservation_touch(p->store, r);
	}
	g_ptr_array_remove(p->ops, op);
	op_free(op);
	host_changed(p);
	kick(p);
}

/* hold up to @blocks free (or assemblable) blocks of @node for @r */
static void
start_pool(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 blocks, guint64 free_blocks)
{
	HrReservationStep *s;
	Op *op = g_new0(Op, 1);

	if (run->pool_step > 0 && run->pool_step == r->steps->len) {
		/* nothing else happened since the last grow: one step for both */
		s = g_ptr_array_index(r->steps, run->pool_step - 1);
		if (free_blocks < blocks)
			pool_step_assembled(s);
		run->pool_grows++;
	} else {
		s = hr_reservation_add_step(r, free_blocks >= blocks ? "free" : "compact", node);
		run->pool_step = r->steps->len;
		run->pool_grows = 1;
	}
	s->expect_milli += blocks * 1000;
	op->prepare = p;
	op->res_id = g_strdup(r->id);
	op->step_index = run->pool_step - 1;
	op->node = node;
	op->started = g_get_monotonic_time();
	g_ptr_array_add(p->ops, op);
	run->pool_busy = TRUE;
	run->pool_asked = blocks;
	if (run->pool_cancel == NULL)
		run->pool_cancel = g_cancellable_new();
	g_cancellable_reset(run->pool_cancel);
	g_info("reservation %s: holding %" G_GUINT64_FORMAT " blocks in node %d's hugetlb pool "
	       "(%" G_GUINT64_FORMAT " free 2 MiB blocks there)",
	       r->id, blocks, node, free_blocks);
	hr_pool_grow_async(p->config->host_root, node, blocks, run->pool_cancel, pool_done_cb, op);
}

/* give @r's pool blocks back to the buddy allocator: the VM allocates next */
static gboolean
release_pool(HrPrepare *p, HrReservation *r, GError **error)
{
	guint64 freed = 0;

	if (r->pool_blocks == 0)
		return TRUE;
	if (!hr_pool_shrink(p->config->host_root, r->planned_node, r->pool_blocks, &freed, error))
		return FALSE;
	if (freed < r->pool_blocks)
		g_warning("reservation %s: the hugetlb pool of node %d gave back %" G_GUINT64_FORMAT
			  " of %" G_GUINT64_FORMAT " blocks (others use hugetlb pages there)",
			  r->id, r->planned_node, freed, r->pool_blocks);
	g_info("reservation %s: %" G_GUINT64_FORMAT " blocks of node %d's hugetlb pool given back",
	       r->id, freed, r->planned_node);
	r->pool_blocks = 0;
	host_changed(p);
	hr_reservation_touch(p->store, r);
	return TRUE;
}

static void
defer_guest(HrPrepare *p, guint64 guest_id, gboolean failed)
{
	GuestPlanState *gs = g_hash_table_lookup(p->gstates, &guest_id);
	HrPlanGuest pg = {0};
	if (gs == NULL)
		return;
	pg.failures = gs->failures;
	pg.next_allowed_ms = gs->next_allowed_ms;
	if (failed)
		hr_planner_guest_failed(&pg, g_get_monotonic_time() / 1000, &p->params);
	else
		hr_planner_guest_succeeded(&pg);
	gs->failures = pg.failures;
	gs->next_allowed_ms = pg.next_allowed_ms;
}

/* what the host got back from the donations that ended, in the snapshot decided on */
static void
measure_donations(HrPrepare *p)
{
	for (guint i = 0; i < p->measures->len; i++) {
		Measure *m = g_ptr_array_index(p->measures, i);
		HrReservation *r = hr_reservation_store_find(p->store, m->res_id);
		Run *run = g_hash_table_lookup(p->runs, m->res_id);
		HrReservationStep *s;

		if (r == NULL || m->step_index >= r->steps->len)
			continue;
		s = g_ptr_array_index(r->steps, m->step_index);
		if (m->pool_mode) {
			/*
			 * The pool takes the freed blocks as they come: what the
			 * host got is what the donor's QEMU no longer has resident
			 * (its discards, less pages its migrations faulted in).
			 */
			gint64 rss_after = guest_rss_kb(p, m->guest_id);
			s->gained = m->rss_before_kb >= 0 && rss_after >= 0
					? (m->rss_before_kb - rss_after) / 2048
					: 0;
		} else {
			s->gained = node_free_blocks(p, m->node) - m->blocks_before;
		}
		if (run != NULL && m->held > 0 && s->gained * 2 < (gint64)m->held) {
			guint n = GPOINTER_TO_UINT(g_hash_table_lookup(run->strikes, &m->guest_id));
			g_hash_table_insert(run->strikes,
					    g_memdup2(&m->guest_id, sizeof(m->guest_id)),
					    GUINT_TO_POINTER(n + 1));
			g_message("reservation %s: %s handed over %u blocks but the host got "
				  "%" G_GINT64_FORMAT " back%s",
				  r->id, s->guest, m->held, s->gained,
				  n + 1 >= 2 ? "; not asked again for this reservation" : "");
		}
		g_info("reservation %s: node %d %+" G_GINT64_FORMAT " free blocks after %s gave %u",
		       r->id, m->node, s->gained, s->guest, m->held);
		hr_reservation_touch(p->store, r);
	}
	g_ptr_array_set_size(p->measures, 0);
}

static void
donate_finished(HrPrepare *p, Op *op, HrRequest *request)
{
	HrReservation *r = hr_reservation_store_find(p->store, op->res_id);
	HrGuest *guest = find_guest(p, op->guest_id);
	guint held = request->blocks != NULL ? request->blocks->len : 0;

	if (r != NULL && op->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, op->step_index);
		g_autofree gchar *detail = NULL;
		const HrResult *res = request->have_result ? &request->result : &request->progress;

		Run *run = g_hash_table_lookup(p->runs, r->id);
		Measure *m = g_new0(Measure, 1);

		s->blocks_held = held;
		s->pages_migrated = res->pages_migrated;
		s->elapsed_ms = (g_get_monotonic_time() - op->started) / 1000;
		if (run != NULL && run->pool_mode)
			run->pool_stuck = FALSE;
		m->res_id = g_strdup(r->id);
		m->step_index = op->step_index;
		m->guest_id = op->guest_id;
		m->node = op->node;
		m->pool_mode = run != NULL && run->pool_mode;
		m->held = held;
		m->blocks_before = op->blocks_before;
		m->rss_before_kb = op->rss_before_kb;
		g_ptr_array_add(p->measures, m);
		if (guest != NULL) {
			/* what it gave is not backed any more: see it before the next plan */
			GuestPlanState *gs = g_hash_table_lookup(p->gstates, &guest->id);
			if (gs != NULL)
				gs->map_at = 0;
		}
		if (request->error != NULL) {
			detail = g_strdup(request->error);
		} else if (held < s->blocks_asked) {
			GString *why = g_string_new(NULL);
			for (guint i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++) {
				if (res->failed[i] > 0)
					g_string_append_printf(why, "%s%u %s", why->len ? ", " : "",
							       res->failed[i],
							       hr_reason_to_string(i));
			}
			detail = g_strdup_printf("%s: %u of %" G_GUINT64_FORMAT " blocks held%s%s",
						 hr_request_state_to_string(request->state), held,
						 s->blocks_asked, why->len ? "; failed: " : "",
						 why->str);
			g_string_free(why, TRUE);
		}
		set_step_state(s,
			       held == 0		? "failed"
			       : held < s->blocks_asked ? "short"
							: "done",
			       detail);
		if (g_hash_table_lookup(p->runs, r->id) != NULL)
			((Run *)g_hash_table_lookup(p->runs, r->id))->held_total += held;
		for (guint i = 0; i < held; i++)
			hr_reservation_add_hold(r, op->guest_key,
						guest != NULL ? guest->name : s->guest,
						g_array_index(request->blocks, guint64, i));
		g_info("reservation %s: %s gave %u of %" G_GUINT64_FORMAT
		       " blocks, %" G_GUINT64_FORMAT " pages migrated",
		       r->id, s->guest, held, s->blocks_asked, s->pages_migrated);
		hr_reservation_touch(p->store, r);
		/* it ended while this ran: what came in goes straight back */
		if (!hr_reservation_state_is_live(r->state) && r->state != HR_RESERVATION_CONSUMED)
			return_holds(p, r, G_MAXUINT, "the reservation ended");
	}
	defer_guest(p, op->guest_id, held == 0);
	op_end(p, op);
}

static void
donate_notify(HrRequest *request, gpointer user_data)
{
	Op *op = user_data;
	if (op->prepare == NULL || !hr_request_state_is_final(request->state))
		return;
	/* taken over by whoever sees the end first; never twice */
	hr_request_remove_listener(request, donate_notify, op);
	if (request->owner != NULL)
		hr_pcp_evacuation_end(op->prepare->config, request->owner);
	if (op->submitting) {
		op->ended_early = TRUE;
		return;
	}
	donate_finished(op->prepare, op, request);
}

static void
start_donate(HrPrepare *p, HrReservation *r, Run *run, Input *in, const HrPlanStep *step,
	     gint64 deadline_ms)
{
	HrGuest *guest = input_guest(in, step);
	HrReservationStep *s;
	g_autoptr(GArray) gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
	g_autoptr(GError) error = NULL;
	GHashTable *tried;
	HrRequestParams params = {0};
	HrRequest *request;
	GuestPlanState *gs;
	HrRange ranges[VIRTIO_HUGEROOM_MAX_CMD_RANGES];
	guint n_ranged = 0, n_ranges = 0, count;
	Op *op;

	if (guest == NULL)
		return;
	gs = get_gstate(p, guest);
	tried = g_hash_table_lookup(run->tried, &guest->id);
	if (tried == NULL) {
		tried = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
		g_hash_table_insert(run->tried, g_memdup2(&guest->id, sizeof(guest->id)), tried);
	}
	for (guint i = 0; i < step->picks->len; i++)
		n_ranged += g_array_index(step->picks, HrPlanPick, i).ranged;
	if (n_ranged > 0 && gs->map != NULL) {
		/*
		 * The guest picks its cheapest blocks among those the host
		 * backs with a THP (the named ones are among them): a fresh
		 * sweep of its own, not the report's.
		 */
		n_ranges = hr_thpmap_ranges(gs->map, HR_THP_BLOCK_THP, ranges,
					    VIRTIO_HUGEROOM_MAX_CMD_RANGES, NULL);
		count = step->picks->len;
	} else {
		for (guint i = 0;
		     i < step->picks->len && gpas->len < VIRTIO_HUGEROOM_MAX_CMD_BLOCKS; i++) {
			const HrPlanPick *pk = &g_array_index(step->picks, HrPlanPick, i);
			if (pk->ranged)
				continue;
			g_array_append_val(gpas, pk->gpa);
			g_hash_table_add(tried, g_memdup2(&pk->gpa, sizeof(guint64)));
		}
		count = gpas->len;
	}
	if (count == 0 || (gpas->len == 0 && n_ranges == 0))
		return;
	s = hr_reservation_add_step(r, "donate", step->node);
	s->guest = g_strdup(guest->name);
	s->blocks_asked = count;
	s->expect_milli = step->gain_milli;

	op = g_new0(Op, 1);
	op->prepare = p;
	op->res_id = g_strdup(r->id);
	op->step_index = r->steps->len - 1;
	op->guest_id = guest->id;
	op->guest_key = g_strdup(guest->key);
	s->guest_key = g_strdup(guest->key);
	op->node = step->node;
	op->started = g_get_monotonic_time();
	op->blocks_before = run->pool_mode ? 0 : node_free_blocks(p, step->node);
	op->rss_before_kb = guest_rss_kb(p, guest->id);

	params.kind = HR_REQUEST_EVACUATE;
	params.gpas = (const guint64 *)gpas->data;
	params.nr_gpas = gpas->len;
	params.ranges = n_ranges > 0 ? ranges : NULL;
	params.nr_ranges = n_ranges;
	params.count = count;
	/* the planner's cost with room for its estimate being off, and the overshoot */
	params.budget_pages = step->cost_pages * 2 + BLOCK_PAGES;
	if (deadline_ms > 0)
		params.timeout_s = MAX(1, (deadline_ms + 999) / 1000);
	params.notify = donate_notify;
	params.notify_data = op;
	/* a donor runs density while it gives (SET_PCP goes first on its cmdq) */
	hr_pcp_evacuation_begin(p->config, guest);
	op->submitting = TRUE;
	request = submit(p, guest, &params, &error);
	op->submitting = FALSE;
	if (request == NULL) {
		hr_pcp_evacuation_end(p->config, guest);
		set_step_state(s, "failed", error->message);
		g_info("reservation %s: %s cannot donate: %s", r->id, guest->name, error->message);
		defer_guest(p, guest->id, TRUE);
		op_free(op);
		return;
	}
	s->request_id = request->id;
	op->request = hr_request_ref(request);
	g_ptr_array_add(p->ops, op);
	run->in_flight++;
	/* a restart finds it running, with the request whose late HOLDs are its */
	hr_reservation_touch(p->store, r);
	g_info("reservation %s: asked %s for %u blocks%s (request %" G_GUINT64_FORMAT ")", r->id,
	       guest->name, count, n_ranges > 0 ? " of its host THP-backed ones" : "", request->id);
	if (op->ended_early)
		donate_finished(p, op, request);
}

/* stop what runs for @r: cancel its evacuations (compaction cannot be stopped) */
static void
cancel_ops(HrPrepare *p, HrReservation *r)
{
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		HrGuest *guest;
		if (op->request == NULL || op->returning != NULL ||
		    g_strcmp0(op->res_id, r->id) != 0 ||
		    hr_request_state_is_final(op->request->state))
			continue;
		guest = find_guest(p, op->guest_id);
		if (guest != NULL)
			hr_guest_cancel_request(guest, op->request->id, NULL);
	}
}

/* ---------------------------------------------------------------------- */
/* Reconciling what guests hold */

/*
 * Every block a guest holds has an owner: a reservation (its holds, or a
 * donation in flight), the API (an operator's own evacuation, kept in the
 * store's ledger), or a donation a previous daemon left running, whose
 * blocks come in unasked after a restart (Interrupted). A block nobody
 * owns (a HOLD for a request nobody knows, a block a resync lists that no
 * reservation recorded) is an orphan: it would stay out of the guest for
 * good, so it is given back.
 */

/* the donations a previous run left "running" */
static void
find_interrupted(HrPrepare *p)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		for (guint j = 0; j < r->steps->len; j++) {
			HrReservationStep *s = g_ptr_array_index(r->steps, j);
			Interrupted *it;
			if (g_strcmp0(s->kind, "donate") != 0 ||
			    g_strcmp0(s->state, "running") != 0)
				continue;
			it = g_new0(Interrupted, 1);
			it->res_id = g_strdup(r->id);
			it->step_index = j;
			it->request_id = s->request_id;
			it->guest_key = g_strdup(s->guest_key);
			it->left = s->blocks_asked;
			g_ptr_array_add(p->interrupted, it);
			set_step_state(s, "failed", "the daemon restarted while it ran");
			g_message("reservation %s: the donation of %s (request %" G_GUINT64_FORMAT
				  ") was running when the daemon stopped; what it freed is kept "
				  "when the guest reports it",
				  r->id, s->guest, s->request_id);
		}
	}
}

/* the interrupted donation @block of @guest belongs to, or NULL */
static Interrupted *
interrupted_for(HrPrepare *p, HrGuest *guest, const HrHeldBlock *block)
{
	for (guint i = 0; i < p->interrupted->len; i++) {
		Interrupted *it = g_ptr_array_index(p->interrupted, i);
		if (it->left == 0 || g_strcmp0(it->guest_key, guest->key) != 0)
			continue;
		/* its late HOLDs name it; what it froze before, the resync lists */
		if (block->request_id == it->request_id || block->request_id == 0)
			return it;
	}
	return NULL;
}

static void
interrupted_claim(HrPrepare *p, Interrupted *it, HrGuest *guest, guint64 gpa)
{
	HrReservation *r = hr_reservation_store_find(p->store, it->res_id);

	it->left--;
	if (r == NULL)
		return;
	hr_reservation_add_hold(r, guest->key, guest->name, gpa);
	if (it->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, it->step_index);
		g_autofree gchar *detail = NULL;
		s->blocks_held++;
		detail = g_strdup_printf("the daemon restarted while it ran; %" G_GUINT64_FORMAT
					 " blocks it freed were found held",
					 s->blocks_held);
		set_step_state(s, "short", detail);
	}
	hr_reservation_touch(p->store, r);
}

/* the gpas @guest holds for reservations (HrHeldBlock's gpa -> itself) */
static GHashTable *
reservation_owned(HrPrepare *p, HrGuest *guest)
{
	GHashTable *owned = g_hash_table_new(g_int64_hash, g_int64_equal);
	GPtrArray *list = hr_reservation_store_list(p->store);

	guest_index_begin(p);
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		for (guint j = 0; j < r->holds->len; j++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, j);
			if (find_hold_guest(p, h) == guest)
				g_hash_table_add(owned, &h->gpa);
		}
	}
	guest_index_end(p);
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		if (op->guest_id != guest->id || op->request == NULL)
			continue;
		/* what a donation in flight got, what a RETURN in flight gives back */
		for (guint j = 0; op->request->blocks != NULL && j < op->request->blocks->len; j++)
			g_hash_table_add(owned, &g_array_index(op->request->blocks, guint64, j));
		for (guint j = 0; op->returning != NULL && j < op->returning->len; j++)
			g_hash_table_add(owned, &g_array_index(op->returning, guint64, j));
	}
	return owned;
}

static gboolean
executor_request(HrPrepare *p, guint64 request_id)
{
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		if (op->request != NULL && op->request->id == request_id)
			return TRUE;
	}
	return FALSE;
}

typedef struct {
	HrGuest *guest;
	gint64 now;
} LiveCtx;

/* an API request in the ledger is live while the guest may still run it */
static gboolean
ledger_request_live(guint64 request_id, gint64 since, gpointer data)
{
	LiveCtx *ctx = data;
	HrRequest *request = hr_guest_find_request(ctx->guest, request_id);
	if (request != NULL)
		return !hr_request_state_is_final(request->state);
	/* from before a restart: no request outlives a day (request_timeout_s) */
	return ctx->now - since < (gint64)86400 * G_USEC_PER_SEC;
}

static void
return_orphans(HrPrepare *p, HrGuest *guest, GArray *orphans)
{
	for (guint off = 0; off < orphans->len; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
		g_autoptr(GError) error = NULL;
		HrRequestParams params = {0};

		params.kind = HR_REQUEST_RETURN;
		params.gpas = &g_array_index(orphans, guint64, off);
		params.nr_gpas = MIN(orphans->len - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
		if (submit(p, guest, &params, &error) == NULL) {
			g_warning("%s: cannot return %u blocks nobody owns: %s", guest->name,
				  params.nr_gpas, error->message);
			return;
		}
		for (guint i = 0; i < params.nr_gpas; i++) {
			HrHeldBlock *b = g_hash_table_lookup(guest->held, &params.gpas[i]);
			if (b != NULL)
				b->orphan = TRUE;
		}
		guest->orphans_returned += params.nr_gpas;
	}
	g_message("%s: %u held blocks no reservation or request owns: returned", guest->name,
		  orphans->len);
}

typedef gboolean (*HoldPred)(HrPrepare *p, HrReservationHold *h, gpointer data);

/* index the guests by key for a pass over every reservation's holds */
static void
guest_index_begin(HrPrepare *p)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	p->guest_index = g_hash_table_new(g_str_hash, g_str_equal);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		g_hash_table_insert(p->guest_index, guest->key, guest);
	}
}

static void
guest_index_end(HrPrepare *p)
{
	g_clear_pointer(&p->guest_index, g_hash_table_unref);
}

/* forget the holds of every reservation that @pred says are no more, saying @why */
static void
drop_holds(HrPrepare *p, HoldPred pred, gpointer data, const gchar *why)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	guest_index_begin(p);
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint dropped = 0;
		for (guint j = r->holds->len; j-- > 0;) {
			if (!pred(p, g_ptr_array_index(r->holds, j), data))
				continue;
			g_ptr_array_remove_index(r->holds, j);
			dropped++;
		}
		if (dropped > 0) {
			g_message("reservation %s: %u holds dropped: %s", r->id, dropped, why);
			hr_reservation_touch(p->store, r);
		}
	}
	guest_index_end(p);
}

/*
 * A hold on a block its guest no longer holds (it took it back under
 * pressure, an operator returned it, its device was reset): nothing to
 * give back. Blocks a donation in flight got are not holds yet.
 */
static gboolean
hold_stale(HrPrepare *p, HrReservationHold *h, gpointer data)
{
	HrGuest *guest = data;
	return !g_hash_table_contains(guest->held, &h->gpa) && find_hold_guest(p, h) == guest;
}

/*
 * A hold of a live reservation whose QEMU is gone: its memory went with
 * it, unless the VM runs on in another QEMU of this host (a live
 * migration's source exits), where the hold follows the guest, or may yet
 * (hold_in_grace: a destination that has not connected).
 */
static gboolean
hold_gone(HrPrepare *p, HrReservationHold *h, gpointer data)
{
	HrGuest *guest = find_hold_guest(p, h);
	(void)data;
	/* only a disconnected guest can have lost its process */
	if ((guest != NULL && hr_guest_is_connected(guest)) || !hold_process_gone(guest, h))
		return FALSE;
	if (guest != NULL && follow_migration(p, guest))
		return FALSE;
	return !hold_in_grace(p, guest, h);
}

/*
 * Is @other the same VM as @guest in another QEMU process: the source of a
 * live migration to @guest (same non-zero UUID and name)? Only migration
 * brings held blocks into a new process (SPEC 2.9), so a block @guest's
 * resync lists that @other owned moves to @guest with its owner.
 */
static gboolean
migration_twin(HrGuest *guest, HrGuest *other)
{
	return other != guest && hr_guest_same_vm(guest, other);
}

/* what @from's QEMU process owned (holds, ledger) becomes @to's */
static void
rekey_owner(HrPrepare *p, const gchar *from, HrGuest *to)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint moved = 0;
		for (guint j = 0; j < r->holds->len; j++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, j);
			if (g_strcmp0(h->guest_key, from) != 0)
				continue;
			hr_reservation_hold_set_key(h, to->key);
			moved++;
		}
		if (moved > 0) {
			g_message("reservation %s: %u holds of %s are %s's now", r->id, moved, from,
				  to->key);
			hr_reservation_touch(p->store, r);
		}
	}
	hr_reservation_store_ledger_rekey(p->store, from, to->key);
}

/*
 * @gone is disconnected and its QEMU exited (or is forgotten): when the
 * VM runs on in another QEMU of this host, what @gone's process owned
 * went there with the guest (a live migration whose source exited before
 * the destination's resync was reconciled, or that was pruned first, or
 * a destination taking the guest back after a failed migration). FALSE
 * when no other QEMU of the VM runs.
 */
static gboolean
follow_migration(HrPrepare *p, HrGuest *gone)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	HrGuest *to = NULL;

	for (guint i = 0; i < guests->len; i++) {
		HrGuest *other = g_ptr_array_index(guests, i);
		if (other == gone || !hr_guest_same_vm(gone, other))
			continue;
		if (!hr_guest_is_connected(other) && !hr_peer_is_alive(other->peer))
			continue;
		/* a connected one first, then the one started last */
		if (to == NULL || (hr_guest_is_connected(other) && !hr_guest_is_connected(to)) ||
		    (hr_guest_is_connected(other) == hr_guest_is_connected(to) &&
		     other->peer->starttime > to->peer->starttime))
			to = other;
	}
	if (to == NULL)
		return FALSE;
	g_info("%s: QEMU pid %d is gone, the VM runs on in pid %d: what it owned follows",
	       gone->name, gone->pid, to->pid);
	rekey_owner(p, gone->key, to);
	return TRUE;
}

/* give @h, a hold of @r that a twin's process owned, to @guest, where its block is now */
static void
adopt_hold(HrPrepare *p, HrReservation *r, HrReservationHold *h, HrGuest *guest)
{
	g_info("%s: block 0x%" G_GINT64_MODIFIER "x came with the migration from %s, still "
	       "reservation %s's",
	       guest->name, h->gpa, h->guest_key, r->id);
	hr_reservation_hold_set_key(h, guest->key);
	hr_reservation_touch(p->store, r);
}

/*
 * Was @h held by a QEMU of @guest's VM: the same UUID where both have one
 * (names can be reused by another VM, or be copied), else the same name?
 */
static gboolean
hold_of_vm(HrReservationHold *h, HrGuest *guest)
{
	const gchar *uuid = hr_guest_vm_uuid(guest);

	if (h->guest_uuid != NULL && uuid != NULL)
		return g_ascii_strcasecmp(h->guest_uuid, uuid) == 0;
	return g_strcmp0(h->guest_name, guest->name) == 0;
}

/*
 * @gpa, which @guest holds, was held for a reservation by a QEMU of the
 * same VM (hold_of_vm) that is gone and whose entry is not known (pruned,
 * or before a restart of the daemon), within migration_grace_s: the
 * migration's source. Only a migration brings held blocks into a new QEMU
 * (SPEC 2.9).
 */
static gboolean
adopt_unknown_source(HrPrepare *p, HrGuest *guest, guint64 gpa)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint j = 0; j < list->len; j++) {
		HrReservation *r = g_ptr_array_index(list, j);
		for (guint k = 0; k < r->holds->len; k++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, k);
			if (h->gpa != gpa || !hold_of_vm(h, guest) ||
			    find_hold_guest(p, h) != NULL || !hold_in_grace(p, NULL, h))
				continue;
			adopt_hold(p, r, h, guest);
			return TRUE;
		}
	}
	return FALSE;
}

/* @gpa, which @guest holds, was a twin's: give its owner's record to @guest */
static gboolean
adopt_twin_record(HrPrepare *p, HrGuest *guest, guint64 gpa)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint i = 0; i < guests->len; i++) {
		HrGuest *other = g_ptr_array_index(guests, i);
		if (!migration_twin(guest, other))
			continue;
		if (hr_reservation_store_ledger_has(p->store, other->key, gpa, 0)) {
			hr_reservation_store_ledger_add(p->store, guest->key, gpa, 0);
			g_info("%s: block 0x%" G_GINT64_MODIFIER
			       "x came with the migration from pid "
			       "%d, still the operator's",
			       guest->name, gpa, other->pid);
			return TRUE;
		}
		for (guint j = 0; j < list->len; j++) {
			HrReservation *r = g_ptr_array_index(list, j);
			for (guint k = 0; k < r->holds->len; k++) {
				HrReservationHold *h = g_ptr_array_index(r->holds, k);
				if (h->gpa != gpa || g_strcmp0(h->guest_key, other->key) != 0)
					continue;
				adopt_hold(p, r, h, guest);
				return TRUE;
			}
		}
	}
	return adopt_unknown_source(p, guest, gpa);
}

/* the API request @twin ran when its device went away, or still runs */
static HrRequest *
twin_running_request(HrPrepare *p, HrGuest *twin)
{
	HrRequest *request = twin->active;

	if (request == NULL) {
		request = g_queue_peek_tail(&twin->finished);
		if (request != NULL && request->state != HR_REQUEST_LOST)
			request = NULL;
	}
	if (request == NULL || request->kind == HR_REQUEST_RETURN ||
	    executor_request(p, request->id))
		return NULL;
	return request;
}

/*
 * @block, which @guest holds, was a twin's, or was held by the command
 * the API request of the latest twin (the migration's source) had sent,
 * which migrated with the guest and held it on the destination (SPEC 1.7
 * item 5; resynced with request id 0 if held before the destination's
 * device reconnected): give its owner's record to @guest.
 */
static gboolean
adopt_from_twin(HrPrepare *p, HrGuest *guest, const HrHeldBlock *block)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	HrGuest *source = NULL;
	HrRequest *request;
	gint64 latest = 0;

	if (adopt_twin_record(p, guest, block->gpa))
		return TRUE;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *other = g_ptr_array_index(guests, i);
		/* gone_at is 0 while connected: the latest of all */
		gint64 gone = other->gone_at != 0 ? other->gone_at : G_MAXINT64;
		if (migration_twin(guest, other) && gone > latest) {
			source = other;
			latest = gone;
		}
	}
	request = source != NULL ? twin_running_request(p, source) : NULL;
	if (request == NULL || (block->request_id != 0 && block->request_id != request->id))
		return FALSE;
	hr_reservation_store_ledger_add(p->store, guest->key, block->gpa, 0);
	g_info("%s: block 0x%" G_GINT64_MODIFIER "x held by request %" G_GUINT64_FORMAT
	       " of pid %d, which migrated with the guest: the operator's",
	       guest->name, block->gpa, request->id, source->pid);
	return TRUE;
}

static void
reconcile_guest(HrPrepare *p, HrGuest *guest)
{
	g_autoptr(GHashTable) owned = reservation_owned(p, guest);
	g_autoptr(GArray) orphans = g_array_new(FALSE, FALSE, sizeof(guint64));
	GHashTableIter iter;
	HrHeldBlock *b;
	HrRequest *request;
	LiveCtx ctx = {guest, g_get_real_time()};

	/* the API's requests that run: their blocks are the operator's */
	g_hash_table_iter_init(&iter, guest->requests);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&request)) {
		if (request->kind != HR_REQUEST_RETURN &&
		    !hr_request_state_is_final(request->state) &&
		    request->state != HR_REQUEST_QUEUED && !executor_request(p, request->id))
			hr_reservation_store_ledger_add(p->store, guest->key, 0, request->id);
	}
	g_hash_table_iter_init(&iter, guest->held);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&b)) {
		Interrupted *it;
		if (b->orphan || g_hash_table_contains(owned, &b->gpa) ||
		    hr_reservation_store_ledger_has(p->store, guest->key, b->gpa, 0))
			continue;
		if (b->request_id != 0 && executor_request(p, b->request_id))
			continue;
		if (b->request_id != 0 &&
		    ((request = hr_guest_find_request(guest, b->request_id)) != NULL ||
		     hr_reservation_store_ledger_has(p->store, guest->key, 0, b->request_id))) {
			if (request == NULL || request->kind != HR_REQUEST_RETURN)
				hr_reservation_store_ledger_add(p->store, guest->key, b->gpa, 0);
			continue;
		}
		it = interrupted_for(p, guest, b);
		if (it != NULL) {
			interrupted_claim(p, it, guest, b->gpa);
			continue;
		}
		if (adopt_from_twin(p, guest, b))
			continue;
		/*
		 * resynced after a restart while an operator's request of the
		 * previous daemon ran (its HOLDs went unseen): the operator's
		 */
		if (b->request_id == 0 &&
		    hr_reservation_store_ledger_has_requests(p->store, guest->key)) {
			hr_reservation_store_ledger_add(p->store, guest->key, b->gpa, 0);
			continue;
		}
		g_array_append_val(orphans, b->gpa);
	}
	hr_reservation_store_ledger_sync(p->store, guest->key, guest->held, ledger_request_live,
					 &ctx);
	drop_holds(p, hold_stale, guest, "the guest does not hold them any more");
	if (orphans->len > 0 && p->config->return_orphans)
		return_orphans(p, guest, orphans);
	else if (orphans->len > 0)
		g_message(
		    "%s: %u held blocks no reservation or request owns (return_orphans is off)",
		    guest->name, orphans->len);
}

static void
reconcile_guests(HrPrepare *p)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	if (!p->reconcile_all)
		return;
	p->reconcile_all = FALSE;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		GuestPlanState *gs;
		/* a resync in progress is not the guest's whole held set yet */
		if (!hr_guest_is_connected(guest) || !guest->ready)
			continue;
		gs = get_gstate(p, guest);
		if (gs->reconciled_gen == guest->held_gen && guest->held_gen != 0)
			continue;
		gs->reconciled_gen = guest->held_gen;
		reconcile_guest(p, guest);
	}
}

void
hr_prepare_held_changed(HrPrepare *p, HrGuest *guest)
{
	(void)guest;
	p->reconcile_all = TRUE;
	kick(p);
}

/* ---------------------------------------------------------------------- */
/* Driving a reservation */

static void
settle(HrPrepare *p, HrReservation *r, HrReservationState state, gboolean partial,
       const gchar *reason)
{
	g_autoptr(GError) error = NULL;
	Run *run = g_hash_table_lookup(p->runs, r->id);
	cancel_ops(p, r);
	if (run != NULL && run->pool_cancel != NULL)
		g_cancellable_cancel(run->pool_cancel);
	r->partial = partial;
	if (!hr_reservation_set_state(p->store, r, state, reason, &error)) {
		g_warning("%s", error->message);
		return;
	}
	if (state != HR_RESERVATION_READY && state != HR_RESERVATION_CONSUMED) {
		g_autoptr(GError) pool_error = NULL;
		if (!release_pool(p, r, &pool_error))
			g_warning("reservation %s: %s", r->id, pool_error->message);
		return_holds(p, r, G_MAXUINT, hr_reservation_state_to_string(state));
	}
}

static gint
choose_node(HrPrepare *p, const HrHostState *host, HrReservation *r)
{
	gint best = -1;
	gint64 best_avail = G_MININT64;
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		gint64 avail = (gint64)node_available(ns) -
			       (gint64)hr_reservation_store_promised(p->store, ns->node, r);
		/* all promised away: still a node, the one with the least debt */
		if (best < 0 || avail > best_avail) {
			best_avail = avail;
			best = ns->node;
		}
	}
	return best;
}

/* the planner's decision, timed for the metrics */
static HrPlan *
plan_timed(HrPrepare *p, HrReservation *r, const HrPlanRequest *req, const HrPlanInput *input)
{
	gint64 start = g_get_monotonic_time();
	HrPlan *plan = hr_planner_plan(req, input, &p->params);
	emit(p, HR_PREPARE_PLAN_MADE, r, g_get_monotonic_time() - start);
	return plan;
}

static gboolean
past_deadline(HrPrepare *p, HrReservation *r, gint64 *remaining_ms)
{
	g_autofree gchar *why = NULL;

	*remaining_ms = 0;
	if (r->deadline_at <= 0)
		return FALSE;
	*remaining_ms = (r->deadline_at - g_get_real_time()) / 1000;
	if (*remaining_ms > 0)
		return FALSE;
	why = g_strdup_printf("deadline passed with %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
			      " blocks (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " MiB)",
			      r->obtained, r->need_blocks, r->obtained * 2, r->need_blocks * 2);
	if (r->strict || r->obtained == 0)
		settle(p, r, HR_RESERVATION_FAILED, r->obtained > 0, why);
	else
		settle(p, r, HR_RESERVATION_READY, TRUE, why);
	return TRUE;
}

static void
start_plan_steps(HrPrepare *p, HrReservation *r, Run *run, Input *in, const HrPlan *plan,
		 gint64 remaining_ms);

/*
 * With the hugetlb pool: whatever the node has free (above its high
 * watermark and the pool margin) goes into the pool, the kernel
 * assembling blocks from fragmented free memory on the way; what the node
 * does not have comes from donors, whose freed host THPs the next grow
 * takes. Ready when the pool holds the whole need.
 */
/*
 * The steps a plan starts run to their end before the next plan, so a
 * donor whose host map is still being read when the plan is made would sit
 * out all of them (the headline's second donor did, 34 s of 54). Wait for
 * the maps a bounded time: they take well under a second per 10 GiB.
 */
static gboolean
wait_for_maps(HrReservation *r, Run *run, const Input *in)
{
	gint64 now = g_get_monotonic_time();

	if (in->maps_pending == 0)
		return FALSE;
	if (run->maps_wait_until == 0) {
		run->maps_wait_until = now + MAPS_WAIT_US;
		g_debug("reservation %s: waiting up to %d ms for %u donors' host maps", r->id,
			(int)(MAPS_WAIT_US / 1000), in->maps_pending);
	}
	return now < run->maps_wait_until;
}

static void
drive_pool(HrPrepare *p, HrReservation *r, Run *run, const HrNodeState *ns, const HrHostState *host)
{
	guint64 margin = p->config->pool_margin_mb * 256, keep = ns->wmark_high + margin;
	guint64 headroom = ns->free_pages > keep ? (ns->free_pages - keep) / BLOCK_PAGES : 0;
	guint64 want, coming, remaining;
	gboolean retry;
	gint64 remaining_ms = 0;
	g_autoptr(Input) in = NULL;
	g_autoptr(HrPlan) plan = NULL;
	HrPlanRequest req = {0};
	g_autofree gchar *why = NULL;

	hr_reservation_set_obtained(p->store, r, r->pool_blocks);
	if (r->pool_blocks >= r->need_blocks) {
		why =
		    g_strdup_printf("%" G_GUINT64_FORMAT " 2 MiB blocks held in node %d's hugetlb "
				    "pool (%u steps)",
				    r->pool_blocks, r->planned_node, r->steps->len);
		settle(p, r, HR_RESERVATION_READY, FALSE, why);
		return;
	}
	if (past_deadline(p, r, &remaining_ms))
		return;
	want = r->need_blocks - r->pool_blocks;
	retry = run->pool_stuck && run->pool_empty_grows < POOL_MAX_EMPTY_GROWS && headroom > 0;
	if (!run->pool_busy && headroom > 0 &&
	    (!run->pool_stuck || (retry && g_get_monotonic_time() >= run->pool_retry_at)))
		start_pool(p, r, run, r->planned_node, MIN(want, headroom), ns->free_blocks);
	if (run->in_flight > 0)
		return;
	/* what the grow that runs (or could run) will hold; donors give the rest */
	coming = run->pool_busy ? run->pool_asked : run->pool_stuck ? 0 : MIN(want, headroom);
	remaining = want > coming ? want - coming : 0;
	if (remaining == 0)
		return;
	in = build_input(p, host, r, run, TRUE);
	if (wait_for_maps(r, run, in))
		return;
	req.bytes = remaining * HR_PLAN_BLOCK_BYTES;
	req.node = r->planned_node;
	req.deadline_ms = remaining_ms > 0 ? (guint64)remaining_ms : 0;
	req.strict = FALSE; /* every block a donor gives counts */
	plan = plan_timed(p, r, &req, &in->input);
	start_plan_steps(p, r, run, in, plan, remaining_ms);
	if (run->in_flight > 0 || run->pool_busy || in->maps_pending > 0 || retry)
		return;
	if (plan->guests_deferred > 0 && !r->strict)
		return;
	why = g_strdup_printf("no more sources: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
			      " blocks held, the node has no more free memory to assemble them "
			      "from and no donor can give more%s%s",
			      r->pool_blocks, r->need_blocks, run->why_not != NULL ? ": " : "",
			      run->why_not != NULL ? run->why_not : "");
	if (r->strict || r->pool_blocks == 0)
		settle(p, r, HR_RESERVATION_FAILED, r->pool_blocks > 0, why);
	else
		settle(p, r, HR_RESERVATION_READY, TRUE, why);
}

static void
drive(HrPrepare *p, const HrHostState *host, HrReservation *r)
{
	Run *run = get_run(p, r);
	const HrNodeState *ns;
	gint64 remaining_ms = 0;
	guint64 avail, promised;
	g_autoptr(Input) in = NULL;
	g_autoptr(HrPlan) plan = NULL;
	HrPlanRequest req = {0};
	g_autofree gchar *why = NULL;

	if (r->state == HR_RESERVATION_CREATED) {
		if (r->node >= 0 && hr_host_state_get_node(host, r->node) == NULL) {
			why = g_strdup_printf("the host has no NUMA node %d", r->node);
			settle(p, r, HR_RESERVATION_FAILED, FALSE, why);
			return;
		}
		r->planned_node = r->node >= 0 ? r->node : choose_node(p, host, r);
		hr_reservation_set_state(p->store, r, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	}
	ns = hr_host_state_get_node(host, r->planned_node);
	if (ns == NULL) {
		why = g_strdup_printf("the host has no NUMA node %d", r->planned_node);
		settle(p, r, HR_RESERVATION_FAILED, FALSE, why);
		return;
	}
	if (!run->pool_decided) {
		g_autoptr(GError) pool_error = NULL;
		run->pool_decided = TRUE;
		run->pool_mode =
		    p->config->hold_in_pool &&
		    hr_pool_available(p->config->host_root, r->planned_node, &pool_error);
		if (p->config->hold_in_pool && !run->pool_mode)
			g_message("reservation %s: not holding blocks, only counting free ones: %s",
				  r->id, pool_error->message);
	}
	if (run->pool_mode) {
		drive_pool(p, r, run, ns, host);
		return;
	}
	promised = hr_reservation_store_promised(p->store, r->planned_node, r);
	avail = node_available(ns);
	avail = avail > promised ? avail - promised : 0;
	hr_reservation_set_obtained(p->store, r, avail);
	if (!run->free_recorded) {
		/* what was there from the start: the first step, at no cost */
		if (r->obtained > 0) {
			HrReservationStep *s = hr_reservation_add_step(r, "free", r->planned_node);
			s->gained = r->obtained;
			s->expect_milli = r->obtained * 1000;
			set_step_state(s, "done", "free already, above the high watermark");
			hr_reservation_touch(p->store, r);
		}
		run->free_recorded = TRUE;
	}
	if (run->donate_cap == 0)
		run->donate_cap = 2 * (r->need_blocks - r->obtained) + 16;
	if (r->obtained >= r->need_blocks) {
		why = g_strdup_printf("%" G_GUINT64_FORMAT " free 2 MiB blocks on node %d "
				      "(%u steps)",
				      r->obtained, r->planned_node, r->steps->len);
		settle(p, r, HR_RESERVATION_READY, FALSE, why);
		return;
	}
	if (past_deadline(p, r, &remaining_ms))
		return;
	if (run->in_flight > 0)
		return;
	if (run->compact_after) {
		run->compact_after = FALSE;
		if (!run->compacted) {
			start_compact(p, r, run, r->planned_node, 0);
			return;
		}
	}

	/*
	 * Guests that handed over twice what was asked without the host seeing
	 * it (4 KiB-backed blocks compaction could not assemble, a QEMU that
	 * does not discard) are not asked again for this reservation.
	 */
	in = build_input(p, host, r, run, run->held_total < run->donate_cap);
	if (wait_for_maps(r, run, in))
		return;
	req.bytes = r->need_blocks * HR_PLAN_BLOCK_BYTES;
	req.node = r->planned_node;
	req.deadline_ms = remaining_ms > 0 ? (guint64)remaining_ms : 0;
	req.strict = r->strict;
	plan = plan_timed(p, r, &req, &in->input);
	start_plan_steps(p, r, run, in, plan, remaining_ms);
	if (run->in_flight == 0 && run->compact_after && !run->compacted) {
		run->compact_after = FALSE;
		start_compact(p, r, run, r->planned_node, 0);
	}
	if (run->in_flight > 0 || in->maps_pending > 0)
		return;
	/* nothing could be started: wait for deferred guests, else this is all */
	if (plan->guests_deferred > 0 && !r->strict)
		return;
	why = g_strdup_printf(
	    "no more sources: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " blocks; plan: %s%s%s",
	    r->obtained, r->need_blocks, plan->summary, run->why_not != NULL ? "; " : "",
	    run->why_not != NULL ? run->why_not : "");
	if (r->strict || r->obtained == 0)
		settle(p, r, HR_RESERVATION_FAILED, r->obtained > 0, why);
	else
		settle(p, r, HR_RESERVATION_READY, TRUE, why);
}

static void
start_plan_steps(HrPrepare *p, HrReservation *r, Run *run, Input *in, const HrPlan *plan,
		 gint64 remaining_ms)
{
	run->plans++;
	if (g_strcmp0(run->last_plan, plan->summary) != 0) {
		g_free(run->last_plan);
		run->last_plan = g_strdup(plan->summary);
		g_info("reservation %s: plan %u: %s", r->id, run->plans, plan->summary);
	}
	for (guint i = 0; i < plan->steps->len; i++) {
		const HrPlanStep *step = g_ptr_array_index(plan->steps, i);
		switch (step->kind) {
		case HR_PLAN_STEP_FREE:
			if (!run->free_recorded) {
				HrReservationStep *s =
				    hr_reservation_add_step(r, "free", step->node);
				s->expect_milli = step->gain_milli;
				s->gained = step->blocks;
				set_step_state(s, "done", "free already, above the high watermark");
				run->free_recorded = TRUE;
				hr_reservation_touch(p->store, r);
			}
			break;
		case HR_PLAN_STEP_COMPACT:
			if (step->after_donations)
				run->compact_after = TRUE;
			else if (!run->compacted)
				start_compact(p, r, run, step->node, step->gain_milli);
			break;
		case HR_PLAN_STEP_DONATE:
			start_donate(p, r, run, in, step, remaining_ms);
			break;
		}
	}
}

/* the decision of a tick, on a snapshot read since the last change of ours */
static void
decide(HrPrepare *p, const HrHostState *host)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	gint64 now = g_get_real_time();

	measure_donations(p);
	/* oldest first: an older reservation gets its promise first */
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		switch (r->state) {
		case HR_RESERVATION_CREATED:
		case HR_RESERVATION_IN_PROGRESS:
			drive(p, host, r);
			break;
		case HR_RESERVATION_READY:
			if (now - r->finished_at >
			    (gint64)p->config->reservation_ttl_s * G_USEC_PER_SEC) {
				g_autofree gchar *why =
				    g_strdup_printf("not consumed within %u s of being ready",
						    p->config->reservation_ttl_s);
				settle(p, r, HR_RESERVATION_EXPIRED, r->partial, why);
			}
			break;
		case HR_RESERVATION_CANCELLED:
		case HR_RESERVATION_FAILED:
		case HR_RESERVATION_EXPIRED:
			/* holds of guests that were away when it ended */
			if (r->holds->len > 0)
				return_holds(p, r, G_MAXUINT, "the reservation ended");
			break;
		default:
			break;
		}
	}
	return_by_high_mark(p, host);
}

/* a guest's host backing the snapshot reads: a donor's stale map, if not too large */
static gboolean
snapshot_scans(HrPrepare *p, HrGuest *guest, gint64 now)
{
	GuestPlanState *gs;
	HrGuestPolicy policy;

	if (p->config->backing != HR_BACKING_SCAN || guest->ram_size > THPMAP_SNAPSHOT_MAX_BYTES ||
	    !guest_can_donate(guest))
		return FALSE;
	hr_config_guest_policy(p->config, guest->name, &policy);
	if (!policy.donor)
		return FALSE;
	gs = get_gstate(p, guest);
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

static void
snapshot_read_cb(GObject *source, GAsyncResult *result, gpointer user_data);

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
		    (guest->pid > 0 && ((p->config->hold_in_pool && guest_can_donate(guest)) ||
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
			thpmap_failed(gs, find_guest(p, sg->id), sg->error);
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
	decide(p, snap->host);
}

/*
 * What needs no snapshot runs now; a decision, once the snapshot the
 * tick asks for is in (or the one being read, which began recently).
 */
void
hr_prepare_tick(HrPrepare *p)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	gboolean work = p->measures->len > 0;

	reconcile_guests(p);
	drop_holds(p, hold_gone, NULL, "their QEMU is gone");
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
	kick(p);
	return r;
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
		settle(p, r, HR_RESERVATION_CANCELLED, r->obtained < r->need_blocks, why);
		return TRUE;
	case HR_RESERVATION_READY:
		settle(p, r, HR_RESERVATION_CANCELLED, r->partial, "released");
		return TRUE;
	case HR_RESERVATION_CONSUMED:
		/* the memory is not needed any more: give the holds back now */
		return_holds(p, r, G_MAXUINT, "released after use");
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
	if (r->state == HR_RESERVATION_READY && !release_pool(p, r, error))
		return FALSE;
	return hr_reservation_set_state(p->store, r, HR_RESERVATION_CONSUMED, "consumed", error);
}

JsonNode *
hr_prepare_host_json(HrPrepare *p, const HrHostState *host)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	const HrCompactCounters *c;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "nodes");
	json_builder_begin_array(b);
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		json_builder_begin_object(b);
		hr_json_add_int(b, "node", ns->node);
		hr_json_add_int(b, "free_pages", ns->free_pages);
		hr_json_add_int(b, "free_blocks", ns->free_blocks);
		hr_json_add_int(b, "available_blocks", node_available(ns));
		hr_json_add_int(b, "promised_blocks",
				hr_reservation_store_promised(p->store, ns->node, NULL));
		hr_json_add_int(b, "wmark_min", ns->wmark_min);
		hr_json_add_int(b, "wmark_low", ns->wmark_low);
		hr_json_add_int(b, "wmark_high", ns->wmark_high);
		hr_json_add_int(b, "managed", ns->managed);
		hr_json_add_int(b, "present", ns->present);
		hr_json_add_int(b, "unusable_index", ns->unusable_index);
		if (ns->has_meminfo) {
			hr_json_add_int(b, "mem_total_kb", ns->mem_total_kb);
			hr_json_add_int(b, "mem_free_kb", ns->mem_free_kb);
		}
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	c = &host->compact;
	json_builder_set_member_name(b, "compaction");
	json_builder_begin_object(b);
	hr_json_add_int(b, "compact_stall", c->compact_stall);
	hr_json_add_int(b, "compact_fail", c->compact_fail);
	hr_json_add_int(b, "compact_success", c->compact_success);
	hr_json_add_int(b, "compact_migrate_scanned", c->compact_migrate_scanned);
	hr_json_add_int(b, "compact_free_scanned", c->compact_free_scanned);
	hr_json_add_int(b, "compact_isolated", c->compact_isolated);
	hr_json_add_int(b, "compact_daemon_wake", c->compact_daemon_wake);
	hr_json_add_int(b, "pgmigrate_success", c->pgmigrate_success);
	hr_json_add_int(b, "pgmigrate_fail", c->pgmigrate_fail);
	hr_json_add_int(b, "thp_fault_alloc", c->thp_fault_alloc);
	hr_json_add_int(b, "thp_fault_fallback", c->thp_fault_fallback);
	hr_json_add_int(b, "thp_collapse_alloc", c->thp_collapse_alloc);
	hr_json_add_int(b, "thp_split_page", c->thp_split_page);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "thp");
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "enabled");
	json_builder_add_string_value(b, host->thp.enabled);
	json_builder_set_member_name(b, "defrag");
	json_builder_add_string_value(b, host->thp.defrag);
	json_builder_set_member_name(b, "khugepaged_defrag");
	if (host->thp.khugepaged_defrag != NULL)
		json_builder_add_string_value(b, host->thp.khugepaged_defrag);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "hpage_pmd_size", host->thp.hpage_pmd_size);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "backing");
	json_builder_add_string_value(b, hr_backing_mode_to_string(p->config->backing));
	json_builder_end_object(b);
	return json_builder_get_root(b);
}
