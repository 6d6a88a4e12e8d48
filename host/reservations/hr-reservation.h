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
 * gone times) are migrated on load. A reservation of the file that cannot
 * be read is skipped, logged and counted (hr_reservation_store_get_skipped:
 * GET /v1/host and /metrics show it), the others are loaded, and the file
 * as it was is kept as FILE.skipped-TIMESTAMP. A file that cannot be parsed
 * at all is moved aside to FILE.corrupt-TIMESTAMP and the store starts
 * empty with an error that says so; it never takes the daemon down. The
 * file's directory must be owned by root or the daemon's uid and not
 * writable by others: else it is neither read nor written (the writes
 * fail, so GET /healthz says degraded).
 */

#include <glib.h>

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
	gchar *id; /* "r-" and a ULID: unique across restarts and hosts ("r1" in old files) */
	guint64 bytes;
	guint64 need_blocks; /* bytes in 2 MiB blocks, rounded up */
	gint node;	     /* asked: a node, or HR_RESERVATION_ANY_NODE */
	gint planned_node;   /* the node progress is counted on; -1 before */
	gboolean strict;
	gchar *requester;
	/*
	 * The client's Idempotency-Key it was created with, and a digest of
	 * what it asked (bytes, node, deadline, strict, requester, owner): the
	 * same key with the same request is this reservation again. NULL without.
	 */
	gchar *idempotency_key;
	gchar *request_digest;
	/*
	 * Who made it ("uid:0", "token:..."; the API's principal), NULL in
	 * files of before: only it (and the requester it named) may consume
	 * or release it unless an admin forces it.
	 */
	gchar *owner;
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

/* a reservation with no steps or holds, and its end (the store's) */
HrReservation *
hr_reservation_new(void);
void
hr_reservation_free(HrReservation *r);
void
hr_reservation_hold_free(HrReservationHold *hold);
/*
 * Counts every change of any reservation's holds (one made, freed, moved,
 * or given another owner): work that runs in slices (hr-prepare-holds.c)
 * tells by it whether what it read of the holds still stands.
 */
guint64
hr_reservation_hold_changes(void);
/* @hold is @guest_key's now (a QEMU process of its VM that took it over) */
void
hr_reservation_hold_set_key(HrReservationHold *hold, const gchar *guest_key);

G_END_DECLS
