// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: STATUS reports, the free-list report sweep.
 *
 * Report contents: per-zone data (free counts per order, per-migratetype
 * free pages at pageblock order and above, watermarks, PCP state) is read
 * fresh for each report.  Per-pageblock data (the histogram of movable
 * pageblocks and the cheapest candidate blocks) comes from a lockless scan of
 * every pageblock, like compaction's free scanner.  On a large guest a full
 * scan is too slow for one report, so the scan is a sweep with a cursor: each
 * report advances it by at most VIRTIO_HUGEROOM_SCAN_BLOCKS pageblocks or 1%
 * of the report period in time, and reports carry the histogram and
 * candidates of the last *complete* sweep.  The very first report after probe
 * completes a sweep regardless of the budget, so no report is ever empty.
 * EVACUATE CHEAPEST runs sweeps of its own with the same scanner
 * (vh->evac_scan, hr_evac.c).
 *
 * Pageblock migratetype: get_pfnblock_flags_mask() is not exported, so the
 * scanner reads the pageblock bits from the section usemap itself, exactly as
 * mm/page_alloc.c does for SPARSEMEM kernels.  Until 6.16 isolation is a
 * migratetype (MIGRATE_ISOLATE in the migratetype bits); since 6.17 it is
 * a bit of its own next to them, which the kernel's reader turns into
 * MIGRATE_ISOLATE (a feature test, VIRTIO_HUGEROOM_HAVE_PB_ISOLATE_BIT).
 *
 * Locks: the report sweep, building and sending run under report_lock
 * (a mutex, held while waiting for the device; sleeps).  zone->lock is
 * taken under it for one capped free list at a time, with IRQs off.  The
 * scanner itself takes no lock: each sweep cursor has one user at a time
 * (vh->scan under report_lock, vh->evac_scan in job_work).  Section
 * usemaps are read under rcu_read_lock().
 */

#include "hr_internal.h"
#include "hr_pcp.h"

/* The all_vm_events() index of wire counter @i; -1 where the kernel has none. */
static int virtio_hugeroom_vm_event(unsigned int i)
{
	switch (i) {
#ifdef CONFIG_COMPACTION
	case VIRTIO_HUGEROOM_VS_COMPACT_STALL:
		return COMPACTSTALL;
	case VIRTIO_HUGEROOM_VS_COMPACT_FAIL:
		return COMPACTFAIL;
	case VIRTIO_HUGEROOM_VS_COMPACT_SUCCESS:
		return COMPACTSUCCESS;
	case VIRTIO_HUGEROOM_VS_COMPACT_MIGRATE_SCANNED:
		return COMPACTMIGRATE_SCANNED;
	case VIRTIO_HUGEROOM_VS_COMPACT_FREE_SCANNED:
		return COMPACTFREE_SCANNED;
	case VIRTIO_HUGEROOM_VS_COMPACT_ISOLATED:
		return COMPACTISOLATED;
	case VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_WAKE:
		return KCOMPACTD_WAKE;
	case VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_MIGRATE_SCANNED:
		return KCOMPACTD_MIGRATE_SCANNED;
	case VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_FREE_SCANNED:
		return KCOMPACTD_FREE_SCANNED;
#endif
#ifdef CONFIG_MIGRATION
	case VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS:
		return PGMIGRATE_SUCCESS;
	case VIRTIO_HUGEROOM_VS_PGMIGRATE_FAIL:
		return PGMIGRATE_FAIL;
#endif
#ifdef CONFIG_TRANSPARENT_HUGEPAGE
	case VIRTIO_HUGEROOM_VS_THP_FAULT_ALLOC:
		return THP_FAULT_ALLOC;
	case VIRTIO_HUGEROOM_VS_THP_FAULT_FALLBACK:
		return THP_FAULT_FALLBACK;
	case VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC:
		return THP_COLLAPSE_ALLOC;
	case VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC_FAILED:
		return THP_COLLAPSE_ALLOC_FAILED;
	case VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE:
		return THP_SPLIT_PAGE;
#endif
	default:
		return -1;
	}
}

