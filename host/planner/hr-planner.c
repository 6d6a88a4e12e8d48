/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrPlanner"

#include "hr-planner.h"

#include <string.h>

#define MILLI 1000
#define KEY_SCALE G_GUINT64_CONSTANT(1000000)

enum { STREAM_THP, STREAM_SMALL, STREAM_COMPACT };

static inline gboolean
is_thp(const HrPlanCandidate *c)
{
	return c->backing == HR_THP_BLOCK_THP;
}

void
hr_planner_params_init(HrPlannerParams *params)
{
	params->small_benefit_milli = 500;
	params->compact_margin = 2;
	params->compact_scan_cost_milli = 30;
	params->compact_scan_ns = 80;
	params->host_migrate_ns = 1000;
	params->guest_migrate_ns = 5000;
	params->guest_request_ms = 20;
	params->defer_base_ms = 1000;
	params->defer_max_shift = 6;
	params->defer_wait_failures = 3;
	params->balance_milli = 20;
}

const gchar *
hr_plan_step_kind_to_string(HrPlanStepKind kind)
{
	switch (kind) {
	case HR_PLAN_STEP_FREE:
		return "free";
	case HR_PLAN_STEP_COMPACT:
		return "compact";
	case HR_PLAN_STEP_DONATE:
		return "donate";
	}
	return "unknown";
}

static void
hr_plan_step_free(HrPlanStep *step)
{
	if (step->picks != NULL)
		g_array_unref(step->picks);
	g_free(step);
}

void
hr_plan_free(HrPlan *plan)
{
	if (plan == NULL)
		return;
	g_ptr_array_unref(plan->steps);
	g_free(plan->summary);
	g_free(plan);
}

/* ---------------------------------------------------------------------- */
/* Cost model */

void
hr_plan_node_from_state(HrPlanNode *node, const HrNodeState *state)
{
	memset(node, 0, sizeof(*node));
	node->node = state->node;
	node->free_blocks = state->free_blocks;
	node->free_pages = state->free_pages;
	node->managed = state->managed;
	node->wmark_high = state->wmark_high;
	node->unusable_index = state->unusable_index;
}

guint64
hr_planner_compact_block_cost(const HrPlanNode *node)
{
	/* a block holds, on average, the node's share of used pages */
	if (node->managed == 0 || node->free_pages >= node->managed)
		return 0;
	return (HR_PLAN_BLOCK_PAGES * (node->managed - node->free_pages) + node->managed - 1) /
	       node->managed;
}

guint64
hr_planner_compact_scan_cost(const HrPlanNode *node, const HrPlannerParams *params)
{
	return node->managed * params->compact_scan_cost_milli / MILLI;
}

static guint64
compact_est_ms(const HrPlanNode *node, guint64 blocks, const HrPlannerParams *params)
{
	guint64 ns = node->managed * params->compact_scan_ns +
		     blocks * hr_planner_compact_block_cost(node) * params->host_migrate_ns;
	return (ns + 999999) / 1000000;
}

static guint64
small_assembly_cost(const HrPlanNode *node, const HrPlannerParams *params)
{
	return (hr_planner_compact_block_cost(node) * params->small_benefit_milli + MILLI - 1) /
	       MILLI;
}

guint64
hr_planner_candidate_cost(const HrPlanNode *node, const HrPlanCandidate *candidate,
			  const HrPlannerParams *params)
{
	guint64 guest = HR_PLAN_BLOCK_PAGES - MIN(candidate->free_pages, HR_PLAN_BLOCK_PAGES);
	return is_thp(candidate) ? guest : guest + small_assembly_cost(node, params);
}

guint64
hr_planner_candidate_gain_milli(const HrPlanCandidate *candidate, const HrPlannerParams *params)
{
	switch (candidate->backing) {
	case HR_THP_BLOCK_THP:
		return MILLI;
	case HR_THP_BLOCK_SMALL:
		return params->small_benefit_milli;
	default:
		return 0; /* nothing for the host's buddy allocator */
	}
}

/* ---------------------------------------------------------------------- */
/* Deferral */

void
hr_planner_guest_failed(HrPlanGuest *guest, gint64 now_ms, const HrPlannerParams *params)
{
	guint shift;

	guest->failures++;
	shift = MIN(guest->failures - 1, params->defer_max_shift);
	guest->next_allowed_ms = now_ms + ((gint64)params->defer_base_ms << shift);
}

void
hr_planner_guest_succeeded(HrPlanGuest *guest)
{
	guest->failures = 0;
	guest->next_allowed_ms = 0;
}

gboolean
hr_planner_guest_deferred(const HrPlanGuest *guest, gint64 now_ms)
{
	return guest->failures > 0 && now_ms < guest->next_allowed_ms;
}

/* ---------------------------------------------------------------------- */
/* Planning one node */

