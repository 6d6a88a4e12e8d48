/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * Donor choice: the host and the guests as the planner sees them (its input),
 * which guests may donate and why not, their host backing (the THP maps), the
 * backoff of guests whose evacuations failed, and the plan's JSON.
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare-private.h"

typedef struct {
	HrPrepare *prepare; /* valid unless the scan was cancelled */
	guint64 guest_id;
} ScanCtx;

/* ---------------------------------------------------------------------- */
/* Host and guests as the planner sees them */

/* free 2 MiB blocks above the high watermark, as the planner's FREE step counts */
guint64
hr_prepare_node_available(const HrNodeState *ns)
{
	guint64 headroom = ns->free_pages > ns->wmark_high ? ns->free_pages - ns->wmark_high : 0;
	return MIN(ns->free_blocks, headroom / BLOCK_PAGES);
}

gboolean
prep_guest_can_donate(HrGuest *guest)
{
	guint64 need = (1 << VIRTIO_HUGEROOM_F_EVACUATE) | (1 << VIRTIO_HUGEROOM_F_HOLD);
	const HrChanDeviceState *state = hr_guest_get_state(guest);
	return hr_guest_is_connected(guest) && hr_guest_is_ready(guest) &&
	       hr_guest_get_status(guest) != NULL && state != NULL && state->driver_ok &&
	       !state->discard_disabled && (state->guest_features & need) == need;
}

void
prep_input_free(Input *in)
{
	g_array_unref(in->nodes);
	g_array_unref(in->guests);
	g_ptr_array_unref(in->refs);
	g_ptr_array_unref(in->cand_bufs);
	g_free(in);
}

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

void
prep_thpmap_failed(GuestPlanState *gs, HrGuest *guest, const GError *error)
{
	gs->map_failed = TRUE;
	if (!gs->map_warned) {
		gs->map_warned = TRUE;
		g_warning("%s: cannot read the host backing of its RAM (%s); its blocks count as "
			  "4 KiB-backed",
			  guest != NULL ? hr_guest_get_name(guest) : "a guest", error->message);
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
			prep_thpmap_failed(gs, prep_find_guest(ctx->prepare, ctx->guest_id), error);
		}
		prep_kick(ctx->prepare);
	}
	g_clear_pointer(&map, hr_thpmap_free);
	g_free(ctx);
}

static void
refresh_thpmap(HrPrepare *p, HrGuest *guest, GuestPlanState *gs)
{
	gint64 now = g_get_monotonic_time();
	const HrRamRange *ram;
	guint n_ram;
	ScanCtx *ctx;

	if (p->config->backing != HR_BACKING_SCAN || hr_guest_get_pid(guest) <= 0 || gs->scanning)
		return;
	if (gs->map_at != 0 && now - gs->map_at < THPMAP_MAX_AGE_US)
		return;
	/*
	 * Not in the snapshot (a large guest, one that came since, POST
	 * /v1/plan): the previous map serves until the new one is in.
	 */
	ctx = g_new0(ScanCtx, 1);
	ctx->prepare = p;
	ctx->guest_id = hr_guest_get_id(guest);
	gs->scanning = TRUE;
	ram = hr_guest_get_ram(guest, &n_ram);
	hr_thpmap_scan_async(hr_guest_get_pid(guest), ram, n_ram, p->cancellable, thpmap_scanned_cb,
			     ctx);
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
				       hr_guest_get_name(guest), pg->next_allowed_ms - now_ms,
				       pg->failures);
		return;
	}
	if (pg->free_pages < pg->floor_pages + BLOCK_PAGES) {
		g_string_append_printf(why,
				       "; %s: at its floor (%" G_GUINT64_FORMAT
				       " MiB free, floor %" G_GUINT64_FORMAT " MiB)",
				       hr_guest_get_name(guest), pg->free_pages / 256,
				       (pg->floor_pages - FLOOR_SLACK_PAGES) / 256);
		return;
	}
	if (pg->held_blocks >= pg->budget_blocks) {
		g_string_append_printf(why, "; %s: holds its budget of %u blocks already",
				       hr_guest_get_name(guest), pg->budget_blocks);
		return;
	}
	for (guint c = 0; c < pg->n_candidates; c++)
		thp += pg->candidates[c].backing == HR_THP_BLOCK_THP && !pg->candidates[c].tried;
	if (thp == 0)
		g_string_append_printf(why, "; %s: %s", hr_guest_get_name(guest),
				       gs->map == NULL && !gs->map_failed
					   ? "its host backing is being scanned"
					   : "no free memory inside host THP-backed blocks");
}

