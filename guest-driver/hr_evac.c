// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: holds, evacuation, giving memory back.
 *
 * EVACUATE and CAPTURE take 2 MiB blocks from the guest's allocator and
 * list them in HOLDs; the device discards what it acks, and the driver
 * holds those blocks until the host asks for them (RETURN), the guest
 * needs memory (pressure trigger, shrinker, OOM notifier), memory goes
 * offline, or the device stops.  See "Holding blocks", "The pressure
 * trigger" and "EVACUATE and CAPTURE" below.
 *
 * Locks: return_lock (mutex) serializes everything that gives blocks back,
 * so a block is never returned twice; hold_lock (spinlock, also taken in
 * reclaim) protects the held and limbo lists and the counters, and is
 * taken under event_lock when a HOLD's ack is settled; job_lock guards the
 * job slot and is never held with another lock.  Reclaim (the shrinker)
 * only trylocks return_lock and event_lock: it may run in our own workers
 * while they hold them.  Nobody allocates while holding return_lock or
 * event_lock, so the OOM notifier may wait for both.  The pressure
 * trigger's work takes return_lock, then hold_lock and event_lock, like
 * RETURN, and stop_lock (a leaf) to re-arm.  Order: hr_internal.h.
 */

#include "hr_internal.h"

static void virtio_hugeroom_pressure_arm(struct virtio_hugeroom *vh);

/* ---------------------------------------------------------------------- */
/*
 * Holding blocks.
 *
 * A block is taken from the allocator (alloc_contig_range() or an order-9
 * allocation split into base pages), marked PageOffline at once like
 * virtio-mem's fake-offline memory, and listed in a HOLD.  Only after the
 * device acked the HOLD (and so discarded the block) is it held: it leaves
 * the managed page count (MemTotal shrinks) and joins vh->held.  Blocks the
 * device did not take go straight back to the allocator.  Giving a block
 * back is the reverse, and again waits for the device's ack of the
 * RETURNED before the guest may touch the memory (SPEC 1.6.6.1 item 2).
 */

static struct page *virtio_hugeroom_lru_page(struct list_head *pos)
{
	return list_entry(pos, struct page, lru);
}

/* Mark the 512 pages at @pfn, just taken from the allocator, offline. */
static void virtio_hugeroom_block_offline(unsigned long pfn)
{
	unsigned long i;

	page_offline_begin();
	for (i = 0; i < pageblock_nr_pages; i++)
		VIRTIO_HUGEROOM_SET_OFFLINE(pfn_to_page(pfn + i));
	page_offline_end();
}

/*
 * Give the block at @pfn back to the allocator; @managed if it was held
 * (taken out of the managed page count).
 */
static void virtio_hugeroom_block_put(unsigned long pfn, bool managed)
{
	unsigned long i;

	set_page_private(pfn_to_page(pfn), 0);
	for (i = 0; i < pageblock_nr_pages; i++)
		VIRTIO_HUGEROOM_CLEAR_OFFLINE(pfn_to_page(pfn + i));
	if (managed)
		adjust_managed_page_count(pfn_to_page(pfn), pageblock_nr_pages);
	free_contig_range(pfn, pageblock_nr_pages);
}

/*
 * Is the block at @pfn (online) held by us?  A held block's head page has
 * page_private() pointing at its device from the HOLD ack until it is
 * freed, also while a RETURNED for it is in flight (the pages are ours:
 * nothing else reads private).  hold_lock held.
 */
static bool virtio_hugeroom_is_held_locked(struct virtio_hugeroom *vh,
					   unsigned long pfn)
{
	struct page *head = pfn_to_page(pfn);

	return PageOffline(head) && page_private(head) == (unsigned long)vh;
}

/* May the ack of a message that failed with @rc still come (and act)? */
static bool virtio_hugeroom_maybe_seen(int rc)
{
	return rc == -ETIMEDOUT || rc == -EPROTO;
}

/*
 * A chain the device gave back after its sender stopped waiting.  For a
 * HOLD whose blocks went to limbo the ack now says which the device holds
 * (has discarded): those are held from now on, the others go back to the
 * allocator.  A malformed ack leaves them in limbo until the next reset.
 * Nothing else needs settling: a RETURNED whose ack came late left its
 * blocks held, and a RETURNED of a block the device no longer holds is
 * valid (SPEC 1.6.4).  event_lock held.
 */
void virtio_hugeroom_settle_late(struct virtio_hugeroom *vh,
				 struct virtio_hugeroom_evbuf *eb)
{
	const struct virtio_hugeroom_blocks *msg = eb->msg;
	const __le64 *gpas = (const void *)(msg + 1);
	u32 nr = le32_to_cpu(msg->nr_blocks), done = 0, i;
	int rc;

	if (!eb->limbo)
		return;
	if (eb->used < sizeof(*eb->ack)) {
		dev_warn_ratelimited(&vh->vdev->dev,
				     "late HOLD ack malformed: %u blocks stay out until reset\n",
				     nr);
		return;
	}
	rc = virtio_hugeroom_ack_errno(le32_to_cpu(eb->ack->status));
	if (!rc || rc == -EOPNOTSUPP)
		done = min_t(u32, le32_to_cpu(eb->ack->nr_done), nr);
	dev_info_ratelimited(&vh->vdev->dev,
			     "late HOLD ack (%d): %u of %u blocks held\n",
			     rc, done, nr);
	for (i = 0; i < nr; i++) {
		unsigned long pfn = PHYS_PFN(le64_to_cpu(gpas[i]));
		struct page *page = pfn_to_page(pfn);

		if (i < done)
			adjust_managed_page_count(page, -pageblock_nr_pages);
		spin_lock(&vh->hold_lock);
		list_del(&page->lru);
		vh->nr_limbo--;
		if (i < done) {
			list_add(&page->lru, &vh->held);
			set_page_private(page, (unsigned long)vh);
			vh->nr_held++;
			vh->blocks_held_total++;
		}
		spin_unlock(&vh->hold_lock);
		if (i >= done)
			virtio_hugeroom_block_put(pfn, false);
	}
	if (done)
		virtio_hugeroom_pressure_arm(vh);
}

/*
 * Send a HOLD or RETURNED (@type, @reason) listing the first @nr blocks of
 * @list and wait for the ack.  Returns the ack's errno and its nr_done in
 * @done.  The blocks of a HOLD the device may still act on (no ack in
 * time, or a malformed one) are moved from @list to limbo here, under
 * event_lock, where a late ack finds them.  With @trylock, fails with
 * -EAGAIN instead of waiting for another sender (shrinker context).
 */
