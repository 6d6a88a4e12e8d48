/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * Driving a reservation: each tick's decision, the plan for each live
 * reservation, its deadline, and how it settles (ready, failed, ...).
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare-private.h"

/* ---------------------------------------------------------------------- */
/* Driving a reservation */

void
prep_settle(HrPrepare *p, HrReservation *r, HrReservationState state, gboolean partial,
	    const gchar *reason)
{
	g_autoptr(GError) error = NULL;
	Run *run = g_hash_table_lookup(p->runs, r->id);
	prep_cancel_ops(p, r);
	if (run != NULL && run->pool_cancel != NULL)
		g_cancellable_cancel(run->pool_cancel);
	r->partial = partial;
	if (!hr_reservation_set_state(p->store, r, state, reason, &error)) {
		g_warning("%s", error->message);
		return;
	}
	if (state != HR_RESERVATION_READY && state != HR_RESERVATION_CONSUMED) {
		g_autoptr(GError) pool_error = NULL;
		if (!prep_release_pool(p, r, &pool_error))
			g_warning("reservation %s: %s", r->id, pool_error->message);
		prep_return_holds(p, r, G_MAXUINT, hr_reservation_state_to_string(state));
	}
}

static gint
choose_node(HrPrepare *p, const HrHostState *host, HrReservation *r)
{
	gint best = -1;
	gint64 best_avail = G_MININT64;
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		gint64 avail = (gint64)hr_prepare_node_available(ns) -
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
	prep_emit(p, HR_PREPARE_PLAN_MADE, r, g_get_monotonic_time() - start);
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
		prep_settle(p, r, HR_RESERVATION_FAILED, r->obtained > 0, why);
	else
		prep_settle(p, r, HR_RESERVATION_READY, TRUE, why);
	return TRUE;
}

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

/*
 * What the running steps of @r are still expected to bring, in blocks: a
 * donation's expected gain less the blocks its guest handed over so far
 * (those are free on the host already, or in the pool pool_unclaimed()
 * counts them), a compaction's whole expected gain. The pool's grow is not
 * one of them: drive_pool() counts it on its own.
 */
static guint64
running_gain(HrPrepare *p, HrReservation *r, Run *run)
{
	guint64 milli = 0;

	for (guint i = 0; i < p->ops->len; i++) {
		const Op *op = g_ptr_array_index(p->ops, i);
		const HrReservationStep *s;
		guint64 held_milli = 0;

		if (op->returning != NULL || g_strcmp0(op->res_id, r->id) != 0 ||
		    op->step_index >= r->steps->len)
			continue;
		if (op->request == NULL && run->pool_mode)
			continue;
		s = g_ptr_array_index(r->steps, op->step_index);
		if (op->request != NULL && op->request->blocks != NULL)
			held_milli = (guint64)op->request->blocks->len * 1000;
		milli += s->expect_milli > held_milli ? s->expect_milli - held_milli : 0;
	}
	return (milli + 999) / 1000;
}

/*
 * In the pool, the blocks guests handed over since the last grow started:
 * running_gain() no longer counts them and no grow has asked for them
 * (the one that runs was asked before they were freed; a stuck one waits
 * for its retry), yet the pool's next grow takes them. Without them the
 * late plan asked the demo's donors for 475 blocks where 341 were needed.
 */
static guint64
pool_unclaimed(HrPrepare *p, HrReservation *r, Run *run)
{
	guint64 held = prep_handed_over(p, r, run);

	return held > run->pool_held_mark ? held - run->pool_held_mark : 0;
}

/* a guest with an evacuation (or a return) of ours in flight */
static gboolean
guest_busy(HrPrepare *p, guint64 guest_id)
{
	for (guint i = 0; i < p->ops->len; i++) {
		const Op *op = g_ptr_array_index(p->ops, i);
		if (op->request != NULL && op->guest_id == guest_id)
			return TRUE;
	}
	return FALSE;
}

/*
 * Donors that come late. The steps a plan starts run to their end before
 * the next plan, so a donor that connects while they run, or whose host
 * map arrives after wait_for_maps() gave up on it, would sit out until the
 * last of them ends. While steps run, plan again for the donors that have
 * none, for what the running steps are not expected to bring: the plan is
 * asked for @want_blocks less their expected gains, the donors with a step
 * in flight are left out of it. @want_blocks is what drive() asks the
 * planner for (it counts the node's free blocks itself), or in the pool
 * what is left beyond the pool and its grow.
 */
