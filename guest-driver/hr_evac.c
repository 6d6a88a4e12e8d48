// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: EVACUATE and CAPTURE.
 *
 * EVACUATE and CAPTURE take 2 MiB blocks from the guest's allocator,
 * mark them offline and list them in HOLDs; what the device acks is held
 * from then on, and giving it back is hr_hold.c's.  One job at a time,
 * in job_work, on the driver's own thread at evac_nice.  See "EVACUATE and
 * CAPTURE" and "Claiming holes" below.
 *
 * Calls go down only: to the holds (hr_hold.c: taking, holding and
 * claiming blocks, the pressure trigger's levels for admission), the
 * eventq senders (hr_event.c) and the pageblock readers (hr_report.c).
 *
 * Locks: job_lock guards the job slot and is never held with another
 * lock; hold_lock is taken briefly for the counters, the holds' other
 * locks only inside hr_hold.c's functions.  Order: hr_internal.h.
 */

#include "hr_internal.h"

/* ---------------------------------------------------------------------- */
/*
 * EVACUATE and CAPTURE.  One at a time, in job_work, so that cmd_work can
 * still take CANCEL, RETURN and REPORT while it runs.
 */

/* A block of a span (see "Spans"): its free pages, chosen and now. */
struct virtio_hugeroom_span_blk {
	unsigned long pfn;
	unsigned int chosen;		/* the sweep's count; UINT_MAX: named */
	unsigned int free;
};

/* One running EVACUATE or CAPTURE. */
struct virtio_hugeroom_run {
	struct virtio_hugeroom *vh;
	u64 id;
	u32 count;
	u64 budget_ns;			/* 0 = none */
	u64 budget_pages;		/* 0 = none */
	struct virtio_hugeroom_counts c;
	struct list_head pending;	/* taken, offline, HOLD not acked */
	unsigned int nr_pending;
	/* offered in a HOLD, not taken by the device: kept until the end */
	struct list_head refused;
	u64 first_pending_ns;
	u64 last_progress_ns;
	unsigned int since_progress;
	u32 stop;			/* S_CANCELLED or S_BUDGET once stopped */
	bool no_discard;		/* NO_DISCARD or INVALID for a HOLD */
	bool no_memory;			/* admission failed, or -ENOMEM */
	bool budget_skipped;		/* a block was left for the budget */
	/* the free pages of the blocks this pass will empty, claimed */
	struct virtio_hugeroom_claim *claims;
	unsigned int nr_claims;
	bool claimed;			/* this pass has looked at claims */
	/* what this command's migrations and claims cost */
	u64 mig_ns;
	u64 mig_pages;
	u64 mig_page_min_ns;		/* the cheapest block's, per page */
	u64 claim_ns;
	u64 claim_calls;
	u64 claim_first_ns;		/* the first claim call's time */
	/* the span being formed (NULL: no spans), see "Spans" */
	struct virtio_hugeroom_span_blk *span;
};

/*
 * Must the command end before its next block, other than for a CANCEL or
 * a budget (r->stop)?  After a refused HOLD, without memory, and while an
 * eventq chain is stuck with the device: no HOLD could go out, so taking
 * more blocks from the guest would only leave them in limbo.
 */
static bool virtio_hugeroom_run_blocked(struct virtio_hugeroom_run *r)
{
	return r->no_discard || r->no_memory ||
	       virtio_hugeroom_event_stuck(r->vh);
}

/* pgmigrate_success now: a global counter, every migration counts. */
static u64 virtio_hugeroom_pgmigrate(struct virtio_hugeroom *vh)
{
#ifdef CONFIG_MIGRATION
	all_vm_events(vh->job_events);
	return vh->job_events[PGMIGRATE_SUCCESS];
#else
	return 0;
#endif
}

/*
 * alloc_contig_range() for a block or (claims) a run of free pages in one
 * (virtio_hugeroom_acr(), hr_compat.h).  GFP: may reclaim a
 * little, never OOM, never warn (SPEC 1.6.3.2 item 4).
 */
static int virtio_hugeroom_contig_range(unsigned long start,
					unsigned long end)
{
	return virtio_hugeroom_acr(start, end, GFP_KERNEL | __GFP_NOWARN |
				   __GFP_RETRY_MAYFAIL);
}

static int virtio_hugeroom_contig_alloc(unsigned long pfn)
{
	return virtio_hugeroom_contig_range(pfn, pfn + pageblock_nr_pages);
}

/* Sum of the high watermarks of all populated zones. */
static unsigned long virtio_hugeroom_high_wmarks(void)
{
	unsigned long sum = 0;
	int nid, zid;

	/* for_each_populated_zone() needs symbols modules do not get. */
	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];

			if (populated_zone(zone))
				sum += high_wmark_pages(zone);
		}
	}
	return sum;
}

/* The MemAvailable admission keeps: the watermarks and a reserve. */
static unsigned long virtio_hugeroom_admit_floor(void)
{
	return virtio_hugeroom_high_wmarks() +
	       (totalram_pages() >> VIRTIO_HUGEROOM_ADMIT_RESERVE_SHIFT);
}

/*
 * Admission (SPEC 1.6.3.2 item 6): may the guest give up 512 more pages
 * of @zone (NULL: only the global rule) without going below the
 * watermarks, and while keeping MemAvailable a reserve above them?  A
 * guest held down to its watermarks reclaims its page cache (or gives the
 * holds back) at its next allocation burst.  The zone must keep the
 * pressure trigger's give-back level, floor + 2 * margin + ahead (see
 * "Pressure trigger"), a margin above the level where the trigger gives
 * blocks back, so that it never gives back at once what was just taken.
 * @need: the pages still to be taken (virtio_hugeroom_admit(): a block,
 * or none with @taken, the pages are already allocated).
 */
static bool virtio_hugeroom_admit_pages(struct virtio_hugeroom *vh,
					struct zone *zone, unsigned long need)
{
	unsigned long floor = virtio_hugeroom_admit_floor();
	long avail = si_mem_available();

	if (zone && zone_page_state(zone, NR_FREE_PAGES) <
		    virtio_hugeroom_zone_floor(zone) +
		    2 * virtio_hugeroom_zone_margin(zone) +
		    READ_ONCE(vh->pressure_ahead) + need)
		return false;
	return avail >= 0 && (unsigned long)avail >= floor + need;
}

/*
 * About how many blocks admission lets the job take now (the global rule
 * only: each block taken lowers MemAvailable by its 512 pages).
 */
static unsigned long virtio_hugeroom_admit_blocks(void)
{
	unsigned long floor = virtio_hugeroom_admit_floor();
	long avail = si_mem_available();

	if (avail < 0 || (unsigned long)avail <= floor)
		return 0;
	return ((unsigned long)avail - floor) / pageblock_nr_pages;
}

static bool virtio_hugeroom_admit(struct virtio_hugeroom *vh,
				  struct zone *zone, bool taken)
{
	return virtio_hugeroom_admit_pages(vh, zone,
					   taken ? 0 : pageblock_nr_pages);
}

static void virtio_hugeroom_run_fail(struct virtio_hugeroom_run *r,
				     unsigned int reason)
{
	struct virtio_hugeroom *vh = r->vh;

	r->c.tried++;
	r->c.failed[reason]++;
	spin_lock(&vh->hold_lock);
	vh->evac_failed[reason]++;
	spin_unlock(&vh->hold_lock);
}

/* S_CANCELLED or S_BUDGET if the command must stop now, else 0. */
static u32 virtio_hugeroom_run_check(struct virtio_hugeroom_run *r)
{
	struct virtio_hugeroom *vh = r->vh;
	bool cancel;

	spin_lock(&vh->job_lock);
	cancel = vh->job_cancel;
	spin_unlock(&vh->job_lock);
	if (cancel)
		return VIRTIO_HUGEROOM_S_CANCELLED;
	if (r->budget_ns && ktime_get_ns() - r->c.start_ns >= r->budget_ns)
		return VIRTIO_HUGEROOM_S_BUDGET;
	if (r->budget_pages && r->c.migrated >= r->budget_pages)
		return VIRTIO_HUGEROOM_S_BUDGET;
	return 0;
}