typedef struct {
	guint64 key; /* cost per benefit, scaled; lower is better */
	guint32 run; /* index into runs, or G_MAXUINT32 for compaction */
	guint32 stream;
} HeapEntry;

typedef struct {
	guint guest;
	guint cursor[2];   /* per stream: next candidate index to look at */
	guint cap;	   /* blocks it may still give */
	guint64 budget_ns; /* G_MAXUINT64: no deadline */
	guint64 used_ns;
	guint n_picked;
} GuestRun;

typedef struct {
	guint32 run;
	guint32 candidate;
	gboolean removed;
} Pick;

static gboolean
heap_less(const HeapEntry *a, const HeapEntry *b)
{
	if (a->key != b->key)
		return a->key < b->key;
	if (a->run != b->run)
		return a->run < b->run;
	return a->stream < b->stream;
}

static void
heap_swap(HeapEntry *h, guint i, guint j)
{
	HeapEntry tmp = h[i];

	h[i] = h[j];
	h[j] = tmp;
}

static void
heap_sift_up(HeapEntry *h, guint i)
{
	while (i > 0) {
		guint parent = (i - 1) / 2;
		if (!heap_less(&h[i], &h[parent]))
			break;
		heap_swap(h, i, parent);
		i = parent;
	}
}

static void
heap_sift_down(HeapEntry *h, guint len, guint i)
{
	for (;;) {
		guint l = 2 * i + 1, r = l + 1, m = i;
		if (l < len && heap_less(&h[l], &h[m]))
			m = l;
		if (r < len && heap_less(&h[r], &h[m]))
			m = r;
		if (m == i)
			break;
		heap_swap(h, i, m);
		i = m;
	}
}

static void
heap_push(GArray *heap, HeapEntry entry)
{
	g_array_append_val(heap, entry);
	heap_sift_up((HeapEntry *)heap->data, heap->len - 1);
}

static HeapEntry
heap_remove_at(GArray *heap, guint i)
{
	HeapEntry *h = (HeapEntry *)heap->data;
	HeapEntry out = h[i];

	h[i] = h[heap->len - 1];
	g_array_set_size(heap, heap->len - 1);
	if (i < heap->len) {
		heap_sift_down(h, heap->len, i);
		heap_sift_up(h, i);
	}
	return out;
}

static HeapEntry
heap_pop(GArray *heap)
{
	return heap_remove_at(heap, 0);
}

static guint64
stream_key(const HrPlanNode *node, const HrPlanCandidate *c, const HrPlannerParams *params)
{
	return hr_planner_candidate_cost(node, c, params) * KEY_SCALE /
	       hr_planner_candidate_gain_milli(c, params);
}

/*
 * A guest's two streams are its THP-backed and its 4 KiB-backed candidates,
 * each in the order of the report: most free pages first, which the STATUS
 * codec enforces (SPEC rule 6). A stream is a cursor over the candidates,
 * so the planner only looks at as many of a guest's candidates as it takes
 * (plus the other stream's it skips), not at all 2048 of each guest.
 * Returns the index of the stream's next usable candidate, or n_candidates.
 */
static guint
stream_peek(const HrPlanGuest *g, GuestRun *run, guint s)
{
	const guint want = s == STREAM_THP ? HR_THP_BLOCK_THP : HR_THP_BLOCK_SMALL;
	guint i = run->cursor[s];

	for (; i < g->n_candidates; i++) {
		const HrPlanCandidate *c = &g->candidates[i];
		if (c->backing == want && !c->tried && c->free_pages <= HR_PLAN_BLOCK_PAGES)
			break;
	}
	run->cursor[s] = i;
	return i;
}

/*
 * The least loaded of the guest streams in the heap's subtree at @i whose
 * key is at most @limit (a heap keeps those at its top), as a heap index
 * in *@best; *@best_ns is that guest's planned evacuation time.
 */
static void
find_less_loaded(const GArray *heap, const GuestRun *runs, guint i, guint64 limit, guint *best,
		 guint64 *best_ns)
{
	const HeapEntry *f;

	if (i >= heap->len)
		return;
	f = &g_array_index(heap, HeapEntry, i);
	if (f->key > limit)
		return;
	if (f->stream != STREAM_COMPACT && runs[f->run].cap > 0 &&
	    runs[f->run].used_ns < *best_ns) {
		*best = i;
		*best_ns = runs[f->run].used_ns;
	}
	find_less_loaded(heap, runs, 2 * i + 1, limit, best, best_ns);
	find_less_loaded(heap, runs, 2 * i + 2, limit, best, best_ns);
}