static int virtio_hugeroom_send_blocks(struct virtio_hugeroom *vh, u16 type,
				       u64 request_id, u32 reason,
				       struct list_head *list, unsigned int nr,
				       u32 *done, bool trylock)
{
	struct virtio_hugeroom_ack ack;
	struct virtio_hugeroom_evbuf *eb;
	struct virtio_hugeroom_blocks *msg;
	struct list_head *pos, *tmp;
	unsigned int i = 0;
	u32 len = sizeof(*msg) + nr * sizeof(__le64);
	__le64 *gpas;
	int rc = -EBUSY;

	*done = 0;
	if (trylock) {
		if (!mutex_trylock(&vh->event_lock))
			return -EAGAIN;
	} else {
		mutex_lock(&vh->event_lock);
	}
	eb = virtio_hugeroom_event_get(vh);
	if (!eb)
		goto out_unlock;
	msg = eb->msg;
	gpas = (void *)(msg + 1);
	memset(msg, 0, sizeof(*msg));
	msg->hdr.type = cpu_to_le16(type);
	msg->hdr.len = cpu_to_le32(len);
	msg->hdr.request_id = cpu_to_le64(request_id);
	msg->nr_blocks = cpu_to_le32(nr);
	msg->reason = cpu_to_le32(reason);
	list_for_each(pos, list) {
		struct page *page = virtio_hugeroom_lru_page(pos);

		if (i == nr)
			break;
		gpas[i++] = cpu_to_le64(PFN_PHYS(page_to_pfn(page)));
	}
	rc = virtio_hugeroom_event_send(vh, eb, len, &ack);
	if (rc == 0 || rc == -EOPNOTSUPP) {
		*done = min_t(u32, le32_to_cpu(ack.nr_done), nr);
	} else if (type == VIRTIO_HUGEROOM_MSG_HOLD &&
		   virtio_hugeroom_maybe_seen(rc)) {
		/* The device may still discard them: never reuse them. */
		i = 0;
		spin_lock(&vh->hold_lock);
		list_for_each_safe(pos, tmp, list) {
			if (i++ == nr)
				break;
			list_move_tail(pos, &vh->limbo);
			vh->nr_limbo++;
		}
		spin_unlock(&vh->hold_lock);
		/* A stuck chain is settled by whoever reaps it. */
		eb->limbo = rc == -ETIMEDOUT;
	}
out_unlock:
	if (rc && rc != -EOPNOTSUPP)
		vh->event_errors++;
	else
		vh->events_sent++;
	mutex_unlock(&vh->event_lock);
	return rc;
}

/*
 * Return up to @want held blocks (from @list if given: blocks the caller
 * already took off vh->held; else the most recently held) to the guest
 * with a RETURNED of @reason.  Blocks whose RETURNED was not acked stay
 * held.  Returns the number of blocks given back.  return_lock held.
 */
unsigned int virtio_hugeroom_return_locked(struct virtio_hugeroom *vh,
					   struct list_head *list,
					   unsigned int want,
					   u32 reason, u64 request_id,
					   bool trylock)
{
	unsigned int given = 0;

	while (want) {
		LIST_HEAD(batch);
		unsigned int nr = 0;
		struct page *page, *tmp;
		u32 done;
		int rc;

		spin_lock(&vh->hold_lock);
		if (list) {
			while (nr < want && nr < VIRTIO_HUGEROOM_RET_BATCH &&
			       !list_empty(list)) {
				list_move_tail(list->next, &batch);
				nr++;
			}
		} else {
			while (nr < want && nr < VIRTIO_HUGEROOM_RET_BATCH &&
			       !list_empty(&vh->held)) {
				list_move_tail(vh->held.next, &batch);
				nr++;
			}
		}
		spin_unlock(&vh->hold_lock);
		if (!nr)
			break;

		rc = virtio_hugeroom_send_blocks(vh,
						 VIRTIO_HUGEROOM_MSG_RETURNED,
						 request_id, reason, &batch,
						 nr, &done, trylock);
		if (rc) {
			/* Still held by the device: keep them held. */
			spin_lock(&vh->hold_lock);
			list_splice(&batch, &vh->held);
			spin_unlock(&vh->hold_lock);
			if (rc != -EAGAIN)
				dev_warn_ratelimited(&vh->vdev->dev,
						     "RETURNED of %u blocks failed: %d\n",
						     nr, rc);
			break;
		}
		if (done != nr)
			dev_warn_once(&vh->vdev->dev,
				      "device held %u of %u returned blocks\n",
				      done, nr);
		spin_lock(&vh->hold_lock);
		vh->nr_held -= nr;
		vh->blocks_returned[reason] += nr;
		spin_unlock(&vh->hold_lock);
		list_for_each_entry_safe(page, tmp, &batch, lru) {
			list_del(&page->lru);
			virtio_hugeroom_block_put(page_to_pfn(page), true);
		}
		given += nr;
		want -= nr;
	}
	if (list && !list_empty(list)) {
		/* Not offered to the device: still held. */
		spin_lock(&vh->hold_lock);
		list_splice_init(list, &vh->held);
		spin_unlock(&vh->hold_lock);
	}
	return given;
}

static unsigned int virtio_hugeroom_return_some(struct virtio_hugeroom *vh,
						unsigned int want, u32 reason,
						bool trylock)
{
	unsigned int given;

	if (trylock) {
		if (!mutex_trylock(&vh->return_lock))
			return 0;
	} else {
		mutex_lock(&vh->return_lock);
	}
	given = virtio_hugeroom_return_locked(vh, NULL, want, reason, 0,
					      trylock);
	mutex_unlock(&vh->return_lock);
	return given;
}

static bool virtio_hugeroom_deflate_on_oom(struct virtio_hugeroom *vh)
{
	return virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM);
}

/*
 * Shrinker: the claimed pages of a running EVACUATE, and the held pages
 * (with F_DEFLATE_ON_OOM), are what it can free.
 */
static unsigned long virtio_hugeroom_count(struct virtio_hugeroom *vh)
{
	unsigned long n = READ_ONCE(vh->nr_claimed);

	if (virtio_hugeroom_deflate_on_oom(vh))
		n += (unsigned long)READ_ONCE(vh->nr_held) * pageblock_nr_pages;
	return n;
}