/* Send a HOLD for the pending blocks and settle them by the ack. */
static void virtio_hugeroom_run_flush(struct virtio_hugeroom_run *r)
{
	struct virtio_hugeroom *vh = r->vh;
	struct page *page, *tmp;
	unsigned int i = 0;
	u64 t0 = ktime_get_ns();
	u32 done;
	int rc;

	if (!r->nr_pending)
		return;
	rc = virtio_hugeroom_send_blocks(vh, VIRTIO_HUGEROOM_MSG_HOLD, r->id, 0,
					 &r->pending, r->nr_pending, &done,
					 false);
	spin_lock(&vh->hold_lock);
	vh->evac_hold_ns += ktime_get_ns() - t0;
	vh->evac_hold_sends++;
	spin_unlock(&vh->hold_lock);
	/* Refused whole: the next HOLD would be too. */
	if (rc == -EOPNOTSUPP || rc == -EINVAL)
		r->no_discard = true;
	if (rc && rc != -EOPNOTSUPP)
		dev_warn_ratelimited(&vh->vdev->dev,
				     "HOLD of %u blocks failed: %d\n",
				     r->nr_pending, rc);

	/* Blocks the device may still act on are in limbo already. */
	list_for_each_entry_safe(page, tmp, &r->pending, lru) {
		if (i++ < done) {
			/* Discarded by the device: now held. */
			adjust_managed_page_count(page, -pageblock_nr_pages);
			spin_lock(&vh->hold_lock);
			list_move(&page->lru, &vh->held);
			set_page_private(page, (unsigned long)vh);
			vh->nr_held++;
			vh->blocks_held_total++;
			spin_unlock(&vh->hold_lock);
			r->c.freed++;
			continue;
		}
		/*
		 * Not held, whatever the ack's status: the device stopped
		 * before it (it cannot discard it, or one before it), or the
		 * HOLD failed.  Kept out of the allocator until the command
		 * ends, so that the command does not take it and offer it
		 * again: a device that acks ACK_OK with nr_done 0 would
		 * otherwise see the same blocks until the budget ran out,
		 * each counted as tried and failed once more.
		 */
		list_move_tail(&page->lru, &r->refused);
	}
	if (done)
		virtio_hugeroom_pressure_arm(vh);
	/* Counted as tried when taken. */
	r->c.tried -= r->nr_pending - done;
	for (i = done; i < r->nr_pending; i++)
		virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_OTHER);
	r->nr_pending = 0;
}

/*
 * The command ends: the blocks the device did not take go back to the
 * allocator (SPEC 1.6.4.1 item 2), counted as R_OTHER when refused.
 */
static void virtio_hugeroom_run_release(struct virtio_hugeroom_run *r)
{
	struct page *page, *tmp;

	list_for_each_entry_safe(page, tmp, &r->refused, lru) {
		list_del(&page->lru);
		virtio_hugeroom_block_put(page_to_pfn(page), false);
	}
}

/* After each block: a HOLD when a batch is full or a second old. */
static void virtio_hugeroom_run_tick(struct virtio_hugeroom_run *r)
{
	u64 now = ktime_get_ns();

	if (r->nr_pending &&
	    (r->nr_pending >= VIRTIO_HUGEROOM_HOLD_BATCH ||
	     now - r->first_pending_ns >= VIRTIO_HUGEROOM_HOLD_NS))
		virtio_hugeroom_run_flush(r);
	now = ktime_get_ns();
	if (now - r->last_progress_ns >= VIRTIO_HUGEROOM_PROGRESS_NS ||
	    (r->since_progress >= VIRTIO_HUGEROOM_HOLD_BATCH &&
	     now - r->last_progress_ns >= VIRTIO_HUGEROOM_PROGRESS_MIN_NS)) {
		virtio_hugeroom_send_counts(r->vh, VIRTIO_HUGEROOM_MSG_PROGRESS,
					    r->id, 0, &r->c);
		r->last_progress_ns = ktime_get_ns();
		r->since_progress = 0;
	}
}

/*
 * @pages (below 0: given back) of the alloc_contig_range() call under way,
 * for the pressure trigger: the call isolates the holes and allocates the
 * targets of all its blocks, which run_take() counts only when it ends,
 * and its migrations refill the per-cpu lists.  The trigger predicts no
 * burst from a drop such a call made: a span takes up to 64 blocks at
 * once, and without this the trigger saw its drop as an allocation
 * burst, and admission then kept twice that free.
 */
static void virtio_hugeroom_run_taking(struct virtio_hugeroom_run *r,
				       long pages)
{
	WRITE_ONCE(r->vh->pages_taking, r->vh->pages_taking + pages);
	if (pages > 0)
		WRITE_ONCE(r->vh->taking_calls, r->vh->taking_calls + 1);
}

/*
 * Account an alloc_contig_range() over @blocks blocks that took @ns in
 * @calls tries and migrated what the pgmigrate counters say since @ev0;
 * @used: the pages in use by the blocks' counts at the call,
 * @used_chosen: when they were chosen.  Returns the pages migrated.
 */
static u64 virtio_hugeroom_run_account(struct virtio_hugeroom_run *r,
				       u64 ev0, u64 ns, unsigned int calls,
				       unsigned int blocks, unsigned int used,
				       unsigned int used_chosen, int rc)
{
	struct virtio_hugeroom *vh = r->vh;
	u64 ev1 = virtio_hugeroom_pgmigrate(vh);
	u64 moved = ev1 > ev0 ? ev1 - ev0 : 0;

	r->c.migrated += moved;
	r->mig_ns += ns;
	r->mig_pages += moved;
	if (moved && (!r->mig_page_min_ns ||
		      div64_u64(ns, moved) < r->mig_page_min_ns))
		r->mig_page_min_ns = max_t(u64, div64_u64(ns, moved), 1);
	spin_lock(&vh->hold_lock);
	vh->evac_block_ns += ns;
	vh->evac_block_calls += calls;
	vh->evac_pages_estimate += used;
	vh->evac_pages_migrated += moved;
	if (rc == -ENOMEM)
		vh->evac_call_enomem++;
	if (blocks > 1) {
		vh->evac_span_calls++;
		if (!rc)
			vh->evac_span_blocks += blocks;
	}
	if (!rc) {
		vh->evac_taken_blocks += blocks;
		vh->evac_taken_used += used_chosen;
		vh->evac_taken_migrated += moved;
	}
	spin_unlock(&vh->hold_lock);
	return moved;
}

/* A block just taken from the allocator: offline, then pending. */
static void virtio_hugeroom_run_take(struct virtio_hugeroom_run *r,
				     unsigned long pfn)
{
	u64 t0 = ktime_get_ns();

	virtio_hugeroom_block_offline(pfn);
	spin_lock(&r->vh->hold_lock);
	r->vh->evac_take_ns += ktime_get_ns() - t0;
	spin_unlock(&r->vh->hold_lock);
	/* The pressure trigger tells our own takes from pressure. */
	WRITE_ONCE(r->vh->pages_taken, r->vh->pages_taken + pageblock_nr_pages);
	if (!r->nr_pending)
		r->first_pending_ns = ktime_get_ns();
	list_add_tail(&pfn_to_page(pfn)->lru, &r->pending);
	r->nr_pending++;
	r->c.tried++;
}

/* Blocks freed so far, counting those whose HOLD is not yet acked. */
static bool virtio_hugeroom_run_enough(struct virtio_hugeroom_run *r)
{
	if (r->c.freed + r->nr_pending < r->count)
		return false;
	virtio_hugeroom_run_flush(r);
	return r->c.freed >= r->count;
}

/*
 * Checks before evacuating the block at @pfn.  Returns a failure reason,
 * or -1 with the block's free pages and zone.  @explicit: the host named
 * it (CHEAPEST only picks eligible blocks, but re-checks them).
 */