/*
 * The next stream to take from: the cheapest, unless another guest's next
 * candidate costs at most balance_milli / 1000 more per benefit and that
 * guest has less evacuation work planned. Guests evacuate in parallel, so
 * spreading near-equal work over them shortens the preparation at a
 * bounded cost: without it, donors whose blocks cost the same (as after
 * the same workload) were asked one after another, the first for all it
 * could give.
 */
static HeapEntry
pop_balanced(GArray *heap, const GuestRun *runs, const HrPlannerParams *params)
{
	HeapEntry e = heap_pop(heap), f;
	guint best = G_MAXUINT;
	guint64 best_ns;

	if (e.stream == STREAM_COMPACT || params->balance_milli == 0)
		return e;
	best_ns = runs[e.run].used_ns;
	find_less_loaded(heap, runs, 0, e.key + e.key * params->balance_milli / MILLI, &best,
			 &best_ns);
	if (best == G_MAXUINT)
		return e;
	f = heap_remove_at(heap, best);
	heap_push(heap, e);
	return f;
}

static void
push_stream(GArray *heap, GuestRun *runs, guint r, guint s, const HrPlanInput *input,
	    const HrPlanNode *node, const HrPlannerParams *params)
{
	GuestRun *run = &runs[r];
	const HrPlanGuest *g = &input->guests[run->guest];
	guint i;
	HeapEntry e;

	if (run->cap == 0)
		return;
	i = stream_peek(g, run, s);
	if (i >= g->n_candidates)
		return;
	e.key = stream_key(node, &g->candidates[i], params);
	e.run = r;
	e.stream = s;
	heap_push(heap, e);
}

static gint
candidate_cmp(gconstpointer a, gconstpointer b, gpointer user_data)
{
	const HrPlanCandidate *x = a, *y = b;

	(void)user_data;
	return (gint)y->free_pages - (gint)x->free_pages;
}

void
hr_planner_sort_candidates(HrPlanCandidate *candidates, guint n_candidates)
{
	/* GLib's sort is a stable merge sort: ties keep their order */
	g_qsort_with_data(candidates, (gint)n_candidates, sizeof(*candidates), candidate_cmp, NULL);
}

static HrPlanStep *
step_new(HrPlanStepKind kind, guint node)
{
	HrPlanStep *step = g_new0(HrPlanStep, 1);
	step->kind = kind;
	step->node = node;
	return step;
}

/* What one node offers, shared by the merge variants. */
typedef struct {
	const HrPlanInput *input;
	const HrPlanNode *node;
	const HrPlannerParams *params;
	guint64 need_milli;
	guint64 free_take;   /* blocks step 1 uses */
	guint64 compact_cap; /* blocks compaction could assemble; 0: not an option */
	guint64 compact_ms;  /* one compaction, scan and assembly */
	guint64 deadline_ns; /* G_MAXUINT64: none */
	GuestRun *runs;
	guint n_runs;
	guint *init_cap;
} NodeCtx;

/* One way of meeting the need: with or without host compaction and small blocks. */
typedef struct {
	gboolean allow_compact;
	gboolean allow_small;
	GArray *picks; /* Pick, in the order taken */
	guint64 gain;  /* milli-blocks */
	guint64 cost;  /* pages, all steps */
	guint64 compact_blocks;
	guint n_small;
} Merge;

static void
merge_clear(Merge *m)
{
	g_clear_pointer(&m->picks, g_array_unref);
}

static guint64
guest_ns(const HrPlanCandidate *c, const HrPlannerParams *params)
{
	return (guint64)(HR_PLAN_BLOCK_PAGES - c->free_pages) * params->guest_migrate_ns;
}

/*
 * Take candidates in increasing cost per benefit until the need is met.
 * Within a variant the one-off scan of a compaction is already paid, so
 * every stream is ranked by its marginal cost; the variants are compared
 * on their totals.
 */