/*
 * Is some zone below its high watermark, the level kswapd reclaims to?
 * Holds never take a zone there (admission rule), so then something else
 * needs the memory.  Shrinkers also run without any shortage (drop_caches
 * calls every shrinker until they give up): holds stay then.
 */
static bool virtio_hugeroom_under_pressure(void)
{
	int nid, zid;

	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];

			if (populated_zone(zone) &&
			    zone_page_state(zone, NR_FREE_PAGES) <
			    high_wmark_pages(zone))
				return true;
		}
	}
	return false;
}

/*
 * Give back @nr_to_scan pages: claims first, then held blocks.  Reclaim
 * may run in any task, including our own workers while they hold a lock,
 * so only trylock (claims take no lock of ours but the claim lock).
 */
static unsigned long virtio_hugeroom_scan_held(struct virtio_hugeroom *vh,
					       unsigned long nr_to_scan)
{
	unsigned long got;
	unsigned int want, given = 0;

	if (!virtio_hugeroom_under_pressure())
		return SHRINK_STOP;
	got = virtio_hugeroom_claims_drop(vh, NULL, nr_to_scan);
	if (got < nr_to_scan && virtio_hugeroom_deflate_on_oom(vh)) {
		want = DIV_ROUND_UP(nr_to_scan - got, pageblock_nr_pages);
		given = virtio_hugeroom_return_some(vh, want,
						    VIRTIO_HUGEROOM_RET_PRESSURE,
						    true);
	}
	got += (unsigned long)given * pageblock_nr_pages;
	return got ? got : SHRINK_STOP;
}

#ifdef VIRTIO_HUGEROOM_HAVE_SHRINKER_ALLOC
static unsigned long virtio_hugeroom_shrink_count(struct shrinker *s,
						  struct shrink_control *sc)
{
	return virtio_hugeroom_count(s->private_data);
}

static unsigned long virtio_hugeroom_shrink_scan(struct shrinker *s,
						 struct shrink_control *sc)
{
	return virtio_hugeroom_scan_held(s->private_data, sc->nr_to_scan);
}

/* The one place that knows the two shrinker APIs (shrinker_alloc(): 6.7). */
int virtio_hugeroom_shrinker_register(struct virtio_hugeroom *vh)
{
	struct shrinker *s = shrinker_alloc(0, "virtio-hugeroom");

	if (!s)
		return -ENOMEM;
	s->count_objects = virtio_hugeroom_shrink_count;
	s->scan_objects = virtio_hugeroom_shrink_scan;
	s->seeks = VIRTIO_HUGEROOM_SHRINK_SEEKS;
	s->batch = pageblock_nr_pages;
	s->private_data = vh;
	shrinker_register(s);
	vh->shrinker = s;
	return 0;
}

void virtio_hugeroom_shrinker_unregister(struct virtio_hugeroom *vh)
{
	if (vh->shrinker)
		shrinker_free(vh->shrinker);
	vh->shrinker = NULL;
}
#else
static unsigned long virtio_hugeroom_shrink_count(struct shrinker *s,
						  struct shrink_control *sc)
{
	return virtio_hugeroom_count(container_of(s, struct virtio_hugeroom,
						  shrinker));
}

static unsigned long virtio_hugeroom_shrink_scan(struct shrinker *s,
						 struct shrink_control *sc)
{
	return virtio_hugeroom_scan_held(container_of(s, struct virtio_hugeroom,
						      shrinker),
					 sc->nr_to_scan);
}

int virtio_hugeroom_shrinker_register(struct virtio_hugeroom *vh)
{
	int rc;

	vh->shrinker.count_objects = virtio_hugeroom_shrink_count;
	vh->shrinker.scan_objects = virtio_hugeroom_shrink_scan;
	vh->shrinker.seeks = VIRTIO_HUGEROOM_SHRINK_SEEKS;
	vh->shrinker.batch = pageblock_nr_pages;
	rc = register_shrinker(&vh->shrinker, "virtio-hugeroom");
	vh->shrinker_registered = !rc;
	return rc;
}

void virtio_hugeroom_shrinker_unregister(struct virtio_hugeroom *vh)
{
	if (vh->shrinker_registered)
		unregister_shrinker(&vh->shrinker);
	vh->shrinker_registered = false;
}
#endif

/*
 * Last resort before an OOM kill: give every claim back, and blocks too
 * if the claims came to less than VIRTIO_HUGEROOM_OOM_BLOCKS of them, and
 * say how many pages that freed.  Waiting for the RETURNED ack is allowed
 * here (SPEC 1.6.6.1 item 2); nobody allocates while holding return_lock
 * or event_lock.
 */
int virtio_hugeroom_oom_notify(struct notifier_block *nb,
			       unsigned long dummy, void *parm)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  oom_nb);
	unsigned long *freed = parm, got;
	unsigned int given;

	got = virtio_hugeroom_claims_drop(vh, NULL, ULONG_MAX);
	*freed += got;
	if (got >= VIRTIO_HUGEROOM_OOM_BLOCKS * pageblock_nr_pages ||
	    !virtio_hugeroom_deflate_on_oom(vh))
		return NOTIFY_OK;
	given = virtio_hugeroom_return_some(vh, VIRTIO_HUGEROOM_OOM_BLOCKS,
					    VIRTIO_HUGEROOM_RET_PRESSURE,
					    false);
	*freed += (unsigned long)given * pageblock_nr_pages;
	return NOTIFY_OK;
}

static bool virtio_hugeroom_block_isolated(unsigned long pfn)
{
	return virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(pfn)) ==
	       VIRTIO_HUGEROOM_MT_ISOLATE;
}

/*
 * Move up to @want held blocks whose pfn lies in [@start, @end) from
 * vh->held to @list, most recently held first.  With @zone (the pressure
 * trigger), only blocks of @zone that would help it once freed: not in an
 * isolated pageblock (memory going offline, or alloc_contig_range() of
 * someone else), whose pages would only stay isolated; the memory
 * notifier gives those back.  O(held blocks) at worst.  Returns how many.
 * hold_lock held.
 */
