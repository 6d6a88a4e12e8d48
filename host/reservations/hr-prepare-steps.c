/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The steps a plan starts: compacting a node, growing its hugetlb pool, a
 * guest's donation (EVACUATE), and what each brought.
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare-private.h"

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
op_end(HrPrepare *p, Op *op)
{
	Run *run = g_hash_table_lookup(p->runs, op->res_id);
	if (run != NULL && run->in_flight > 0)
		run->in_flight--;
	g_ptr_array_remove(p->ops, op);
	prep_op_free(op);
	prep_host_changed(p);
	prep_kick(p);
}

static void
compact_done_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	Op *op = user_data;
	HrPrepare *p = op->prepare;
	g_autoptr(GError) error = NULL;
	g_autofree HrCompactResult *result = hr_compact_node_finish(res, &error);
	HrReservation *r;
	Run *run;
	(void)source;

	if (p == NULL) {
		prep_op_free(op);
		return;
	}
	r = hr_reservation_store_find(p->store, op->res_id);
	run = g_hash_table_lookup(p->runs, op->res_id);
	if (run != NULL && run->pool_mode)
		run->pool_retry_at = 0; /* grow now, from what it assembled */
	if (r != NULL && op->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, op->step_index);
		s->elapsed_ms = (g_get_monotonic_time() - op->started) / 1000;
		if (result == NULL) {
			hr_reservation_step_set_state(s, HR_STEP_FAILED, error->message);
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
			hr_reservation_step_set_state(
			    s,
			    (guint64)MAX(s->gained, 0) * 1000 >= s->expect_milli ? HR_STEP_DONE
										 : HR_STEP_SHORT,
			    detail);
		}
		g_info("reservation %s: compaction of node %d %s: %" G_GINT64_FORMAT
		       " blocks in %" G_GUINT64_FORMAT " ms",
		       r->id, op->node, hr_step_state_to_string(s->state), s->gained,
		       s->elapsed_ms);
		hr_reservation_touch(p->store, r);
	}
	op_end(p, op);
}

void
prep_start_compact(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 expect_milli)
{
	HrReservationStep *s = hr_reservation_add_step(r, HR_STEP_COMPACT, node);
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
	if (s->kind == HR_STEP_FREE)
		s->kind = HR_STEP_COMPACT;
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
		prep_op_free(op);
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
			hr_reservation_step_set_state(s, HR_STEP_FAILED, error->message);
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
			hr_reservation_step_set_state(s,
						      (guint64)s->gained * 1000 >= s->expect_milli
							  ? HR_STEP_DONE
						      : s->gained > 0 ? HR_STEP_SHORT
								      : HR_STEP_FAILED,
						      detail);
		}
		g_info("reservation %s: pool of node %d %s: %" G_GINT64_FORMAT
		       " blocks in %" G_GUINT64_FORMAT " ms, %" G_GUINT64_FORMAT " pages scanned",
		       r->id, op->node, hr_step_state_to_string(s->state), s->gained, s->elapsed_ms,
		       s->pages_scanned);
		hr_reservation_touch(p->store, r);
	}
	g_ptr_array_remove(p->ops, op);
	prep_op_free(op);
	prep_host_changed(p);
	prep_kick(p);
}

/* the blocks guests handed over for @r so far, in donations that ended and that run */
guint64
prep_handed_over(HrPrepare *p, HrReservation *r, Run *run)
{
	guint64 held = run->held_total;

	for (guint i = 0; i < p->ops->len; i++) {
		const Op *op = g_ptr_array_index(p->ops, i);
		if (op->returning == NULL && op->request != NULL && op->request->blocks != NULL &&
		    g_strcmp0(op->res_id, r->id) == 0)
			held += op->request->blocks->len;
	}
	return held;
}

/* hold up to @blocks free (or assemblable) blocks of @node for @r */
void
prep_start_pool(HrPrepare *p, HrReservation *r, Run *run, gint node, guint64 blocks,
		guint64 free_blocks)
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
		s = hr_reservation_add_step(
		    r, free_blocks >= blocks ? HR_STEP_FREE : HR_STEP_COMPACT, node);
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
	/* what guests handed over so far is free memory this grow may take */
	run->pool_held_mark = prep_handed_over(p, r, run);
	if (run->pool_cancel == NULL)
		run->pool_cancel = g_cancellable_new();
	g_cancellable_reset(run->pool_cancel);
	g_info("reservation %s: holding %" G_GUINT64_FORMAT " blocks in node %d's hugetlb pool "
	       "(%" G_GUINT64_FORMAT " free 2 MiB blocks there)",
	       r->id, blocks, node, free_blocks);
	hr_pool_grow_async(p->config->host_root, node, blocks, run->pool_cancel, pool_done_cb, op);
}

/* give @r's pool blocks back to the buddy allocator: the VM allocates next */
gboolean
prep_release_pool(HrPrepare *p, HrReservation *r, GError **error)
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
	prep_host_changed(p);
	hr_reservation_touch(p->store, r);
	return TRUE;
}

