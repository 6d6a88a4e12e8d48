/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Reservations: "make N bytes of THP-capable memory free on node X (or any)
 * by deadline D, strict or best effort", asked by a requester (a VM
 * launcher, an operator).
 *
 *   created --start--> in-progress --enough--> ready --consume--> consumed
 *      |                   |                     |
 *      |                   |                     +--ttl passed---> expired
 *      |                   +--deadline, best effort, some--------> ready (partial)
 *      |                   +--deadline or impossible, strict-----> failed
 *      |                   +--nothing obtained, best effort------> failed
 *      +-------------------+---------------------+--release------> cancelled
 *
 * Progress is measured, not assumed: a reservation counts the 2 MiB blocks
 * it holds in the node's hugetlb pool (pool_blocks) or, where the daemon
 * does not hold blocks (no hugetlb pool), the node's free 2 MiB blocks
 * above the high watermark (buddyinfo, zoneinfo) minus what other live
 * reservations (in progress or ready) already count. So memory
 * promised once is never promised twice: a ready reservation's blocks are
 * subtracted from what a later one may count, until it is consumed,
 * released or expires.
 *
 * Every step the daemon takes for a reservation (free blocks already
 * there, host compaction, a guest's donation) is recorded with what it was
 * expected to give, what it gave and what it cost. Guest blocks held for a
 * reservation are recorded too (guest UUID, gpa, since when): they go back
 * to their guests when the reservation is released, cancelled, failed or
 * expired, and, for a consumed one, once the host has room again (the
 * node's free memory above a configured high mark), oldest first.
 *
 * The store persists itself as JSON, atomically (a temporary file, fsync,
 * rename) after every change, in a thread, so a daemon restart keeps every
 * reservation, its steps in flight, its holds and how long ago the QEMUs
 * they name were seen gone (the migration grace goes on). A write that
 * fails is tried again on its own, backing off from 1 s to 30 s, so the
 * file is not left stale when no change follows. Files of versions 1
 * (holds named by guest UUID) and 2 (holds without their VM's UUID, no
 * gone times) are migrated on load. A file that cannot be parsed is moved aside to
 * FILE.corrupt-TIMESTAMP and the store starts empty with an error that
 * says so; it never takes the daemon down.
 */

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define HR_RESERVATION_ERROR (hr_reservation_error_quark())
GQuark
hr_reservation_error_quark(void);

typedef enum {
	HR_RESERVATION_ERROR_INVALID,	/* a parameter or a transition is not allowed */
	HR_RESERVATION_ERROR_NOT_FOUND, /* no such reservation */
	HR_RESERVATION_ERROR_CORRUPT,	/* the state file cannot be read back */
	HR_RESERVATION_ERROR_IO,	/* the state file cannot be written */
} HrReservationError;

typedef enum {
	HR_RESERVATION_CREATED,
	HR_RESERVATION_IN_PROGRESS,
	HR_RESERVATION_READY,
	HR_RESERVATION_CONSUMED,
	HR_RESERVATION_EXPIRED,
	HR_RESERVATION_CANCELLED,
	HR_RESERVATION_FAILED,
	HR_RESERVATION_N_STATES,
} HrReservationState;

#define HR_RESERVATION_ANY_NODE (-1)

/* what a step does; its name in the API and the state file */
typedef enum {
	HR_STEP_FREE,	 /* "free": blocks free already (or held in the pool as they were) */
	HR_STEP_COMPACT, /* "compact": compaction of the node (or the pool assembling) */
	HR_STEP_DONATE,	 /* "donate": a guest's evacuation */
	HR_STEP_RESERVE, /* "reserve": taken from the standing reserve (hr-reserve) */
	HR_STEP_N_KINDS,
} HrStepKind;

/* where a step is: running until it ends done, short or failed */
typedef enum {
	HR_STEP_RUNNING, /* "running" */
	HR_STEP_DONE,	 /* "done": it gave what was expected */
	HR_STEP_SHORT,	 /* "short": less */
	HR_STEP_FAILED,	 /* "failed": nothing, or an error */
	HR_STEP_N_STATES,
} HrStepState;

/* One thing done for a reservation, with what it gave and cost. */
typedef struct {
	HrStepKind kind;
	gint node;
	gchar *guest;	    /* donate: the guest's name */
	gchar *guest_key;   /* donate: HrGuest.key, NULL in a version 1 file */
	guint64 request_id; /* donate: the evacuation request */
	HrStepState state;
	gchar *detail;		/* why it fell short or failed, or NULL */
	guint64 expect_milli;	/* the planner's expected gain, x1000 blocks */
	gint64 gained;		/* host 2 MiB blocks it gave, measured */
	guint64 blocks_asked;	/* donate: blocks requested */
	guint64 blocks_held;	/* donate: blocks the guest handed over */
	guint64 pages_migrated; /* cost: guest or host pages migrated */
	guint64 pages_scanned;	/* cost: host compaction pages scanned */
	guint64 elapsed_ms;
	gint64 started_at; /* wall clock, us */
} HrReservationStep;

/* A guest block held on behalf of a reservation. */
typedef struct {
	gchar *guest_key; /* HrGuest.key: the guest bound to its QEMU process */
	/*
	 * The VM's UUID (its HELLO's), NULL for a VM without one: a migration's
	 * destination adopts the hold by it, by name without. A hold from a
	 * version 1 file has no key and names its guest by this alone, until a
	 * guest adopts it.
	 */
	gchar *guest_uuid;
	gchar *guest_name;
	guint64 gpa;
	gint64 held_at; /* wall clock, us */
} HrReservationHold;

typedef struct {
	gchar *id; /* "r1", "r2", ...: unique for the store's life */
	guint64 bytes;
	guint64 need_blocks; /* bytes in 2 MiB blocks, rounded up */
	gint node;	     /* asked: a node, or HR_RESERVATION_ANY_NODE */
	gint planned_node;   /* the node progress is counted on; -1 before */
	gboolean strict;
	gchar *requester;
	HrReservationState state;
	gchar *reason; /* why it failed, expired, was cancelled or is partial */
	gboolean partial;
	guint64 obtained;   /* blocks counted for it (<= need_blocks) */
	gint64 created_at;  /* wall clock, us */
	gint64 deadline_at; /* 0: none */
	gint64 updated_at;
	gint64 finished_at;	 /* reached a final state, or ready */
	GPtrArray *steps;	 /* HrReservationStep */
	GPtrArray *holds;	 /* HrReservationHold */
	guint64 blocks_returned; /* holds given back so far */
	/*
	 * 2 MiB blocks the daemon holds for it in the planned node's hugetlb
	 * pool (hr_pool_grow()): assembled and out of everybody's reach until
	 * it is consumed (given back just before the VM allocates) or ends.
	 */
	guint64 pool_blocks;
} HrReservation;

typedef struct _HrReservationStore HrReservationStore;
typedef void (*HrReservationFunc)(HrReservation *r, gpointer user_data);

const gchar *
hr_step_kind_to_string(HrStepKind kind);
/* -1 when unknown */
gint
hr_step_kind_from_string(const gchar *str);
const gchar *
hr_step_state_to_string(HrStepState state);
/* -1 when unknown */
gint
hr_step_state_from_string(const gchar *str);
/* @step ended (or is again) @state, for @detail (or NULL) */
void
hr_reservation_step_set_state(HrReservationStep *step, HrStepState state, const gchar *detail);

const gchar *
hr_reservation_state_to_string(HrReservationState state);
/* -1 when unknown */
gint
hr_reservation_state_from_string(const gchar *str);
/* ready, consumed, expired, cancelled and failed: no more work */
gboolean
hr_reservation_state_is_settled(HrReservationState state);
/* it counts memory as promised: in progress or ready */
gboolean
hr_reservation_state_is_live(HrReservationState state);
/* may @from go to @to? */
gboolean
hr_reservation_transition_allowed(HrReservationState from, HrReservationState to);

/* "1G", "512M", "2048K", "4096" (bytes); FALSE for garbage or 0 */
gboolean
hr_parse_size(const gchar *str, guint64 *bytes);

/*
 * The ledger: what guests hold for the API's own requests (an operator's
 * hugeroomctl evacuate) and those requests while they run, per guest key,
 * saved with the reservations. After a daemon restart a held block that
 * neither a reservation nor the ledger owns is an orphan.
 */
void
hr_reservation_store_ledger_add(HrReservationStore *store, const gchar *guest_key, guint64 gpa,
				guint64 request_id);
/* is @gpa (or, @gpa 0, @request_id) owned by the API? */
gboolean
hr_reservation_store_ledger_has(HrReservationStore *store, const gchar *guest_key, guint64 gpa,
				guint64 request_id);
/* does the API have a request of @guest_key's that runs (or ran when we stopped)? */
gboolean
hr_reservation_store_ledger_has_requests(HrReservationStore *store, const gchar *guest_key);
/*
 * Drop @guest_key's blocks that are not in @held (gpa -> anything) and its
 * requests @is_live says are over; saves when something went.
 */
void
hr_reservation_store_ledger_sync(
    HrReservationStore *store, const gchar *guest_key, GHashTable *held,
    gboolean (*is_live)(guint64 request_id, gint64 since, gpointer data), gpointer data);
/* @from's entries become @to's (a QEMU process that took the guest over); saves */
void
hr_reservation_store_ledger_rekey(HrReservationStore *store, const gchar *from, const gchar *to);
guint
hr_reservation_store_ledger_size(HrReservationStore *store);

/*
 * How long ago (us) the QEMU process of @guest_key was first seen gone,
 * the first call starting the clock: saved with the reservations, so a
 * restarted daemon goes on with a migration grace where it was.
 * G_MAXINT64 for a process of an earlier boot.
 */
gint64
hr_reservation_store_gone_for(HrReservationStore *store, const gchar *guest_key);
/* forget the gone processes no hold names any more; saves when some went */
void
hr_reservation_store_gone_prune(HrReservationStore *store);

/* @path: the JSON file; NULL keeps everything in memory only (tests) */
HrReservationStore *
hr_reservation_store_new(const gchar *path);
void
hr_reservation_store_free(HrReservationStore *store);
/*
 * Read the file. A missing file is an empty store. A corrupt or truncated
 * one is moved aside (the error names where) and the store stays empty.
 */
gboolean
hr_reservation_store_load(HrReservationStore *store, GError **error);
/* write the file atomically, now */
gboolean
hr_reservation_store_save(HrReservationStore *store, GError **error);
/*
 * Every change below saves in a thread, off the main loop: the latest
 * state is written once the write in progress is done. A failed write
 * (a full disk) leaves the previous file as it was; it is logged (once
 * until a write succeeds again), counted, and written again after 1 s,
 * 2 s, ... 30 s at most, or at once with the next change, until it is.
 */
guint64
hr_reservation_store_save_failures(HrReservationStore *store);
/* the error of the latest write if it failed, else NULL (free it) */
gchar *
hr_reservation_store_dup_save_error(HrReservationStore *store);
/* wait for the writes in progress, not for a retry's time (tests, shutdown) */
void
hr_reservation_store_flush(HrReservationStore *store);
/*
 * At most @max reservations are kept: creating one more forgets the
 * oldest settled one that holds nothing, or fails when there is none.
 */
void
hr_reservation_store_set_max(HrReservationStore *store, guint max);
const gchar *
hr_reservation_store_get_path(HrReservationStore *store);

HrReservation *
hr_reservation_store_create(HrReservationStore *store, guint64 bytes, gint node, gint64 deadline_at,
			    gboolean strict, const gchar *requester, GError **error);
HrReservation *
hr_reservation_store_find(HrReservationStore *store, const gchar *id);
/* every reservation, oldest first */
GPtrArray *
hr_reservation_store_list(HrReservationStore *store);

/* checked transition; saves. @reason may be NULL */
gboolean
hr_reservation_set_state(HrReservationStore *store, HrReservation *r, HrReservationState state,
			 const gchar *reason, GError **error);
/* blocks counted for @r (clamped to its need); saves when it changed */
void
hr_reservation_set_obtained(HrReservationStore *store, HrReservation *r, guint64 blocks);
/* a new step, owned by @r; the caller fills it and calls _touch */
HrReservationStep *
hr_reservation_add_step(HrReservation *r, HrStepKind kind, gint node);
void
hr_reservation_add_hold(HrReservation *r, const gchar *guest_key, const gchar *guest_name,
			guint64 gpa);
/* remove and return (as a new array, oldest first) up to @max holds of @r */
GPtrArray *
hr_reservation_take_holds(HrReservation *r, guint max);
/*
 * Move up to @max holds, oldest first, from @from to @to (the standing
 * reserve handing its blocks over): not returned, only owned by @to now.
 * The caller touches both. Returns how many moved.
 */
guint
hr_reservation_move_holds(HrReservation *from, HrReservation *to, guint max);
/* mark changed, save (logs a failed save) and tell the changed function */
void
hr_reservation_touch(HrReservationStore *store, HrReservation *r);
/* told of every change of a reservation that goes through _touch */
void
hr_reservation_store_set_changed_func(HrReservationStore *store, HrReservationFunc func,
				      gpointer user_data);

/*
 * Blocks promised on @node by live reservations other than @except
 * (NULL: all). A reservation whose node is not decided yet promises
 * nothing.
 */
guint64
hr_reservation_store_promised(HrReservationStore *store, gint node, const HrReservation *except);

void
hr_reservation_hold_free(HrReservationHold *hold);
/* @hold is @guest_key's now (a QEMU process of its VM that took it over) */
void
hr_reservation_hold_set_key(HrReservationHold *hold, const gchar *guest_key);
/*
 * @r as the state file keeps it (hr-reservation-file.c); the API's view of
 * a reservation is the API's (hr_api_reservation_add_json)
 */
void
hr_reservation_add_json(HrReservation *r, JsonBuilder *b, gboolean with_steps);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrReservationStore, hr_reservation_store_free)

G_END_DECLS