static unsigned int virtio_hugeroom_pick_held(struct virtio_hugeroom *vh,
					      struct list_head *list,
					      unsigned int want,
					      struct zone *zone,
					      unsigned long start,
					      unsigned long end)
{
	struct page *page, *tmp;
	unsigned int nr = 0;

	list_for_each_entry_safe(page, tmp, &vh->held, lru) {
		unsigned long pfn = page_to_pfn(page);

		if (nr == want)
			break;
		if (pfn < start || pfn >= end)
			continue;
		if (zone && (page_zone(page) != zone ||
			     virtio_hugeroom_block_isolated(pfn)))
			continue;
		list_move_tail(&page->lru, list);
		nr++;
	}
	return nr;
}

/* ---------------------------------------------------------------------- */
/*
 * The pressure trigger: holds go back before the guest reclaims.
 *
 * The shrinker is asked only once reclaim runs, and how early depends on
 * the LRU: the classic LRU's kswapd asks the shrinkers after a gentle
 * first pass over the LRUs, the multi-gen LRU (Debian's 6.12) evicts page
 * cache until every zone is balanced and only then asks them, when no
 * zone is short any more.  So the driver looks itself, ahead of reclaim:
 * while blocks are held, a delayed work polls every zone's free pages
 * every VIRTIO_HUGEROOM_PRESSURE_MS (none while nothing is held) and gives
 * back blocks of a zone that comes near the level kswapd balances it to.
 * No tracepoint or kswapd hook is exported to modules, hence the poll.
 *
 * For a zone, with
 *   floor  = high watermark + lowmem_reserve for the node's top zone
 *            (what kswapd, and the multi-gen LRU's should_abort_scan(),
 *            require of it),
 *   margin = max(managed pages / 256, 2 blocks)  (4 MiB on 1 GiB),
 *   ahead  = twice the drop of its free pages since the last poll (pages
 *            our own job took subtracted), so that a fast allocation is
 *            met before it reaches the low watermark:
 * blocks go back (RETURNED, reason pressure, blocks of that zone, most
 * recently held first) once free < floor + margin + ahead, as many as
 * bring it to floor + 2 * margin + ahead.  Admission asks a zone to stay
 * at floor + 2 * margin + ahead after a block is taken, so the band
 * [floor + margin, floor + 2 * margin) takes no block and gives none: the
 * trigger never gives back at once what admission just took.
 *
 * Cost: a poll reads NR_FREE_PAGES and the watermarks of every populated
 * zone, no lock, no allocation (see README.md for figures).  Giving back
 * waits for the RETURNED ack under return_lock and event_lock, as RETURN
 * does; the work runs on vh->wq.  The shrinker and the OOM notifier stay
 * the last line.
 */

/* The free pages reclaim balances @zone to. */
static unsigned long virtio_hugeroom_zone_floor(struct zone *zone)
{
	return high_wmark_pages(zone) + zone->lowmem_reserve[MAX_NR_ZONES - 1];
}

static unsigned long virtio_hugeroom_zone_margin(struct zone *zone)
{
	return max_t(unsigned long,
		     zone_managed_pages(zone) >>
		     VIRTIO_HUGEROOM_PRESSURE_MARGIN_SHIFT,
		     VIRTIO_HUGEROOM_PRESSURE_MIN_BLOCKS * pageblock_nr_pages);
}

/* Queue the next poll, unless the device stops. */
static void virtio_hugeroom_pressure_arm(struct virtio_hugeroom *vh)
{
	unsigned long flags;

	if (!virtio_hugeroom_deflate_on_oom(vh) && !READ_ONCE(vh->nr_claimed))
		return;
	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		queue_delayed_work(vh->wq, &vh->pressure_work,
				   msecs_to_jiffies(VIRTIO_HUGEROOM_PRESSURE_MS));
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* Give back up to @want held blocks of @zone, reason pressure. */
static unsigned int virtio_hugeroom_return_zone(struct virtio_hugeroom *vh,
						struct zone *zone,
						unsigned int want)
{
	unsigned int nr, given;
	LIST_HEAD(list);

	mutex_lock(&vh->return_lock);
	spin_lock(&vh->hold_lock);
	nr = virtio_hugeroom_pick_held(vh, &list, want, zone,
				       zone->zone_start_pfn,
				       zone_end_pfn(zone));
	spin_unlock(&vh->hold_lock);
	given = virtio_hugeroom_return_locked(vh, &list, nr,
					      VIRTIO_HUGEROOM_RET_PRESSURE, 0,
					      false);
	mutex_unlock(&vh->return_lock);
	return given;
}

void virtio_hugeroom_pressure_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(to_delayed_work(work),
						  struct virtio_hugeroom,
						  pressure_work);
	u64 now = ktime_get_ns(), taken = READ_ONCE(vh->pages_taken);
	bool fresh = now - vh->pressure_last_ns <
		     (u64)VIRTIO_HUGEROOM_PRESSURE_STALE_MS * NSEC_PER_MSEC;
	unsigned long ours = taken - vh->pressure_taken_seen, ahead_max = 0;
	unsigned long claims = 0;
	unsigned int i = 0, given = 0;
	int nid, zid;

	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];
			unsigned long free, last, floor, margin, ahead = 0;
			unsigned long need, got;
			unsigned int want;

			/* A ZONE_DMA block is never held (R_ZONE). */
			if (!virtio_hugeroom_zone_blocks(zone))
				continue;
			free = zone_page_state(zone, NR_FREE_PAGES);
			last = i < VIRTIO_HUGEROOM_MAX_ZONES ?
			       vh->pressure_last[i] : 0;
			if (fresh && last > free + ours)
				ahead = 2 * (last - free - ours);
			floor = virtio_hugeroom_zone_floor(zone);
			margin = virtio_hugeroom_zone_margin(zone);
			if (free < floor + margin + ahead) {
				/* Claims first: the running pass's shortcut. */
				need = floor + 2 * margin + ahead - free;
				got = virtio_hugeroom_claims_drop(vh, zone,
								  need);
				claims += got;
				want = 0;
				if (got < need &&
				    virtio_hugeroom_deflate_on_oom(vh))
					want = virtio_hugeroom_return_zone(vh,
									   zone,
									   DIV_ROUND_UP(need - got,
											pageblock_nr_pages));
				if (want || got)
					free = zone_page_state(zone,
							       NR_FREE_PAGES);
				given += want;
			}
			if (i < VIRTIO_HUGEROOM_MAX_ZONES)
				vh->pressure_last[i] = free;
			ahead_max = max(ahead_max, ahead);
			i++;
		}
	}
	WRITE_ONCE(vh->pressure_ahead, ahead_max);
	vh->pressure_taken_seen = taken;
	vh->pressure_last_ns = now;
	WRITE_ONCE(vh->pressure_polls, vh->pressure_polls + 1);
	if (given || claims) {
		WRITE_ONCE(vh->pressure_returns, vh->pressure_returns + 1);
		WRITE_ONCE(vh->pressure_blocks, vh->pressure_blocks + given);
		dev_dbg(&vh->vdev->dev,
			"pressure: %lu claimed pages and %u blocks given back, %lu pages ahead\n",
			claims, given, ahead_max);
	} else {
		WRITE_ONCE(vh->pressure_idle_ns, vh->pressure_idle_ns +
			   ktime_get_ns() - now);
	}
	if (READ_ONCE(vh->nr_held) || READ_ONCE(vh->nr_claimed))
		virtio_hugeroom_pressure_arm(vh);
}