u8 virtio_hugeroom_wire_mt(int mt)
{
	switch (mt) {
	case MIGRATE_UNMOVABLE:
		return VIRTIO_HUGEROOM_MT_UNMOVABLE;
	case MIGRATE_MOVABLE:
		return VIRTIO_HUGEROOM_MT_MOVABLE;
	case MIGRATE_RECLAIMABLE:
		return VIRTIO_HUGEROOM_MT_RECLAIMABLE;
	case MIGRATE_HIGHATOMIC:
		return VIRTIO_HUGEROOM_MT_HIGHATOMIC;
#ifdef CONFIG_CMA
	case MIGRATE_CMA:
		return VIRTIO_HUGEROOM_MT_CMA;
#endif
	default:
		/* MIGRATE_ISOLATE, or a section that went away */
		return VIRTIO_HUGEROOM_MT_ISOLATE;
	}
}

/* ---------------------------------------------------------------------- */
/* Pageblock scan.  Called with report_lock held; sleeps. */

/*
 * Migratetype of the pageblock at @pfn, as get_pageblock_migratetype() would
 * return it, or MIGRATE_TYPES if its section went away.  Racy like the
 * original.  The section's usage (and so the usemap) is freed with RCU when
 * memory is hot-removed, as pfn_valid() knows: read it under
 * rcu_read_lock(), after checking that the section is still valid.
 */
int virtio_hugeroom_block_mt(unsigned long pfn)
{
	struct mem_section_usage *usage;
	struct mem_section *ms;
	unsigned long *flags;
	unsigned long bitidx;
	unsigned long word;

	bitidx = ((pfn & (PAGES_PER_SECTION - 1)) >> pageblock_order) *
		 NR_PAGEBLOCK_BITS;
	rcu_read_lock();
	ms = __pfn_to_section(pfn);
	/*
	 * Removal clears the valid bit, then sets usage NULL (and frees it
	 * with RCU): a section valid a moment ago may have none already.
	 */
	usage = ms && valid_section(ms) ? READ_ONCE(ms->usage) : NULL;
	if (!usage) {
		rcu_read_unlock();
		return MIGRATE_TYPES;
	}
	/*
	 * Through a pointer: pageblock_flags is declared [0] (its real
	 * length is the section's), and with UBSAN_BOUNDS_STRICT (Debian's
	 * 7.x) any index into the array itself is "out of bounds".
	 */
	flags = usage->pageblock_flags;
	word = READ_ONCE(flags[BIT_WORD(bitidx)]);
	rcu_read_unlock();
	word >>= bitidx % BITS_PER_LONG;
#ifdef VIRTIO_HUGEROOM_HAVE_PB_ISOLATE_BIT
	if (word & PAGEBLOCK_ISO_MASK)
		return MIGRATE_ISOLATE;
	return word & PAGEBLOCK_MIGRATETYPE_MASK;
#else
	return word & MIGRATETYPE_MASK;
#endif
}

/* Buddy order of a PageBuddy page, or an invalid order if it raced. */
unsigned int virtio_hugeroom_buddy_order(struct page *page)
{
	return READ_ONCE(page_private(page));
}

/*
 * Is the block at @pfn (its first page @head) wholly free and reported
 * by free page reporting (virtio-balloon's free-page-reporting, in the
 * same guest)?  Reporting hands free buddies of at least
 * page_reporting_order (a pageblock by default) to its device, which
 * discards them on the host, and marks them PageReported until they are
 * allocated.  Holding such a block frees nothing on the host: it is not
 * backed any more, and its HOLD would only discard it a second time
 * while the guest gives up 2 MiB for nothing.  Lockless, a hint, as the
 * free count is.
 */