static int virtio_hugeroom_evac_check(struct virtio_hugeroom *vh,
				      unsigned long pfn, unsigned int released,
				      unsigned int *free, struct zone **zonep)
{
	struct page *head = pfn_to_online_page(pfn);
	struct page *last = pfn_to_online_page(pfn + pageblock_nr_pages - 1);
	struct zone *zone;
	bool held;
	u8 mt;

	if (!head || !last)
		return VIRTIO_HUGEROOM_R_OFFLINE;
	zone = page_zone(head);
	if (page_zone(last) != zone || !zone_spans_pfn(zone, pfn) ||
	    !zone_spans_pfn(zone, pfn + pageblock_nr_pages - 1))
		return VIRTIO_HUGEROOM_R_ZONE;
#ifdef CONFIG_ZONE_DMA
	if (zone_idx(zone) == ZONE_DMA)
		return VIRTIO_HUGEROOM_R_ZONE;
#endif
	spin_lock(&vh->hold_lock);
	held = virtio_hugeroom_is_held_locked(vh, pfn);
	spin_unlock(&vh->hold_lock);
	if (held)
		return VIRTIO_HUGEROOM_R_HELD;

	mt = virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(pfn));
	*free = virtio_hugeroom_block_free(head, pfn);
	if (mt == VIRTIO_HUGEROOM_MT_CMA || mt == VIRTIO_HUGEROOM_MT_ISOLATE ||
	    mt == VIRTIO_HUGEROOM_MT_HIGHATOMIC ||
	    (mt != VIRTIO_HUGEROOM_MT_MOVABLE && *free < pageblock_nr_pages))
		return VIRTIO_HUGEROOM_R_ZONE;
	/*
	 * Wholly free and reported by free page reporting: discarded on the
	 * host already, so its HOLD would free nothing (hr_report.c).
	 */
	if (*free == pageblock_nr_pages &&
	    virtio_hugeroom_block_reported(head, pfn))
		return VIRTIO_HUGEROOM_R_OTHER;
	/* Its claimed pages, just given back, count as taken already. */
	if (!virtio_hugeroom_admit_pages(vh, zone, pageblock_nr_pages -
					 min_t(unsigned int, released,
					       pageblock_nr_pages)))
		return VIRTIO_HUGEROOM_R_NOMEM;
	*zonep = zone;
	return -1;
}

/*
 * Does every page of the block at @pfn look free or migratable?  A
 * lockless walk, modelled on has_unmovable_pages() and compaction's
 * migrate scanner, run before alloc_contig_range() so that a block with a
 * page nothing can move (slab, page table, a long-term pin, any other
 * kernel allocation that fell back into a movable pageblock) fails
 * R_UNMOVABLE before its movable pages are migrated for nothing.
 *
 * Racy by nature: pages change state while they are looked at, so the
 * answer is a hint and alloc_contig_range() stays the authority.  In doubt
 * it says yes: a page with no references (on a per-cpu list or being
 * freed) and a page with a mapping but not on an LRU (in an LRU add batch
 * or isolated for a moment) count as movable.
 */
static bool virtio_hugeroom_block_movable(unsigned long pfn)
{
	unsigned long i = 0;

	while (i < pageblock_nr_pages) {
		struct page *page = pfn_to_page(pfn + i);
		struct page *head;
		unsigned long end;
		unsigned int order;

		if (PageBuddy(page)) {
			order = virtio_hugeroom_buddy_order(page);
			i += order < VIRTIO_HUGEROOM_KERNEL_ORDERS ?
			     1UL << order : 1;
			continue;
		}
		/* A compound page: judge its head, then skip its tail. */
		head = compound_head(page);
		if (page_ref_count(head)) {
			if (PageReserved(head) || PageSlab(head) ||
			    PageTable(head) || PageOffline(head))
				return false;
			if (PageLRU(head)) {
				if (folio_maybe_dma_pinned(page_folio(head)))
					return false;
			} else if (!READ_ONCE(head->mapping) &&
				   !virtio_hugeroom_movable_ops(head)) {
				/*
				 * Neither on an LRU nor movable_ops (whose
				 * mapping is set until 6.16, see
				 * __PageMovable(); a page flag since).
				 */
				return false;
			}
		}
		order = compound_order(head);
		end = page_to_pfn(head) + (1UL << order);
		if (order && order < VIRTIO_HUGEROOM_KERNEL_ORDERS &&
		    end > pfn + i)
			i = end - pfn;
		else
			i++;
	}
	return true;
}

/*
 * Try to free and take the block at @pfn, which had @chosen_free free
 * pages when it was chosen (UINT_MAX: now, a block the host named), and
 * whose @released claimed pages were just given back (they may still sit
 * on a per-cpu list, which the free count does not see).  Returns 1 if
 * taken, 0 if it failed (counted), -EAGAIN if it was left alone for the
 * page budget (not counted: SPEC 1.6.3.1).
 */
static int virtio_hugeroom_evac_block(struct virtio_hugeroom_run *r,
				      unsigned long pfn,
				      unsigned int chosen_free,
				      unsigned int released)
{
	struct virtio_hugeroom *vh = r->vh;
	unsigned int free = 0, used, tries;
	struct zone *zone = NULL;
	u64 ev0, moved, t0;
	int reason, rc;

	reason = virtio_hugeroom_evac_check(vh, pfn, released, &free, &zone);
	if (reason >= 0) {
		/* Every further block would break the admission rule too. */
		if (reason == VIRTIO_HUGEROOM_R_NOMEM)
			r->no_memory = true;
		virtio_hugeroom_run_fail(r, reason);
		return 0;
	}
	free = max(free, released);
	used = pageblock_nr_pages - min_t(unsigned int, free,
					  pageblock_nr_pages);
	if (chosen_free > pageblock_nr_pages)
		chosen_free = free;
	if (r->budget_pages && r->c.migrated + used > r->budget_pages) {
		r->budget_skipped = true;
		return -EAGAIN;
	}

	/* Nothing migrated for a block that cannot be freed. */
	if (used && !virtio_hugeroom_block_movable(pfn)) {
		dev_dbg(&vh->vdev->dev, "block 0x%llx: unmovable page\n",
			(u64)PFN_PHYS(pfn));
		virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_UNMOVABLE);
		r->since_progress++;
		return 0;
	}

	ev0 = virtio_hugeroom_pgmigrate(vh);
	t0 = ktime_get_ns();
	virtio_hugeroom_run_taking(r, pageblock_nr_pages);
	for (tries = 1; ; tries++) {
		rc = virtio_hugeroom_contig_alloc(pfn);
		if (rc != -EBUSY || tries == VIRTIO_HUGEROOM_EVAC_TRIES)
			break;
		/* No retry once the block shows a page it cannot move. */
		if (!virtio_hugeroom_block_movable(pfn))
			break;
		/* SPEC 1.6.3.2 item 5, 1.6.8.1 item 2: check between tries. */
		r->stop = virtio_hugeroom_run_check(r);
		if (r->stop) {
			rc = r->stop == VIRTIO_HUGEROOM_S_CANCELLED ?
			     -ECANCELED : -ETIME;
			break;
		}
		cond_resched();
	}
	if (rc)
		virtio_hugeroom_run_taking(r, -(long)pageblock_nr_pages);
	moved = virtio_hugeroom_run_account(r, ev0, ktime_get_ns() - t0, tries,
					    1, used,
					    pageblock_nr_pages - chosen_free,
					    rc);
	virtio_hugeroom_test_evac_rec(vh, pfn, chosen_free, free, moved,
				      rc);

	switch (rc) {
	case 0:
		virtio_hugeroom_run_take(r, pfn);
		virtio_hugeroom_run_taking(r, -(long)pageblock_nr_pages);
		r->since_progress++;
		return 1;
	case -EBUSY:
		reason = VIRTIO_HUGEROOM_R_UNMOVABLE;
		break;
	case -ENOMEM:
		/* As virtio-mem: no point in migrating more without memory. */
		reason = VIRTIO_HUGEROOM_R_NOMEM;
		r->no_memory = true;
		break;
	case -ECANCELED:
		reason = VIRTIO_HUGEROOM_R_CANCELLED;
		break;
	case -ETIME:
		reason = VIRTIO_HUGEROOM_R_BUDGET;
		break;
	default:
		reason = VIRTIO_HUGEROOM_R_OTHER;
		break;
	}
	dev_dbg(&vh->vdev->dev, "block 0x%llx: %d after %u tries\n",
		(u64)PFN_PHYS(pfn), rc, tries);
	virtio_hugeroom_run_fail(r, reason);
	r->since_progress++;
	return 0;
}