/*
 * After a device reset the device holds nothing (SPEC 1.5.2): whatever is
 * still on our lists can go back to the allocator.
 */
void virtio_hugeroom_release_all(struct virtio_hugeroom *vh)
{
	LIST_HEAD(held);
	LIST_HEAD(limbo);
	struct page *page, *tmp;

	spin_lock(&vh->hold_lock);
	list_splice_init(&vh->held, &held);
	list_splice_init(&vh->limbo, &limbo);
	vh->nr_held = 0;
	vh->nr_limbo = 0;
	spin_unlock(&vh->hold_lock);
	list_for_each_entry_safe(page, tmp, &held, lru) {
		list_del(&page->lru);
		virtio_hugeroom_block_put(page_to_pfn(page), true);
	}
	list_for_each_entry_safe(page, tmp, &limbo, lru) {
		list_del(&page->lru);
		virtio_hugeroom_block_put(page_to_pfn(page), false);
	}
}

/*
 * Memory is going offline (hot-unplug, or an admin offlining a memory
 * block).  Held blocks in it are PageOffline pages with a reference, which
 * offline_pages() can neither migrate nor skip: it would retry until the
 * offlining task is killed.  Give them back first (RETURNED, reason
 * unload); once freed they lie in the isolated range and go offline with
 * it.  A running job could take more blocks of the range: it ends first.
 * Blocks in limbo cannot go back before a device reset, so the offlining
 * fails then, with -EBUSY, as it would for any unmovable page.  Runs in
 * the offlining task, which holds the memory hotplug lock; sleeps.
 */
int virtio_hugeroom_memory_notify(struct notifier_block *nb,
				  unsigned long action, void *arg)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  memory_nb);
	const struct memory_notify *mn = arg;
	unsigned long start = mn->start_pfn, end = start + mn->nr_pages;
	unsigned int nr, given;
	bool in_limbo = false;
	struct page *page;
	LIST_HEAD(list);

	if (action != MEM_GOING_OFFLINE)
		return NOTIFY_OK;

	spin_lock(&vh->job_lock);
	if (vh->job_busy)
		vh->job_cancel = true;
	spin_unlock(&vh->job_lock);
	flush_work(&vh->job_work);

	mutex_lock(&vh->return_lock);
	spin_lock(&vh->hold_lock);
	nr = virtio_hugeroom_pick_held(vh, &list, UINT_MAX, NULL, start, end);
	list_for_each_entry(page, &vh->limbo, lru) {
		unsigned long pfn = page_to_pfn(page);

		if (pfn >= start && pfn < end)
			in_limbo = true;
	}
	spin_unlock(&vh->hold_lock);
	given = virtio_hugeroom_return_locked(vh, &list, nr,
					      VIRTIO_HUGEROOM_RET_UNLOAD, 0,
					      false);
	mutex_unlock(&vh->return_lock);
	if (given < nr || in_limbo) {
		dev_warn(&vh->vdev->dev,
			 "pfns 0x%lx-0x%lx cannot go offline: %u of %u held blocks returned%s\n",
			 start, end - 1, given, nr,
			 in_limbo ? ", blocks in limbo" : "");
		return notifier_from_errno(-EBUSY);
	}
	if (nr)
		dev_info(&vh->vdev->dev,
			 "returned %u held blocks of pfns 0x%lx-0x%lx going offline\n",
			 nr, start, end - 1);
	return NOTIFY_OK;
}

/* RETURN command (SPEC 1.6.6.1 item 1).  Runs in cmd_work. */
void virtio_hugeroom_do_return(struct virtio_hugeroom *vh,
			       const struct virtio_hugeroom_return *ret)
{
	u64 id = le64_to_cpu(ret->hdr.request_id);
	const __le64 *gpas = (const void *)(ret + 1);
	u32 nr_gpas = le32_to_cpu(ret->nr_gpas);
	struct virtio_hugeroom_counts c = { .start_ns = ktime_get_ns() };
	unsigned int i, nr = 0, given;
	LIST_HEAD(list);

	mutex_lock(&vh->return_lock);
	if (!nr_gpas) {
		unsigned int want = min(le32_to_cpu(ret->count),
					READ_ONCE(vh->nr_held));

		given = virtio_hugeroom_return_locked(vh, NULL, want,
						      VIRTIO_HUGEROOM_RET_HOST,
						      id, false);
		c.tried = want;
		c.freed = given;
		c.failed[VIRTIO_HUGEROOM_R_OTHER] = want - given;
	} else {
		spin_lock(&vh->hold_lock);
		for (i = 0; i < nr_gpas; i++) {
			u64 gpa = le64_to_cpu(gpas[i]);
			unsigned long pfn = PHYS_PFN(gpa);

			if (pfn_to_online_page(pfn) &&
			    virtio_hugeroom_is_held_locked(vh, pfn)) {
				list_move_tail(&pfn_to_page(pfn)->lru, &list);
				nr++;
			} else {
				c.failed[VIRTIO_HUGEROOM_R_OTHER]++;
			}
		}
		spin_unlock(&vh->hold_lock);
		given = virtio_hugeroom_return_locked(vh, &list, nr,
						      VIRTIO_HUGEROOM_RET_HOST,
						      id, false);
		/* Blocks not given back went back to vh->held. */
		c.tried = nr_gpas;
		c.freed = given;
		c.failed[VIRTIO_HUGEROOM_R_OTHER] += nr - given;
	}
	mutex_unlock(&vh->return_lock);
	virtio_hugeroom_send_counts(vh, VIRTIO_HUGEROOM_MSG_RESULT, id,
				    c.freed == c.tried ? VIRTIO_HUGEROOM_S_OK :
				    VIRTIO_HUGEROOM_S_PARTIAL, &c);
}