/* what the host got back from the donations that ended, in the snapshot decided on */
void
prep_measure_donations(HrPrepare *p)
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
	HrGuest *guest = prep_find_guest(p, op->guest_id);
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
			GuestPlanState *gs =
			    g_hash_table_lookup(p->gstates, &(guint64){hr_guest_get_id(guest)});
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
		hr_reservation_step_set_state(s,
					      held == 0		       ? HR_STEP_FAILED
					      : held < s->blocks_asked ? HR_STEP_SHORT
								       : HR_STEP_DONE,
					      detail);
		if (g_hash_table_lookup(p->runs, r->id) != NULL)
			((Run *)g_hash_table_lookup(p->runs, r->id))->held_total += held;
		for (guint i = 0; i < held; i++)
			hr_reservation_add_hold(r, op->guest_key,
						guest != NULL ? hr_guest_get_name(guest) : s->guest,
						g_array_index(request->blocks, guint64, i));
		g_info("reservation %s: %s gave %u of %" G_GUINT64_FORMAT
		       " blocks, %" G_GUINT64_FORMAT " pages migrated",
		       r->id, s->guest, held, s->blocks_asked, s->pages_migrated);
		hr_reservation_touch(p->store, r);
		/* it ended while this ran: what came in goes straight back */
		if (!hr_reservation_state_is_live(r->state) && r->state != HR_RESERVATION_CONSUMED)
			prep_return_holds(p, r, G_MAXUINT, "the reservation ended");
	}
	prep_defer_guest(p, op->guest_id, held == 0);
	op_end(p, op);
}

void
prep_donate_notify(HrRequest *request, gpointer user_data)
{
	Op *op = user_data;
	if (op->prepare == NULL || !hr_request_state_is_final(request->state))
		return;
	/* taken over by whoever sees the end first; never twice */
	hr_request_remove_listener(request, prep_donate_notify, op);
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
	HrGuest *guest = prep_input_guest(in, step);
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
	gs = prep_get_gstate(p, guest);
	tried = g_hash_table_lookup(run->tried, &(guint64){hr_guest_get_id(guest)});
	if (tried == NULL) {
		tried = g_hash_table_new_full(hr_gpa_hash, g_int64_equal, g_free, NULL);
		g_hash_table_insert(run->tried,
				    g_memdup2(&(guint64){hr_guest_get_id(guest)}, sizeof(guint64)),
				    tried);
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
	s = hr_reservation_add_step(r, HR_STEP_DONATE, step->node);
	s->guest = g_strdup(hr_guest_get_name(guest));
	s->blocks_asked = count;
	s->expect_milli = step->gain_milli;

	op = g_new0(Op, 1);
	op->prepare = p;
	op->res_id = g_strdup(r->id);
	op->step_index = r->steps->len - 1;
	op->guest_id = hr_guest_get_id(guest);
	op->guest_key = g_strdup(hr_guest_get_key(guest));
	s->guest_key = g_strdup(hr_guest_get_key(guest));
	op->node = step->node;
	op->started = g_get_monotonic_time();
	op->blocks_before = run->pool_mode ? 0 : node_free_blocks(p, step->node);
	op->rss_before_kb = guest_rss_kb(p, hr_guest_get_id(guest));

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
	/* nobody waits for the standing reserve: the donor's own tasks come first */
	params.background =
	    hr_reserve_is_part(r) && hr_guest_has_feature(guest, VIRTIO_HUGEROOM_F_BACKGROUND);
	params.notify = prep_donate_notify;
	params.notify_data = op;
	/* a donor runs density while it gives (SET_PCP goes first on its cmdq) */
	hr_pcp_evacuation_begin(p->config, guest);
	op->submitting = TRUE;
	request = prep_submit(p, guest, &params, &error);
	op->submitting = FALSE;
	if (request == NULL) {
		hr_pcp_evacuation_end(p->config, guest);
		hr_reservation_step_set_state(s, HR_STEP_FAILED, error->message);
		g_info("reservation %s: %s cannot donate: %s", r->id, hr_guest_get_name(guest),
		       error->message);
		prep_defer_guest(p, hr_guest_get_id(guest), TRUE);
		prep_op_free(op);
		return;
	}
	s->request_id = request->id;
	op->request = hr_request_ref(request);
	g_ptr_array_add(p->ops, op);
	run->in_flight++;
	/* a restart finds it running, with the request whose late HOLDs are its */
	hr_reservation_touch(p->store, r);
	g_info("reservation %s: asked %s for %u blocks%s (request %" G_GUINT64_FORMAT ")", r->id,
	       hr_guest_get_name(guest), count, n_ranges > 0 ? " of its host THP-backed ones" : "",
	       request->id);
	if (op->ended_early)
		donate_finished(p, op, request);
}

/* stop what runs for @r: cancel its evacuations (compaction cannot be stopped) */
void
prep_cancel_ops(HrPrepare *p, HrReservation *r)
{
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		HrGuest *guest;
		if (op->request == NULL || op->returning != NULL ||
		    g_strcmp0(op->res_id, r->id) != 0 ||
		    hr_request_state_is_final(op->request->state))
			continue;
		guest = prep_find_guest(p, op->guest_id);
		if (guest != NULL)
			hr_guest_cancel_request(guest, op->request->id, NULL);
	}
}

void
prep_start_plan_steps(HrPrepare *p, HrReservation *r, Run *run, Input *in, const HrPlan *plan,
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
				    hr_reservation_add_step(r, HR_STEP_FREE, step->node);
				s->expect_milli = step->gain_milli;
				s->gained = step->blocks;
				hr_reservation_step_set_state(
				    s, HR_STEP_DONE, "free already, above the high watermark");
				run->free_recorded = TRUE;
				hr_reservation_touch(p->store, r);
			}
			break;
		case HR_PLAN_STEP_COMPACT:
			if (step->after_donations)
				run->compact_after = TRUE;
			else if (!run->compacted)
				prep_start_compact(p, r, run, step->node, step->gain_milli);
			break;
		case HR_PLAN_STEP_DONATE:
			start_donate(p, r, run, in, step, remaining_ms);
			break;
		}
	}
}
