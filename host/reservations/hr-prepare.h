/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The daemon's reservation executor: it drives every live reservation
 * (hr-reservation) to ready with the planner (hr-planner) over the host's
 * memory state (hr-monitor) and each guest's latest status.
 *
 * Every tick (reservation_tick_ms) it reads the host and the donors' host
 * backing in a worker thread (hr-snapshot) and decides once that snapshot
 * is in, never reading /proc or pagemap on the main loop; a snapshot read
 * before one of its own steps ended is read again first. It counts for each
 * reservation the free 2 MiB blocks of its node above the high watermark
 * not promised to others, and, when that is short and nothing runs for it,
 * plans the remainder and starts the plan's steps: host compaction of the
 * node (hr-compact, in a thread), and guest donations, one EVACUATE per
 * donor with the planner's blocks (hr_daemon_submit), all at once. A step
 * that falls short is simply followed by a new plan; the blocks it tried
 * are not offered again and a guest whose evacuation failed is deferred
 * with backoff. A deadline ends the work: best effort keeps what it got
 * (ready, partial), strict fails; a plan that cannot go further ends it
 * the same way before the deadline.
 *
 * Blocks that guests hand over are recorded as the reservation's holds and
 * go back (RETURN) when it is released, cancelled, fails or expires, and,
 * once it is consumed, when its node has more than return_high_mark_mb
 * free, oldest holds first.
 */

#include "hr-config.h"
#include "hr-core.h"
#include "hr-guest.h"
#include "hr-monitor.h"
#include "hr-planner.h"
#include "hr-prepare-types.h"
#include "hr-reservation-store.h"
#include "hr-reserve.h"

G_BEGIN_DECLS

/* loads the state file; a corrupt one is set aside and logged */
HrPrepare *
hr_prepare_new(HrCore *core);
void
hr_prepare_free(HrPrepare *prepare);
HrReservationStore *
hr_prepare_get_store(HrPrepare *prepare);
void
hr_prepare_listen(HrPrepare *prepare, HrPrepareFunc func, gpointer user_data);
void
hr_prepare_unlisten(HrPrepare *prepare, HrPrepareFunc func, gpointer user_data);
/* "reservation", "plan": the event stream's type names */
const gchar *
hr_prepare_event_kind_to_string(HrPrepareEventKind kind);
/* drop what the executor keeps of a guest the daemon forgets */
void
hr_prepare_forget_guest(HrPrepare *prepare, HrGuest *guest);
/* @guest's held set changed: reconcile it with the owners of its blocks */
void
hr_prepare_held_changed(HrPrepare *prepare, HrGuest *guest);
/* guests the executor keeps state of (tests) */
guint
hr_prepare_n_guest_states(HrPrepare *prepare);

HrReservation *
hr_prepare_create(HrPrepare *prepare, guint64 bytes, gint node, guint deadline_s, gboolean strict,
		  const gchar *requester, GError **error);
/* cancel a reservation that is not settled, or release a ready one */
gboolean
hr_prepare_release(HrPrepare *prepare, const gchar *id, GError **error);
/* the standing reserve, for the API */
HrReserve *
hr_prepare_get_reserve(HrPrepare *prepare);
/* the requester used the memory */
gboolean
hr_prepare_consume(HrPrepare *prepare, const gchar *id, GError **error);
/* run one tick now (tests; the timer does it otherwise) */
void
hr_prepare_tick(HrPrepare *prepare);
/*
 * The host changed behind the executor's back (a test rewrote its fake
 * host): a snapshot being read may predate it and is read again before
 * anything is decided on it, as after one of the executor's own steps.
 */
void
hr_prepare_host_changed(HrPrepare *prepare);

/*
 * The planner's choice for @request over @host and the guests' live state,
 * without acting on it: what POST /v1/plan shows.
 * A donor's host backing is as the executor last read it; one it never
 * read (or read over 10 s ago) is scanned in a thread, and counts as being
 * scanned until then. Nothing here reads /proc or pagemap.
 */
typedef struct {
	HrPlan *plan;
	GPtrArray *step_guests; /* the name of each step's guest, NULL for a step without one */
	guint n_guests;		/* the guests the planner was given */
	gint64 input_us;	/* building its input */
	gint64 decision_us;	/* the planner's decision */
} HrPlanTrial;
HrPlanTrial *
hr_prepare_try_plan(HrPrepare *prepare, const HrHostState *host, const HrPlanRequest *request);
void
hr_plan_trial_free(HrPlanTrial *trial);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrPlanTrial, hr_plan_trial_free)

/*
 * What a prepare could make ready now, per node, within each of
 * within_s[] (10, 30 and 60 s), from a dry-run plan for all of the node
 * with each as its deadline (what is promised to reservations counted out,
 * as for any plan). A few plans: the API caches it.
 */
#define HR_CAPACITY_WINDOWS 3
typedef struct {
	gint node;
	guint64 ready_bytes[HR_CAPACITY_WINDOWS];
} HrCapacityNode;
typedef struct {
	guint within_s[HR_CAPACITY_WINDOWS];
	GArray *nodes; /* HrCapacityNode, in the host state's order */
	guint n_guests;
	gint64 decision_us;
} HrCapacity;
HrCapacity *
hr_prepare_capacity(HrPrepare *prepare, const HrHostState *host);
void
hr_capacity_free(HrCapacity *capacity);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrCapacity, hr_capacity_free)
/* the latest plan made for a reservation, or NULL */
const gchar *
hr_prepare_get_last_plan(HrPrepare *prepare, const gchar *id);

/* the free 2 MiB blocks of a node above its high watermark, as the planner's FREE step counts */
guint64
hr_prepare_node_available(const HrNodeState *ns);

G_END_DECLS