/* ---------------------------------------------------------------------- */
/*
 * EVACUATE and CAPTURE.  One at a time, in job_work, so that cmd_work can
 * still take CANCEL, RETURN and REPORT while it runs.
 */

/*
 * The free pages of a block a pass will empty, claimed (see "Claiming
 * holes" below): pages we allocated, one bit each in @map, each page's
 * page_private() pointing at its claim while it is claimed.  Published
 * in vh->claims, so that pressure gives them back before anything else
 * (virtio_hugeroom_claims_drop()).
 */
struct virtio_hugeroom_claim {
	struct virtio_hugeroom *vh;
	unsigned long pfn;
	unsigned int pages;		/* claimed now, under the claim lock */
	unsigned int taken;		/* claimed by the pass, for pages_taken */
	unsigned int used;		/* its in-use pages when planned */
	/* pages of the block claimed now, under the claim lock */
	DECLARE_BITMAP(map, VIRTIO_HUGEROOM_CLAIM_BITS);
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
	u64 claim_ns;
	u64 claim_calls;
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
	unsigned long floor = virtio_hugeroom_high_wmarks() +
			      (totalram_pages() >>
			       VIRTIO_HUGEROOM_ADMIT_RESERVE_SHIFT);
	long avail = si_mem_available();

	if (zone && zone_page_state(zone, NR_FREE_PAGES) <
		    virtio_hugeroom_zone_floor(zone) +
		    2 * virtio_hugeroom_zone_margin(zone) +
		    READ_ONCE(vh->pressure_ahead) + need)
		return false;
	return avail >= 0 && (unsigned long)avail >= floor + need;
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
	u32 done;
	int rc;

	if (!r->nr_pending)
		return;
	rc = virtio_hugeroom_send_blocks(vh, VIRTIO_HUGEROOM_MSG_HOLD, r->id, 0,
					 &r->pending, r->nr_pending, &done,
					 false);
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

/* A block just taken from the allocator: offline, then pending. */
static void virtio_hugeroom_run_take(struct virtio_hugeroom_run *r,
				     unsigned long pfn)
{
	virtio_hugeroom_block_offline(pfn);
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
	u64 ev0, ev1, moved, t0;
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
	ev1 = virtio_hugeroom_pgmigrate(vh);
	moved = ev1 > ev0 ? ev1 - ev0 : 0;
	r->c.migrated += moved;
	r->mig_ns += ktime_get_ns() - t0;
	r->mig_pages += moved;
	spin_lock(&vh->hold_lock);
	vh->evac_pages_estimate += used;
	vh->evac_pages_migrated += moved;
	if (!rc) {
		vh->evac_taken_blocks++;
		vh->evac_taken_used += pageblock_nr_pages - chosen_free;
		vh->evac_taken_migrated += moved;
	}
	spin_unlock(&vh->hold_lock);
	virtio_hugeroom_test_evac_rec(vh, pfn, chosen_free, free, moved,
				      rc);

	switch (rc) {
	case 0:
		virtio_hugeroom_run_take(r, pfn);
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
 * 0: never; 1: where it pays (measured); 2: always.  Kernels without
 * movable_ops for a driver's pages (6.17 and later, see below) have no
 * claims: there the parameter reads 0 and refuses anything else.
 */
#ifdef VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE
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
		pr_notice_once("virtio_hugeroom: claim_holes: this kernel has no movable_ops for driver pages, hole claims stay off\n");
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
		 "EVACUATE claims the free pages of the blocks it empties before migrating: 0 never, 1 where cheaper than migrating twice (default), 2 always (0 only on kernels without driver movable_ops)");

/*
 * A claimed page is in use, and alloc_contig_range() refuses to isolate
 * a pageblock with a page in use that is neither on an LRU nor movable
 * (has_unmovable_pages() looks at the whole pageblock, on 6.1 and 6.12):
 * the second claim of a block failed -EBUSY.  So claimed pages are
 * movable_ops pages, as balloon pages are.  6.17 took __SetPageMovable()
 * away: movable_ops are the core's, for page types it knows (balloon's
 * PageOffline, zsmalloc), one set per type.  A claimed page would make
 * the second claim of its block fail, so there are no claims there
 * (VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE, a feature test in Kbuild);
 * EVACUATE migrates as without claim_holes.
 *
 * A claim is ours only until someone else needs the page.  Isolation
 * for a synchronous migration (alloc_contig_range() of virtio-mem
 * unplug, gigantic pages or CMA, memory offline, full compaction) gives
 * the claim up: isolate_page takes the page off its claim, drops our
 * reference and unmarks it, and the migration finds it "released by its
 * owner" and frees it (migrate_movable_ops_page(), the refcount-1 case of
 * migrate_folio_unmap()), so the range frees.  Asynchronous compaction
 * (kcompactd, the first pass of direct compaction) is refused: it would
 * undo the claims for nothing.  A claim goes back with __free_page() per
 * page, never free_contig_range(): an isolator may hold a reference for a
 * moment (isolate_movable_page() takes one before it looks), and then
 * the last of the two frees the page, without free_contig_range()'s
 * "pages are still in use" warning.
 *
 * The claim lock (a spinlock of the module: isolate_page has only the
 * page) protects every claim's @map and @pages, the pages' private and
 * vh->claims/nr_claims/nr_claimed.  A leaf: taken under a page lock
 * (isolate_page), nothing is taken under it.
 */
static DEFINE_SPINLOCK(virtio_hugeroom_claim_lock);

/* Take up to @max claimed pages off @cl into @pfns.  Claim lock held. */
static unsigned int virtio_hugeroom_claim_detach(struct virtio_hugeroom_claim *cl,
						 unsigned long *pfns,
						 unsigned int max)
{
	unsigned int n = 0, b;

	for_each_set_bit(b, cl->map, VIRTIO_HUGEROOM_CLAIM_BITS) {
		if (n == max)
			break;
		__clear_bit(b, cl->map);
		set_page_private(pfn_to_page(cl->pfn + b), 0);
		pfns[n++] = cl->pfn + b;
	}
	cl->pages -= n;
	cl->vh->nr_claimed -= n;
	return n;
}

#ifdef VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE
/*
 * Someone isolates a claimed page (its page lock held): refuse an
 * asynchronous compaction, give the claim up to anyone else (above).
 */
static bool virtio_hugeroom_claim_isolate(struct page *page,
					  isolate_mode_t mode)
{
	struct virtio_hugeroom_claim *cl;

	if (mode & ISOLATE_ASYNC_MIGRATE)
		return false;
	spin_lock(&virtio_hugeroom_claim_lock);
	cl = (struct virtio_hugeroom_claim *)page_private(page);
	if (cl) {
		__clear_bit(page_to_pfn(page) - cl->pfn, cl->map);
		set_page_private(page, 0);
		cl->pages--;
		cl->vh->nr_claimed--;
		cl->vh->claims_isolated++;
	}
	spin_unlock(&virtio_hugeroom_claim_lock);
	if (!cl)
		return false;
	/* Released by its owner: the isolator's reference frees it. */
	VIRTIO_HUGEROOM_CLEAR_MOVABLE(page);
	put_page(page);
	return true;
}

/* Never called: a page given up is no longer movable_ops. */
static int virtio_hugeroom_claim_migrate(struct page *dst, struct page *src,
					 enum migrate_mode mode)
{
	return -EAGAIN;
}

static void virtio_hugeroom_claim_putback(struct page *page)
{
}

static const struct movable_operations virtio_hugeroom_claim_mops = {
	.isolate_page = virtio_hugeroom_claim_isolate,
	.migrate_page = virtio_hugeroom_claim_migrate,
	.putback_page = virtio_hugeroom_claim_putback,
};

/* Mark the @n pages at @pfn, just claimed, movable_ops pages. */
static void virtio_hugeroom_claim_mark(unsigned long pfn, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++) {
		struct page *page = pfn_to_page(pfn + i);

		lock_page(page);
		VIRTIO_HUGEROOM_SET_MOVABLE(page, &virtio_hugeroom_claim_mops);
		unlock_page(page);
	}
}

/*
 * Give back a claimed page taken off its claim: unmarked under its page
 * lock (an isolator that holds it finds no claim and lets go), then our
 * reference dropped.  Freeing clears the mapping unmarking leaves.
 */
static void virtio_hugeroom_claim_put(unsigned long pfn)
{
	struct page *page = pfn_to_page(pfn);

	lock_page(page);
	VIRTIO_HUGEROOM_CLEAR_MOVABLE(page);
	unlock_page(page);
	__free_page(page);
}
#else
/* Never called: claim_due() says no on these kernels. */
static void virtio_hugeroom_claim_mark(unsigned long pfn, unsigned long n)
{
	WARN_ON_ONCE(1);
}

static void virtio_hugeroom_claim_put(unsigned long pfn)
{
	WARN_ON_ONCE(1);
}
#endif

#define VIRTIO_HUGEROOM_CLAIM_PUT_BATCH	32

/* Give back what is left of the claim @cl; how many pages that was. */
static unsigned int virtio_hugeroom_claim_release(struct virtio_hugeroom_run *r,
						  struct virtio_hugeroom_claim *cl)
{
	unsigned long pfns[VIRTIO_HUGEROOM_CLAIM_PUT_BATCH];
	unsigned int n, k, given = 0;