bool virtio_hugeroom_block_reported(struct page *head, unsigned long pfn)
{
	struct page *buddy = head;
	unsigned int order;

	if (!IS_ALIGNED(pfn, MAX_ORDER_NR_PAGES)) {
		struct page *big = pfn_to_online_page(ALIGN_DOWN(pfn,
							   MAX_ORDER_NR_PAGES));

		if (big && PageBuddy(big)) {
			order = virtio_hugeroom_buddy_order(big);
			if (order < VIRTIO_HUGEROOM_KERNEL_ORDERS &&
			    ALIGN_DOWN(pfn, MAX_ORDER_NR_PAGES) +
			    (1UL << order) >= pfn + pageblock_nr_pages)
				buddy = big;
		}
	}
	if (!PageBuddy(buddy))
		return false;
	order = virtio_hugeroom_buddy_order(buddy);
	return order >= pageblock_order &&
	       order < VIRTIO_HUGEROOM_KERNEL_ORDERS && PageReported(buddy);
}

/*
 * Free pages in the pageblock starting at @head, counted without zone->lock
 * as compaction's free scanner does.  A buddy larger than a pageblock starts
 * at a MAX_ORDER_NR_PAGES boundary, which may lie in the previous block.
 */
unsigned int virtio_hugeroom_block_free(struct page *head,
					unsigned long pfn)
{
	unsigned long i = 0;
	unsigned int free = 0;
	unsigned int order;

	if (!IS_ALIGNED(pfn, MAX_ORDER_NR_PAGES)) {
		unsigned long start = ALIGN_DOWN(pfn, MAX_ORDER_NR_PAGES);
		struct page *big = pfn_to_online_page(start);

		if (big && PageBuddy(big)) {
			order = virtio_hugeroom_buddy_order(big);
			if (order < VIRTIO_HUGEROOM_KERNEL_ORDERS &&
			    start + (1UL << order) >= pfn + pageblock_nr_pages)
				return pageblock_nr_pages;
		}
	}

	while (i < pageblock_nr_pages) {
		struct page *page = head + i;

		if (PageBuddy(page)) {
			order = virtio_hugeroom_buddy_order(page);
			if (order < VIRTIO_HUGEROOM_KERNEL_ORDERS) {
				free += min(1UL << order,
					    pageblock_nr_pages - i);
				i += 1UL << order;
				continue;
			}
		} else if (PageHead(page)) {
			/* Skip a whole THP or other compound page at once. */
			order = compound_order(page);
			if (order && order < VIRTIO_HUGEROOM_KERNEL_ORDERS) {
				i += 1UL << order;
				continue;
			}
		}
		i++;
	}
	return free;
}

static int virtio_hugeroom_hist_bucket(unsigned int free)
{
	if (free >= pageblock_nr_pages)
		return 0;
	if (free >= pageblock_nr_pages * 7 / 8)
		return 1;
	if (free >= pageblock_nr_pages / 2)
		return 2;
	if (free >= pageblock_nr_pages / 8)
		return 3;
	if (free)
		return 4;
	return 5;
}

/* Keep the VIRTIO_HUGEROOM_MAX_CANDIDATES blocks with the most free pages. */
static void virtio_hugeroom_cand_add(struct virtio_hugeroom_sweep *sw,
				     const struct virtio_hugeroom_cand *c)
{
	struct virtio_hugeroom_cand *h = sw->cand;
	unsigned int i, child;

	sw->nr_eligible++;
	if (sw->nr_cands < VIRTIO_HUGEROOM_MAX_CANDIDATES) {
		i = sw->nr_cands++;
		h[i] = *c;
		while (i && h[(i - 1) / 2].free > h[i].free) {
			swap(h[(i - 1) / 2], h[i]);
			i = (i - 1) / 2;
		}
		return;
	}
	if (c->free <= h[0].free)
		return;
	h[0] = *c;
	i = 0;
	for (;;) {
		child = 2 * i + 1;
		if (child >= sw->nr_cands)
			break;
		if (child + 1 < sw->nr_cands && h[child + 1].free < h[child].free)
			child++;
		if (h[i].free <= h[child].free)
			break;
		swap(h[i], h[child]);
		i = child;
	}
}