/*
 * Claiming holes.  alloc_contig_range() takes its migration targets from
 * the buddy allocator, which hands out free pages wherever they are: also
 * in the holes of the blocks this pass empties later, whose pages then
 * move twice (tests/vm evac-order: 1.21x the pages the occupancy said,
 * asking for half the blocks of a guest whose blocks are half used).  So
 * a pass first takes the free pages of the blocks it means to empty (one
 * alloc_contig_range() per run of free pages: it isolates the pageblock
 * only for the call and migrates nothing while the run is free), and
 * gives a block's back right before emptying it; the targets are then the
 * holes of blocks it keeps.  The claims are pages the donation takes
 * anyway, only earlier: each must pass admission as if it were taken (a
 * pass claims no more than admission would let it take), and they count
 * as taken for the pressure trigger.
 */
/*
 * 0: never; 1: where it pays (measured); 2: always.  Kernels where a
 * driver's pages cannot be movable (6.17 to 6.19, or later ones without
 * CONFIG_BALLOON_MIGRATION; hr_compat.h) have no claims: there the
 * parameter reads 0 and refuses anything else.
 */
#if defined(VIRTIO_HUGEROOM_CLAIMS_MOVABLE_OPS) || \
	defined(VIRTIO_HUGEROOM_CLAIMS_BALLOON)
static unsigned int claim_holes = 1;
#else
static unsigned int claim_holes;
#endif

static int virtio_hugeroom_claim_holes_set(const char *val,
					   const struct kernel_param *kp)
{
	unsigned int v;
	int rc = kstrtouint(val, 0, &v);

	if (rc)
		return rc;
	if (v > 2)
		return -EINVAL;
	if (v && !virtio_hugeroom_claims_supported()) {
		pr_notice_once("virtio_hugeroom: claim_holes: this kernel has no movable driver pages, hole claims stay off\n");
		return -EOPNOTSUPP;
	}
	WRITE_ONCE(claim_holes, v);
	return 0;
}

static const struct kernel_param_ops virtio_hugeroom_claim_holes_ops = {
	.set = virtio_hugeroom_claim_holes_set,
	.get = param_get_uint,
};

module_param_cb(claim_holes, &virtio_hugeroom_claim_holes_ops, &claim_holes,
		0644);
MODULE_PARM_DESC(claim_holes,
		 "EVACUATE claims the free pages of the blocks it empties before migrating: 0 never, 1 where cheaper than migrating twice (default), 2 always (0 only on kernels without movable driver pages: 6.17-6.19, no CONFIG_BALLOON_MIGRATION)");

/*
 * The next run of free pages in the block at @head from @*i: its start,
 * and @*i past it (pageblock_nr_pages: none left).  Lockless, a hint.
 */
static unsigned long virtio_hugeroom_next_run(struct page *head,
					      unsigned long *i)
{
	unsigned long start;
	unsigned int order;

	for (; *i < pageblock_nr_pages; (*i)++) {
		start = *i;
		while (*i < pageblock_nr_pages && PageBuddy(head + *i)) {
			order = virtio_hugeroom_buddy_order(head + *i);
			if (order >= VIRTIO_HUGEROOM_KERNEL_ORDERS)
				break;
			*i = min(*i + (1UL << order), pageblock_nr_pages);
		}
		if (*i > start)
			return start;
	}
	return pageblock_nr_pages;
}

/* Free pages and runs of them in the block at @head. */
static unsigned int virtio_hugeroom_count_runs(struct page *head,
					       unsigned int *free)
{
	unsigned long i = 0, start;
	unsigned int runs = 0;

	*free = 0;
	while ((start = virtio_hugeroom_next_run(head, &i)) <
	       pageblock_nr_pages) {
		*free += i - start;
		runs++;
	}
	return runs;
}

/*
 * The free pages of @head's zone that migrations take before the holes of
 * the block at @head: the allocator serves the smallest free chunks
 * first, so those of orders up to the block's largest free buddy (and
 * the block's own).  Lockless, a hint.
 */
static unsigned long virtio_hugeroom_free_before(struct page *head)
{
	struct zone *zone = page_zone(head);
	unsigned int order, top = 0;
	unsigned long i = 0, sum = 0;

	while (i < pageblock_nr_pages) {
		if (PageBuddy(head + i)) {
			order = virtio_hugeroom_buddy_order(head + i);
			if (order < VIRTIO_HUGEROOM_KERNEL_ORDERS) {
				top = max(top, order);
				i += 1UL << order;
				continue;
			}
		}
		i++;
	}
	for (order = 0; order <= top; order++)
		sum += READ_ONCE(zone->free_area[order].nr_free) << order;
	return sum;
}

/*
 * Claim the free pages of the block at @cl->pfn.  False once admission
 * refuses a claim: no further block is claimed.
 */
static bool virtio_hugeroom_claim_block(struct virtio_hugeroom_run *r,
					struct virtio_hugeroom_claim *cl)
{
	unsigned long pfn = cl->pfn, i = 0, start, n;
	struct page *head = pfn_to_page(pfn);
	struct zone *zone = page_zone(head);
	u64 t0;
	int rc;

	while ((start = virtio_hugeroom_next_run(head, &i)) <
	       pageblock_nr_pages) {
		n = i - start;
		if (!virtio_hugeroom_admit_pages(r->vh, zone, n))
			return false;
		t0 = ktime_get_ns();
		rc = virtio_hugeroom_contig_range(pfn + start, pfn + i);
		t0 = ktime_get_ns() - t0;
		if (!r->claim_calls)
			r->claim_first_ns = t0;
		r->claim_ns += t0;
		r->claim_calls++;
		if (rc) {
			r->vh->evac_claim_failed++;
			dev_dbg(&r->vh->vdev->dev, "claim 0x%llx+%lu: %d\n",
				(u64)PFN_PHYS(pfn + start), n, rc);
			continue;
		}
		virtio_hugeroom_claim_add(cl, pfn + start, pfn + i);
	}
	return true;
}

/*
 * Plan the block of @cl, the pages migrated before its turn @before: how
 * many migrated pages its holes are expected to take (cl->expect), and
 * its runs of free pages (0: not worth a claim).  The migrations before
 * its turn take the smallest free chunks first: the share of them it
 * gets is @before of the zone's free pages up to its largest hole
 * (virtio_hugeroom_free_before(); all free pages underestimated it).
 */
static unsigned int virtio_hugeroom_claim_plan(struct virtio_hugeroom_claim *cl,
					       u64 before)
{
	struct page *head = pfn_to_online_page(cl->pfn);
	unsigned int free, runs;
	u64 pool;

	cl->expect = 0;
	/* Only what evac_check() would let through has holes worth it. */
	if (!head || !virtio_hugeroom_zone_blocks(page_zone(head)) ||
	    virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(cl->pfn)) !=
	    VIRTIO_HUGEROOM_MT_MOVABLE)
		return 0;
	runs = virtio_hugeroom_count_runs(head, &free);
	pool = virtio_hugeroom_free_before(head);
	if (!runs || !pool)
		return 0;
	cl->expect = div64_u64((u64)free * min(before, pool), pool);
	return runs;
}