	do {
		spin_lock(&virtio_hugeroom_claim_lock);
		n = virtio_hugeroom_claim_detach(cl, pfns, ARRAY_SIZE(pfns));
		spin_unlock(&virtio_hugeroom_claim_lock);
		for (k = 0; k < n; k++)
			virtio_hugeroom_claim_put(pfns[k]);
		given += n;
	} while (n);
	/* Taking the block counts all its pages again. */
	WRITE_ONCE(r->vh->pages_taken, r->vh->pages_taken - cl->taken);
	cl->taken = 0;
	return given;
}

/*
 * Memory is short: give back up to @want claimed pages (of @zone, if
 * given), the blocks the pass empties last first.  Claims are the first
 * memory to go back under pressure, before held blocks (the pressure
 * trigger, the shrinker, the OOM notifier): they are a shortcut of the
 * running pass, not memory the host was promised.  Takes the claim lock
 * and the pages' locks only, so reclaim may call it.  Returns how many.
 */
unsigned long virtio_hugeroom_claims_drop(struct virtio_hugeroom *vh,
					  struct zone *zone,
					  unsigned long want)
{
	unsigned long pfns[VIRTIO_HUGEROOM_CLAIM_PUT_BATCH], got = 0;
	unsigned int i, n, k;

	while (got < want && READ_ONCE(vh->nr_claimed)) {
		n = 0;
		spin_lock(&virtio_hugeroom_claim_lock);
		for (i = vh->nr_claims; i-- > 0 && n < ARRAY_SIZE(pfns) &&
		     got + n < want; ) {
			struct virtio_hugeroom_claim *cl = &vh->claims[i];

			if (!cl->pages ||
			    (zone && page_zone(pfn_to_page(cl->pfn)) != zone))
				continue;
			n += virtio_hugeroom_claim_detach(cl, pfns + n,
							  min_t(unsigned long,
								ARRAY_SIZE(pfns) - n,
								want - got - n));
		}
		spin_unlock(&virtio_hugeroom_claim_lock);
		if (!n)
			break;
		for (k = 0; k < n; k++)
			virtio_hugeroom_claim_put(pfns[k]);
		got += n;
	}
	if (got) {
		spin_lock(&vh->hold_lock);
		vh->claims_pressure += got;
		spin_unlock(&vh->hold_lock);
		dev_dbg(&vh->vdev->dev, "pressure: %lu claimed pages given back\n",
			got);
	}
	return got;
}

#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
/* debugfs "claims" (hr_test.c): the claimed blocks, "0x<gpa> pages". */
void virtio_hugeroom_claims_list(struct virtio_hugeroom *vh,
				 struct seq_file *m)
{
	unsigned int i;