static void
plan_late(HrPrepare *p, const HrHostState *host, HrReservation *r, Run *run, guint64 want_blocks,
	  gboolean guests_too, gint64 remaining_ms)
{
	guint64 coming = running_gain(p, r, run) + (run->pool_mode ? pool_unclaimed(p, r, run) : 0);
	guint idle = 0, donations = 0;
	g_autoptr(Input) in = NULL;
	g_autoptr(HrPlan) plan = NULL;
	HrPlanRequest req = {0};

	if (!guests_too || want_blocks <= coming + (run->pool_mode ? 0 : r->obtained))
		return;
	in = prep_build_input(p, host, r, run, TRUE);
	for (guint i = 0; i < in->guests->len; i++) {
		HrPlanGuest *pg = &g_array_index(in->guests, HrPlanGuest, i);
		HrGuest *guest = g_ptr_array_index(in->refs, i);
		GuestPlanState *gs = prep_get_gstate(p, guest);
		if (!pg->donor)
			continue;
		if (guest_busy(p, hr_guest_get_id(guest)))
			pg->donor = FALSE;
		/* one whose host map is still being read is planned for once it is in */
		else if (gs->map != NULL || !gs->scanning)
			idle++;
	}
	if (idle == 0)
		return;
	req.bytes = (want_blocks - coming) * HR_PLAN_BLOCK_BYTES;
	req.node = r->planned_node;
	req.deadline_ms = remaining_ms > 0 ? (guint64)remaining_ms : 0;
	req.strict = FALSE;
	plan = plan_timed(p, r, &req, &in->input);
	for (guint i = 0; i < plan->steps->len; i++)
		donations += ((const HrPlanStep *)g_ptr_array_index(plan->steps, i))->kind ==
			     HR_PLAN_STEP_DONATE;
	if (donations == 0)
		return;
	g_info("reservation %s: %u donors without a step while %u run: planned for the "
	       "%" G_GUINT64_FORMAT " blocks beyond the %" G_GUINT64_FORMAT
	       " the running steps are expected to bring",
	       r->id, idle, run->in_flight,
	       want_blocks - coming - (run->pool_mode ? 0 : MIN(r->obtained, want_blocks - coming)),
	       coming);
	prep_start_plan_steps(p, r, run, in, plan, remaining_ms);
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
		prep_settle(p, r, HR_RESERVATION_READY, FALSE, why);
		return;
	}
	if (past_deadline(p, r, &remaining_ms))
		return;
	want = r->need_blocks - r->pool_blocks;
	retry = run->pool_stuck && run->pool_empty_grows < POOL_MAX_EMPTY_GROWS && headroom > 0;
	if (!run->pool_busy && headroom > 0 &&
	    (!run->pool_stuck || (retry && g_get_monotonic_time() >= run->pool_retry_at)))
		prep_start_pool(p, r, run, r->planned_node, MIN(want, headroom), ns->free_blocks);
	/* what the grow that runs (or could run) will hold; donors give the rest */
	coming = run->pool_busy ? run->pool_asked : run->pool_stuck ? 0 : MIN(want, headroom);
	remaining = want > coming ? want - coming : 0;
	if (run->in_flight > 0) {
		plan_late(p, host, r, run, remaining, TRUE, remaining_ms);
		return;
	}
	if (remaining == 0)
		return;
	in = prep_build_input(p, host, r, run, TRUE);
	if (wait_for_maps(r, run, in))
		return;
	req.bytes = remaining * HR_PLAN_BLOCK_BYTES;
	req.node = r->planned_node;
	req.deadline_ms = remaining_ms > 0 ? (guint64)remaining_ms : 0;
	req.strict = FALSE; /* every block a donor gives counts */
	plan = plan_timed(p, r, &req, &in->input);
	prep_start_plan_steps(p, r, run, in, plan, remaining_ms);
	if (run->in_flight > 0 || run->pool_busy || in->maps_pending > 0 || retry)
		return;
	if (plan->guests_deferred > 0 && !r->strict)
		return;
	/*
	 * Grows that got nothing while the node has free memory in fragments:
	 * after failures the kernel defers its own compaction (for up to 64
	 * tries), so those fragments stay. A write to the node's compact file
	 * is not deferred: once, then grow again.
	 */
	if (run->pool_stuck && !run->compacted && headroom > ns->free_blocks) {
		g_info("reservation %s: the pool's grows came up short with %" G_GUINT64_FORMAT
		       " free 2 MiB blocks for %" G_GUINT64_FORMAT " blocks of free memory: "
		       "compacting before the next",
		       r->id, ns->free_blocks, headroom);
		run->pool_empty_grows = 0;
		run->pool_retry_at = G_MAXINT64; /* compact_done_cb() sets it */
		prep_start_compact(p, r, run, r->planned_node, 0);
		return;
	}
	why = g_strdup_printf("no more sources: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
			      " blocks held, the node has no more free memory to assemble them "
			      "from and no donor can give more%s%s",
			      r->pool_blocks, r->need_blocks, run->why_not != NULL ? ": " : "",
			      run->why_not != NULL ? run->why_not : "");
	if (r->strict || r->pool_blocks == 0)
		prep_settle(p, r, HR_RESERVATION_FAILED, r->pool_blocks > 0, why);
	else
		prep_settle(p, r, HR_RESERVATION_READY, TRUE, why);
}