/*
 * Is claiming the block of @cl, of @runs runs, worth it?  Its holes are
 * expected to take cl->expect migrated pages (then moved again); a claim
 * costs an alloc_contig_range() per run, which on a host short of CPU
 * (each call waits for every CPU: an RCU grace period, per-cpu drains)
 * may cost more than migrating the pages it saves.  Both costs as
 * measured in this command: per migrated page the cheapest block's (the
 * average has the slow ones), per claim call those after the first (which
 * costs about twice as much; the first claim is always made, to measure
 * it).  Claimed whatever that says, while the pass has spent on its
 * claims, @spent ns, less than its @total pages take to migrate at the
 * cheapest block's pace (the first blocks of a command, which the
 * average has, are the slowest): a block expected to take
 * VIRTIO_HUGEROOM_CLAIM_MIN_PAGES or more, and, the last blocks first,
 * while the double migrations expected of this one and those before it,
 * @rest, exceed 1/32 of @total.  That bound keeps a guest whose CPUs are
 * busy (a claim call waits for every CPU, and each wait lets the busy
 * tasks run) from spending several times its migrations' time on claims.
 */
static bool virtio_hugeroom_claim_pays(struct virtio_hugeroom_run *r,
				       struct virtio_hugeroom_claim *cl,
				       unsigned int runs, u64 rest, u64 total,
				       u64 spent)
{
	u64 gain, cost, calls, ns, page_ns;

	if (!runs)
		return false;
	if (!r->claim_calls || READ_ONCE(claim_holes) == 2)
		return true;
	page_ns = r->mig_page_min_ns ?: div64_u64(r->mig_ns, r->mig_pages);
	if (spent < total * page_ns &&
	    (cl->expect >= VIRTIO_HUGEROOM_CLAIM_MIN_PAGES ||
	     rest << VIRTIO_HUGEROOM_CLAIM_REST_SHIFT > total))
		return true;
	calls = r->claim_calls > 1 ? r->claim_calls - 1 : 1;
	ns = r->claim_calls > 1 ? r->claim_ns - r->claim_first_ns : r->claim_ns;
	gain = (u64)cl->expect * page_ns;
	cost = div64_u64(ns * runs, calls);
	return gain > cost;
}

/*
 * The blocks r->claims[0, @nr).pfn are those the pass empties next, in
 * its order, .used their in-use pages: claim the free pages of those
 * it pays to (no more than the blocks still wanted), the last first
 * (their holes are the likeliest to fill).  r->nr_claims says how many
 * were looked at.  Nothing before the command has migrated a few pages,
 * the measure of what a migration costs.  Migrations by the claims
 * (pages allocated into a hole since it was counted) are the job's.
 */
static void virtio_hugeroom_claim(struct virtio_hugeroom_run *r,
				  unsigned int nr)
{
	u64 ev0, ev1, t0 = ktime_get_ns(), before = 0, rest = 0, total;
	u64 calls0 = r->claim_calls;
	unsigned int want = r->count - min(r->count,
					   r->c.freed + r->nr_pending);
	unsigned int i;
	bool admitted = true;

	ev0 = virtio_hugeroom_pgmigrate(r->vh);
	nr = min(nr, want);
	for (i = 0; i < nr; i++) {
		virtio_hugeroom_claim_init(r->vh, &r->claims[i]);
		/* planned again below, with the runs of the moment */
		virtio_hugeroom_claim_plan(&r->claims[i], before);
		before += r->claims[i].used;
		rest += r->claims[i].expect;
	}
	total = before;
	r->nr_claims = nr;
	/* Pressure finds them from now on (virtio_hugeroom_claims_drop()). */
	virtio_hugeroom_claims_publish(r->vh, r->claims, nr);
	for (i = nr; i-- > 0 && admitted && !r->stop; ) {
		struct virtio_hugeroom_claim *cl = &r->claims[i];
		u64 planned = cl->expect;
		unsigned int runs;

		before -= cl->used;
		runs = virtio_hugeroom_claim_plan(cl, before);
		if (!virtio_hugeroom_claim_pays(r, cl, runs, rest, total,
						ktime_get_ns() - t0)) {
			rest -= min(rest, planned);
			continue;
		}
		rest -= min(rest, planned);
		admitted = virtio_hugeroom_claim_block(r, cl);
		r->stop = virtio_hugeroom_run_check(r);
		cond_resched();
	}
	ev1 = virtio_hugeroom_pgmigrate(r->vh);
	if (ev1 > ev0)
		r->c.migrated += ev1 - ev0;
	/* The pressure trigger watches while claims sit, held blocks or not. */
	if (READ_ONCE(r->vh->nr_claimed))
		virtio_hugeroom_pressure_arm(r->vh);
	spin_lock(&r->vh->hold_lock);
	r->vh->evac_claim_ns += ktime_get_ns() - t0;
	r->vh->evac_claim_calls += r->claim_calls - calls0;
	spin_unlock(&r->vh->hold_lock);
}

/*
 * Does the pass look at claims before its next block?  Once, as soon as
 * this command has migrated enough pages to know what a migration costs
 * (the first blocks of the pass, emptied before any claim, are those
 * whose holes had the least time to fill).
 */
static bool virtio_hugeroom_claim_due(struct virtio_hugeroom_run *r)
{
	if (!virtio_hugeroom_claims_supported() ||
	    r->claimed || !r->claims || !READ_ONCE(claim_holes) ||
	    r->mig_pages < VIRTIO_HUGEROOM_CLAIM_PROBE_PAGES)
		return false;
	r->claimed = true;
	return true;
}

/*
 * Give back the claim of the block at @pfn, if any, and say how many
 * pages it held.
 */
static struct virtio_hugeroom_claim *
virtio_hugeroom_claim_of(struct virtio_hugeroom_run *r, unsigned long pfn)
{
	unsigned int i;

	for (i = 0; i < r->nr_claims; i++)
		if (r->claims[i].pfn == pfn)
			return &r->claims[i];
	return NULL;
}

static unsigned int virtio_hugeroom_unclaim(struct virtio_hugeroom_run *r,
					    unsigned long pfn)
{
	struct virtio_hugeroom_claim *cl = virtio_hugeroom_claim_of(r, pfn);

	return cl ? virtio_hugeroom_claim_release(cl) : 0;
}

static void virtio_hugeroom_unclaim_all(struct virtio_hugeroom_run *r)
{
	unsigned int i;

	for (i = 0; i < r->nr_claims; i++)
		virtio_hugeroom_claim_release(&r->claims[i]);
	virtio_hugeroom_claims_publish(r->vh, r->claims, 0);
	r->nr_claims = 0;
}

/* The pages of the block at @pfn that this pass claims now. */
static unsigned int virtio_hugeroom_claimed(struct virtio_hugeroom_run *r,
					    unsigned long pfn)
{
	struct virtio_hugeroom_claim *cl = virtio_hugeroom_claim_of(r, pfn);

	return cl ? READ_ONCE(cl->pages) : 0;
}

/*
 * Will the pass still look at claims (virtio_hugeroom_claim_due())?  Until
 * it has, only wholly free blocks make spans: a span that migrates before
 * the claims would move its pages into the holes the claims are there to
 * keep free.
 */
static bool virtio_hugeroom_claims_pending(struct virtio_hugeroom_run *r)
{
	return virtio_hugeroom_claims_supported() && r->claims &&
	       !r->claimed && READ_ONCE(claim_holes);
}

/*
 * Spans.  Every alloc_contig_range() call pays a fixed price besides its
 * migrations: an expedited RCU grace period and a drain of every CPU's
 * LRU batches and per-cpu lists, which the other CPUs must answer.  Under
 * TCG that is 3-6 ms a call (a claim, which migrates nothing, costs it),
 * about what migrating the 256 pages of a half-used block costs.  Blocks
 * a command empties one after another at consecutive addresses (the host
 * names blocks of equal cost in address order; CHEAPEST takes the
 * cheapest blocks it wants in address order) are emptied by one call over
 * all of them: it isolates the whole span before it migrates, so no page
 * moved out of one lands in the holes of another either.  A span that
 * fails (a page nothing could move after all) is tried again block by
 * block, each with its own checks and tries.  A pass that claims holes
 * makes spans of wholly free blocks only before it has claimed: the
 * blocks it empties before that are those whose migrations tell what a
 * migration costs.  span_blocks: the most blocks a call takes, 1 to
 * empty each on its own.
 */