/* Most free pages first, then lowest address. */
static int virtio_hugeroom_cand_cmp(const void *a, const void *b)
{
	const struct virtio_hugeroom_cand *x = a, *y = b;

	if (x->free != y->free)
		return x->free > y->free ? -1 : 1;
	if (x->pfn != y->pfn)
		return x->pfn < y->pfn ? -1 : 1;
	return 0;
}

static int virtio_hugeroom_sweep_slot(struct virtio_hugeroom_sweep *sw,
				      int nid, int zid)
{
	unsigned int i;

	for (i = 0; i < sw->nr_zones; i++)
		if (sw->zone[i].nid == nid && sw->zone[i].zid == zid)
			return i;
	if (sw->nr_zones == VIRTIO_HUGEROOM_MAX_ZONES)
		return -1;
	sw->zone[i].nid = nid;
	sw->zone[i].zid = zid;
	memset(sw->zone[i].hist, 0, sizeof(sw->zone[i].hist));
	sw->nr_zones++;
	return i;
}

/* Does the block at @pfn lie entirely inside one of the sorted ranges? */
static bool virtio_hugeroom_in_ranges(const struct virtio_hugeroom_scan *s,
				      unsigned long pfn)
{
	u64 start = PFN_PHYS(pfn), end = start + VIRTIO_HUGEROOM_BLOCK_SIZE;
	unsigned int lo = 0, hi = s->nr_ranges;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct virtio_hugeroom_range *r = &s->ranges[mid];

		if (le64_to_cpu(r->end) <= start)
			lo = mid + 1;
		else if (le64_to_cpu(r->start) >= end)
			hi = mid;
		else
			return le64_to_cpu(r->start) <= start &&
			       end <= le64_to_cpu(r->end);
	}
	return false;
}

static void virtio_hugeroom_scan_block(const struct virtio_hugeroom_scan *s,
				       struct virtio_hugeroom_sweep *sw,
				       struct zone *zone, int slot,
				       int nid, int zid, unsigned long pfn)
{
	struct virtio_hugeroom_cand c;
	struct page *head;
	unsigned int free;
	u8 mt;

	sw->nr_blocks++;
	head = pfn_to_online_page(pfn);
	if (!head || page_zone(head) != zone)
		return;
	mt = virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(pfn));
	if (mt == VIRTIO_HUGEROOM_MT_CMA || mt == VIRTIO_HUGEROOM_MT_ISOLATE)
		return;
	/*
	 * Held blocks (ours, or a balloon's) are no guest memory: neither in
	 * the histogram (a held block is no fully used one) nor candidates.
	 */
	if (PageOffline(head))
		return;

	free = virtio_hugeroom_block_free(head, pfn);
	if (mt == VIRTIO_HUGEROOM_MT_MOVABLE)
		sw->zone[slot].hist[virtio_hugeroom_hist_bucket(free)]++;
	/*
	 * Candidates: MOVABLE blocks, or blocks of any other type all free,
	 * except HIGHATOMIC, the reserve for high-order atomic allocations;
	 * never ZONE_DMA, which evacuation refuses (SPEC R_ZONE).
	 */
	if (mt == VIRTIO_HUGEROOM_MT_HIGHATOMIC ||
	    (mt != VIRTIO_HUGEROOM_MT_MOVABLE && free < pageblock_nr_pages))
		return;
#ifdef CONFIG_ZONE_DMA
	if (zid == ZONE_DMA)
		return;
#endif
	if (s->ranges && !virtio_hugeroom_in_ranges(s, pfn))
		return;
	/* Discarded on the host already: holding it would give nothing. */
	if (free == pageblock_nr_pages &&
	    virtio_hugeroom_block_reported(head, pfn))
		return;

	c.pfn = pfn;
	c.free = free;
	c.nid = nid;
	c.zid = zid;
	c.mt = mt;
	virtio_hugeroom_cand_add(sw, &c);
}