static void
merge_run(const NodeCtx *ctx, Merge *m)
{
	const HrPlanNode *node = ctx->node;
	const HrPlannerParams *params = ctx->params;
	g_autoptr(GArray) heap = g_array_new(FALSE, FALSE, sizeof(HeapEntry));
	guint64 reserve_ms = m->allow_compact || m->allow_small ? ctx->compact_ms : 0;
	guint64 budget_ns = G_MAXUINT64;
	gboolean any_small;

	m->picks = g_array_new(FALSE, FALSE, sizeof(Pick));
	m->gain = ctx->free_take * MILLI;
	m->compact_blocks = 0;
	m->n_small = 0;
	if (ctx->deadline_ns != G_MAXUINT64) {
		guint64 fixed = (reserve_ms + params->guest_request_ms) * 1000000;
		budget_ns = ctx->deadline_ns > fixed ? ctx->deadline_ns - fixed : 0;
	}
	for (guint r = 0; r < ctx->n_runs; r++) {
		GuestRun *run = &ctx->runs[r];
		run->cursor[STREAM_THP] = run->cursor[STREAM_SMALL] = 0;
		run->cap = ctx->init_cap[r];
		run->used_ns = 0;
		run->n_picked = 0;
		run->budget_ns = budget_ns;
		push_stream(heap, ctx->runs, r, STREAM_THP, ctx->input, node, params);
		if (m->allow_small)
			push_stream(heap, ctx->runs, r, STREAM_SMALL, ctx->input, node, params);
	}
	if (m->allow_compact && ctx->compact_cap > 0) {
		HeapEntry e = {.key = hr_planner_compact_block_cost(node) * KEY_SCALE / MILLI,
			       .run = G_MAXUINT32,
			       .stream = STREAM_COMPACT};
		heap_push(heap, e);
	}

	while (m->gain < ctx->need_milli && heap->len > 0) {
		HeapEntry e = pop_balanced(heap, ctx->runs, params);
		GuestRun *run;
		const HrPlanCandidate *c;
		guint64 ns;
		Pick pick;

		if (e.stream == STREAM_COMPACT) {
			guint64 rest = (ctx->need_milli - m->gain + MILLI - 1) / MILLI;
			m->compact_blocks = MIN(ctx->compact_cap, rest);
			m->gain += m->compact_blocks * MILLI;
			continue;
		}
		run = &ctx->runs[e.run];
		c = &ctx->input->guests[run->guest].candidates[run->cursor[e.stream]];
		if (run->cap == 0)
			continue;
		ns = guest_ns(c, params);
		if (run->budget_ns != G_MAXUINT64 && run->used_ns + ns > run->budget_ns)
			continue; /* later ones in this stream take as long or longer */
		run->used_ns += ns;
		run->cap--;
		run->n_picked++;
		pick.run = e.run;
		pick.candidate = run->cursor[e.stream];
		pick.removed = FALSE;
		g_array_append_val(m->picks, pick);
		m->gain += hr_planner_candidate_gain_milli(c, params);
		run->cursor[e.stream]++;
		push_stream(heap, ctx->runs, e.run, e.stream, ctx->input, node, params);
	}

	/*
	 * Repair: a guest whose budget ran out on 4 KiB-backed blocks may still
	 * have THP-backed ones, worth more per block of budget. Swap while the
	 * need is not met.
	 */
	if (m->gain < ctx->need_milli && m->allow_small && params->small_benefit_milli < MILLI) {
		g_autofree GArray **small_picks = g_new0(GArray *, MAX(ctx->n_runs, 1));

		for (guint p = 0; p < m->picks->len; p++) {
			const Pick *pk = &g_array_index(m->picks, Pick, p);
			const HrPlanGuest *g = &ctx->input->guests[ctx->runs[pk->run].guest];
			if (is_thp(&g->candidates[pk->candidate]))
				continue;
			if (small_picks[pk->run] == NULL)
				small_picks[pk->run] = g_array_new(FALSE, FALSE, sizeof(guint));
			g_array_append_val(small_picks[pk->run], p);
		}
		for (guint r = 0; r < ctx->n_runs; r++) {
			GuestRun *run = &ctx->runs[r];
			const HrPlanGuest *g = &ctx->input->guests[run->guest];

			while (m->gain < ctx->need_milli && run->cap == 0 &&
			       small_picks[r] != NULL && small_picks[r]->len > 0 &&
			       stream_peek(g, run, STREAM_THP) < g->n_candidates) {
				guint p =
				    g_array_index(small_picks[r], guint, small_picks[r]->len - 1);
				Pick *old = &g_array_index(m->picks, Pick, p);
				guint32 ci = run->cursor[STREAM_THP];
				const HrPlanCandidate *c = &g->candidates[ci];
				guint64 used = run->used_ns -
					       guest_ns(&g->candidates[old->candidate], params) +
					       guest_ns(c, params);
				Pick pick = {.run = r, .candidate = ci, .removed = FALSE};

				if (run->budget_ns != G_MAXUINT64 && used > run->budget_ns)
					break;
				old->removed = TRUE;
				g_array_set_size(small_picks[r], small_picks[r]->len - 1);
				run->used_ns = used;
				run->cursor[STREAM_THP]++;
				g_array_append_val(m->picks, pick);
				m->gain += MILLI - params->small_benefit_milli;
			}
			if (small_picks[r] != NULL)
				g_array_unref(small_picks[r]);
		}
	}

	/* drop the most expensive picks the need does not require */
	for (guint p = m->picks->len; p-- > 0 && m->gain > ctx->need_milli;) {
		Pick *pk = &g_array_index(m->picks, Pick, p);
		const HrPlanGuest *g = &ctx->input->guests[ctx->runs[pk->run].guest];
		guint64 pg = hr_planner_candidate_gain_milli(&g->candidates[pk->candidate], params);
		if (!pk->removed && m->gain - pg >= ctx->need_milli) {
			pk->removed = TRUE;
			m->gain -= pg;
		}
	}
	while (m->compact_blocks > 0 && m->gain >= ctx->need_milli + MILLI) {
		m->compact_blocks--;
		m->gain -= MILLI;
	}

	m->cost = m->compact_blocks * hr_planner_compact_block_cost(node);
	for (guint p = 0; p < m->picks->len; p++) {
		const Pick *pk = &g_array_index(m->picks, Pick, p);
		const HrPlanCandidate *c =
		    &ctx->input->guests[ctx->runs[pk->run].guest].candidates[pk->candidate];
		if (pk->removed)
			continue;
		m->cost += hr_planner_candidate_cost(node, c, params);
		m->n_small += !is_thp(c);
	}
	any_small = m->n_small > 0;
	if (m->compact_blocks > 0 || any_small)
		m->cost +=
		    hr_planner_compact_scan_cost(node, params); /* one compaction does both */
}