	spin_lock(&virtio_hugeroom_claim_lock);
	for (i = 0; i < vh->nr_claims; i++)
		if (vh->claims[i].pages)
			seq_printf(m, "0x%llx %u\n",
				   (u64)PFN_PHYS(vh->claims[i].pfn),
				   vh->claims[i].pages);
	spin_unlock(&virtio_hugeroom_claim_lock);
}
#endif

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
 * Claim the free pages of the block at @cl->pfn.  False once admission
 * refuses a claim: no further block is claimed.
 */
static bool virtio_hugeroom_claim_block(struct virtio_hugeroom_run *r,
					struct virtio_hugeroom_claim *cl)
{
	unsigned long pfn = cl->pfn, i = 0, start, n, k;
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
		r->claim_ns += ktime_get_ns() - t0;
		r->claim_calls++;
		if (rc) {
			r->vh->evac_claim_failed++;
			dev_dbg(&r->vh->vdev->dev, "claim 0x%llx+%lu: %d\n",
				(u64)PFN_PHYS(pfn + start), n, rc);
			continue;
		}
		virtio_hugeroom_claim_mark(pfn + start, n);
		spin_lock(&virtio_hugeroom_claim_lock);
		for (k = start; k < i; k++) {
			set_page_private(head + k, (unsigned long)cl);
			__set_bit(k, cl->map);
		}
		cl->pages += n;
		r->vh->nr_claimed += n;
		spin_unlock(&virtio_hugeroom_claim_lock);
		cl->taken += n;
		WRITE_ONCE(r->vh->pages_taken, r->vh->pages_taken + n);
	}
	return true;
}

/*
 * Is claiming the block of @cl worth it?  Its holes get pages moved in
 * (and then moved again) with the chance that the pages migrated before
 * its turn, @before, take of all free pages, @free_all; a claim costs an
 * alloc_contig_range() per run of free pages, which on a host short of
 * CPU (each call waits for every CPU: an RCU grace period, per-cpu
 * drains) costs more than migrating the pages it saves.  Both costs as
 * measured in this command: per migrated page, and per claim call (the
 * first claim is always made, to measure it).
 */
static bool virtio_hugeroom_claim_pays(struct virtio_hugeroom_run *r,
				       struct virtio_hugeroom_claim *cl,
				       u64 before, u64 free_all)
{
	struct page *head = pfn_to_online_page(cl->pfn);
	unsigned int free, runs;
	u64 gain, cost;

	/* Only what evac_check() would let through has holes worth it. */
	if (!head || !virtio_hugeroom_zone_blocks(page_zone(head)) ||
	    virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(cl->pfn)) !=
	    VIRTIO_HUGEROOM_MT_MOVABLE)
		return false;
	runs = virtio_hugeroom_count_runs(head, &free);
	if (!runs || !free_all)
		return false;
	if (!r->claim_calls || READ_ONCE(claim_holes) == 2)
		return true;
	gain = div64_u64((u64)free * min(before, free_all) *
			 div64_u64(r->mig_ns, r->mig_pages), free_all);
	cost = div64_u64(r->claim_ns * runs, r->claim_calls);
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
	u64 ev0, ev1, t0 = ktime_get_ns(), before = 0, free_all;
	u64 calls0 = r->claim_calls;
	unsigned int want = r->count - min(r->count,
					   r->c.freed + r->nr_pending);
	unsigned int i;
	bool admitted = true;

	ev0 = virtio_hugeroom_pgmigrate(r->vh);
	nr = min(nr, want);
	for (i = 0; i < nr; i++) {
		r->claims[i].vh = r->vh;
		r->claims[i].pages = 0;
		r->claims[i].taken = 0;
		bitmap_zero(r->claims[i].map, VIRTIO_HUGEROOM_CLAIM_BITS);
		before += r->claims[i].used;
	}
	r->nr_claims = nr;
	/* Pressure finds them from now on (virtio_hugeroom_claims_drop()). */
	spin_lock(&virtio_hugeroom_claim_lock);
	r->vh->claims = r->claims;
	r->vh->nr_claims = nr;
	spin_unlock(&virtio_hugeroom_claim_lock);
	free_all = global_zone_page_state(NR_FREE_PAGES);
	for (i = nr; i-- > 0 && admitted && !r->stop; ) {
		struct virtio_hugeroom_claim *cl = &r->claims[i];

		before -= cl->used;
		if (!virtio_hugeroom_claim_pays(r, cl, before, free_all))
			continue;
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
static unsigned int virtio_hugeroom_unclaim(struct virtio_hugeroom_run *r,
					    unsigned long pfn)
{
	unsigned int i;

	for (i = 0; i < r->nr_claims; i++)
		if (r->claims[i].pfn == pfn)
			return virtio_hugeroom_claim_release(r, &r->claims[i]);
	return 0;
}

static void virtio_hugeroom_unclaim_all(struct virtio_hugeroom_run *r)
{
	unsigned int i;

	for (i = 0; i < r->nr_claims; i++)
		virtio_hugeroom_claim_release(r, &r->claims[i]);
	spin_lock(&virtio_hugeroom_claim_lock);
	r->vh->nr_claims = 0;
	spin_unlock(&virtio_hugeroom_claim_lock);
	r->nr_claims = 0;
}

/* Explicit form: the host's blocks, in its order, until count are freed. */
static void virtio_hugeroom_evac_explicit(struct virtio_hugeroom_run *r,
					  const __le64 *gpas, u32 nr)
{
	unsigned long pfn;
	u32 i, k, n;

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
	unsigned int i, nr, stale_sweeps = 0;
	bool progress, stale;
	u64 sweeps;

	s->ranges = nr_ranges ? ranges : NULL;
	s->nr_ranges = nr_ranges;
	do {
		/*
		 * A sweep of a big guest takes long: in slices, so that a
		 * CANCEL, the time budget or a suspend stops it too.
		 */
		s->nid = NUMA_NO_NODE;
		sweeps = s->sweeps;
		while (s->sweeps == sweeps) {
			virtio_hugeroom_scan(s, VIRTIO_HUGEROOM_SCAN_BATCH,
					     deadline);
			r->stop = virtio_hugeroom_run_check(r);
			if (r->stop)
				goto out;
		}
		progress = false;
		stale = false;
		r->claimed = false;
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

void virtio_hugeroom_job_work(struct work_struct *work)
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
		if (le16_to_cpu(ev->hdr.flags) & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST)
			virtio_hugeroom_evac_cheapest(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_ranges));
		else
			virtio_hugeroom_evac_explicit(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_gpas));
	}
	spin_lock(&virtio_hugeroom_claim_lock);
	vh->claims = NULL;
	vh->nr_claims = 0;
	spin_unlock(&virtio_hugeroom_claim_lock);
	kvfree(r.claims);
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
