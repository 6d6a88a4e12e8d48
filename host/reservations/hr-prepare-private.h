/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The executor's own state, shared by its files (hr-prepare*.c) and by
 * nothing else: the API is hr-prepare.h.
 */

#include <gio/gio.h>
#include <string.h>

#include "hr-compact.h"
#include "hr-listeners.h"
#include "hr-pcp.h"
#include "hr-peer.h"
#include "hr-prepare.h"
#include "hr-reserve.h"
#include "hr-snapshot.h"
#include "hr-thpmap.h"

G_BEGIN_DECLS

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
	guint64 pool_held_mark;	   /* prep_handed_over() when the last grow started */
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

/*
 * A place in a walk over every reservation's holds that runs in slices:
 * the next reservation and hold to look at. Holds made or dropped between
 * two slices may shift it: a hold is then looked at twice or not until the
 * next walk, which a test of a hold that reads only the present allows.
 */
typedef struct {
	guint res;
	guint hold;
} HoldWalk;

typedef struct _ReconcileJob ReconcileJob;

struct _HrPrepare {
	HrCore *core;
	void (*tick)(HrPrepare *p); /* hr_prepare_tick(): what a kick runs */
	guint submitting;	    /* inside prep_submit(): our requests' events */
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
	ReconcileJob *reconcile; /* the reconcile of one guest that runs in slices, or NULL */
	guint reconcile_id;	 /* the idle source that runs its next slice */
	HoldWalk gone_walk;	 /* the tick's walk for holds whose QEMU is gone */
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
	HrReserve *reserve;  /* the standing reserve, its parts our reservations */
};

typedef struct {
	HrPlanInput input;
	GArray *nodes;	      /* HrPlanNode */
	GArray *guests;	      /* HrPlanGuest */
	GPtrArray *refs;      /* HrGuest *, parallel to guests */
	GPtrArray *cand_bufs; /* HrPlanCandidate arrays to free */
	guint maps_pending;   /* donors whose host backing is being scanned */
} Input;

/* a test of a hold, for prep_drop_holds() */
typedef gboolean (*HoldPred)(HrPrepare *p, HrReservationHold *h, gpointer data);

/* hr-prepare-state.c */
GHashTable *
prep_guest_table_new(GDestroyNotify value_free);
void
prep_guest_plan_state_free(GuestPlanState *gs);
void
prep_interrupted_free(Interrupted *it);
void
prep_measure_free(Measure *m);
void
prep_run_free(Run *run);
void
prep_op_free(Op *op);
Run *
prep_get_run(HrPrepare *p, HrReservation *r);
GuestPlanState *
prep_get_gstate(HrPrepare *p, HrGuest *guest);
void
prep_kick(HrPrepare *p);
void
prep_host_changed(HrPrepare *p);
void
prep_emit(HrPrepare *p, HrPrepareEventKind kind, HrReservation *r, gint64 duration_us);
HrRequest *
prep_submit(HrPrepare *p, HrGuest *guest, const HrRequestParams *params, GError **error);
HrGuest *
prep_find_guest(HrPrepare *p, guint64 id);

/* hr-prepare-donors.c */
gboolean
prep_guest_can_donate(HrGuest *guest);
void
prep_input_free(Input *in);
void
prep_thpmap_failed(GuestPlanState *gs, HrGuest *guest, const GError *error);
Input *
prep_build_input(HrPrepare *p, const HrHostState *host, HrReservation *r, Run *run,
		 gboolean guests_too);
HrGuest *
prep_input_guest(Input *in, const HrPlanStep *step);
void
prep_defer_guest(HrPrepare *p, guint64 guest_id, gboolean failed);

/* hr-prepare-holds.c */
void
prep_return_notify(HrRequest *request, gpointer user_data);
guint
prep_return_holds(HrPrepare *p, HrReservation *r, guint max, const gchar *why);
void
prep_return_by_high_mark(HrPrepare *p, const HrHostState *host);
void
prep_find_interrupted(HrPrepare *p);
gboolean
prep_executor_request(HrPrepare *p, guint64 request_id);
void
prep_drop_holds(HrPrepare *p, HoldPred pred, gpointer data, const gchar *why);
/*
 * The same, from @walk on, until the monotonic clock passes @deadline;
 * TRUE when the walk reached the end (and @walk is back at the start).
 */
gboolean
prep_drop_holds_walk(HrPrepare *p, HoldWalk *walk, HoldPred pred, gpointer data, const gchar *why,
		     gint64 deadline);
/* the main loop stops reconciling in slices: what runs is dropped */
void
prep_reconcile_stop(HrPrepare *p);
gboolean
prep_hold_gone(HrPrepare *p, HrReservationHold *h, gpointer data);
void
prep_rekey_owner(HrPrepare *p, const gchar *from, HrGuest *to);
gboolean
prep_follow_migration(HrPrepare *p, HrGuest *gone);
void
prep_reconcile_guests(HrPrepare *p);

/* hr-prepare-steps.c */
void
prep_start_compact(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 expect_milli);
void
prep_start_pool(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 blocks,
		guint64 free_blocks);
gboolean
prep_release_pool(HrPrepare *p, HrReservation *r, GError **error);
void
prep_measure_donations(HrPrepare *p);
void
prep_donate_notify(HrRequest *request, gpointer user_data);
void
prep_cancel_ops(HrPrepare *p, HrReservation *r);
void
prep_start_plan_steps(HrPrepare *p, HrReservation *r, Run *run, Input *in, const HrPlan *plan,
		      gint64 remaining_ms);

/* hr-prepare-drive.c */
/* the blocks guests handed over for @r so far, in donations that ended and that run */
guint64
prep_handed_over(HrPrepare *p, HrReservation *r, Run *run);
void
prep_settle(HrPrepare *p, HrReservation *r, HrReservationState state, gboolean partial,
	    const gchar *reason);
void
prep_drive(HrPrepare *p, const HrHostState *host, HrReservation *r);
void
prep_decide(HrPrepare *p, const HrHostState *host);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Input, prep_input_free)

G_END_DECLS