static void virtio_hugeroom_scan_next_zone(struct virtio_hugeroom_scan *s)
{
	s->pfn = 0;
	if (++s->zid < MAX_NR_ZONES)
		return;
	s->zid = 0;
	s->nid = next_online_node(s->nid);
}

/*
 * Advance the sweep by at most @budget pageblocks, stopping early once
 * @deadline_ns (ktime_get_ns()) has passed.  Publishes the sweep to
 * scan->done when it completes.
 */
void virtio_hugeroom_scan(struct virtio_hugeroom_scan *s,
			  unsigned long budget, u64 deadline_ns)
{
	unsigned long batch = 0;

	while (budget) {
		struct zone *zone;
		unsigned long end;
		int slot;

		if (s->nid == NUMA_NO_NODE) {
			memset(s->cur, 0, offsetof(struct virtio_hugeroom_sweep,
						   cand));
			s->nid = first_online_node;
			s->zid = 0;
			s->pfn = 0;
			s->sweep_start_ns = ktime_get_ns();
		}
		if (s->nid >= MAX_NUMNODES) {
			sort(s->cur->cand, s->cur->nr_cands,
			     sizeof(s->cur->cand[0]), virtio_hugeroom_cand_cmp,
			     NULL);
			swap(s->cur, s->done);
			s->sweeps++;
			s->last_sweep_ns = ktime_get_ns() - s->sweep_start_ns;
			s->nid = NUMA_NO_NODE;
			return;
		}
		if (!node_online(s->nid)) {
			s->nid = next_online_node(s->nid);
			s->zid = 0;
			s->pfn = 0;
			continue;
		}

		zone = &NODE_DATA(s->nid)->node_zones[s->zid];
		slot = populated_zone(zone) ?
		       virtio_hugeroom_sweep_slot(s->cur, s->nid, s->zid) : -1;
		if (slot < 0) {
			virtio_hugeroom_scan_next_zone(s);
			continue;
		}

		if (!s->pfn)
			s->pfn = pageblock_align(zone->zone_start_pfn);
		end = zone_end_pfn(zone);
		while (budget && s->pfn + pageblock_nr_pages <= end) {
			virtio_hugeroom_scan_block(s, s->cur, zone, slot,
						   s->nid, s->zid, s->pfn);
			s->pfn += pageblock_nr_pages;
			budget--;
			if (++batch % VIRTIO_HUGEROOM_SCAN_BATCH)
				continue;
			cond_resched();
			virtio_hugeroom_fault_scan(s);
			if (ktime_get_ns() > deadline_ns)
				budget = 0;
		}
		if (s->pfn + pageblock_nr_pages > end)
			virtio_hugeroom_scan_next_zone(s);
	}
}

/* ---------------------------------------------------------------------- */
/* Building a report.  Called with report_lock held; sleeps. */

/*
 * Free pages in blocks of order >= pageblock_order, per migratetype, from
 * the free lists.  zone->lock is held for one capped list at a time (SPEC
 * 1.6.2.1 item 8), as /proc/pagetypeinfo does.  Returns false if a list was
 * capped, so that some counts are lower bounds.
 */
static bool virtio_hugeroom_zone_mt(struct zone *zone,
				    struct virtio_hugeroom_zone *z)
{
	u64 pages[VIRTIO_HUGEROOM_NR_MT] = { };
	bool exact = true;
	unsigned int order, i;
	int mt;

	for (order = pageblock_order; order < VIRTIO_HUGEROOM_KERNEL_ORDERS;
	     order++) {
		for (mt = 0; mt < MIGRATE_TYPES; mt++) {
			struct list_head *pos;
			unsigned long count = 0, flags;

			spin_lock_irqsave(&zone->lock, flags);
			list_for_each(pos, &zone->free_area[order].free_list[mt]) {
				if (++count == VIRTIO_HUGEROOM_MT_WALK_CAP) {
					exact = false;
					break;
				}
			}
			spin_unlock_irqrestore(&zone->lock, flags);
			pages[virtio_hugeroom_wire_mt(mt)] += (u64)count << order;
		}
		cond_resched();
	}