/* Complete first; then cheaper; an incomplete one: more gain first. */
static gboolean
merge_better(const Merge *a, const Merge *b, guint64 need_milli)
{
	gboolean ca = a->gain >= need_milli, cb = b->gain >= need_milli;

	if (ca != cb)
		return ca;
	if (!ca && a->gain != b->gain)
		return a->gain > b->gain;
	return a->cost < b->cost;
}

static void
build_steps(HrPlan *plan, const NodeCtx *ctx, const Merge *m)
{
	const HrPlanNode *node = ctx->node;
	const HrPlannerParams *params = ctx->params;
	g_autofree HrPlanStep **by_run = g_new0(HrPlanStep *, MAX(ctx->n_runs, 1));
	guint64 slowest_ms = 0;
	guint first_donation;

	if (ctx->free_take > 0) {
		HrPlanStep *step = step_new(HR_PLAN_STEP_FREE, node->node);
		step->blocks = ctx->free_take;
		step->gain_milli = ctx->free_take * MILLI;
		g_ptr_array_add(plan->steps, step);
	}
	if (m->compact_blocks > 0 && m->n_small == 0) {
		HrPlanStep *step = step_new(HR_PLAN_STEP_COMPACT, node->node);
		step->blocks = m->compact_blocks;
		step->gain_milli = m->compact_blocks * MILLI;
		step->cost_pages = hr_planner_compact_scan_cost(node, params) +
				   m->compact_blocks * hr_planner_compact_block_cost(node);
		step->est_ms = compact_est_ms(node, m->compact_blocks, params);
		g_ptr_array_add(plan->steps, step);
	}

	/* one donation step per guest, in the order of their first pick */
	first_donation = plan->steps->len;
	for (guint p = 0; p < m->picks->len; p++) {
		const Pick *pk = &g_array_index(m->picks, Pick, p);
		const HrPlanGuest *g = &ctx->input->guests[ctx->runs[pk->run].guest];
		const HrPlanCandidate *c = &g->candidates[pk->candidate];
		HrPlanStep *step = by_run[pk->run];
		HrPlanPick hp = {0};

		if (pk->removed)
			continue;
		if (step == NULL) {
			step = step_new(HR_PLAN_STEP_DONATE, node->node);
			step->guest = ctx->runs[pk->run].guest;
			step->guest_id = g->id;
			step->picks = g_array_sized_new(FALSE, FALSE, sizeof(HrPlanPick),
							ctx->runs[pk->run].n_picked);
			by_run[pk->run] = step;
			g_ptr_array_add(plan->steps, step);
		}
		hp.gpa = c->gpa;
		hp.index = pk->candidate;
		hp.free_pages = c->free_pages;
		hp.backing = c->backing;
		hp.ranged = c->ranged;
		g_array_append_val(step->picks, hp);
		step->gain_milli += hr_planner_candidate_gain_milli(c, params);
		/* the guest's pages; a small block's host share is on the compaction */
		step->cost_pages += HR_PLAN_BLOCK_PAGES - c->free_pages;
		if (is_thp(c))
			step->n_thp++;
		else
			step->n_small++;
	}
	for (guint s = first_donation; s < plan->steps->len; s++) {
		HrPlanStep *step = g_ptr_array_index(plan->steps, s);
		step->est_ms = params->guest_request_ms +
			       (step->cost_pages * params->guest_migrate_ns + 999999) / 1000000;
		slowest_ms = MAX(slowest_ms, step->est_ms);
	}
	if (m->n_small > 0) {
		HrPlanStep *step = step_new(HR_PLAN_STEP_COMPACT, node->node);
		step->after_donations = TRUE;
		step->blocks = m->compact_blocks + m->n_small * params->small_benefit_milli / MILLI;
		step->gain_milli = m->compact_blocks * MILLI;
		step->cost_pages = hr_planner_compact_scan_cost(node, params) +
				   m->compact_blocks * hr_planner_compact_block_cost(node) +
				   m->n_small * small_assembly_cost(node, params);
		step->est_ms = compact_est_ms(node, step->blocks, params);
		g_ptr_array_add(plan->steps, step);
	}

	for (guint s = 0; s < plan->steps->len; s++) {
		const HrPlanStep *step = g_ptr_array_index(plan->steps, s);
		plan->gain_milli += step->gain_milli;
		plan->cost_pages += step->cost_pages;
		if (step->kind != HR_PLAN_STEP_DONATE)
			plan->est_ms += step->est_ms;
	}
	plan->est_ms += slowest_ms;
	plan->complete = plan->gain_milli >= plan->need_blocks * MILLI;
}

