// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: holds, and giving memory back.
 *
 * EVACUATE and CAPTURE (hr_evac.c) take 2 MiB blocks from the guest's
 * allocator and list them in HOLDs; the device discards what it acks, and
 * the driver holds those blocks until the host asks for them (RETURN),
 * the guest needs memory (pressure trigger, shrinker, OOM notifier),
 * memory goes offline, or the device stops.  Under pressure the claims
 * of a running pass (the free pages of the blocks it empties later, see
 * "Claiming holes" in hr_evac.c), whose storage is here, go back first.
 * See "Holding blocks", "The pressure trigger" and "Claims" below.
 *
 * Calls go down only: to the eventq senders (hr_event.c) and the
 * pageblock readers (hr_report.c); a late HOLD ack comes up through
 * vh->event_late_ack (virtio_hugeroom_settle_late()), and the memory
 * notifier stops a running job through the job slot's flag, not a call.
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
 * RETURN, and stop_lock (a leaf) to re-arm.  The claim lock is a leaf
 * (below).  Order: hr_internal.h.
 */

#include "hr_internal.h"
#include "hr_pcp.h"

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
void virtio_hugeroom_block_offline(unsigned long pfn)
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
void virtio_hugeroom_block_put(unsigned long pfn, bool managed)
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
bool virtio_hugeroom_is_held_locked(struct virtio_hugeroom *vh,
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
int virtio_hugeroom_send_blocks(struct virtio_hugeroom *vh, u16 type,
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
	/* Every claim: a shortcut of the pass, not to be kept under pressure. */
	got = virtio_hugeroom_claims_drop(vh, NULL, ULONG_MAX);
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
unsigned long virtio_hugeroom_zone_floor(struct zone *zone)
{
	return high_wmark_pages(zone) + zone->lowmem_reserve[MAX_NR_ZONES - 1];
}

unsigned long virtio_hugeroom_zone_margin(struct zone *zone)
{
	return max_t(unsigned long,
		     zone_managed_pages(zone) >>
		     VIRTIO_HUGEROOM_PRESSURE_MARGIN_SHIFT,
		     VIRTIO_HUGEROOM_PRESSURE_MIN_BLOCKS * pageblock_nr_pages);
}

/* Queue the next poll, unless the device stops. */
void virtio_hugeroom_pressure_arm(struct virtio_hugeroom *vh)
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

/*
 * @zone is @need pages short of the trigger's give-back level: give back
 * every claim of the zone first (the running pass's shortcut, added to
 * @claims: all of them, not @need, since a burst outruns the polls and
 * a claim kept is no use to it), then, with F_DEFLATE_ON_OOM, held
 * blocks of it for the rest.  Returns the blocks given back.
 */
static unsigned int virtio_hugeroom_relieve(struct virtio_hugeroom *vh,
					    struct zone *zone,
					    unsigned long need,
					    unsigned long *claims)
{
	unsigned long got = virtio_hugeroom_claims_drop(vh, zone, ULONG_MAX);

	*claims += got;
	if (got >= need || !virtio_hugeroom_deflate_on_oom(vh))
		return 0;
	return virtio_hugeroom_return_zone(vh, zone,
					   DIV_ROUND_UP(need - got,
							pageblock_nr_pages));
}

void virtio_hugeroom_pressure_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(to_delayed_work(work),
						  struct virtio_hugeroom,
						  pressure_work);
	u64 now = ktime_get_ns(), taken = READ_ONCE(vh->pages_taken);
	bool fresh = now - vh->pressure_last_ns <
		     (u64)VIRTIO_HUGEROOM_PRESSURE_STALE_MS * NSEC_PER_MSEC;
	/* below 0 when claims gave pages back */
	long ours = (long)(taken - vh->pressure_taken_seen);
	/*
	 * An alloc_contig_range() call of the job ran since the last poll:
	 * its pages go a few at a time, and its migrations refill the per-cpu
	 * lists (tens of MiB on 6.12) beyond them, so the drop it makes
	 * cannot be told from an allocation burst: no prediction from it.
	 */
	u64 calls = READ_ONCE(vh->taking_calls);
	bool ours_all = calls != vh->pressure_calls_seen ||
			READ_ONCE(vh->pages_taking);
	unsigned long ahead_max = 0;
	unsigned long claims = 0;
	unsigned int i = 0, given = 0;
	int nid, zid;

	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];
			unsigned long free, last, floor, margin, ahead = 0;
			unsigned int want;

			/* A ZONE_DMA block is never held (R_ZONE). */
			if (!virtio_hugeroom_zone_blocks(zone))
				continue;
			free = zone_page_state(zone, NR_FREE_PAGES);
			last = i < VIRTIO_HUGEROOM_MAX_ZONES ?
			       vh->pressure_last[i] : 0;
			if (fresh && !ours_all && (long)(last - free) > ours)
				ahead = 2 * ((long)(last - free) - ours);
			floor = virtio_hugeroom_zone_floor(zone);
			margin = virtio_hugeroom_zone_margin(zone);
			if (free < floor + margin + ahead) {
				unsigned long claims0 = claims;

				want = virtio_hugeroom_relieve(vh, zone,
							       floor + 2 * margin +
							       ahead - free,
							       &claims);
				/*
				 * What went back was freed a page at a
				 * time, onto this CPU's lists, which hold
				 * tens of MiB on 6.7+ and which the
				 * watermarks do not count: an OOM kill
				 * met 43 MiB there, the buddy lists below
				 * min (driver-claims-sid).
				 */
				if (want || claims > claims0)
					virtio_hugeroom_pcp_drain_zone(zone);
				free = zone_page_state(zone, NR_FREE_PAGES);
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
	vh->pressure_calls_seen = calls;
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
	kthread_flush_work(&vh->job_work);

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
 * Claims.
 *
 * A claimed page is in use, and alloc_contig_range() refuses to isolate
 * a pageblock with a page in use that is neither on an LRU nor movable
 * (has_unmovable_pages() looks at the whole pageblock): the second claim
 * of a block failed -EBUSY.  So claimed pages are movable, in one of two
 * ways (hr_compat.h):
 *
 * * 6.1 and 6.12 (VIRTIO_HUGEROOM_CLAIMS_MOVABLE_OPS): movable_ops pages
 *   of our own (__SetPageMovable()), one bit each in the claim's @map,
 *   page_private() pointing at the claim.
 * * 7.x (VIRTIO_HUGEROOM_CLAIMS_BALLOON): 6.17 took __SetPageMovable()
 *   away; movable_ops are the core's, for page types it knows.  Balloon
 *   pages (PageOffline with PG_movable_ops) are one, and since 7.0 a
 *   balloon's migratepage may give a page up (-ENOENT: "deflated, not
 *   inflated").  So each claim is a balloon of its own (@bal): its pages
 *   go on @bal's list (balloon_page_list_enqueue(), which counts them in
 *   NR_BALLOON_PAGES: "Balloon:" in /proc/meminfo while they sit), and
 *   come off it (balloon_page_list_dequeue()) to go back.  A page someone
 *   isolated is off the list until it comes back (putback) or is given up
 *   (migratepage), so @pages counts it until then and a claim's release
 *   waits for it: the page points at @bal.
 *
 * A claim is ours only until someone else needs the page.  Isolation
 * for a synchronous migration (alloc_contig_range() of virtio-mem
 * unplug, gigantic pages or CMA, memory offline, full or direct
 * compaction's second pass) gives the claim up: on 6.x isolate_page takes
 * the page off its claim, drops our reference and unmarks it, and the
 * migration finds it "released by its owner" and frees it
 * (migrate_movable_ops_page(), the refcount-1 case of
 * migrate_folio_unmap()); on 7.x migratepage says -ENOENT and the balloon
 * core frees it.  Either way that range frees.  Asynchronous compaction
 * (kcompactd, the first pass of direct compaction) is refused: it would
 * undo the claims for nothing.  A claim goes back with put_page() per
 * page, never free_contig_range(): an isolator may hold a reference for a
 * moment (it takes one before it looks), and then the last of the two
 * frees the page, without free_contig_range()'s "pages are still in use"
 * warning.
 *
 * The claim lock (a spinlock of the module: isolate_page has only the
 * page) protects every claim's @map and @pages, the pages' private on
 * 6.x and vh->claims/nr_claims/nr_claimed.  On 6.x a leaf, taken under a
 * page lock (isolate_page); on 7.x the balloon core's lock (taken with
 * interrupts off) nests inside it (balloon_page_list_dequeue()), and is
 * never held where we take it.
 */
static DEFINE_SPINLOCK(virtio_hugeroom_claim_lock);

#ifdef VIRTIO_HUGEROOM_CLAIMS_MOVABLE_OPS
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

/*
 * The @n pages at @pfn, just allocated, are claimed by @cl from now on:
 * movable_ops pages, each pointing at @cl.
 */
static void virtio_hugeroom_claim_enqueue(struct virtio_hugeroom_claim *cl,
					  unsigned long pfn, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++) {
		struct page *page = pfn_to_page(pfn + i);

		lock_page(page);
		VIRTIO_HUGEROOM_SET_MOVABLE(page, &virtio_hugeroom_claim_mops);
		unlock_page(page);
	}
	spin_lock(&virtio_hugeroom_claim_lock);
	for (i = 0; i < n; i++) {
		set_page_private(pfn_to_page(pfn + i), (unsigned long)cl);
		__set_bit(pfn + i - cl->pfn, cl->map);
	}
	cl->pages += n;
	cl->vh->nr_claimed += n;
	spin_unlock(&virtio_hugeroom_claim_lock);
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

static void virtio_hugeroom_claim_init_pages(struct virtio_hugeroom_claim *cl)
{
	bitmap_zero(cl->map, VIRTIO_HUGEROOM_CLAIM_BITS);
}

/* Does a page still point at @cl?  Its pages go at once on 6.x. */
static bool virtio_hugeroom_claim_busy(struct virtio_hugeroom_claim *cl)
{
	return READ_ONCE(cl->pages);
}
#elif defined(VIRTIO_HUGEROOM_CLAIMS_BALLOON)
/*
 * Take up to @max claimed pages off @cl into @pfns: those on its balloon
 * list (not those isolated just now).  Claim lock held.
 */
static unsigned int virtio_hugeroom_claim_detach(struct virtio_hugeroom_claim *cl,
						 unsigned long *pfns,
						 unsigned int max)
{
	struct page *page, *tmp;
	unsigned int n = 0;
	LIST_HEAD(list);

	if (!cl->pages)
		return 0;
	balloon_page_list_dequeue(&cl->bal, &list, max);
	list_for_each_entry_safe(page, tmp, &list, lru) {
		list_del(&page->lru);
		pfns[n++] = page_to_pfn(page);
	}
	cl->pages -= n;
	cl->vh->nr_claimed -= n;
	return n;
}

/*
 * Someone isolated a claimed page and migrates it: refuse an asynchronous
 * compaction (the page goes back on the list), give the claim up to
 * anyone else (above).  -ENOENT: the balloon core drops our reference and
 * the page is freed; it lowers NR_BALLOON_PAGES only when it migrates a
 * page, so it is lowered here.
 */
static int virtio_hugeroom_claim_migrate(struct balloon_dev_info *bal,
					 struct page *newpage,
					 struct page *page,
					 enum migrate_mode mode)
{
	struct virtio_hugeroom_claim *cl;

	if (mode == MIGRATE_ASYNC)
		return -EBUSY;
	cl = container_of(bal, struct virtio_hugeroom_claim, bal);
	spin_lock(&virtio_hugeroom_claim_lock);
	cl->pages--;
	cl->vh->nr_claimed--;
	cl->vh->claims_isolated++;
	spin_unlock(&virtio_hugeroom_claim_lock);
	dec_node_page_state(page, NR_BALLOON_PAGES);
	return -ENOENT;
}

/*
 * The @n pages at @pfn, just allocated, are claimed by @cl from now on:
 * balloon pages on @cl->bal.  Counted first, so that a page given up at
 * once is counted off a count that has it.
 */
static void virtio_hugeroom_claim_enqueue(struct virtio_hugeroom_claim *cl,
					  unsigned long pfn, unsigned long n)
{
	unsigned long i;
	LIST_HEAD(list);

	for (i = 0; i < n; i++)
		list_add_tail(&pfn_to_page(pfn + i)->lru, &list);
	spin_lock(&virtio_hugeroom_claim_lock);
	cl->pages += n;
	cl->vh->nr_claimed += n;
	spin_unlock(&virtio_hugeroom_claim_lock);
	balloon_page_list_enqueue(&cl->bal, &list);
}

/*
 * Give back a claimed page taken off its claim (off the balloon list, its
 * private cleared: an isolator that holds it finds no balloon and lets
 * go).  Freeing clears PageOffline and PG_movable_ops.
 */
static void virtio_hugeroom_claim_put(unsigned long pfn)
{
	put_page(pfn_to_page(pfn));
}

static void virtio_hugeroom_claim_init_pages(struct virtio_hugeroom_claim *cl)
{
	balloon_devinfo_init(&cl->bal);
	cl->bal.migratepage = virtio_hugeroom_claim_migrate;
}

/*
 * Does a page still point at @cl, or the balloon core still touch it?  A
 * page given up is counted off @pages in migratepage, and the core counts
 * it off @bal.isolated_pages after that (its last touch of @bal).
 */
static bool virtio_hugeroom_claim_busy(struct virtio_hugeroom_claim *cl)
{
	return READ_ONCE(cl->pages) || READ_ONCE(cl->bal.isolated_pages);
}
#else
/* Never called: claim_due() says no on these kernels. */
static unsigned int virtio_hugeroom_claim_detach(struct virtio_hugeroom_claim *cl,
						 unsigned long *pfns,
						 unsigned int max)
{
	return 0;
}

static void virtio_hugeroom_claim_enqueue(struct virtio_hugeroom_claim *cl,
					  unsigned long pfn, unsigned long n)
{
	WARN_ON_ONCE(1);
}

static void virtio_hugeroom_claim_put(unsigned long pfn)
{
	WARN_ON_ONCE(1);
}

static void virtio_hugeroom_claim_init_pages(struct virtio_hugeroom_claim *cl)
{
	bitmap_zero(cl->map, VIRTIO_HUGEROOM_CLAIM_BITS);
}

static bool virtio_hugeroom_claim_busy(struct virtio_hugeroom_claim *cl)
{
	return false;
}
#endif

#define VIRTIO_HUGEROOM_CLAIM_PUT_BATCH	32

/* @cl, of a pass's claims, claims nothing yet. */
void virtio_hugeroom_claim_init(struct virtio_hugeroom *vh,
				struct virtio_hugeroom_claim *cl)
{
	cl->vh = vh;
	cl->pages = 0;
	cl->taken = 0;
	virtio_hugeroom_claim_init_pages(cl);
}

/*
 * Give back what is left of the claim @cl (the pass is about to empty its
 * block, or ends); how many pages that was.  Waits for pages someone has
 * isolated (7.x): they point at @cl until they come back or are given up.
 */
unsigned int virtio_hugeroom_claim_release(struct virtio_hugeroom_claim *cl)
{
	unsigned long pfns[VIRTIO_HUGEROOM_CLAIM_PUT_BATCH];
	unsigned int n, k, given = 0;

	for (;;) {
		spin_lock(&virtio_hugeroom_claim_lock);
		n = virtio_hugeroom_claim_detach(cl, pfns, ARRAY_SIZE(pfns));
		spin_unlock(&virtio_hugeroom_claim_lock);
		for (k = 0; k < n; k++)
			virtio_hugeroom_claim_put(pfns[k]);
		given += n;
		if (n)
			continue;
		if (!virtio_hugeroom_claim_busy(cl))
			break;
		/* Isolated by someone: back on the list or given up soon. */
		schedule_timeout_uninterruptible(1);
	}
	/* Taking the block counts all its pages again. */
	WRITE_ONCE(cl->vh->pages_taken, cl->vh->pages_taken - cl->taken);
	cl->taken = 0;
	return given;
}

/*
 * The pages [@start, @end) of the block of @cl, just allocated by the
 * pass, are claimed from now on.
 */
void virtio_hugeroom_claim_add(struct virtio_hugeroom_claim *cl,
			       unsigned long start, unsigned long end)
{
	virtio_hugeroom_claim_enqueue(cl, start, end - start);
	cl->taken += end - start;
	WRITE_ONCE(cl->vh->pages_taken, cl->vh->pages_taken + end - start);
}

/*
 * The pass's claims from now on are @claims[0, @nr), emptied (pages 0,
 * bitmaps clear), where pressure finds them (virtio_hugeroom_claims_drop());
 * NULL, 0 when the pass's claims are all given back.
 */
void virtio_hugeroom_claims_publish(struct virtio_hugeroom *vh,
				    struct virtio_hugeroom_claim *claims,
				    unsigned int nr)
{
	spin_lock(&virtio_hugeroom_claim_lock);
	vh->claims = claims;
	vh->nr_claims = nr;
	spin_unlock(&virtio_hugeroom_claim_lock);
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
		i = vh->nr_claims;
		while (i-- > 0 && n < ARRAY_SIZE(pfns) && got + n < want) {
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
/* debugfs "claimed_blocks" (hr_test.c): the claimed blocks, "0x<gpa> pages". */
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