	for (i = 0; i < VIRTIO_HUGEROOM_NR_MT; i++)
		z->nr_free_pb_mt[i] = cpu_to_le64(pages[i]);
	return exact;
}

static void virtio_hugeroom_zone_pcp(struct zone *zone,
				     struct virtio_hugeroom_zone *z)
{
	u32 count = 0, high = 0;
	int cpu;

	for_each_online_cpu(cpu) {
		struct per_cpu_pages *pcp;

		pcp = per_cpu_ptr(zone->per_cpu_pageset, cpu);
		count += READ_ONCE(pcp->count);
		high += READ_ONCE(pcp->high);
	}
	z->pcp_count = cpu_to_le32(count);
	z->pcp_high = cpu_to_le32(high);
	z->pcp_batch = cpu_to_le32(READ_ONCE(zone->pageset_batch));
#ifdef VIRTIO_HUGEROOM_HAVE_PCP_HIGH_MIN
	z->pcp_high_min = cpu_to_le32(READ_ONCE(zone->pageset_high_min));
	z->pcp_high_max = cpu_to_le32(READ_ONCE(zone->pageset_high_max));
#endif
	virtio_hugeroom_pcp_fill_zone(z);
}

/* Fill @z from @zone; returns false if the migratetype walk was capped. */
static bool virtio_hugeroom_fill_zone(struct zone *zone, int nid, int zid,
				      struct virtio_hugeroom_zone *z)
{
	unsigned long nr_free[VIRTIO_HUGEROOM_KERNEL_ORDERS];
	unsigned long flags;
	unsigned int order;
	bool exact;

	BUILD_BUG_ON(VIRTIO_HUGEROOM_KERNEL_ORDERS > VIRTIO_HUGEROOM_NR_ORDERS);

	z->nid = cpu_to_le16(nid);
	z->zone_idx = zid;
	strscpy_pad(z->name, zone->name, sizeof(z->name));
	z->start_pfn = cpu_to_le64(zone->zone_start_pfn);
	z->spanned_pages = cpu_to_le64(zone->spanned_pages);
	z->managed_pages = cpu_to_le64(zone_managed_pages(zone));
	z->wmark_min = cpu_to_le64(min_wmark_pages(zone));
	z->wmark_low = cpu_to_le64(low_wmark_pages(zone));
	z->wmark_high = cpu_to_le64(high_wmark_pages(zone));

	/* One consistent snapshot, O(orders) with IRQs off. */
	spin_lock_irqsave(&zone->lock, flags);
	for (order = 0; order < VIRTIO_HUGEROOM_KERNEL_ORDERS; order++)
		nr_free[order] = zone->free_area[order].nr_free;
	spin_unlock_irqrestore(&zone->lock, flags);
	z->free_pages = cpu_to_le64(zone_page_state(zone, NR_FREE_PAGES));
	for (order = 0; order < VIRTIO_HUGEROOM_KERNEL_ORDERS; order++)
		z->nr_free[order] = cpu_to_le64(nr_free[order]);

	exact = virtio_hugeroom_zone_mt(zone, z);
	virtio_hugeroom_zone_pcp(zone, z);
	return exact;
}

/*
 * Build a STATUS answering @request_id into vh->report.  Returns its length;
 * vh->report_len is only updated once it has been sent.
 */