Input *
prep_build_input(HrPrepare *p, const HrHostState *host, HrReservation *r, Run *run,
		 gboolean guests_too)
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
		if (!prep_guest_can_donate(guest)) {
			if (hr_guest_is_connected(guest))
				g_string_append_printf(
				    why,
				    "; %s: cannot donate (driver not ready, "
				    "no evacuate/hold feature or discard disabled)",
				    hr_guest_get_name(guest));
			continue;
		}
		if (run != NULL && GPOINTER_TO_UINT(g_hash_table_lookup(
				       run->strikes, &(guint64){hr_guest_get_id(guest)})) >= 2) {
			g_string_append_printf(why, "; %s: its donations freed little host memory",
					       hr_guest_get_name(guest));
			continue;
		}
		gs = prep_get_gstate(p, guest);
		hr_config_guest_policy(p->config, hr_guest_get_name(guest), &policy);
		if (!policy.donor) {
			g_string_append_printf(why, "; %s: not a donor (policy)",
					       hr_guest_get_name(guest));
		} else {
			refresh_thpmap(p, guest, gs);
			/* not known yet: wait for the scan rather than give up on it */
			if (gs->map == NULL && gs->scanning)
				in->maps_pending++;
		}
		if (run != NULL)
			tried = g_hash_table_lookup(run->tried, &(guint64){hr_guest_get_id(guest)});
		pg.id = hr_guest_get_id(guest);
		/* the node most of its host THPs are on (else the first node) */
		pg.node = gs->map != NULL && gs->map->thp_node >= 0 ? (guint)gs->map->thp_node
								    : first_node;
		pg.donor = policy.donor;
		/*
		 * The status may predate blocks the guest handed over since: each
		 * one took 512 pages of its free memory (its own free pages and
		 * the free pages its used pages moved to).
		 */
		pg.free_pages = hr_guest_get_status(guest)->mem_free_pages;
		if (g_hash_table_size(hr_guest_get_held(guest)) >
		    hr_guest_get_status(guest)->held_blocks)
			pg.free_pages -= MIN(pg.free_pages,
					     (guint64)(g_hash_table_size(hr_guest_get_held(guest)) -
						       hr_guest_get_status(guest)->held_blocks) *
						 BLOCK_PAGES);
		/*
		 * A block of slack above the floor: the guest allocates on its
		 * own between its report and the last hold.
		 */
		pg.floor_pages = policy.floor_mb * 256 + FLOOR_SLACK_PAGES;
		pg.held_blocks = g_hash_table_size(hr_guest_get_held(guest));
		pg.budget_blocks =
		    policy.budget_blocks > 0
			? policy.budget_blocks
			: (guint)(hr_guest_get_ram_size(guest) / HR_PLAN_BLOCK_BYTES / 2);
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
		cands = g_new0(HrPlanCandidate,
			       MAX(hr_guest_get_status(guest)->nr_candidates + n_ranged_max, 1));
		for (guint c = 0; c < hr_guest_get_status(guest)->nr_candidates; c++) {
			const HrCandidate *hc = &hr_guest_get_status(guest)->candidates[c];
			cands[c].gpa = hc->gpa;
			cands[c].free_pages = hc->free_pages;
			cands[c].backing = policy.donor ? candidate_backing(p, guest, gs, hc->gpa)
							: HR_THP_BLOCK_ABSENT;
			cands[c].tried = tried != NULL && g_hash_table_contains(tried, &hc->gpa);
			/* a block the guest holds already is not a candidate any more */
			if (g_hash_table_contains(hr_guest_get_held(guest), &hc->gpa))
				cands[c].tried = TRUE;
			n_named += cands[c].backing == HR_THP_BLOCK_THP;
		}
		pg.n_candidates = hr_guest_get_status(guest)->nr_candidates;
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

