/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The store of reservations (hr-reservation-store.c): the list, the
 * ledger, the gone times, the changes that save, and the state file
 * (hr-reservation-file.c). A reservation itself is hr-reservation.h.
 */

#include <json-glib/json-glib.h>

#include "hr-reservation.h"

G_BEGIN_DECLS

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
/*
 * how many reservations of the file loaded were skipped; @errors (may be
 * NULL) gets why, for the first few
 */
guint
hr_reservation_store_get_skipped(HrReservationStore *store, GPtrArray **errors);
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
/* the reservation created with Idempotency-Key @key, or NULL */
HrReservation *
hr_reservation_store_find_by_idempotency_key(HrReservationStore *store, const gchar *key);
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

/*
 * @r as the state file keeps it (hr-reservation-file.c); the API's view of
 * a reservation is the API's (hr_api_reservation_add_json)
 */
void
hr_reservation_add_json(HrReservation *r, JsonBuilder *b, gboolean with_steps);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrReservationStore, hr_reservation_store_free)

G_END_DECLS