static u32 virtio_hugeroom_build_report(struct virtio_hugeroom *vh,
					u64 request_id)
{
	struct virtio_hugeroom_status *st = vh->report;
	struct virtio_hugeroom_zone *zones = (void *)(st + 1);
	struct virtio_hugeroom_candidate *cands;
	struct virtio_hugeroom_sweep *sw;
	u8 slot_to_zone[VIRTIO_HUGEROOM_MAX_ZONES];
	unsigned int nr_zones = 0, nr_cands = 0, max_cands, i, j;
	u16 flags = 0;
	u64 start = ktime_get_ns();
	int nid, zid;

	/* Only the first sweep ignores the budget; see the top comment. */
	if (!vh->scan.sweeps) {
		virtio_hugeroom_scan(&vh->scan, ULONG_MAX, U64_MAX);
	} else {
		u64 budget_ns = READ_ONCE(vh->status_interval_ms) *
				(NSEC_PER_MSEC / 100);

		budget_ns = clamp_t(u64, budget_ns, VIRTIO_HUGEROOM_SCAN_MIN_NS,
				    VIRTIO_HUGEROOM_SCAN_MAX_NS);
		virtio_hugeroom_scan(&vh->scan, VIRTIO_HUGEROOM_SCAN_BLOCKS,
				     start + budget_ns);
	}
	sw = vh->scan.done;
	if (virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_PCP))
		virtio_hugeroom_pcp_check(&vh->vdev->dev);

	memset(st, 0, sizeof(*st));
	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];

			if (!populated_zone(zone))
				continue;
			if (nr_zones == VIRTIO_HUGEROOM_MAX_ZONES) {
				dev_warn_once(&vh->vdev->dev,
					      "more than %d zones, reporting the first\n",
					      VIRTIO_HUGEROOM_MAX_ZONES);
				break;
			}
			memset(&zones[nr_zones], 0, sizeof(zones[0]));
			if (!virtio_hugeroom_fill_zone(zone, nid, zid,
						       &zones[nr_zones]))
				flags |= VIRTIO_HUGEROOM_STATUS_F_MT_PARTIAL;
			nr_zones++;
		}
	}

	/* Attach the last sweep's histograms to the zones they describe. */
	for (i = 0; i < sw->nr_zones; i++) {
		slot_to_zone[i] = U8_MAX;
		for (j = 0; j < nr_zones; j++) {
			if (le16_to_cpu(zones[j].nid) != sw->zone[i].nid ||
			    zones[j].zone_idx != sw->zone[i].zid)
				continue;
			slot_to_zone[i] = j;
			for (zid = 0; zid < VIRTIO_HUGEROOM_NR_HIST; zid++)
				zones[j].hist[zid] =
					cpu_to_le32(sw->zone[i].hist[zid]);
			break;
		}
	}

	cands = (void *)&zones[nr_zones];
	max_cands = min_t(u32, vh->max_candidates,
			  VIRTIO_HUGEROOM_MAX_CANDIDATES);
	for (i = 0; i < sw->nr_cands && nr_cands < max_cands; i++) {
		const struct virtio_hugeroom_cand *c = &sw->cand[i];
		struct virtio_hugeroom_candidate *wc = &cands[nr_cands];
		int zone = -1;

		struct page *head;

		for (j = 0; j < sw->nr_zones; j++)
			if (sw->zone[j].nid == c->nid &&
			    sw->zone[j].zid == c->zid)
				zone = slot_to_zone[j];
		if (zone < 0 || zone == U8_MAX)
			continue;	/* zone went away since the sweep */
		/* Held (or gone offline) since the sweep: no candidate now. */
		head = pfn_to_online_page(c->pfn);
		if (!head || PageOffline(head))
			continue;
		wc->gpa = cpu_to_le64(PFN_PHYS(c->pfn));
		wc->free_pages = cpu_to_le16(c->free);
		wc->migratetype = c->mt;
		wc->zone = zone;
		wc->reserved = 0;
		nr_cands++;
	}
	if (sw->nr_eligible > nr_cands)
		flags |= VIRTIO_HUGEROOM_STATUS_F_TRUNCATED;

	all_vm_events(vh->vm_events);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++) {
		int item = virtio_hugeroom_vm_event(i);

		if (item >= 0)
			st->vmstat[i] = cpu_to_le64(vh->vm_events[item]);
	}

	st->hdr.type = cpu_to_le16(VIRTIO_HUGEROOM_MSG_STATUS);
	st->hdr.flags = cpu_to_le16(flags);
	st->hdr.request_id = cpu_to_le64(request_id);
	st->seq = cpu_to_le64(++vh->seq);
	st->mem_total_pages = cpu_to_le64(totalram_pages());
	st->mem_free_pages =
		cpu_to_le64(global_zone_page_state(NR_FREE_PAGES));
	st->mem_available_pages = cpu_to_le64(si_mem_available());
	st->held_blocks = cpu_to_le32(READ_ONCE(vh->nr_held));
	st->page_shift = cpu_to_le32(PAGE_SHIFT);
	st->pb_order = cpu_to_le32(pageblock_order);
	st->nr_zones = cpu_to_le16(nr_zones);
	st->nr_candidates = cpu_to_le16(nr_cands);
	i = sizeof(*st) + nr_zones * sizeof(zones[0]) +
	    nr_cands * sizeof(cands[0]);
	st->hdr.len = cpu_to_le32(i);
	st->uptime_ns = cpu_to_le64(ktime_get_ns());
	st->build_ns = cpu_to_le64(ktime_get_ns() - start);
	return i;
}

