/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The standing reserve: 2 MiB blocks kept assembled in a node's hugetlb
 * pool ahead of demand (`reserve = SIZE[@NODE]`, PUT /v1/reserve), so that
 * a reservation, and with it the hook's prepare, is ready at once instead
 * of after the donations it would otherwise wait for.
 *
 * The reserve is made of parts: reservations of its own (requester
 * HR_RESERVE_REQUESTER, no deadline, never expiring), which the executor
 * drives like any other, from the node's free memory and from donors. One
 * part is filled at a time, at most reserve_rate_mb MiB a second, and
 * none while the host is under memory pressure (PSI some avg10 at
 * reserve_pause_psi percent or more) or a donor gave blocks back for its
 * own pressure in the last minute: the reserve is made from memory nobody
 * needs now, and no part starts while a reservation somebody asked for is
 * being prepared. A new reservation takes from the parts at once (their
 * pool blocks and, in proportion, their holds become its own, oldest part
 * first; a part being filled gives what it holds so far); the reserve
 * refills after. Under host pressure (PSI full avg10 at
 * reserve_pause_psi or more), and when a donor gives blocks back for its
 * own pressure, the reserve gives its newest part back first: before any
 * reservation somebody asked for.
 *
 * The reserve talks to the executor through HrReserveExecutor only; the
 * executor calls hr_reserve_take() when a reservation is created and
 * hr_reserve_tick() with every decision.
 */

#include "hr-config.h"
#include "hr-monitor.h"
#include "hr-reservation-store.h"

G_BEGIN_DECLS

#define HR_RESERVE_REQUESTER "hugeroomd standing reserve"

/* what the reserve asks of the executor (hr-prepare) */
typedef struct {
	HrReservation *(*create)(gpointer executor, guint64 bytes, gint node, GError **error);
	gboolean (*release)(gpointer executor, const gchar *id, GError **error);
	/* a part whose blocks were all taken: ended, nothing to give back */
	gboolean (*consume)(gpointer executor, const gchar *id, GError **error);
	/* the total of RETURNED blocks all guests gave back for their own pressure */
	guint64 (*pressure_returns)(gpointer executor);
} HrReserveExecutor;

typedef struct _HrReserve HrReserve;

HrReserve *
hr_reserve_new(const HrConfig *config, HrReservationStore *store, const HrReserveExecutor *exec,
	       gpointer executor);
void
hr_reserve_free(HrReserve *reserve);

/* "SIZE[@NODE]": "10G", "512M@1"; "0" or "" is no reserve */
gboolean
hr_reserve_parse(const gchar *str, guint64 *bytes, gint *node, GError **error);
/* the API's: what to keep from now on (0 bytes: none; the parts beyond it go back) */
gboolean
hr_reserve_set(HrReserve *reserve, guint64 bytes, gint node, GError **error);

/* is @r one of the reserve's parts (by its requester, so also after a restart)? */
gboolean
hr_reserve_is_part(const HrReservation *r);
/*
 * Move what the ready parts hold into the new reservation @r, up to its
 * need: their pool blocks and holds become @r's, @r's planned node theirs.
 * Returns the blocks moved; the caller settles @r when that is its need.
 */
guint64
hr_reserve_take(HrReserve *reserve, HrReservation *r);
/* is there a reserve to keep, or a change of its config to apply? */
gboolean
hr_reserve_wants_ticks(HrReserve *reserve);
/* every decision of the executor: refill, pause, give back */
void
hr_reserve_tick(HrReserve *reserve, const HrHostState *host);

/* what the reserve keeps and how it stands (GET /v1/reserve) */
typedef struct {
	guint64 bytes;		/* to keep; 0: none */
	gint node;		/* or HR_RESERVATION_ANY_NODE (< 0) */
	guint64 blocks;		/* @bytes in 2 MiB blocks, rounded up */
	guint64 blocks_ready;	/* held by the ready parts */
	guint64 blocks_filling; /* what the part being filled is for */
	guint parts;
	const gchar *paused; /* why the refill waits, or NULL */
	guint64 taken_blocks;
	guint64 given_back_blocks;
	gint64 last_refill_ms; /* how long the last refill after a take took, -1 none yet */
} HrReserveView;
void
hr_reserve_get_view(HrReserve *reserve, HrReserveView *view);

G_END_DECLS