void
prep_drive(HrPrepare *p, const HrHostState *host, HrReservation *r)
{
	Run *run = prep_get_run(p, r);
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
			prep_settle(p, r, HR_RESERVATION_FAILED, FALSE, why);
			return;
		}
		r->planned_node = r->node >= 0 ? r->node : choose_node(p, host, r);
		hr_reservation_set_state(p->store, r, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	}
	ns = hr_host_state_get_node(host, r->planned_node);
	if (ns == NULL) {
		why = g_strdup_printf("the host has no NUMA node %d", r->planned_node);
		prep_settle(p, r, HR_RESERVATION_FAILED, FALSE, why);
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
	avail = hr_prepare_node_available(ns);
	avail = avail > promised ? avail - promised : 0;
	hr_reservation_set_obtained(p->store, r, avail);
	if (!run->free_recorded) {
		/* what was there from the start: the first step, at no cost */
		if (r->obtained > 0) {
			HrReservationStep *s =
			    hr_reservation_add_step(r, HR_STEP_FREE, r->planned_node);
			s->gained = r->obtained;
			s->expect_milli = r->obtained * 1000;
			hr_reservation_step_set_state(s, HR_STEP_DONE,
						      "free already, above the high watermark");
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
		prep_settle(p, r, HR_RESERVATION_READY, FALSE, why);
		return;
	}
	if (past_deadline(p, r, &remaining_ms))
		return;
	if (run->in_flight > 0) {
		plan_late(p, host, r, run, r->need_blocks, run->held_total < run->donate_cap,
			  remaining_ms);
		return;
	}
	if (run->compact_after) {
		run->compact_after = FALSE;
		if (!run->compacted) {
			prep_start_compact(p, r, run, r->planned_node, 0);
			return;
		}
	}

	/*
	 * Guests that handed over twice what was asked without the host seeing
	 * it (4 KiB-backed blocks compaction could not assemble, a QEMU that
	 * does not discard) are not asked again for this reservation.
	 */
	in = prep_build_input(p, host, r, run, run->held_total < run->donate_cap);
	if (wait_for_maps(r, run, in))
		return;
	req.bytes = r->need_blocks * HR_PLAN_BLOCK_BYTES;
	req.node = r->planned_node;
	req.deadline_ms = remaining_ms > 0 ? (guint64)remaining_ms : 0;
	req.strict = r->strict;
	plan = plan_timed(p, r, &req, &in->input);
	prep_start_plan_steps(p, r, run, in, plan, remaining_ms);
	if (run->in_flight == 0 && run->compact_after && !run->compacted) {
		run->compact_after = FALSE;
		prep_start_compact(p, r, run, r->planned_node, 0);
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
		prep_settle(p, r, HR_RESERVATION_FAILED, r->obtained > 0, why);
	else
		prep_settle(p, r, HR_RESERVATION_READY, TRUE, why);
}

/* the decision of a tick, on a snapshot read since the last change of ours */
void
prep_decide(HrPrepare *p, const HrHostState *host)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	gint64 now = g_get_real_time();

	prep_measure_donations(p);
	/* oldest first: an older reservation gets its promise first */
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		switch (r->state) {
		case HR_RESERVATION_CREATED:
		case HR_RESERVATION_IN_PROGRESS:
			prep_drive(p, host, r);
			break;
		case HR_RESERVATION_READY:
			/* the standing reserve's parts wait for a reservation to take them */
			if (hr_reserve_is_part(r))
				break;
			if (now - r->finished_at >
			    (gint64)p->config->reservation_ttl_s * G_USEC_PER_SEC) {
				g_autofree gchar *why =
				    g_strdup_printf("not consumed within %u s of being ready",
						    p->config->reservation_ttl_s);
				prep_settle(p, r, HR_RESERVATION_EXPIRED, r->partial, why);
			}
			break;
		case HR_RESERVATION_CANCELLED:
		case HR_RESERVATION_FAILED:
		case HR_RESERVATION_EXPIRED:
			/* holds of guests that were away when it ended */
			if (r->holds->len > 0)
				prep_return_holds(p, r, G_MAXUINT, "the reservation ended");
			break;
		default:
			break;
		}
	}
	prep_return_by_high_mark(p, host);
	hr_reserve_tick(p->reserve, host);
}