static unsigned int span_blocks = VIRTIO_HUGEROOM_SPAN_MAX;

static int virtio_hugeroom_span_blocks_set(const char *val,
					   const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, VIRTIO_HUGEROOM_SPAN_MAX);
}

static const struct kernel_param_ops virtio_hugeroom_span_blocks_ops = {
	.set = virtio_hugeroom_span_blocks_set,
	.get = param_get_uint,
};

module_param_cb(span_blocks, &virtio_hugeroom_span_blocks_ops, &span_blocks,
		0644);
MODULE_PARM_DESC(span_blocks,
		 "most blocks at consecutive addresses one alloc_contig_range() empties, 1 to "
		 __stringify(VIRTIO_HUGEROOM_SPAN_MAX) " (default 64; 1: each block on its own)");

/*
 * How many of the @nr blocks at r->span (at most VIRTIO_HUGEROOM_SPAN_MAX),
 * from the first, make a span: at consecutive addresses, each passing the
 * checks of a block of its own and the movable walk, together within
 * admission (in the first's zone) and the page budget, and no more than
 * the blocks still wanted.  The claims of a span's blocks are given
 * back (those of a block that ends it stay).  Their free pages, claimed
 * ones too, go to their .free.  Before the pass has looked at claims only
 * wholly free blocks make a span: they migrate nothing into holes.  Below
 * 2: no span (the first block goes its own way).
 */
static unsigned int virtio_hugeroom_span(struct virtio_hugeroom_run *r,
					 unsigned int nr)
{
	struct virtio_hugeroom_span_blk *b = r->span;
	unsigned int k, max, claimed, f, used = 0;
	unsigned long need = 0;
	struct zone *zone0 = NULL, *zone;
	bool free_only = virtio_hugeroom_claims_pending(r);

	max = min3(nr, READ_ONCE(span_blocks),
		   r->count - min(r->count, r->c.freed + r->nr_pending));
	if (!b || max < 2 ||
	    virtio_hugeroom_fault_no_span(&r->vh->evac_scan))
		return 0;
	for (k = 0; k < max; k++) {
		unsigned long pfn = b[0].pfn + k * pageblock_nr_pages;

		if (b[k].pfn != pfn)
			break;
		/* claimed pages count as taken already */
		claimed = virtio_hugeroom_claimed(r, pfn);
		zone = NULL;
		f = 0;
		if (virtio_hugeroom_evac_check(r->vh, pfn, claimed, &f,
					       &zone) >= 0)
			break;
		if (zone0 && zone != zone0)
			break;
		zone0 = zone;
		f = min_t(unsigned int, f + claimed, pageblock_nr_pages);
		if (free_only && f < pageblock_nr_pages)
			break;
		/*
		 * The movable walk takes claimed pages for unmovable on 7.x
		 * (balloon pages): a claimed block, whose claims kept its
		 * holes free, goes without it (the span falls back on one
		 * block at a time if alloc_contig_range() says otherwise).
		 */
		if (f < pageblock_nr_pages && !claimed &&
		    !virtio_hugeroom_block_movable(pfn))
			break;
		/*
		 * Its pages, and room for the targets of its used ones: a
		 * span takes them all in one call, with no admission between
		 * blocks, and its migrations refill the per-cpu lists, which
		 * admission does not count as free (6.12's held 16 MiB more
		 * after a span of 64 blocks, driver-pressure-6.12).
		 */
		need += 2 * pageblock_nr_pages - f -
			min_t(unsigned int, claimed, pageblock_nr_pages);
		if (k && !virtio_hugeroom_admit_pages(r->vh, zone0, need))
			break;
		if (r->budget_pages && r->c.migrated + used +
		    pageblock_nr_pages - f > r->budget_pages)
			break;
		used += pageblock_nr_pages - f;
		b[k].free = f;
	}
	if (k < 2)
		return k;
	/* alloc_contig_range() would migrate them */
	for (max = 0; max < k; max++)
		virtio_hugeroom_unclaim(r, b[max].pfn);
	return k;
}

/*
 * Empty the @k blocks of r->span in one call.  True if they were all
 * taken; false: nothing was (the pages it moved out stay out).
 */
static bool virtio_hugeroom_evac_span(struct virtio_hugeroom_run *r,
				      unsigned int k)
{
	struct virtio_hugeroom_span_blk *b = r->span;
	unsigned long pfn = b[0].pfn;
	struct virtio_hugeroom *vh = r->vh;
	unsigned int j, used = 0, used_chosen = 0;
	u64 ev0, moved, share, t0;
	int rc;

	for (j = 0; j < k; j++) {
		if (b[j].chosen > pageblock_nr_pages)
			b[j].chosen = b[j].free;
		used += pageblock_nr_pages - b[j].free;
		used_chosen += pageblock_nr_pages - b[j].chosen;
	}
	ev0 = virtio_hugeroom_pgmigrate(vh);
	t0 = ktime_get_ns();
	virtio_hugeroom_run_taking(r, k * pageblock_nr_pages);
	rc = virtio_hugeroom_contig_range(pfn, pfn + k * pageblock_nr_pages);
	if (rc)
		virtio_hugeroom_run_taking(r, -(long)(k * pageblock_nr_pages));
	moved = virtio_hugeroom_run_account(r, ev0, ktime_get_ns() - t0, 1, k,
					    used, used_chosen, rc);
	if (rc) {
		dev_dbg(&vh->vdev->dev, "span 0x%llx+%u blocks: %d\n",
			(u64)PFN_PHYS(pfn), k, rc);
		return false;
	}
	for (j = 0; j < k; j++) {
		/* the migrations of the span, shared by the blocks' use */
		share = used ? div64_u64(moved * (pageblock_nr_pages -
						  b[j].free), used) : 0;
		virtio_hugeroom_test_evac_rec(vh, b[j].pfn, b[j].chosen,
					      b[j].free, share, 0);
		virtio_hugeroom_run_take(r, pfn + j * pageblock_nr_pages);
		virtio_hugeroom_run_taking(r, -(long)pageblock_nr_pages);
		r->since_progress++;
	}
	return true;
}

/* Explicit form: the host's blocks, in its order, until count are freed. */
static void virtio_hugeroom_evac_explicit(struct virtio_hugeroom_run *r,
					  const __le64 *gpas, u32 nr)
{
	unsigned long pfn;
	u32 i, k, n, no_span = 0;

	for (i = 0; i < nr; i++) {
		if (virtio_hugeroom_run_enough(r) ||
		    virtio_hugeroom_run_blocked(r))
			break;
		r->stop = virtio_hugeroom_run_check(r);
		if (r->stop)
			break;
		if (virtio_hugeroom_claim_due(r)) {
			n = min_t(u32, nr - i, VIRTIO_HUGEROOM_MAX_CLAIMS);
			for (k = 0; k < n; k++) {
				struct page *head;

				pfn = PHYS_PFN(le64_to_cpu(gpas[i + k]));
				head = pfn_to_online_page(pfn);
				r->claims[k].pfn = pfn;
				r->claims[k].used = head ? pageblock_nr_pages -
					virtio_hugeroom_block_free(head, pfn) : 0;
			}
			virtio_hugeroom_claim(r, n);
		}
		pfn = PHYS_PFN(le64_to_cpu(gpas[i]));
		virtio_hugeroom_fault_block(&r->vh->evac_scan);
		/* after a failed span its blocks go one by one */
		n = 0;
		if (i >= no_span && r->span) {
			n = min_t(u32, nr - i, VIRTIO_HUGEROOM_SPAN_MAX);
			for (k = 0; k < n; k++) {
				r->span[k].pfn = PHYS_PFN(le64_to_cpu(gpas[i + k]));
				r->span[k].chosen = UINT_MAX;
			}
			n = virtio_hugeroom_span(r, n);
		}
		if (n > 1) {
			if (virtio_hugeroom_evac_span(r, n)) {
				i += n - 1;
				virtio_hugeroom_run_tick(r);
				continue;
			}
			no_span = i + n;
		}
		virtio_hugeroom_evac_block(r, pfn, UINT_MAX,
					   virtio_hugeroom_unclaim(r, pfn));
		if (r->stop)
			break;
		virtio_hugeroom_run_tick(r);
	}
	virtio_hugeroom_unclaim_all(r);
}