static HrPlan *
plan_node(const HrPlanRequest *request, const HrPlanInput *input, const HrPlanNode *node,
	  guint64 need_blocks, const HrPlannerParams *params)
{
	HrPlan *plan = g_new0(HrPlan, 1);
	NodeCtx ctx = {0};
	Merge variants[4] = {{0}};
	Merge *best = NULL;
	g_autofree GuestRun *runs = NULL;
	g_autofree guint *init_cap = NULL;
	guint64 headroom;
	guint n_guests = 0;

	plan->node = (gint)node->node;
	plan->need_blocks = need_blocks;
	plan->steps = g_ptr_array_new_with_free_func((GDestroyNotify)hr_plan_step_free);

	ctx.input = input;
	ctx.node = node;
	ctx.params = params;
	ctx.need_milli = need_blocks * MILLI;
	ctx.deadline_ns = request->deadline_ms > 0 ? request->deadline_ms * 1000000 : G_MAXUINT64;

	/* 1. free blocks above the high watermark */
	headroom = node->free_pages > node->wmark_high ? node->free_pages - node->wmark_high : 0;
	ctx.free_take = MIN(MIN(node->free_blocks, headroom / HR_PLAN_BLOCK_PAGES), need_blocks);

	/* 2. what compaction of the fragmented free memory could assemble */
	if (params->compact_margin > 0 && !node->compacted) {
		guint64 assemblable = headroom / (HR_PLAN_BLOCK_PAGES * params->compact_margin);
		if (assemblable > node->free_blocks)
			ctx.compact_cap = assemblable - node->free_blocks;
	}
	ctx.compact_ms = compact_est_ms(node, MIN(ctx.compact_cap, need_blocks), params);
	if (node->compacted || ctx.compact_ms * 1000000 > ctx.deadline_ns) {
		/* no compaction fits: neither of the free memory nor of small donations */
		ctx.compact_cap = 0;
		ctx.compact_ms = G_MAXUINT64 / 2000000;
	}

	/* 3. the donors' candidates, sorted once for all variants */
	for (guint i = 0; i < input->n_guests; i++) {
		const HrPlanGuest *g = &input->guests[i];
		if (g->node != node->node)
			continue;
		plan->guests_considered++;
		if (hr_planner_guest_deferred(g, input->now_ms) &&
		    g->failures < params->defer_wait_failures)
			plan->guests_deferred++;
		n_guests++;
	}
	if (ctx.free_take * MILLI < ctx.need_milli && n_guests > 0) {
		runs = g_new0(GuestRun, n_guests);
		init_cap = g_new0(guint, n_guests);
		for (guint i = 0; i < input->n_guests; i++) {
			const HrPlanGuest *g = &input->guests[i];
			GuestRun *run = &runs[ctx.n_runs];
			guint64 above;
			guint cap;

			if (g->node != node->node || !g->donor || g->n_candidates == 0 ||
			    hr_planner_guest_deferred(g, input->now_ms))
				continue;
			above = g->free_pages > g->floor_pages ? g->free_pages - g->floor_pages : 0;
			cap = g->budget_blocks > g->held_blocks ? g->budget_blocks - g->held_blocks
								: 0;
			cap = (guint)MIN((guint64)cap, above / HR_PLAN_BLOCK_PAGES);
			if (cap == 0)
				continue;
			run->guest = i;
			init_cap[ctx.n_runs++] = cap;
		}
	}
	ctx.runs = runs;
	ctx.init_cap = init_cap;

	/*
	 * The variants: with or without compaction, with or without small
	 * blocks. Any but the first pays a compaction's scan, so when the
	 * first is complete for less, the others cannot beat it.
	 */
	for (guint v = 0; v < 4; v++) {
		Merge *m = &variants[v];
		if (v > 0 && variants[0].gain >= ctx.need_milli &&
		    variants[0].cost <= hr_planner_compact_scan_cost(node, params))
			break;
		m->allow_compact = v & 1;
		m->allow_small = v & 2;
		if ((m->allow_compact && ctx.compact_cap == 0) ||
		    (m->allow_small && ctx.compact_ms * 1000000 > ctx.deadline_ns))
			continue;
		merge_run(&ctx, m);
		g_debug("node %u, compaction %s, small blocks %s: %" G_GUINT64_FORMAT
			" milli-blocks for %" G_GUINT64_FORMAT " pages",
			node->node, m->allow_compact ? "yes" : "no", m->allow_small ? "yes" : "no",
			m->gain, m->cost);
		if (best == NULL || merge_better(m, best, ctx.need_milli))
			best = m;
	}
	build_steps(plan, &ctx, best);
	for (guint v = 0; v < 4; v++)
		merge_clear(&variants[v]);
	return plan;
}

