/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The planner: where the next free 2 MiB host blocks of a node should come
 * from, at the least total cost, within a deadline.
 *
 * It is a pure, deterministic function of its input: the request, each
 * node's memory state (hr-monitor) and each guest's donor data (its status
 * report's candidate blocks, the host THP map, its policy and its history).
 * It does nothing itself; the daemon executes the steps and, when a step
 * gives less than expected, applies the outcome and plans the remainder.
 *
 * Steps, in the order they appear in a plan:
 *  1. FREE: free 2 MiB blocks the node already has above its high
 *     watermark. Cost 0.
 *  2. COMPACT: host compaction of the node, when its free memory above the
 *     high watermark is at least compact_margin times what compaction must
 *     assemble but sits in smaller chunks. Expected cost: a scan of the
 *     node plus, per block, the used pages a block holds on average
 *     (512 * used / managed), all in "pages migrated" units.
 *  3. DONATE: guest evacuations, one step per guest, all in parallel.
 *     A candidate block costs the guest pages it must migrate
 *     (512 - free pages). A block backed by one host THP gives the host a
 *     whole free 2 MiB block when discarded (benefit 1); a block backed by
 *     4 KiB host pages only gives 512 scattered free pages, valued at
 *     small_benefit_milli / 1000 of a block, and host compaction must then
 *     assemble them (its per-block cost is added to the candidate's cost).
 *     A block the host never backed (absent: the guest never touched it,
 *     or it was discarded already) or backs with hugetlbfs gives the
 *     host's buddy allocator nothing and is never picked.
 *     Candidates are taken in increasing cost per unit of benefit, from
 *     every eligible guest at once, within each guest's budget (blocks
 *     the host may hold from it, minus those it holds), its floor
 *     (free memory it must keep) and the deadline (a guest works through
 *     its blocks one after another; guests work in parallel). Where
 *     another guest's next candidate costs at most balance_milli / 1000
 *     more per benefit than the cheapest, the guest with less work planned
 *     gets it: near-equal work is spread over guests that evacuate in
 *     parallel instead of going to one after the other.
 *  4. COMPACT after the donations, when some donated blocks were
 *     4 KiB-backed; it then also does step 2's work (one scan, not two).
 *
 * A compaction's scan of the node is a one-off cost that no per-block
 * ranking can price, so the planner merges four ways (with or without
 * compaction, with or without 4 KiB-backed blocks), each ranking by
 * marginal cost, and keeps the cheapest complete one (else the one that
 * gets furthest). On random cases of up to 12 candidates its cost stays
 * within one candidate's cost of the brute-force optimum (two with
 * per-guest budgets); see tests/unit/test-planner.c.
 *
 * For HR_PLAN_ANY_NODE every node is planned and the cheapest complete
 * plan wins. A strict request that cannot be met gets a plan with its
 * numbers but no steps; a best-effort one gets the steps that reach
 * furthest.
 *
 * Guests are skipped when they are not donors, have nothing above their
 * floor, or are deferred: each failed evacuation doubles the time a guest
 * is left alone (defer_base_ms << failures-1, the shift capped at
 * defer_max_shift like compaction's COMPACT_MAX_DEFER_SHIFT), and a
 * success resets it. A plan counts in guests_deferred only the deferred
 * guests worth waiting for, those with fewer than defer_wait_failures
 * failures in a row: a donor that gave nothing that often (at its floor,
 * its free memory in the blocks it was asked for) is still asked again
 * after its backoff, but a best-effort request does not wait for it.
 *
 * Gains are in thousandths of a block ("milli-blocks") so that fractional
 * benefits stay exact integers and plans are reproducible.
 *
 * Cost: O(G + (S + K) log G) for G guests, S picks and K candidates looked
 * at and skipped: each guest's candidates come sorted (most free pages
 * first, as the STATUS codec enforces), and a heap merges per-guest
 * streams, so candidates past the ones taken are never read. Unsorted
 * candidates give a valid plan, but not the cheapest.
 */

#include <glib.h>

#include "hr-monitor.h"
#include "hr-thpmap.h"

G_BEGIN_DECLS

#define HR_PLAN_ANY_NODE (-1)
#define HR_PLAN_BLOCK_PAGES 512
#define HR_PLAN_BLOCK_BYTES (G_GUINT64_CONSTANT(2) * 1024 * 1024)

typedef struct {
	guint64 bytes;	     /* rounded up to whole 2 MiB blocks */
	gint node;	     /* a node id, or HR_PLAN_ANY_NODE */
	guint64 deadline_ms; /* time allowed from now; 0: none */
	gboolean strict;     /* all or nothing: an incomplete plan has no steps */
} HrPlanRequest;