/*
 * Has the block of @c taken pages since the sweep counted it?  The pages
 * moved out of one candidate land in free holes anywhere, also in the
 * holes of later candidates; emptying one of those would move them a
 * second time.  Such a block is left for the next sweep, which ranks it
 * by what it holds then.
 */
static bool virtio_hugeroom_cand_stale(const struct virtio_hugeroom_cand *c)
{
	struct page *head = pfn_to_online_page(c->pfn);
	unsigned int now;

	if (!head)
		return false;
	now = virtio_hugeroom_block_free(head, c->pfn);
	return now < c->free && c->free - now > VIRTIO_HUGEROOM_STALE_PAGES;
}

/*
 * Into r->span, the @nr candidates from @c that may make a span (up to
 * VIRTIO_HUGEROOM_SPAN_MAX): until one that filled up since the sweep
 * (virtio_hugeroom_cand_stale(), a claimed one cannot have).
 */
static unsigned int virtio_hugeroom_span_cands(struct virtio_hugeroom_run *r,
					       const struct virtio_hugeroom_cand *c,
					       unsigned int nr)
{
	unsigned int k;

	nr = min_t(unsigned int, nr, VIRTIO_HUGEROOM_SPAN_MAX);
	for (k = 0; k < nr; k++) {
		if (!virtio_hugeroom_claimed(r, c[k].pfn) &&
		    virtio_hugeroom_cand_stale(&c[k]))
			break;
		r->span[k].pfn = c[k].pfn;
		r->span[k].chosen = c[k].free;
	}
	return k;
}

static int virtio_hugeroom_cand_pfn_cmp(const void *a, const void *b)
{
	const struct virtio_hugeroom_cand *x = a, *y = b;

	if (x->pfn != y->pfn)
		return x->pfn < y->pfn ? -1 : 1;
	return 0;
}

/*
 * The cheapest candidates of sweep @sw that the command still wants and
 * admission would let it take, in address order, so that neighbours among
 * them make spans; the rest stay behind them, cheapest first, for the
 * blocks that fail.  Without the admission bound a command asking for
 * more than the guest can give had all its candidates in address order,
 * the dearest and the lowest (which hold the kernel's own pages) with the
 * cheapest: 22-27 R_UNMOVABLE and more migrated where block by block took
 * the cheapest (fake-daemon.py pressure, EVACUATE 1000).
 */
static void virtio_hugeroom_cands_by_pfn(struct virtio_hugeroom_run *r,
					 struct virtio_hugeroom_sweep *sw)
{
	unsigned int want = r->count - min(r->count,
					   r->c.freed + r->nr_pending);

	want = min3((unsigned long)want, (unsigned long)sw->nr_cands,
		    virtio_hugeroom_admit_blocks());
	if (READ_ONCE(span_blocks) > 1 && want > 1)
		sort(sw->cand, want, sizeof(sw->cand[0]),
		     virtio_hugeroom_cand_pfn_cmp, NULL);
}

/*
 * CHEAPEST form: a fresh sweep of every pageblock (not an old report),
 * then its candidates, most free pages first, each re-checked.  Another
 * sweep if that was not enough and the last one made progress, or left
 * candidates that had filled up meanwhile (at most
 * VIRTIO_HUGEROOM_STALE_SWEEPS of those in a row).
 */
static void virtio_hugeroom_evac_cheapest(struct virtio_hugeroom_run *r,
					  const struct virtio_hugeroom_range *ranges,
					  u32 nr_ranges)
{
	struct virtio_hugeroom_scan *s = &r->vh->evac_scan;
	u64 deadline = r->budget_ns ? r->c.start_ns + r->budget_ns : U64_MAX;
	unsigned int i, nr, no_span, stale_sweeps = 0;
	bool progress, stale;
	u64 sweeps, t0;

	s->ranges = nr_ranges ? ranges : NULL;
	s->nr_ranges = nr_ranges;
	do {
		/*
		 * A sweep of a big guest takes long: in slices, so that a
		 * CANCEL, the time budget or a suspend stops it too.
		 */
		s->nid = NUMA_NO_NODE;
		sweeps = s->sweeps;
		t0 = ktime_get_ns();
		while (s->sweeps == sweeps) {
			virtio_hugeroom_scan(s, VIRTIO_HUGEROOM_SCAN_BATCH,
					     deadline);
			r->stop = virtio_hugeroom_run_check(r);
			if (r->stop)
				break;
		}
		spin_lock(&r->vh->hold_lock);
		r->vh->evac_sweep_ns += ktime_get_ns() - t0;
		spin_unlock(&r->vh->hold_lock);
		if (r->stop)
			goto out;
		progress = false;
		stale = false;
		r->claimed = false;
		no_span = 0;
		virtio_hugeroom_cands_by_pfn(r, s->done);
		for (i = 0; i < s->done->nr_cands; i++) {
			const struct virtio_hugeroom_cand *c = &s->done->cand[i];
			unsigned int released, k;

			if (virtio_hugeroom_run_enough(r) ||
			    virtio_hugeroom_run_blocked(r))
				goto out;
			r->stop = virtio_hugeroom_run_check(r);
			if (r->stop)
				goto out;
			if (virtio_hugeroom_claim_due(r)) {
				nr = min_t(unsigned int, s->done->nr_cands - i,
					   VIRTIO_HUGEROOM_MAX_CLAIMS);
				for (k = 0; k < nr; k++) {
					r->claims[k].pfn = c[k].pfn;
					r->claims[k].used = pageblock_nr_pages -
							    c[k].free;
				}
				virtio_hugeroom_claim(r, nr);
				if (r->stop)
					goto out;
			}
			virtio_hugeroom_fault_block(&r->vh->evac_scan);
			/* after a failed span its blocks go one by one */
			nr = 0;
			if (i >= no_span && r->span) {
				nr = s->done->nr_cands - i;
				nr = virtio_hugeroom_span_cands(r, c, nr);
				nr = virtio_hugeroom_span(r, nr);
			}
			if (nr > 1) {
				if (virtio_hugeroom_evac_span(r, nr)) {
					progress = true;
					i += nr - 1;
					virtio_hugeroom_run_tick(r);
					continue;
				}
				no_span = i + nr;
			}
			/* A claimed block cannot have filled up. */
			released = virtio_hugeroom_unclaim(r, c->pfn);
			if (!released && virtio_hugeroom_cand_stale(c)) {
				stale = true;
				continue;
			}
			if (virtio_hugeroom_evac_block(r, c->pfn, c->free,
						       released) > 0)
				progress = true;
			if (r->stop)
				goto out;
			virtio_hugeroom_run_tick(r);
		}
		virtio_hugeroom_unclaim_all(r);
		stale_sweeps = progress ? 0 : stale_sweeps + stale;
	} while ((progress || stale) && !virtio_hugeroom_run_enough(r) &&
		 stale_sweeps < VIRTIO_HUGEROOM_STALE_SWEEPS);
out:
	virtio_hugeroom_unclaim_all(r);
	s->ranges = NULL;
	s->nr_ranges = 0;
}

/*
 * CAPTURE: order-9 allocations that may compact (SPEC 1.6.5.1), split into
 * base pages so that they go back exactly like evacuated blocks.
 */
static void virtio_hugeroom_capture(struct virtio_hugeroom_run *r)
{
	struct virtio_hugeroom *vh = r->vh;
	u64 ev0 = virtio_hugeroom_pgmigrate(vh), ev1;
	struct page *page, *tmp;
	unsigned int nr_cma = 0;
	LIST_HEAD(cma);
	int mt;

	while (!virtio_hugeroom_run_enough(r) &&
	       !virtio_hugeroom_run_blocked(r)) {
		r->stop = virtio_hugeroom_run_check(r);
		if (r->stop)
			break;
		if (!virtio_hugeroom_admit(vh, NULL, false)) {
			virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_NOMEM);
			break;
		}
		page = alloc_pages(GFP_HIGHUSER_MOVABLE | __GFP_NOWARN |
				   __GFP_NORETRY, pageblock_order);
		if (!page) {
			virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_NOMEM);
			break;
		}