/*
 * Get back a statusq buffer the device did not use in time, waiting for it
 * if @wait.  Returns -EBUSY while the device still owns it: then it must not
 * be rewritten.  Called with report_lock held.
 */
int virtio_hugeroom_status_reap(struct virtio_hugeroom *vh, bool wait)
{
	unsigned int used;

	if (!vh->ready)
		return -ENODEV;
	if (!vh->status_inflight)
		return 0;
	if (wait) {
		if (wait_event_timeout(vh->status_acked,
				       virtqueue_get_buf(vh->status_vq, &used),
				       VIRTIO_HUGEROOM_TX_TIMEOUT))
			vh->status_inflight = NULL;
	} else if (virtqueue_get_buf(vh->status_vq, &used)) {
		vh->status_inflight = NULL;
	}
	return vh->status_inflight ? -EBUSY : 0;
}

/*
 * Send @len bytes of @buf on statusq and wait for the device to use them.
 * Called with report_lock held, after virtio_hugeroom_status_reap()
 * succeeded.  A buffer the device has not used in time stays owned by it.
 */
int virtio_hugeroom_status_send(struct virtio_hugeroom *vh, void *buf,
				u32 len)
{
	struct scatterlist sg;
	unsigned int used;
	int rc;

	sg_init_one(&sg, buf, len);
	rc = virtqueue_add_outbuf(vh->status_vq, &sg, 1, buf, GFP_KERNEL);
	if (rc)
		return rc;
	vh->status_inflight = buf;
	virtqueue_kick(vh->status_vq);

	if (!wait_event_timeout(vh->status_acked,
				virtqueue_get_buf(vh->status_vq, &used),
				VIRTIO_HUGEROOM_TX_TIMEOUT))
		return -ETIMEDOUT;
	vh->status_inflight = NULL;
	return 0;
}

/*
 * Build and send one report answering @request_id (0: unsolicited).  A
 * periodic report (!@wait) is skipped while the previous one is still with
 * the device; any other waits for it.  Takes report_lock; sleeps.
 */
int virtio_hugeroom_report(struct virtio_hugeroom *vh, u64 request_id,
			   bool wait)
{
	u32 len;
	int rc;

	if (!virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_STATUS))
		return -EOPNOTSUPP;

	mutex_lock(&vh->report_lock);
	/* Never rewrite a report the device may still be reading. */
	rc = virtio_hugeroom_status_reap(vh, wait);
	if (rc) {
		vh->report_errors++;
		goto out_unlock;
	}

	len = virtio_hugeroom_build_report(vh, request_id);
	rc = virtio_hugeroom_status_send(vh, vh->report, len);
	if (rc)
		goto out_err;
	vh->report_len = len;
	vh->reports_sent++;
	mutex_unlock(&vh->report_lock);
	return 0;

out_err:
	/* The buffer no longer holds a report the device accepted. */
	vh->report_len = 0;
	vh->report_errors++;
out_unlock:
	mutex_unlock(&vh->report_lock);
	dev_warn_ratelimited(&vh->vdev->dev, "status report failed: %d\n", rc);
	return rc;
}