typedef struct {
	guint node;
	guint64 free_blocks; /* free chunks of order >= 9, in 2 MiB blocks */
	guint64 free_pages;
	guint64 managed;
	guint64 wmark_high; /* pages the host keeps free */
	guint unusable_index;
	gboolean compacted; /* compacted earlier for this request: not again */
} HrPlanNode;

typedef struct {
	guint64 gpa;
	guint16 free_pages; /* 0-512, from the guest's status report */
	guint8 backing;	    /* HrThpBlock from hr-thpmap: what discarding it frees on the host */
	guint8 tried;	    /* already evacuated or failed in this request: skipped */
	/* not a named block: one of the host THP-backed blocks the guest picks
	 * itself (EVACUATE CHEAPEST within the backed ranges); gpa is 0 and
	 * free_pages an estimate, see hr_plan_ranged_candidates() */
	guint8 ranged;
	guint8 reserved[3];
} HrPlanCandidate;

typedef struct {
	guint64 id;
	guint node; /* host node its RAM is on */
	gboolean donor;
	guint64 free_pages;	/* guest free memory now */
	guint64 floor_pages;	/* free memory the guest must keep */
	guint held_blocks;	/* blocks the host holds from it already */
	guint budget_blocks;	/* most blocks the host may hold from it at once */
	guint failures;		/* consecutive failed evacuations */
	gint64 next_allowed_ms; /* deferred until then */
	/* borrowed; most free pages first, as in the STATUS report (see
	 * hr_planner_sort_candidates()); tried is written by replanning */
	HrPlanCandidate *candidates;
	guint n_candidates;
} HrPlanGuest;

typedef struct {
	HrPlanNode *nodes; /* borrowed */
	guint n_nodes;
	HrPlanGuest *guests; /* borrowed */
	guint n_guests;
	gint64 now_ms; /* the clock deferrals are compared with */
} HrPlanInput;

typedef struct {
	guint small_benefit_milli; /* value of a 4 KiB-backed donated block: 500 */
	guint compact_margin; /* free memory above the watermark needed per block assembled: 2 */
	guint compact_scan_cost_milli; /* scanning a page, in thousandths of a migration: 30 */
	guint compact_scan_ns;	       /* host compaction time per managed page: 80 */
	guint host_migrate_ns;	       /* host compaction time per page migrated: 1000 */
	guint guest_migrate_ns;	       /* guest evacuation time per page migrated: 5000 */
	guint guest_request_ms;	       /* fixed latency of one evacuation request: 20 */
	guint defer_base_ms;	       /* first deferral after a failure: 1000 */
	guint defer_max_shift;	       /* 6: at most 64 times the base */
	guint defer_wait_failures;     /* 3: a plan waits for a deferred guest below this */
	guint balance_milli; /* extra cost per benefit taken to spread work over guests: 20 */
} HrPlannerParams;

void
hr_planner_params_init(HrPlannerParams *params);
/* Most free pages first, ties in their order: for candidates not from a report. */
void
hr_planner_sort_candidates(HrPlanCandidate *candidates, guint n_candidates);

typedef enum {
	HR_PLAN_STEP_FREE,
	HR_PLAN_STEP_COMPACT,
	HR_PLAN_STEP_DONATE,
} HrPlanStepKind;

typedef struct {
	guint64 gpa;
	guint32 index; /* into the guest's candidates */
	guint16 free_pages;
	guint8 backing; /* HrThpBlock */
	guint8 ranged;	/* the guest picks the block itself, see HrPlanCandidate */
} HrPlanPick;

typedef struct {
	HrPlanStepKind kind;
	guint node;
	guint guest;		  /* DONATE: index into the input's guests */
	guint64 guest_id;	  /* DONATE */
	GArray *picks;		  /* DONATE: HrPlanPick, in the order to evacuate */
	guint n_thp;		  /* DONATE: picks backed by a host THP */
	guint n_small;		  /* DONATE: picks backed by 4 KiB host pages */
	guint64 blocks;		  /* FREE: blocks used; COMPACT: blocks it should assemble */
	gboolean after_donations; /* COMPACT: runs when the donations are done */
	guint64 gain_milli;	  /* expected host 2 MiB blocks, x1000 */
	guint64 cost_pages;	  /* expected pages migrated (scans weighted in) */
	guint64 est_ms;		  /* expected duration */
} HrPlanStep;