#ifdef CONFIG_ZONE_DMA
		if (zone_idx(page_zone(page)) == ZONE_DMA) {
			__free_pages(page, pageblock_order);
			virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_ZONE);
			break;
		}
#endif
		/*
		 * A movable allocation may be served from CMA pageblocks
		 * (first, once they hold half the zone's free pages): a hold
		 * there would keep cma_alloc() from its memory for as long as
		 * the host wants.  Such a block is R_ZONE, as EVACUATE has it,
		 * and kept aside until the end so that the allocator hands
		 * out another; at most as many as the command asks for.
		 */
		mt = virtio_hugeroom_block_mt(page_to_pfn(page));
		if (virtio_hugeroom_wire_mt(mt) == VIRTIO_HUGEROOM_MT_CMA) {
			list_add(&page->lru, &cma);
			virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_ZONE);
			if (++nr_cma >= r->count)
				break;
			continue;
		}
		if (!virtio_hugeroom_admit(vh, page_zone(page), true)) {
			__free_pages(page, pageblock_order);
			virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_NOMEM);
			break;
		}
		split_page(page, pageblock_order);
		virtio_hugeroom_run_take(r, page_to_pfn(page));
		r->since_progress++;
		ev1 = virtio_hugeroom_pgmigrate(vh);
		r->c.migrated = ev1 > ev0 ? ev1 - ev0 : 0;
		virtio_hugeroom_run_tick(r);
	}
	list_for_each_entry_safe(page, tmp, &cma, lru) {
		list_del(&page->lru);
		__free_pages(page, pageblock_order);
	}
	ev1 = virtio_hugeroom_pgmigrate(vh);
	r->c.migrated = ev1 > ev0 ? ev1 - ev0 : 0;
}

/*
 * The job's thread runs at this nice level.  0, the default, runs it like
 * any kworker: a donation is what a VM start waits for.  Higher leaves a
 * busy guest's own tasks more of its CPUs while a donation migrates their
 * pages (at 10 a job that meets a task of nice 0 on a CPU gets about a
 * tenth of it) and an idle guest's CPUs are still the job's; measured on
 * CPU-bound donors, 10 halved what a donation cost their workloads and
 * made it 4-5x longer (guest-driver/README.md).
 */
static int evac_nice;

static int virtio_hugeroom_evac_nice_set(const char *val,
					 const struct kernel_param *kp)
{
	int v;
	int rc = kstrtoint(val, 0, &v);

	if (rc)
		return rc;
	if (v < 0 || v > MAX_NICE)
		return -EINVAL;
	WRITE_ONCE(*(int *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops virtio_hugeroom_evac_nice_ops = {
	.set = virtio_hugeroom_evac_nice_set,
	.get = param_get_int,
};

module_param_cb(evac_nice, &virtio_hugeroom_evac_nice_ops, &evac_nice, 0644);
MODULE_PARM_DESC(evac_nice,
		 "nice level of EVACUATE and CAPTURE, 0 (as a kworker, default) to 19; read at each command's start");

/*
 * An EVACUATE nobody waits for (EVAC_F_BACKGROUND: hugeroomd fills its
 * standing reserve) runs at this nice level, or evac_nice if higher: a
 * busy guest keeps nearly all of its CPUs, an idle one gives its blocks
 * as fast as for any other command.
 */
static int evac_background_nice = MAX_NICE;

module_param_cb(evac_background_nice, &virtio_hugeroom_evac_nice_ops,
		&evac_background_nice, 0644);
MODULE_PARM_DESC(evac_background_nice,
		 "nice level of an EVACUATE with EVAC_F_BACKGROUND (a daemon's standing reserve), 0 to 19 (default); evac_nice if that is higher");

void virtio_hugeroom_job_work(struct kthread_work *work)
{
	struct virtio_hugeroom *vh = container_of(work, struct virtio_hugeroom,
						  job_work);
	const struct virtio_hugeroom_hdr *hdr = vh->job_cmd;
	struct virtio_hugeroom_run r = {
		.vh = vh,
		.id = le64_to_cpu(hdr->request_id),
		.c.start_ns = ktime_get_ns(),
	};
	u32 status;
	int nice;

	nice = READ_ONCE(evac_nice);
	if (le16_to_cpu(hdr->type) == VIRTIO_HUGEROOM_CMD_EVACUATE &&
	    le16_to_cpu(hdr->flags) & VIRTIO_HUGEROOM_EVAC_F_BACKGROUND)
		nice = max(nice, READ_ONCE(evac_background_nice));
	sched_set_normal(current, nice);
	INIT_LIST_HEAD(&r.pending);
	INIT_LIST_HEAD(&r.refused);
	virtio_hugeroom_test_evac_start(vh);
	r.last_progress_ns = r.c.start_ns;
	if (le16_to_cpu(hdr->type) == VIRTIO_HUGEROOM_CMD_CAPTURE) {
		const struct virtio_hugeroom_capture *cap = vh->job_cmd;

		r.count = le32_to_cpu(cap->count);
		r.budget_ns = (u64)le32_to_cpu(cap->budget_ms) * NSEC_PER_MSEC;
		virtio_hugeroom_capture(&r);
	} else {
		const struct virtio_hugeroom_evacuate *ev = vh->job_cmd;

		r.count = le32_to_cpu(ev->count);
		r.budget_ns = (u64)le32_to_cpu(ev->budget_ms) * NSEC_PER_MSEC;
		r.budget_pages = le64_to_cpu(ev->budget_pages);
		/* Without it, a pass claims nothing (as before claims). */
		r.claims = kvmalloc_array(VIRTIO_HUGEROOM_MAX_CLAIMS,
					  sizeof(*r.claims),
					  GFP_KERNEL | __GFP_NOWARN);
		/* Without it, every block goes on its own. */
		r.span = kmalloc_array(VIRTIO_HUGEROOM_SPAN_MAX,
				       sizeof(*r.span),
				       GFP_KERNEL | __GFP_NOWARN);
		if (le16_to_cpu(ev->hdr.flags) & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST)
			virtio_hugeroom_evac_cheapest(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_ranges));
		else
			virtio_hugeroom_evac_explicit(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_gpas));
	}
	virtio_hugeroom_claims_publish(vh, NULL, 0);
	kvfree(r.claims);
	kfree(r.span);
	virtio_hugeroom_run_flush(&r);
	virtio_hugeroom_run_release(&r);

	/* SPEC 1.6.3.1: first of CANCELLED, BUDGET, PARTIAL. */
	if (r.c.freed >= r.count)
		status = VIRTIO_HUGEROOM_S_OK;
	else if (r.stop)
		status = r.stop;
	else if (r.budget_skipped)
		status = VIRTIO_HUGEROOM_S_BUDGET;
	else
		status = VIRTIO_HUGEROOM_S_PARTIAL;
	dev_dbg(&vh->vdev->dev,
		"request %llu: status %u, %u of %u blocks held, %u tried, %llu pages migrated, %llu ms\n",
		r.id, status, r.c.freed, r.count, r.c.tried, r.c.migrated,
		div_u64(ktime_get_ns() - r.c.start_ns, NSEC_PER_MSEC));
	/*
	 * Free the slot before the RESULT: a host may send the next command
	 * as soon as it sees it.  That command's job_work cannot run before
	 * this one returns, and nothing below reads vh->job_cmd.
	 */
	spin_lock(&vh->job_lock);
	vh->job_busy = false;
	vh->job_cancel = false;
	spin_unlock(&vh->job_lock);
	virtio_hugeroom_send_counts(vh, VIRTIO_HUGEROOM_MSG_RESULT, r.id, status,
				    &r.c);
}