static void
plan_summarize(HrPlan *plan, const HrPlanRequest *request)
{
	guint donors = 0;

	for (guint s = 0; s < plan->steps->len; s++) {
		const HrPlanStep *step = g_ptr_array_index(plan->steps, s);
		donors += step->kind == HR_PLAN_STEP_DONATE;
	}
	if (plan->node < 0) {
		plan->summary =
		    g_strdup_printf("no node can take the request (node %d)", request->node);
		return;
	}
	plan->summary = g_strdup_printf(
	    "node %d: %s %" G_GUINT64_FORMAT ".%03u of %" G_GUINT64_FORMAT " blocks in %u steps "
	    "(%u donors of %u guests, %u deferred), cost %" G_GUINT64_FORMAT
	    " pages, ~%" G_GUINT64_FORMAT " ms",
	    plan->node, plan->complete ? "plans" : "can only reach", plan->gain_milli / MILLI,
	    (guint)(plan->gain_milli % MILLI), plan->need_blocks, plan->steps->len, donors,
	    plan->guests_considered, plan->guests_deferred, plan->cost_pages, plan->est_ms);
}

/* Is @a a better plan than @b? Complete first, then cheaper, then larger. */
static gboolean
plan_better(const HrPlan *a, const HrPlan *b)
{
	if (b == NULL)
		return TRUE;
	if (a->complete != b->complete)
		return a->complete;
	if (!a->complete && a->gain_milli != b->gain_milli)
		return a->gain_milli > b->gain_milli;
	if (a->cost_pages != b->cost_pages)
		return a->cost_pages < b->cost_pages;
	return a->est_ms < b->est_ms;
}

HrPlan *
hr_planner_plan(const HrPlanRequest *request, const HrPlanInput *input,
		const HrPlannerParams *params)
{
	guint64 need = (request->bytes + HR_PLAN_BLOCK_BYTES - 1) / HR_PLAN_BLOCK_BYTES;
	HrPlan *best = NULL;

	for (guint n = 0; n < input->n_nodes; n++) {
		HrPlan *plan;
		if (request->node != HR_PLAN_ANY_NODE &&
		    (guint)request->node != input->nodes[n].node)
			continue;
		plan = plan_node(request, input, &input->nodes[n], need, params);
		if (plan_better(plan, best)) {
			hr_plan_free(best);
			best = plan;
		} else {
			hr_plan_free(plan);
		}
	}
	if (best == NULL) {
		best = g_new0(HrPlan, 1);
		best->node = -1;
		best->need_blocks = need;
		best->complete = need == 0;
		best->steps = g_ptr_array_new_with_free_func((GDestroyNotify)hr_plan_step_free);
	}
	if (request->strict && !best->complete) {
		/* all or nothing: keep the numbers, drop the work */
		g_ptr_array_set_size(best->steps, 0);
	}
	plan_summarize(best, request);
	return best;
}

void
hr_plan_candidates_from_status(HrPlanCandidate *out, const HrCandidate *candidates,
			       guint n_candidates, const HrThpMap *map)
{
	for (guint i = 0; i < n_candidates; i++) {
		HrThpBlock backing = HR_THP_BLOCK_SMALL;

		if (map != NULL && !hr_thpmap_lookup(map, candidates[i].gpa, &backing))
			backing = HR_THP_BLOCK_SMALL;
		memset(&out[i], 0, sizeof(out[i]));
		out[i].gpa = candidates[i].gpa;
		out[i].free_pages = candidates[i].free_pages;
		out[i].backing = backing;
	}
}