HrGuest *
prep_input_guest(Input *in, const HrPlanStep *step)
{
	if (step->guest >= in->refs->len)
		return NULL;
	return g_ptr_array_index(in->refs, step->guest);
}

HrPlanTrial *
hr_prepare_try_plan(HrPrepare *p, const HrHostState *host, const HrPlanRequest *request)
{
	HrPlanTrial *trial = g_new0(HrPlanTrial, 1);
	g_autoptr(Input) in = NULL;
	gint64 t0, t1, t2;

	t0 = g_get_monotonic_time();
	in = prep_build_input(p, host, NULL, NULL, TRUE);
	t1 = g_get_monotonic_time();
	trial->plan = hr_planner_plan(request, &in->input, &p->params);
	t2 = g_get_monotonic_time();
	trial->step_guests = g_ptr_array_new_with_free_func(g_free);
	for (guint i = 0; i < trial->plan->steps->len; i++) {
		const HrPlanStep *s = g_ptr_array_index(trial->plan->steps, i);
		HrGuest *guest = s->kind == HR_PLAN_STEP_DONATE ? prep_input_guest(in, s) : NULL;
		g_ptr_array_add(trial->step_guests,
				guest != NULL ? g_strdup(hr_guest_get_name(guest)) : NULL);
	}
	trial->n_guests = in->input.n_guests;
	trial->input_us = t1 - t0;
	trial->decision_us = t2 - t1;
	return trial;
}

void
hr_plan_trial_free(HrPlanTrial *trial)
{
	if (trial == NULL)
		return;
	hr_plan_free(trial->plan);
	g_ptr_array_unref(trial->step_guests);
	g_free(trial);
}

static const guint capacity_within_s[] = {10, 30, 60};

HrCapacity *
hr_prepare_capacity(HrPrepare *p, const HrHostState *host)
{
	HrCapacity *c = g_new0(HrCapacity, 1);
	g_autoptr(Input) in = NULL;
	gint64 t0 = g_get_monotonic_time();

	G_STATIC_ASSERT(G_N_ELEMENTS(capacity_within_s) == HR_CAPACITY_WINDOWS);
	in = prep_build_input(p, host, NULL, NULL, TRUE);
	memcpy(c->within_s, capacity_within_s, sizeof(c->within_s));
	c->nodes = g_array_new(FALSE, TRUE, sizeof(HrCapacityNode));
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		HrCapacityNode cn = {.node = (gint)ns->node};
		for (guint d = 0; d < HR_CAPACITY_WINDOWS; d++) {
			/* all of the node, non-strict: the plan says how much it would get */
			HrPlanRequest req = {
			    .bytes = MAX(ns->managed, 1) * 4096,
			    .node = (gint)ns->node,
			    .deadline_ms = (guint64)capacity_within_s[d] * 1000,
			};
			g_autoptr(HrPlan) plan = hr_planner_plan(&req, &in->input, &p->params);
			guint64 blocks = MIN(plan->gain_milli / 1000, plan->need_blocks);
			/* a plan for another node (none qualified) makes nothing ready here */
			if (plan->node != (gint)ns->node)
				blocks = 0;
			cn.ready_bytes[d] = blocks * HR_PLAN_BLOCK_BYTES;
		}
		g_array_append_val(c->nodes, cn);
	}
	c->n_guests = in->input.n_guests;
	c->decision_us = g_get_monotonic_time() - t0;
	return c;
}

void
hr_capacity_free(HrCapacity *capacity)
{
	if (capacity == NULL)
		return;
	g_array_unref(capacity->nodes);
	g_free(capacity);
}

void
prep_defer_guest(HrPrepare *p, guint64 guest_id, gboolean failed)
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