typedef struct {
	gint node;	     /* the node planned for; -1 when no node qualified */
	guint64 need_blocks; /* the request in blocks */
	guint64 gain_milli;  /* expected, all steps */
	guint64 cost_pages;
	guint64 est_ms;	   /* free + compaction + slowest guest + compaction after */
	gboolean complete; /* gain_milli >= need_blocks * 1000 */
	gchar *summary;	   /* one line for logs and reports */
	GPtrArray *steps;  /* HrPlanStep */
	guint guests_considered;
	guint guests_deferred; /* the ones worth waiting for (see above) */
} HrPlan;

HrPlan *
hr_planner_plan(const HrPlanRequest *request, const HrPlanInput *input,
		const HrPlannerParams *params);
void
hr_plan_free(HrPlan *plan);
const gchar *
hr_plan_step_kind_to_string(HrPlanStepKind kind);

/* What a step actually achieved. */
typedef struct {
	guint step;	       /* index into plan->steps */
	guint64 blocks_gained; /* host 2 MiB blocks measured (buddyinfo) */
	guint n_evacuated;     /* DONATE: blocks the guest handed over */
	gboolean failed;       /* DONATE: the guest failed the evacuation */
} HrStepOutcome;

/*
 * Fold outcomes into @input (node free blocks and pages, compaction done,
 * guests' candidates tried, held blocks, free memory and deferral), so that
 * hr_planner_plan() on it plans what is left. A caller that re-reads the
 * host instead may still apply outcomes for the guest side.
 */
void
hr_planner_apply_outcomes(HrPlanInput *input, const HrPlan *plan, const HrStepOutcome *outcomes,
			  guint n_outcomes, const HrPlannerParams *params);
/* hr_planner_apply_outcomes() then hr_planner_plan() */
HrPlan *
hr_planner_replan(const HrPlanRequest *request, HrPlanInput *input, const HrPlan *plan,
		  const HrStepOutcome *outcomes, guint n_outcomes, const HrPlannerParams *params);

/* Deferral with exponential backoff (capped at 1 << defer_max_shift). */
void
hr_planner_guest_failed(HrPlanGuest *guest, gint64 now_ms, const HrPlannerParams *params);
void
hr_planner_guest_succeeded(HrPlanGuest *guest);
gboolean
hr_planner_guest_deferred(const HrPlanGuest *guest, gint64 now_ms);

/*
 * Planner candidates from a STATUS report's candidates (already in the
 * order the planner wants) and the guest's host THP map; a block the map
 * does not cover, or every block when @map is NULL, is taken as 4 KiB-backed.
 * @out has room for @n_candidates.
 */
void
hr_plan_candidates_from_status(HrPlanCandidate *out, const HrCandidate *candidates,
			       guint n_candidates, const HrThpMap *map);

/*
 * Donations a guest's report does not name. A report's candidates are the
 * guest's emptiest blocks, which on a busy host are often blocks the host
 * never backed (the guest never touched them): worth nothing. The blocks
 * worth a donation are the host THP-backed ones (@map), and the guest can
 * empty as many of them as its free memory inside them fills: up to
 * (free pages in backed blocks) / 512. The free pages in never-backed
 * blocks that the guest does not hold (they are free in the guest: it
 * never wrote to them) are taken off its free memory first; what is left
 * is shared between THP- and 4 KiB-backed blocks by their count, and each
 * candidate is priced at the average free pages of a THP-backed block (the
 * guest empties the cheapest ones first, so this is an upper bound on its
 * migrations). @n_named THP-backed blocks of the report are already
 * candidates and are not counted twice. Writes at most @max candidates
 * (gpa 0, ranged, THP-backed) to @out and returns how many.
 */
guint
hr_plan_ranged_candidates(HrPlanCandidate *out, guint max, const HrThpMap *map, guint64 free_pages,
			  guint held_blocks, guint n_named);

/* A multi-line account of a plan: one line per step, what it gives and costs. */
gchar *
hr_plan_describe(const HrPlan *plan);

/* The cost model, exposed so tests can price plans independently. */
void
hr_plan_node_from_state(HrPlanNode *node, const HrNodeState *state);
/* host pages to migrate per block compaction assembles on @node */
guint64
hr_planner_compact_block_cost(const HrPlanNode *node);
/* weighted cost of scanning @node once */
guint64
hr_planner_compact_scan_cost(const HrPlanNode *node, const HrPlannerParams *params);
/* cost of one donated candidate, including the host's share for a small one */
guint64
hr_planner_candidate_cost(const HrPlanNode *node, const HrPlanCandidate *candidate,
			  const HrPlannerParams *params);
guint64
hr_planner_candidate_gain_milli(const HrPlanCandidate *candidate, const HrPlannerParams *params);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrPlan, hr_plan_free)

G_END_DECLS