guint
hr_plan_ranged_candidates(HrPlanCandidate *out, guint max, const HrThpMap *map, guint64 free_pages,
			  guint held_blocks, guint n_named)
{
	guint64 unheld_absent, free_absent, rest, rest_thp, backed, n, avg;

	if (map == NULL || map->n_thp <= n_named)
		return 0;
	unheld_absent = map->n_absent > held_blocks ? map->n_absent - held_blocks : 0;
	free_absent = MIN(free_pages, unheld_absent * HR_PLAN_BLOCK_PAGES);
	rest = free_pages - free_absent;
	backed = map->n_thp + map->n_small;
	rest_thp = rest * map->n_thp / backed;
	avg = MIN(rest_thp / map->n_thp, HR_PLAN_BLOCK_PAGES - 1);
	n = MIN(MIN(map->n_thp - n_named, rest_thp / HR_PLAN_BLOCK_PAGES), (guint64)max);
	for (guint64 i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].free_pages = (guint16)avg;
		out[i].backing = HR_THP_BLOCK_THP;
		out[i].ranged = 1;
	}
	return (guint)n;
}

gchar *
hr_plan_describe(const HrPlan *plan)
{
	GString *out = g_string_new(plan->summary);

	g_string_append_c(out, '\n');
	for (guint i = 0; i < plan->steps->len; i++) {
		const HrPlanStep *s = g_ptr_array_index(plan->steps, i);

		g_string_append_printf(out, "  %u. ", i + 1);
		switch (s->kind) {
		case HR_PLAN_STEP_FREE:
			g_string_append_printf(out,
					       "use %" G_GUINT64_FORMAT " free blocks of node %u",
					       s->blocks, s->node);
			break;
		case HR_PLAN_STEP_COMPACT:
			g_string_append_printf(
			    out, "compact node %u%s: %" G_GUINT64_FORMAT " blocks", s->node,
			    s->after_donations ? " after the donations" : "", s->blocks);
			break;
		case HR_PLAN_STEP_DONATE:
			g_string_append_printf(out,
					       "guest %" G_GUINT64_FORMAT " evacuates %u blocks "
					       "(%u host-THP-backed, %u 4 KiB-backed)",
					       s->guest_id, s->picks->len, s->n_thp, s->n_small);
			break;
		}
		g_string_append_printf(out,
				       ", gain %" G_GUINT64_FORMAT
				       ".%03u blocks, cost %" G_GUINT64_FORMAT
				       " pages, ~%" G_GUINT64_FORMAT " ms\n",
				       s->gain_milli / MILLI, (guint)(s->gain_milli % MILLI),
				       s->cost_pages, s->est_ms);
	}
	return g_string_free(out, FALSE);
}

/* ---------------------------------------------------------------------- */
/* Re-planning */

static HrPlanNode *
input_node(HrPlanInput *input, guint node)
{
	for (guint n = 0; n < input->n_nodes; n++) {
		if (input->nodes[n].node == node)
			return &input->nodes[n];
	}
	return NULL;
}

void
hr_planner_apply_outcomes(HrPlanInput *input, const HrPlan *plan, const HrStepOutcome *outcomes,
			  guint n_outcomes, const HrPlannerParams *params)
{
	for (guint o = 0; o < n_outcomes; o++) {
		const HrStepOutcome *out = &outcomes[o];
		const HrPlanStep *step;
		HrPlanNode *node;

		if (out->step >= plan->steps->len)
			continue;
		step = g_ptr_array_index(plan->steps, out->step);
		node = input_node(input, step->node);
		switch (step->kind) {
		case HR_PLAN_STEP_FREE:
			break;
		case HR_PLAN_STEP_COMPACT:
			if (node != NULL) {
				node->compacted = TRUE;
				node->free_blocks += out->blocks_gained;
			}
			break;
		case HR_PLAN_STEP_DONATE: {
			HrPlanGuest *g;
			guint evacuated;

			if (step->guest >= input->n_guests ||
			    input->guests[step->guest].id != step->guest_id)
				break;
			g = &input->guests[step->guest];
			for (guint p = 0; p < step->picks->len; p++) {
				const HrPlanPick *pk = &g_array_index(step->picks, HrPlanPick, p);
				if (pk->index < g->n_candidates &&
				    g->candidates[pk->index].gpa == pk->gpa)
					g->candidates[pk->index].tried = TRUE;
			}
			evacuated = MIN(out->n_evacuated, step->picks->len);
			g->held_blocks += evacuated;
			g->free_pages -=
			    MIN(g->free_pages, (guint64)evacuated * HR_PLAN_BLOCK_PAGES);
			if (out->failed)
				hr_planner_guest_failed(g, input->now_ms, params);
			else
				hr_planner_guest_succeeded(g);
			if (node != NULL) {
				node->free_blocks += out->blocks_gained;
				node->free_pages += (guint64)evacuated * HR_PLAN_BLOCK_PAGES;
			}
			break;
		}
		}
	}
}

HrPlan *
hr_planner_replan(const HrPlanRequest *request, HrPlanInput *input, const HrPlan *plan,
		  const HrStepOutcome *outcomes, guint n_outcomes, const HrPlannerParams *params)
{
	hr_planner_apply_outcomes(input, plan, outcomes, n_outcomes, params);
	return hr_planner_plan(request, input, params);
}
