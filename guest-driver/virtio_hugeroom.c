// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver.
 *
 * The device lets the host see how the guest's free memory is laid out and,
 * in later protocol features, order targeted compaction of 2 MiB
 * guest-physical blocks.  The wire format is protocol/virtio_hugeroom.h.
 *
 * Virtqueues and who drives them:
 *
 * * statusq: the driver sends one STATUS report at a time (an out buffer)
 *   and waits until the device has used it.  Reports go out once after
 *   probe, every status_interval_ms (config; 0 = only on request), on a
 *   REPORT command and on a debugfs request.
 *
 * * cmdq: the driver keeps VIRTIO_HUGEROOM_NR_CMD_BUFS in buffers posted.
 *   The command worker copies each used buffer out, reposts it at once,
 *   decodes the copy strictly and dispatches it from one switch.
 *
 * * eventq: RESULT, PROGRESS, HOLD and RETURNED messages, one sender at a
 *   time, each chain carrying the message out and a struct
 *   virtio_hugeroom_ack in; the driver waits for the ack.  Each chain has
 *   buffers of its own (VIRTIO_HUGEROOM_NR_EVENT_BUFS of them), owned by
 *   the device from virtqueue_add_sgs() until virtqueue_get_buf() gives
 *   them back, also after the driver stopped waiting: a chain whose ack did
 *   not come in time stays "stuck" and its buffer is never rewritten, so a
 *   device that pops it late reads the message that was sent.  Late acks
 *   are settled when the chain comes back (a late HOLD ack takes its blocks
 *   out of limbo), and no evacuation runs while a chain is stuck.
 *
 * Context: virtqueue callbacks and config_changed run in interrupt context
 * and only wake a waiter or queue work.  Everything that sleeps runs in work
 * items on the device's unbound workqueue, or in a debugfs writer; the
 * memory-pressure, memory-offline and PM notifiers act in the notifying
 * task.  The
 * workqueue is not freezable: a long EVACUATE would keep the freezer
 * waiting until suspend fails, so a PM notifier cancels and flushes the job
 * before the freezer runs, and ->freeze stops the rest.
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
 *
 * Pageblock migratetype: get_pfnblock_flags_mask() is not exported, so the
 * scanner reads the pageblock bits from the section usemap itself, exactly as
 * mm/page_alloc.c does for SPARSEMEM kernels.  The layout is stable from
 * 6.1 to 6.16; 6.17 moved isolation into a bit of its own, so kernels with
 * that bit (a feature test, see Kbuild) are refused at build time until the
 * reader is reviewed.
 */

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/memory.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/oom.h>
#include <linux/pageblock-flags.h>
#include <linux/page-flags.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/shrinker.h>
#include <linux/suspend.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/vmalloc.h>
#include <linux/vmstat.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "virtio_hugeroom.h"
#include "hr_pcp.h"

#ifndef CONFIG_SPARSEMEM
#error "virtio_hugeroom reads pageblock flags from the SPARSEMEM usemap"
#endif
/*
 * Kernel interfaces are told apart by feature tests on the headers
 * (VIRTIO_HUGEROOM_HAVE_*, set by Kbuild), never by LINUX_VERSION_CODE: a
 * distribution kernel may carry an interface of a later release.
 */
#if defined(VIRTIO_HUGEROOM_HAVE_PB_ISOLATE_BIT) || \
	defined(VIRTIO_HUGEROOM_HAVE_ACR_FLAGS)
#error "6.17 pageblock bits or alloc_contig_range() flags: review _block_mt(), _contig_alloc()"
#endif

/*
 * Orders the buddy allocator has (MAX_ORDER before 6.4, MAX_ORDER + 1
 * until 6.8, NR_PAGE_ORDERS since), from the one definition that kept its
 * meaning: a MAX_ORDER_NR_PAGES buddy is the largest.
 */
#define VIRTIO_HUGEROOM_KERNEL_ORDERS	(ilog2(MAX_ORDER_NR_PAGES) + 1)

#define VIRTIO_HUGEROOM_NR_CMD_BUFS	8
/* eventq chains: one being sent, the rest for chains stuck with the device. */
#define VIRTIO_HUGEROOM_NR_EVENT_BUFS	4
/* How long the device may keep a statusq/eventq buffer before we give up. */
#define VIRTIO_HUGEROOM_TX_TIMEOUT	(5 * HZ)
/*
 * Per-report scan budget; see "Report contents" above.  The time budget is
 * 1% of the report period (SPEC 1.6.2.1 item 10), within these bounds.
 */
#define VIRTIO_HUGEROOM_SCAN_BLOCKS	32768UL		/* 64 GiB */
#define VIRTIO_HUGEROOM_SCAN_MIN_NS	(1 * NSEC_PER_MSEC)
#define VIRTIO_HUGEROOM_SCAN_MAX_NS	(20 * NSEC_PER_MSEC)
/* The shortest report period the driver accepts (SPEC 1.4.1 item 3). */
#define VIRTIO_HUGEROOM_MIN_INTERVAL_MS	100
#define VIRTIO_HUGEROOM_SCAN_BATCH	64		/* blocks per resched */
/*
 * Free-list entries counted per (order, migratetype) list under zone->lock,
 * as /proc/pagetypeinfo caps its walk.  Keeps IRQs-off time bounded.
 */
#define VIRTIO_HUGEROOM_MT_WALK_CAP	4096

/*
 * Evacuation and holds (see "Holding blocks" below).  A HOLD goes out every
 * VIRTIO_HUGEROOM_HOLD_BATCH blocks or every second, a PROGRESS every second
 * or every VIRTIO_HUGEROOM_HOLD_BATCH blocks but at most ten a second.
 */
#define VIRTIO_HUGEROOM_HOLD_BATCH	32
#define VIRTIO_HUGEROOM_HOLD_NS		NSEC_PER_SEC
#define VIRTIO_HUGEROOM_PROGRESS_NS	NSEC_PER_SEC
#define VIRTIO_HUGEROOM_PROGRESS_MIN_NS	(NSEC_PER_SEC / 10)
/* alloc_contig_range() attempts per block on -EBUSY, as virtio-mem does. */
#define VIRTIO_HUGEROOM_EVAC_TRIES	5
/* A candidate with this many fewer free pages than its sweep counted. */
#define VIRTIO_HUGEROOM_STALE_PAGES	32
#define VIRTIO_HUGEROOM_STALE_SWEEPS	8
/*
 * Admission keeps MemAvailable this far above the high watermarks: 1/32 of
 * the guest's memory, room for page cache and bursts without reclaim.
 */
#define VIRTIO_HUGEROOM_ADMIT_RESERVE_SHIFT	5
/*
 * Shrinker cost: 0, "no IO to recreate", makes reclaim ask for half the
 * held pages at its first, gentlest pass (do_shrink_slab()), before it has
 * to dig into page cache; DEFAULT_SEEKS asked for held >> priority * 2,
 * a block or so per pass, while the LRUs were reclaimed.  The batch is
 * one block, so that a few held blocks are asked for too.
 */
#define VIRTIO_HUGEROOM_SHRINK_SEEKS	0
/* Blocks the OOM notifier gives back per call (8 MiB). */
#define VIRTIO_HUGEROOM_OOM_BLOCKS	4
/* Blocks in one RETURNED (fits VIRTIO_HUGEROOM_MAX_MSG). */
#define VIRTIO_HUGEROOM_RET_BATCH	VIRTIO_HUGEROOM_MAX_EVT_BLOCKS
/* Test aid: the most pages debugfs pin_unmovable keeps. */
#define VIRTIO_HUGEROOM_MAX_PINS	65536

/*
 * The buffers of one eventq chain.  Free (on event_free) or the device's:
 * from virtqueue_add_sgs() until virtqueue_get_buf() returns it, whatever
 * the sender's timeout said.  Fields under event_lock.
 */
struct virtio_hugeroom_evbuf {
	struct list_head node;		/* on event_free while free */
	void *msg;			/* VIRTIO_HUGEROOM_MAX_MSG bytes, out */
	struct virtio_hugeroom_ack *ack;	/* in */
	unsigned int used;		/* used length, once returned */
	bool done;			/* returned to the waiting sender */
	bool late;			/* timed out: settle when it returns */
	bool limbo;			/* a late HOLD whose blocks are in limbo */
};

/* A pageblock seen by the scanner that may be worth evacuating. */
struct virtio_hugeroom_cand {
	unsigned long pfn;
	u16 free;
	u16 nid;
	u8 zid;
	u8 mt;			/* enum virtio_hugeroom_mt */
};

struct virtio_hugeroom_sweep_zone {
	int nid;
	int zid;
	u32 hist[VIRTIO_HUGEROOM_NR_HIST];
};

/* What one sweep over all pageblocks found. */
struct virtio_hugeroom_sweep {
	unsigned int nr_zones;
	struct virtio_hugeroom_sweep_zone zone[VIRTIO_HUGEROOM_MAX_ZONES];
	/* blocks eligible as candidates (SPEC 1.6.2.1 item 6) */
	unsigned long nr_eligible;
	unsigned long nr_blocks;
	/* min-heap on .free while sweeping, sorted cheapest first when done */
	unsigned int nr_cands;
	struct virtio_hugeroom_cand cand[VIRTIO_HUGEROOM_MAX_CANDIDATES];
};

/* Sweep cursor; nid == NUMA_NO_NODE means "start a new sweep". */
struct virtio_hugeroom_scan {
	struct virtio_hugeroom_sweep *cur;
	struct virtio_hugeroom_sweep *done;	/* last complete sweep */
	int nid;
	int zid;
	unsigned long pfn;		/* next block in the zone; 0 = start */
	u64 sweeps;			/* completed sweeps */
	u64 sweep_start_ns;
	u64 last_sweep_ns;		/* wall time of the last sweep */
	/* EVACUATE CHEAPEST|RANGES: candidates only inside these (sorted). */
	const struct virtio_hugeroom_range *ranges;
	unsigned int nr_ranges;
#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
	unsigned int fault_delay_ms;	/* debugfs fault_inject sweep_delay_ms */
#endif
};

struct virtio_hugeroom {
	struct virtio_device *vdev;
	struct virtqueue *status_vq;
	struct virtqueue *cmd_vq;
	struct virtqueue *event_vq;

	struct workqueue_struct *wq;
	struct work_struct cmd_work;
	struct work_struct config_work;
	struct delayed_work status_work;

	/* Protects @stop: no work is queued once it is set. */
	spinlock_t stop_lock;
	bool stop;

	/* Config as last read by config_work (or probe). */
	u32 status_interval_ms;
	u32 max_candidates;

	/*
	 * Protects the statusq and everything a report is built from: @report,
	 * @report_len, @inject, @status_inflight, @seq, @scan, @vm_events, the
	 * status counters, and @ready as seen by report senders.  Held while
	 * waiting for the device to use a buffer, so it sleeps.
	 */
	struct mutex report_lock;
	void *report;			/* last report built (and sent) */
	u32 report_len;
#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
	void *inject;			/* malformed messages for tests */
#endif
	void *status_inflight;		/* buffer the device still owns */
	u64 seq;
	struct virtio_hugeroom_scan scan;
	unsigned long *vm_events;
	u64 reports_sent;
	u64 report_errors;
	wait_queue_head_t status_acked;

	/*
	 * Protects the eventq: the chain buffers, @event_free, @event_stuck,
	 * the event counters, and @ready as seen by event senders.  Held
	 * while waiting for an ack, so it sleeps.  @event_stuck is also read
	 * locklessly by the job, as a hint.
	 */
	struct mutex event_lock;
	struct virtio_hugeroom_evbuf evbufs[VIRTIO_HUGEROOM_NR_EVENT_BUFS];
	struct list_head event_free;
	struct list_head event_late;	/* returned late, to settle */
	unsigned int event_stuck;	/* chains past their timeout */
	u64 events_sent;
	u64 event_errors;
	u64 event_timeouts;
	u64 event_late_acks;
	wait_queue_head_t event_acked;

	/* Set while the vqs exist and DRIVER_OK is set; see the locks above. */
	bool ready;

	/* Command buffers; after probe/restore only cmd_work touches cmdq. */
	void *cmd_bufs;
	void *cmd_copy;
	u64 cmds_received;
	u64 cmds_invalid;

	/*
	 * Held blocks, linked by the head page's lru (the pages are ours and
	 * PageOffline, like balloon pages).  hold_lock (a spinlock, taken
	 * from the shrinker and the OOM notifier too) protects @held,
	 * @nr_held, @limbo, @nr_limbo and the hold counters.
	 *   held:  the device acked their HOLD; out of managed memory.
	 *   limbo: a HOLD that listed them was never acked (timeout): the
	 *          device may still discard them, so they stay out of the
	 *          allocator until a device reset makes them safe.
	 * return_lock serializes everything that gives blocks back, so a
	 * block is never returned twice.
	 */
	spinlock_t hold_lock;
	struct list_head held;		/* most recently held first */
	unsigned int nr_held;
	struct list_head limbo;
	unsigned int nr_limbo;
	u64 blocks_held_total;
	u64 blocks_returned[VIRTIO_HUGEROOM_RET_UNLOAD + 1];
	u64 evac_failed[VIRTIO_HUGEROOM_NR_REASONS];
	u64 evac_pages_estimate;	/* in-use pages of attempted blocks */
	u64 evac_pages_migrated;	/* pgmigrate_success deltas */
	struct mutex return_lock;

	/*
	 * The one EVACUATE or CAPTURE that may run, in job_work.  job_lock
	 * protects @job_busy, @job_id, @job_cancel and @job_blocked; @job_cmd
	 * is written by cmd_work only while !job_busy and read by job_work.
	 * @job_blocked: a suspend or hibernation is under way, no job starts.
	 */
	spinlock_t job_lock;
	bool job_busy;
	bool job_cancel;
	bool job_blocked;
	u64 job_id;
	void *job_cmd;
	u32 job_len;
	struct work_struct job_work;
	unsigned long *job_events;	/* all_vm_events() for job_work */
	struct virtio_hugeroom_scan evac_scan;	/* CHEAPEST's own sweeps */

#ifdef VIRTIO_HUGEROOM_HAVE_SHRINKER_ALLOC
	struct shrinker *shrinker;
#else
	struct shrinker shrinker;
	bool shrinker_registered;
#endif
	struct notifier_block oom_nb;
	bool oom_registered;
	struct notifier_block pm_nb;
	bool pm_registered;
	struct notifier_block memory_nb;
	bool memory_registered;

#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
	/*
	 * debugfs fault_inject, under event_lock: the next eventq chain is
	 * not kicked (@fault_stall_next), and is kicked when the message after
	 * it has been written (@fault_stalled), as a device that pops it late.
	 */
	bool fault_stall_next;
	bool fault_stalled;
	/* debugfs pin_unmovable (a test aid), under pin_lock. */
	struct mutex pin_lock;
	struct page **pins;
	unsigned int nr_pins;
#endif

	struct dentry *debugfs;
};

static const char * const virtio_hugeroom_vmstat_names[] = {
	[VIRTIO_HUGEROOM_VS_COMPACT_STALL] = "compact_stall",
	[VIRTIO_HUGEROOM_VS_COMPACT_FAIL] = "compact_fail",
	[VIRTIO_HUGEROOM_VS_COMPACT_SUCCESS] = "compact_success",
	[VIRTIO_HUGEROOM_VS_COMPACT_MIGRATE_SCANNED] = "compact_migrate_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_FREE_SCANNED] = "compact_free_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_ISOLATED] = "compact_isolated",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_WAKE] = "compact_daemon_wake",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_MIGRATE_SCANNED] =
		"compact_daemon_migrate_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_FREE_SCANNED] =
		"compact_daemon_free_scanned",
	[VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS] = "pgmigrate_success",
	[VIRTIO_HUGEROOM_VS_PGMIGRATE_FAIL] = "pgmigrate_fail",
	[VIRTIO_HUGEROOM_VS_THP_FAULT_ALLOC] = "thp_fault_alloc",
	[VIRTIO_HUGEROOM_VS_THP_FAULT_FALLBACK] = "thp_fault_fallback",
	[VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC] = "thp_collapse_alloc",
	[VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC_FAILED] =
		"thp_collapse_alloc_failed",
	[VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE] = "thp_split_page",
};

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

static void virtio_hugeroom_queue_work(struct virtio_hugeroom *vh,
				       struct work_struct *work)
{
	unsigned long flags;

	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		queue_work(vh->wq, work);
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* (Re)arm the periodic report @delay_ms from now; 0 runs it at once. */
static void virtio_hugeroom_arm_status(struct virtio_hugeroom *vh,
				       unsigned int delay_ms)
{
	unsigned long flags;

	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		mod_delayed_work(vh->wq, &vh->status_work,
				 msecs_to_jiffies(delay_ms));
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* The one place that turns a device ack into an errno. */
static int virtio_hugeroom_ack_errno(u32 status)
{
	switch (status) {
	case VIRTIO_HUGEROOM_ACK_OK:
		return 0;
	case VIRTIO_HUGEROOM_ACK_INVALID:
		return -EINVAL;
	case VIRTIO_HUGEROOM_ACK_NO_DISCARD:
		return -EOPNOTSUPP;
	default:
		return -EPROTO;
	}
}

static u8 virtio_hugeroom_wire_mt(int mt)
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

static void virtio_hugeroom_fault_scan(struct virtio_hugeroom_scan *s);

/*
 * Migratetype of the pageblock at @pfn, as get_pageblock_migratetype() would
 * return it, or MIGRATE_TYPES if its section went away.  Racy like the
 * original.  The section's usage (and so the usemap) is freed with RCU when
 * memory is hot-removed, as pfn_valid() knows: read it under
 * rcu_read_lock(), after checking that the section is still valid.
 */
static int virtio_hugeroom_block_mt(unsigned long pfn)
{
	struct mem_section *ms;
	unsigned long bitidx;
	unsigned long word;

	bitidx = ((pfn & (PAGES_PER_SECTION - 1)) >> pageblock_order) *
		 NR_PAGEBLOCK_BITS;
	rcu_read_lock();
	ms = __pfn_to_section(pfn);
	if (!ms || !valid_section(ms)) {
		rcu_read_unlock();
		return MIGRATE_TYPES;
	}
	word = READ_ONCE(section_to_usemap(ms)[BIT_WORD(bitidx)]);
	rcu_read_unlock();
	return (word >> (bitidx % BITS_PER_LONG)) & MIGRATETYPE_MASK;
}

/* Buddy order of a PageBuddy page, or an invalid order if it raced. */
static unsigned int virtio_hugeroom_buddy_order(struct page *page)
{
	return READ_ONCE(page_private(page));
}

/*
 * Free pages in the pageblock starting at @head, counted without zone->lock
 * as compaction's free scanner does.  A buddy larger than a pageblock starts
 * at a MAX_ORDER_NR_PAGES boundary, which may lie in the previous block.
 */
static unsigned int virtio_hugeroom_block_free(struct page *head,
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
static void virtio_hugeroom_scan(struct virtio_hugeroom_scan *s,
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
	hr_pcp_fill_zone(z);
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
		hr_pcp_check(&vh->vdev->dev);

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
static int virtio_hugeroom_status_reap(struct virtio_hugeroom *vh, bool wait)
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
static int virtio_hugeroom_status_send(struct virtio_hugeroom *vh, void *buf,
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
static int virtio_hugeroom_report(struct virtio_hugeroom *vh, u64 request_id,
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

/* ---------------------------------------------------------------------- */
/* eventq */

static void virtio_hugeroom_settle_late(struct virtio_hugeroom *vh,
					struct virtio_hugeroom_evbuf *eb);
static void virtio_hugeroom_fault_event_send(struct virtio_hugeroom *vh);
static bool virtio_hugeroom_fault_event_stall(struct virtio_hugeroom *vh);

/*
 * Take back every chain the device has used.  The one a sender waits for
 * is marked done and stays with that sender; a late one (its sender gave
 * up) goes to event_late for virtio_hugeroom_event_settle().  Runs in a
 * wait condition, so it does nothing that may sleep.  event_lock held.
 */
static void virtio_hugeroom_event_reap(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb;
	unsigned int used;

	if (!vh->ready)
		return;
	while ((eb = virtqueue_get_buf(vh->event_vq, &used))) {
		eb->used = used;
		if (eb->late)
			list_add_tail(&eb->node, &vh->event_late);
		else
			eb->done = true;
	}
}

/* Reap, then settle the late chains and free them.  event_lock held. */
static void virtio_hugeroom_event_settle(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb, *tmp;

	virtio_hugeroom_event_reap(vh);
	list_for_each_entry_safe(eb, tmp, &vh->event_late, node) {
		virtio_hugeroom_settle_late(vh, eb);
		eb->late = false;
		eb->limbo = false;
		vh->event_stuck--;
		vh->event_late_acks++;
		list_move(&eb->node, &vh->event_free);
	}
}

static bool virtio_hugeroom_event_acked(struct virtio_hugeroom *vh,
					struct virtio_hugeroom_evbuf *eb)
{
	virtio_hugeroom_event_reap(vh);
	return eb->done;
}

/*
 * A free chain to write a message into, or NULL while the device owns all
 * of them (chains stuck with it).  event_lock held.
 */
static struct virtio_hugeroom_evbuf *
virtio_hugeroom_event_get(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb;

	virtio_hugeroom_event_settle(vh);
	eb = list_first_entry_or_null(&vh->event_free,
				      struct virtio_hugeroom_evbuf, node);
	if (eb)
		list_del(&eb->node);
	return eb;
}

/*
 * Send the @len byte message in @eb (from virtio_hugeroom_event_get()) and
 * wait for the device's ack, copied to @ack if not NULL.  @eb is the
 * device's until it comes back: after a timeout it stays stuck (-ETIMEDOUT)
 * and is settled and freed by whoever reaps it later.  Called with
 * event_lock held; sleeps.
 */
static int virtio_hugeroom_event_send(struct virtio_hugeroom *vh,
				      struct virtio_hugeroom_evbuf *eb,
				      u32 len, struct virtio_hugeroom_ack *ack)
{
	struct scatterlist out, in, *sgs[2] = { &out, &in };
	int rc;

	if (!vh->ready) {
		rc = -ENODEV;
		goto out_free;
	}
	sg_init_one(&out, eb->msg, len);
	sg_init_one(&in, eb->ack, sizeof(*eb->ack));
	memset(eb->ack, 0xff, sizeof(*eb->ack));
	eb->done = false;
	virtio_hugeroom_fault_event_send(vh);
	/*
	 * Never allocate with event_lock held: the OOM notifier waits for it.
	 * Without an indirect table the ring uses direct descriptors.
	 */
	rc = virtqueue_add_sgs(vh->event_vq, sgs, 1, 1, eb,
			       GFP_NOWAIT | __GFP_NOWARN);
	if (rc)
		goto out_free;
	if (!virtio_hugeroom_fault_event_stall(vh))
		virtqueue_kick(vh->event_vq);

	if (!wait_event_timeout(vh->event_acked,
				virtio_hugeroom_event_acked(vh, eb),
				VIRTIO_HUGEROOM_TX_TIMEOUT)) {
		/* The device may still read it: @eb is not ours to reuse. */
		eb->late = true;
		vh->event_stuck++;
		vh->event_timeouts++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "eventq: no ack for message type %u in %u s, %u chains stuck\n",
				     le16_to_cpu(((struct virtio_hugeroom_hdr *)
						  eb->msg)->type),
				     VIRTIO_HUGEROOM_TX_TIMEOUT / HZ,
				     vh->event_stuck);
		/* Not settled here: the caller has not parked its blocks. */
		return -ETIMEDOUT;
	}
	virtio_hugeroom_event_settle(vh);
	if (eb->used < sizeof(*eb->ack)) {
		rc = -EPROTO;
	} else {
		if (ack)
			*ack = *eb->ack;
		rc = virtio_hugeroom_ack_errno(le32_to_cpu(eb->ack->status));
	}
out_free:
	list_add(&eb->node, &vh->event_free);
	return rc;
}

/* Is a chain stuck with the device?  Reaps first.  Takes event_lock. */
static bool virtio_hugeroom_event_stuck(struct virtio_hugeroom *vh)
{
	bool stuck;

	if (!READ_ONCE(vh->event_stuck))
		return false;
	mutex_lock(&vh->event_lock);
	virtio_hugeroom_event_settle(vh);
	stuck = vh->event_stuck;
	mutex_unlock(&vh->event_lock);
	return stuck;
}

/*
 * After a device reset every chain is ours again; a stuck HOLD's blocks are
 * still in limbo, for virtio_hugeroom_release_all().  event_lock not
 * needed: no sender runs.
 */
static void virtio_hugeroom_event_reset(struct virtio_hugeroom *vh)
{
	unsigned int i;

	INIT_LIST_HEAD(&vh->event_free);
	INIT_LIST_HEAD(&vh->event_late);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		struct virtio_hugeroom_evbuf *eb = &vh->evbufs[i];

		eb->done = false;
		eb->late = false;
		eb->limbo = false;
		list_add_tail(&eb->node, &vh->event_free);
	}
	vh->event_stuck = 0;
}

/* Virtqueue buffers must be in the linear map: kmalloc, not vmalloc. */
static int virtio_hugeroom_event_alloc(struct virtio_hugeroom *vh)
{
	unsigned int i;

	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		struct virtio_hugeroom_evbuf *eb = &vh->evbufs[i];

		eb->msg = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
		eb->ack = kmalloc(sizeof(*eb->ack), GFP_KERNEL);
		if (!eb->msg || !eb->ack)
			return -ENOMEM;
	}
	virtio_hugeroom_event_reset(vh);
	return 0;
}

/* Counts of one command, as RESULT and PROGRESS carry them. */
struct virtio_hugeroom_counts {
	u32 tried;
	u32 freed;
	u32 failed[VIRTIO_HUGEROOM_NR_REASONS];
	u64 migrated;
	u64 start_ns;
};

/* Send a RESULT or PROGRESS (@type) with @c for @request_id. */
static int virtio_hugeroom_send_counts(struct virtio_hugeroom *vh, u16 type,
				       u64 request_id, u32 status,
				       const struct virtio_hugeroom_counts *c)
{
	struct virtio_hugeroom_evbuf *eb;
	struct virtio_hugeroom_result *res;
	unsigned int i;
	int rc = -EBUSY;

	mutex_lock(&vh->event_lock);
	eb = virtio_hugeroom_event_get(vh);
	if (!eb)
		goto out_err;
	res = eb->msg;
	memset(res, 0, sizeof(*res));
	res->hdr.type = cpu_to_le16(type);
	res->hdr.len = cpu_to_le32(sizeof(*res));
	res->hdr.request_id = cpu_to_le64(request_id);
	res->status = cpu_to_le32(status);
	if (c) {
		res->blocks_tried = cpu_to_le32(c->tried);
		res->blocks_freed = cpu_to_le32(c->freed);
		for (i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
			res->failed[i] = cpu_to_le32(c->failed[i]);
		res->pages_migrated = cpu_to_le64(c->migrated);
		res->elapsed_us = cpu_to_le64(div_u64(ktime_get_ns() -
						      c->start_ns,
						      NSEC_PER_USEC));
	}
	rc = virtio_hugeroom_event_send(vh, eb, sizeof(*res), NULL);
out_err:
	if (rc) {
		vh->event_errors++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "%s for request %llu failed: %d\n",
				     type == VIRTIO_HUGEROOM_MSG_RESULT ?
				     "result" : "progress", request_id, rc);
	} else {
		vh->events_sent++;
	}
	mutex_unlock(&vh->event_lock);
	return rc;
}

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

/*
 * The kernel names the page-type setters __SetPageOffline() and
 * __ClearPageOffline(); checkpatch --strict flags every use of that
 * upstream CamelCase, so they are spelt through this one macro.
 */
#define VIRTIO_HUGEROOM_SET_OFFLINE(page)	__PASTE(__, SetPageOffline)(page)
#define VIRTIO_HUGEROOM_CLEAR_OFFLINE(page)	__PASTE(__, ClearPageOffline)(page)

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
static void virtio_hugeroom_settle_late(struct virtio_hugeroom *vh,
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
static unsigned int virtio_hugeroom_return_locked(struct virtio_hugeroom *vh,
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

/* Shrinker: the held pages are what it can free. */
static unsigned long virtio_hugeroom_count(struct virtio_hugeroom *vh)
{
	if (!virtio_hugeroom_deflate_on_oom(vh))
		return 0;
	return (unsigned long)READ_ONCE(vh->nr_held) * pageblock_nr_pages;
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
 * Give back blocks for @nr_to_scan pages.  Reclaim may run in any task,
 * including our own workers while they hold a lock, so only trylock.
 */
static unsigned long virtio_hugeroom_scan_held(struct virtio_hugeroom *vh,
					       unsigned long nr_to_scan)
{
	unsigned int want, given;

	if (!virtio_hugeroom_deflate_on_oom(vh) ||
	    !virtio_hugeroom_under_pressure())
		return SHRINK_STOP;
	want = DIV_ROUND_UP(nr_to_scan, pageblock_nr_pages);
	given = virtio_hugeroom_return_some(vh, want,
					    VIRTIO_HUGEROOM_RET_PRESSURE, true);
	if (!given)
		return SHRINK_STOP;
	return (unsigned long)given * pageblock_nr_pages;
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
static int virtio_hugeroom_shrinker_register(struct virtio_hugeroom *vh)
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

static void virtio_hugeroom_shrinker_unregister(struct virtio_hugeroom *vh)
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

static int virtio_hugeroom_shrinker_register(struct virtio_hugeroom *vh)
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

static void virtio_hugeroom_shrinker_unregister(struct virtio_hugeroom *vh)
{
	if (vh->shrinker_registered)
		unregister_shrinker(&vh->shrinker);
	vh->shrinker_registered = false;
}
#endif

/*
 * Last resort before an OOM kill: give blocks back and say how many pages
 * that freed.  Waiting for the RETURNED ack is allowed here (SPEC 1.6.6.1
 * item 2); nobody allocates while holding return_lock or event_lock.
 */
static int virtio_hugeroom_oom_notify(struct notifier_block *nb,
				      unsigned long dummy, void *parm)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  oom_nb);
	unsigned long *freed = parm;
	unsigned int given;

	if (!virtio_hugeroom_deflate_on_oom(vh))
		return NOTIFY_OK;
	given = virtio_hugeroom_return_some(vh, VIRTIO_HUGEROOM_OOM_BLOCKS,
					    VIRTIO_HUGEROOM_RET_PRESSURE,
					    false);
	*freed += (unsigned long)given * pageblock_nr_pages;
	return NOTIFY_OK;
}

/*
 * After a device reset the device holds nothing (SPEC 1.5.2): whatever is
 * still on our lists can go back to the allocator.
 */
static void virtio_hugeroom_release_all(struct virtio_hugeroom *vh)
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
static int virtio_hugeroom_memory_notify(struct notifier_block *nb,
					 unsigned long action, void *arg)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  memory_nb);
	const struct memory_notify *mn = arg;
	unsigned long start = mn->start_pfn, end = start + mn->nr_pages;
	unsigned int nr = 0, given;
	bool in_limbo = false;
	struct page *page, *tmp;
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
	list_for_each_entry_safe(page, tmp, &vh->held, lru) {
		unsigned long pfn = page_to_pfn(page);

		if (pfn >= start && pfn < end) {
			list_move_tail(&page->lru, &list);
			nr++;
		}
	}
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
static void virtio_hugeroom_do_return(struct virtio_hugeroom *vh,
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

/* Send a RESULT with @status and nothing done for @request_id. */
static int virtio_hugeroom_send_result(struct virtio_hugeroom *vh,
				       u64 request_id, u32 status)
{
	return virtio_hugeroom_send_counts(vh, VIRTIO_HUGEROOM_MSG_RESULT,
					   request_id, status, NULL);
}

/* ---------------------------------------------------------------------- */
/*
 * EVACUATE and CAPTURE.  One at a time, in job_work, so that cmd_work can
 * still take CANCEL, RETURN and REPORT while it runs.
 */

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
	u64 first_pending_ns;
	u64 last_progress_ns;
	unsigned int since_progress;
	u32 stop;			/* S_CANCELLED or S_BUDGET once stopped */
	bool no_discard;		/* the device refused a HOLD */
	bool no_memory;			/* admission failed, or -ENOMEM */
	bool budget_skipped;		/* a block was left for the budget */
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
 * The one call of alloc_contig_range().  6.1 and 6.12 take a migratetype
 * (6.12 through the alloc_hooks() macro); 6.17 changes it to flags and is
 * refused at the top of this file.  GFP: may reclaim a little, never OOM,
 * never warn (SPEC 1.6.3.2 item 4).
 */
static int virtio_hugeroom_contig_alloc(unsigned long pfn)
{
	return alloc_contig_range(pfn, pfn + pageblock_nr_pages,
				  MIGRATE_MOVABLE,
				  GFP_KERNEL | __GFP_NOWARN |
				  __GFP_RETRY_MAYFAIL);
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
 * holds back) at its next allocation burst.  @taken: the pages are
 * already allocated.
 */
static bool virtio_hugeroom_admit(struct zone *zone, bool taken)
{
	unsigned long need = taken ? 0 : pageblock_nr_pages;
	unsigned long floor = virtio_hugeroom_high_wmarks() +
			      (totalram_pages() >>
			       VIRTIO_HUGEROOM_ADMIT_RESERVE_SHIFT);
	long avail = si_mem_available();

	if (zone && zone_page_state(zone, NR_FREE_PAGES) <
		    high_wmark_pages(zone) + need)
		return false;
	return avail >= 0 && (unsigned long)avail >= floor + need;
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
	if (rc == -EOPNOTSUPP)
		r->no_discard = true;
	if (rc && rc != -EOPNOTSUPP)
		dev_warn_ratelimited(&vh->vdev->dev,
				     "HOLD of %u blocks failed: %d\n",
				     r->nr_pending, rc);

	/* Blocks the device may still act on are in limbo already. */
	list_for_each_entry_safe(page, tmp, &r->pending, lru) {
		unsigned long pfn = page_to_pfn(page);

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
		list_del(&page->lru);
		virtio_hugeroom_block_put(pfn, false);
	}
	/* Counted as tried when taken. */
	r->c.tried -= r->nr_pending - done;
	for (i = done; i < r->nr_pending; i++)
		virtio_hugeroom_run_fail(r, VIRTIO_HUGEROOM_R_OTHER);
	r->nr_pending = 0;
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
				      unsigned long pfn, unsigned int *free,
				      struct zone **zonep)
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
	if (!virtio_hugeroom_admit(zone, false))
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
			} else if (!READ_ONCE(head->mapping)) {
				/*
				 * Neither on an LRU nor movable_ops (whose
				 * mapping is set, see __PageMovable()).
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
 * Try to free and take the block at @pfn.  Returns 1 if taken, 0 if it
 * failed (counted), -EAGAIN if it was left alone for the page budget (not
 * counted: SPEC 1.6.3.1).
 */
static int virtio_hugeroom_evac_block(struct virtio_hugeroom_run *r,
				      unsigned long pfn)
{
	struct virtio_hugeroom *vh = r->vh;
	unsigned int free = 0, used, tries;
	struct zone *zone = NULL;
	u64 ev0, ev1;
	int reason, rc;

	reason = virtio_hugeroom_evac_check(vh, pfn, &free, &zone);
	if (reason >= 0) {
		/* Every further block would break the admission rule too. */
		if (reason == VIRTIO_HUGEROOM_R_NOMEM)
			r->no_memory = true;
		virtio_hugeroom_run_fail(r, reason);
		return 0;
	}
	used = pageblock_nr_pages - min_t(unsigned int, free,
					  pageblock_nr_pages);
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
	if (ev1 > ev0)
		r->c.migrated += ev1 - ev0;
	spin_lock(&vh->hold_lock);
	vh->evac_pages_estimate += used;
	if (ev1 > ev0)
		vh->evac_pages_migrated += ev1 - ev0;
	spin_unlock(&vh->hold_lock);

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

/* Explicit form: the host's blocks, in its order, until count are freed. */
static void virtio_hugeroom_evac_explicit(struct virtio_hugeroom_run *r,
					  const __le64 *gpas, u32 nr)
{
	u32 i;

	for (i = 0; i < nr; i++) {
		if (virtio_hugeroom_run_enough(r) ||
		    virtio_hugeroom_run_blocked(r))
			return;
		r->stop = virtio_hugeroom_run_check(r);
		if (r->stop)
			return;
		virtio_hugeroom_evac_block(r, PHYS_PFN(le64_to_cpu(gpas[i])));
		if (r->stop)
			return;
		virtio_hugeroom_run_tick(r);
	}
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
	unsigned int i, stale_sweeps = 0;
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
		for (i = 0; i < s->done->nr_cands; i++) {
			if (virtio_hugeroom_run_enough(r) ||
			    virtio_hugeroom_run_blocked(r))
				goto out;
			r->stop = virtio_hugeroom_run_check(r);
			if (r->stop)
				goto out;
			if (virtio_hugeroom_cand_stale(&s->done->cand[i])) {
				stale = true;
				continue;
			}
			if (virtio_hugeroom_evac_block(r, s->done->cand[i].pfn) > 0)
				progress = true;
			if (r->stop)
				goto out;
			virtio_hugeroom_run_tick(r);
		}
		stale_sweeps = progress ? 0 : stale_sweeps + stale;
	} while ((progress || stale) && !virtio_hugeroom_run_enough(r) &&
		 stale_sweeps < VIRTIO_HUGEROOM_STALE_SWEEPS);
out:
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
	struct page *page;

	while (!virtio_hugeroom_run_enough(r) &&
	       !virtio_hugeroom_run_blocked(r)) {
		r->stop = virtio_hugeroom_run_check(r);
		if (r->stop)
			break;
		if (!virtio_hugeroom_admit(NULL, false)) {
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
		if (!virtio_hugeroom_admit(page_zone(page), true)) {
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
	ev1 = virtio_hugeroom_pgmigrate(vh);
	r->c.migrated = ev1 > ev0 ? ev1 - ev0 : 0;
}

static void virtio_hugeroom_job_work(struct work_struct *work)
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
		if (le16_to_cpu(ev->hdr.flags) & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST)
			virtio_hugeroom_evac_cheapest(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_ranges));
		else
			virtio_hugeroom_evac_explicit(&r, (const void *)(ev + 1),
						      le32_to_cpu(ev->nr_gpas));
	}
	virtio_hugeroom_run_flush(&r);

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

/* ---------------------------------------------------------------------- */
/* cmdq */

static int virtio_hugeroom_post_cmd_buf(struct virtio_hugeroom *vh, void *buf)
{
	struct scatterlist sg;

	sg_init_one(&sg, buf, VIRTIO_HUGEROOM_CMD_BUF);
	return virtqueue_add_inbuf(vh->cmd_vq, &sg, 1, buf, GFP_KERNEL);
}

static int virtio_hugeroom_post_cmd_bufs(struct virtio_hugeroom *vh)
{
	unsigned int i;
	int rc;

	for (i = 0; i < VIRTIO_HUGEROOM_NR_CMD_BUFS; i++) {
		rc = virtio_hugeroom_post_cmd_buf(vh, vh->cmd_bufs +
						  i * VIRTIO_HUGEROOM_CMD_BUF);
		if (rc)
			return rc;
	}
	return 0;
}

/* The feature a command needs (SPEC 1.6.1), or -1 for none. */
static int virtio_hugeroom_cmd_feature(u16 type)
{
	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		return VIRTIO_HUGEROOM_F_STATUS;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		return VIRTIO_HUGEROOM_F_EVACUATE;
	case VIRTIO_HUGEROOM_CMD_RETURN:
		return VIRTIO_HUGEROOM_F_HOLD;
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		return VIRTIO_HUGEROOM_F_PCP;
	default:
		return -1;
	}
}

/* Block-aligned, and no address repeated (n <= 500: quadratic is fine). */
static bool virtio_hugeroom_gpas_ok(const __le64 *gpas, u32 n)
{
	u32 i, j;

	for (i = 0; i < n; i++) {
		u64 gpa = le64_to_cpu(gpas[i]);

		if (!IS_ALIGNED(gpa, VIRTIO_HUGEROOM_BLOCK_SIZE))
			return false;
		for (j = 0; j < i; j++)
			if (gpas[j] == gpas[i])
				return false;
	}
	return true;
}

/*
 * The per-type rules of SPEC 1.6.3 (EVACUATE), 1.6.5 (CAPTURE) and 1.6.6
 * (RETURN), after virtio_hugeroom_check_cmd() checked the layout.
 */
static u32 virtio_hugeroom_check_args(const void *buf, u16 type)
{
	switch (type) {
	case VIRTIO_HUGEROOM_CMD_EVACUATE: {
		const struct virtio_hugeroom_evacuate *ev = buf;
		const struct virtio_hugeroom_range *rg = (const void *)(ev + 1);
		u16 flags = le16_to_cpu(ev->hdr.flags);
		u32 count = le32_to_cpu(ev->count);
		u32 nr_gpas = le32_to_cpu(ev->nr_gpas);
		u32 nr_ranges = le32_to_cpu(ev->nr_ranges);
		u64 prev_end = 0;
		u32 i;

		if (!count)
			return VIRTIO_HUGEROOM_S_INVALID;
		if (!(flags & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST)) {
			if (flags || nr_ranges || !nr_gpas ||
			    nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS ||
			    count > nr_gpas ||
			    !virtio_hugeroom_gpas_ok((const void *)(ev + 1),
						     nr_gpas))
				return VIRTIO_HUGEROOM_S_INVALID;
			return 0;
		}
		if (nr_gpas)
			return VIRTIO_HUGEROOM_S_INVALID;
		if (!(flags & VIRTIO_HUGEROOM_EVAC_F_RANGES))
			return nr_ranges ? VIRTIO_HUGEROOM_S_INVALID : 0;
		if (!nr_ranges || nr_ranges > VIRTIO_HUGEROOM_MAX_CMD_RANGES)
			return VIRTIO_HUGEROOM_S_INVALID;
		for (i = 0; i < nr_ranges; i++) {
			u64 start = le64_to_cpu(rg[i].start);
			u64 end = le64_to_cpu(rg[i].end);

			if (!IS_ALIGNED(start, VIRTIO_HUGEROOM_BLOCK_SIZE) ||
			    !IS_ALIGNED(end, VIRTIO_HUGEROOM_BLOCK_SIZE) ||
			    start >= end || (i && start < prev_end))
				return VIRTIO_HUGEROOM_S_INVALID;
			prev_end = end;
		}
		return 0;
	}
	case VIRTIO_HUGEROOM_CMD_CAPTURE: {
		const struct virtio_hugeroom_capture *cap = buf;

		return cap->count ? 0 : VIRTIO_HUGEROOM_S_INVALID;
	}
	case VIRTIO_HUGEROOM_CMD_RETURN: {
		const struct virtio_hugeroom_return *ret = buf;
		u32 count = le32_to_cpu(ret->count);
		u32 nr_gpas = le32_to_cpu(ret->nr_gpas);

		if (!nr_gpas)
			return count ? 0 : VIRTIO_HUGEROOM_S_INVALID;
		if (nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS ||
		    count != nr_gpas ||
		    !virtio_hugeroom_gpas_ok((const void *)(ret + 1), nr_gpas))
			return VIRTIO_HUGEROOM_S_INVALID;
		return 0;
	}
	default:
		return 0;
	}
}

/*
 * Start an EVACUATE or CAPTURE in job_work, or answer S_BUSY (another job
 * runs, or the guest is about to suspend).
 */
static void virtio_hugeroom_start_job(struct virtio_hugeroom *vh,
				      const void *buf, u32 len, u64 id)
{
	bool busy;

	spin_lock(&vh->job_lock);
	busy = vh->job_busy || vh->job_blocked;
	if (!busy) {
		vh->job_busy = true;
		vh->job_cancel = false;
		vh->job_id = id;
	}
	spin_unlock(&vh->job_lock);
	if (busy) {
		virtio_hugeroom_send_result(vh, id, VIRTIO_HUGEROOM_S_BUSY);
		return;
	}
	memcpy(vh->job_cmd, buf, len);
	vh->job_len = len;
	virtio_hugeroom_queue_work(vh, &vh->job_work);
}

/* CANCEL: stop the running command it names; otherwise ignore it. */
static void virtio_hugeroom_cancel(struct virtio_hugeroom *vh, u64 id)
{
	spin_lock(&vh->job_lock);
	if (vh->job_busy && vh->job_id == id)
		vh->job_cancel = true;
	spin_unlock(&vh->job_lock);
}

/*
 * Check a command of @len bytes (the used length the device gave) against
 * the common rules of SPEC 1.6.1.1 and the layout rules of its type.
 * Returns 0, or the RESULT status that answers it: S_UNSUPPORTED for an
 * unknown type or a feature not negotiated, S_INVALID for anything else.
 * @buf holds at least min(@len, VIRTIO_HUGEROOM_CMD_BUF) bytes.
 */
static u32 virtio_hugeroom_check_cmd(struct virtio_hugeroom *vh,
				     const void *buf, u32 len)
{
	const struct virtio_hugeroom_hdr *hdr = buf;
	u16 type = le16_to_cpu(hdr->type);
	u16 flags = le16_to_cpu(hdr->flags);
	u16 known_flags = 0;
	u64 expect;
	int feature;

	if (len < sizeof(*hdr) || len > VIRTIO_HUGEROOM_CMD_BUF ||
	    le32_to_cpu(hdr->len) != len)
		return VIRTIO_HUGEROOM_S_INVALID;

	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		expect = sizeof(*hdr);
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE: {
		const struct virtio_hugeroom_evacuate *ev = buf;

		known_flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST |
			      VIRTIO_HUGEROOM_EVAC_F_RANGES;
		if (len < sizeof(*ev))
			return VIRTIO_HUGEROOM_S_INVALID;
		expect = sizeof(*ev) +
			 (u64)le32_to_cpu(ev->nr_gpas) * sizeof(__le64) +
			 (u64)le32_to_cpu(ev->nr_ranges) *
			 sizeof(struct virtio_hugeroom_range);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		expect = sizeof(struct virtio_hugeroom_capture);
		break;
	case VIRTIO_HUGEROOM_CMD_RETURN: {
		const struct virtio_hugeroom_return *ret = buf;

		if (len < sizeof(*ret))
			return VIRTIO_HUGEROOM_S_INVALID;
		expect = sizeof(*ret) +
			 (u64)le32_to_cpu(ret->nr_gpas) * sizeof(__le64);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		expect = sizeof(struct virtio_hugeroom_set_pcp);
		break;
	default:
		return VIRTIO_HUGEROOM_S_UNSUPPORTED;
	}

	feature = virtio_hugeroom_cmd_feature(type);
	if (feature >= 0 && !virtio_has_feature(vh->vdev, feature))
		return VIRTIO_HUGEROOM_S_UNSUPPORTED;
	if ((flags & ~known_flags) || len != expect || !hdr->request_id)
		return VIRTIO_HUGEROOM_S_INVALID;
	return virtio_hugeroom_check_args(buf, type);
}

/*
 * Decode one command and act on it: the one switch that decides what each
 * command does.  Runs in cmd_work; sleeps.
 */
static void virtio_hugeroom_handle_cmd(struct virtio_hugeroom *vh,
				       const void *buf, u32 len)
{
	const struct virtio_hugeroom_hdr *hdr = buf;
	u64 request_id = 0;
	u16 type = 0;
	u32 status;

	vh->cmds_received++;
	if (len >= sizeof(*hdr)) {
		request_id = le64_to_cpu(hdr->request_id);
		type = le16_to_cpu(hdr->type);
	}
	status = virtio_hugeroom_check_cmd(vh, buf, len);
	if (status) {
		vh->cmds_invalid++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "command type %u (%u bytes) refused: status %u\n",
				     type, len, status);
		/* CANCEL has no id of its own; id 0 names no command. */
		if (type != VIRTIO_HUGEROOM_CMD_CANCEL && request_id)
			virtio_hugeroom_send_result(vh, request_id, status);
		return;
	}

	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		/* A failure is logged; the statusq is then broken anyway. */
		virtio_hugeroom_report(vh, request_id, true);
		break;
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		virtio_hugeroom_cancel(vh, request_id);
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		virtio_hugeroom_start_job(vh, buf, len, request_id);
		break;
	case VIRTIO_HUGEROOM_CMD_RETURN:
		virtio_hugeroom_do_return(vh, buf);
		break;
	default: {
		const struct virtio_hugeroom_set_pcp *pcp = buf;

		virtio_hugeroom_send_result(vh, request_id,
					    hr_pcp_set(&vh->vdev->dev,
						       le32_to_cpu(pcp->policy),
						       le32_to_cpu(pcp->high)));
		break;
	}
	}
}

static void virtio_hugeroom_cmd_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(work, struct virtio_hugeroom,
						  cmd_work);
	unsigned int len;
	void *buf;

	while ((buf = virtqueue_get_buf(vh->cmd_vq, &len))) {
		u32 copied = min_t(u32, len, VIRTIO_HUGEROOM_CMD_BUF);

		/* Copy out and repost first: the device may queue more. */
		memcpy(vh->cmd_copy, buf, copied);
		if (virtio_hugeroom_post_cmd_buf(vh, buf))
			dev_warn_ratelimited(&vh->vdev->dev,
					     "cannot repost a command buffer\n");
		virtqueue_kick(vh->cmd_vq);
		/* The decoder rejects a @len beyond the buffer. */
		virtio_hugeroom_handle_cmd(vh, vh->cmd_copy, len);
	}
}

/* ---------------------------------------------------------------------- */
/* Periodic reports and config */

static void virtio_hugeroom_read_config(struct virtio_hugeroom *vh)
{
	u32 interval, max_cands;

	virtio_cread_le(vh->vdev, struct virtio_hugeroom_config,
			status_interval_ms, &interval);
	virtio_cread_le(vh->vdev, struct virtio_hugeroom_config,
			max_candidates, &max_cands);
	if (interval && interval < VIRTIO_HUGEROOM_MIN_INTERVAL_MS)
		interval = VIRTIO_HUGEROOM_MIN_INTERVAL_MS;
	WRITE_ONCE(vh->status_interval_ms, interval);
	WRITE_ONCE(vh->max_candidates,
		   min_t(u32, max_cands, VIRTIO_HUGEROOM_MAX_CANDIDATES));
}

static void virtio_hugeroom_status_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(to_delayed_work(work),
						  struct virtio_hugeroom,
						  status_work);
	u32 interval;

	virtio_hugeroom_report(vh, 0, false);
	interval = READ_ONCE(vh->status_interval_ms);
	if (interval)
		virtio_hugeroom_arm_status(vh, interval);
}

static void virtio_hugeroom_config_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(work, struct virtio_hugeroom,
						  config_work);
	u32 old = READ_ONCE(vh->status_interval_ms);
	u32 interval;

	virtio_hugeroom_read_config(vh);
	interval = READ_ONCE(vh->status_interval_ms);
	if (interval == old ||
	    !virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_STATUS))
		return;
	if (interval)
		virtio_hugeroom_arm_status(vh, interval);
	else
		cancel_delayed_work(&vh->status_work);
}

/* ---------------------------------------------------------------------- */
/* Interrupt context: wake or queue, nothing else. */

static void virtio_hugeroom_status_done(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	wake_up(&vh->status_acked);
}

static void virtio_hugeroom_cmd_ready(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	virtio_hugeroom_queue_work(vh, &vh->cmd_work);
}

static void virtio_hugeroom_event_done(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	wake_up(&vh->event_acked);
}

static void virtio_hugeroom_config_changed(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh = vdev->priv;

	virtio_hugeroom_queue_work(vh, &vh->config_work);
}

/* ---------------------------------------------------------------------- */
/* debugfs */

/* Start a "zone <nid> <idx> <name> <what>" line, ending the previous one. */
static void virtio_hugeroom_show_zone(struct seq_file *m,
				      const struct virtio_hugeroom_zone *z,
				      const char *what)
{
	if (strcmp(what, "nr_free"))
		seq_putc(m, '\n');
	seq_printf(m, "zone %u %u %.12s %s", le16_to_cpu(z->nid), z->zone_idx,
		   z->name, what);
}

static int virtio_hugeroom_status_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	const struct virtio_hugeroom_status *st = vh->report;
	const struct virtio_hugeroom_zone *z = (const void *)(st + 1);
	const struct virtio_hugeroom_candidate *c;
	unsigned int i, j, nr_zones, nr_cands;

	mutex_lock(&vh->report_lock);
	seq_printf(m, "reports_sent %llu\nreport_errors %llu\n",
		   vh->reports_sent, vh->report_errors);
	seq_printf(m, "cmds_received %llu\ncmds_invalid %llu\n",
		   vh->cmds_received, vh->cmds_invalid);
	seq_printf(m, "scan_sweeps %llu\nscan_last_sweep_ns %llu\n",
		   vh->scan.sweeps, vh->scan.last_sweep_ns);
	seq_printf(m, "scan_blocks %lu\n", vh->scan.done->nr_blocks);
	mutex_lock(&vh->event_lock);
	virtio_hugeroom_event_settle(vh);
	seq_printf(m, "events_sent %llu\nevent_errors %llu\n",
		   vh->events_sent, vh->event_errors);
	seq_printf(m, "event_timeouts %llu\nevent_late_acks %llu\n",
		   vh->event_timeouts, vh->event_late_acks);
	seq_printf(m, "eventq_stuck %u\n", vh->event_stuck);
	mutex_unlock(&vh->event_lock);
	spin_lock(&vh->hold_lock);
	seq_printf(m, "held_blocks_driver %u\nhold_limbo %u\n", vh->nr_held,
		   vh->nr_limbo);
	seq_printf(m, "blocks_held_total %llu\n", vh->blocks_held_total);
	seq_printf(m, "blocks_returned_host %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_HOST]);
	seq_printf(m, "blocks_returned_pressure %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_PRESSURE]);
	seq_printf(m, "blocks_returned_unload %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_UNLOAD]);
	seq_puts(m, "evac_blocks_failed");
	for (i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
		seq_printf(m, " %llu", vh->evac_failed[i]);
	seq_printf(m, "\nevac_pages_estimate %llu\n", vh->evac_pages_estimate);
	seq_printf(m, "evac_pages_migrated %llu\n", vh->evac_pages_migrated);
	spin_unlock(&vh->hold_lock);
	hr_pcp_show(m);
	if (!vh->report_len) {
		seq_puts(m, "report none\n");
		goto out_unlock;
	}

	nr_zones = le16_to_cpu(st->nr_zones);
	nr_cands = le16_to_cpu(st->nr_candidates);
	c = (const void *)&z[nr_zones];
	seq_printf(m, "seq %llu\n", le64_to_cpu(st->seq));
	seq_printf(m, "report_bytes %u\n", vh->report_len);
	seq_printf(m, "build_ns %llu\n", le64_to_cpu(st->build_ns));
	seq_printf(m, "uptime_ns %llu\n", le64_to_cpu(st->uptime_ns));
	seq_printf(m, "request_id %llu\n", le64_to_cpu(st->hdr.request_id));
	seq_printf(m, "flags 0x%x\n", le16_to_cpu(st->hdr.flags));
	seq_printf(m, "mem_total_pages %llu\n",
		   le64_to_cpu(st->mem_total_pages));
	seq_printf(m, "mem_free_pages %llu\n",
		   le64_to_cpu(st->mem_free_pages));
	seq_printf(m, "mem_available_pages %llu\n",
		   le64_to_cpu(st->mem_available_pages));
	seq_printf(m, "held_blocks %u\n", le32_to_cpu(st->held_blocks));
	seq_printf(m, "page_shift %u\n", le32_to_cpu(st->page_shift));
	seq_printf(m, "pageblock_order %u\n",
		   le32_to_cpu(st->pb_order));
	seq_printf(m, "nr_zones %u\n", nr_zones);
	seq_printf(m, "nr_candidates %u\n", nr_cands);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		seq_printf(m, "%s %llu\n", virtio_hugeroom_vmstat_names[i],
			   le64_to_cpu(st->vmstat[i]));

	for (i = 0; i < nr_zones; i++, z++) {
		virtio_hugeroom_show_zone(m, z, "nr_free");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_ORDERS; j++)
			seq_printf(m, " %llu", le64_to_cpu(z->nr_free[j]));
		virtio_hugeroom_show_zone(m, z, "pages");
		seq_printf(m, " free %llu managed %llu spanned %llu start_pfn %llu",
			   le64_to_cpu(z->free_pages),
			   le64_to_cpu(z->managed_pages),
			   le64_to_cpu(z->spanned_pages),
			   le64_to_cpu(z->start_pfn));
		virtio_hugeroom_show_zone(m, z, "wmark");
		seq_printf(m, " min %llu low %llu high %llu",
			   le64_to_cpu(z->wmark_min),
			   le64_to_cpu(z->wmark_low),
			   le64_to_cpu(z->wmark_high));
		virtio_hugeroom_show_zone(m, z, "pb_mt");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_MT; j++)
			seq_printf(m, " %llu", le64_to_cpu(z->nr_free_pb_mt[j]));
		virtio_hugeroom_show_zone(m, z, "hist");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_HIST; j++)
			seq_printf(m, " %u", le32_to_cpu(z->hist[j]));
		virtio_hugeroom_show_zone(m, z, "pcp");
		seq_printf(m, " count %u high %u batch %u high_min %u high_max %u policy %u fraction %u\n",
			   le32_to_cpu(z->pcp_count), le32_to_cpu(z->pcp_high),
			   le32_to_cpu(z->pcp_batch),
			   le32_to_cpu(z->pcp_high_min),
			   le32_to_cpu(z->pcp_high_max), z->pcp_policy,
			   le32_to_cpu(z->pcp_fraction));
	}
	for (i = 0; i < nr_cands; i++, c++)
		seq_printf(m, "candidate 0x%llx free %u mt %u zone %u\n",
			   le64_to_cpu(c->gpa), le16_to_cpu(c->free_pages),
			   c->migratetype, c->zone);
out_unlock:
	mutex_unlock(&vh->report_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_status);

static ssize_t virtio_hugeroom_report_now_write(struct file *file,
						const char __user *ubuf,
						size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	unsigned int val;
	int rc;

	rc = kstrtouint_from_user(ubuf, count, 0, &val);
	if (rc)
		return rc;
	if (val != 1)
		return -EINVAL;
	rc = virtio_hugeroom_report(vh, 0, true);
	return rc ? rc : count;
}

static const struct file_operations virtio_hugeroom_report_now_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_report_now_write,
	.llseek = noop_llseek,
};

/* "held": one held block's gpa per line, most recently held first. */
static int virtio_hugeroom_held_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	struct page *page;

	spin_lock(&vh->hold_lock);
	list_for_each_entry(page, &vh->held, lru)
		seq_printf(m, "0x%llx\n", (u64)PFN_PHYS(page_to_pfn(page)));
	spin_unlock(&vh->hold_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_held);

/* ---------------------------------------------------------------------- */
/*
 * Test aids, only in a test build (make CONFIG_VIRTIO_HUGEROOM_TEST=y, as
 * scripts/build-module.sh --test does): debugfs files that pin memory that
 * nothing can migrate and send malformed messages.  The module users load
 * has none of this code.
 */
#ifdef CONFIG_VIRTIO_HUGEROOM_TEST

static void virtio_hugeroom_unpin(struct virtio_hugeroom *vh)
{
	unsigned int i;

	for (i = 0; i < vh->nr_pins; i++)
		__free_page(vh->pins[i]);
	kvfree(vh->pins);
	vh->pins = NULL;
	vh->nr_pins = 0;
}

/*
 * "pin_unmovable", a test aid: writing N keeps N pages that nothing can
 * migrate, so that a test can name a block that must fail with
 * R_UNMOVABLE.  By default they come from movable pageblocks
 * (GFP_HIGHUSER_MOVABLE, never put on an LRU: like a long-term pin), which
 * EVACUATE accepts and alloc_contig_range() cannot empty; "kernel N"
 * allocates GFP_KERNEL pages instead (unmovable pageblocks: R_ZONE).
 * Writing 0 frees them; so does unloading.  Reading lists their gpas.
 */
static ssize_t virtio_hugeroom_pin_write(struct file *file,
					 const char __user *ubuf,
					 size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh =
		((struct seq_file *)file->private_data)->private;
	gfp_t gfp = GFP_HIGHUSER_MOVABLE;
	char buf[32], *p;
	size_t n = min(count, sizeof(buf) - 1);
	unsigned int nr, i;
	int rc;

	if (copy_from_user(buf, ubuf, n))
		return -EFAULT;
	buf[n] = '\0';
	p = strim(buf);
	if (str_has_prefix(p, "kernel ")) {
		gfp = GFP_KERNEL;
		p = strim(p + strlen("kernel "));
	}
	rc = kstrtouint(p, 0, &nr);
	if (rc)
		return rc;
	if (nr > VIRTIO_HUGEROOM_MAX_PINS)
		return -E2BIG;

	mutex_lock(&vh->pin_lock);
	virtio_hugeroom_unpin(vh);
	if (nr) {
		vh->pins = kvcalloc(nr, sizeof(*vh->pins), GFP_KERNEL);
		if (!vh->pins) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		for (i = 0; i < nr; i++) {
			vh->pins[i] = alloc_page(gfp | __GFP_NOWARN);
			if (!vh->pins[i]) {
				rc = -ENOMEM;
				break;
			}
			vh->nr_pins++;
		}
	}
out_unlock:
	mutex_unlock(&vh->pin_lock);
	return rc ? rc : count;
}

static int virtio_hugeroom_pin_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	unsigned int i;

	mutex_lock(&vh->pin_lock);
	for (i = 0; i < vh->nr_pins; i++)
		seq_printf(m, "0x%llx\n",
			   (u64)PFN_PHYS(page_to_pfn(vh->pins[i])));
	mutex_unlock(&vh->pin_lock);
	return 0;
}

static int virtio_hugeroom_pin_open(struct inode *inode, struct file *file)
{
	return single_open(file, virtio_hugeroom_pin_show, inode->i_private);
}

static const struct file_operations virtio_hugeroom_pin_fops = {
	.owner = THIS_MODULE,
	.open = virtio_hugeroom_pin_open,
	.read = seq_read,
	.write = virtio_hugeroom_pin_write,
	.llseek = seq_lseek,
	.release = single_release,
};

enum virtio_hugeroom_inject {
	VIRTIO_HUGEROOM_INJ_BAD_LEN,
	VIRTIO_HUGEROOM_INJ_BAD_TYPE,
	VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE,
	VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES,
	VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME,
	VIRTIO_HUGEROOM_INJ_TRUNCATED,
	/* Hostile lists on eventq, from here on. */
	VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE,
	VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED,
	VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE,
	VIRTIO_HUGEROOM_INJ_HOLD_HELD,
	VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED,
};

static const char * const virtio_hugeroom_inject_names[] = {
	[VIRTIO_HUGEROOM_INJ_BAD_LEN] = "bad_len",
	[VIRTIO_HUGEROOM_INJ_BAD_TYPE] = "bad_type",
	[VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE] = "unaligned_candidate",
	[VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES] = "too_many_zones",
	[VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME] = "bad_zone_name",
	[VIRTIO_HUGEROOM_INJ_TRUNCATED] = "truncated",
	[VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE] = "hold_outside",
	[VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED] = "hold_unaligned",
	[VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE] = "hold_duplicate",
	[VIRTIO_HUGEROOM_INJ_HOLD_HELD] = "hold_held",
	[VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED] = "hold_oversized",
};

/* A request id no daemon hands out, for injected HOLDs. */
#define VIRTIO_HUGEROOM_INJ_REQUEST	(U64_MAX - 1)
/* Block aligned, far outside any guest's RAM (SPEC caps pfns at 2^52). */
#define VIRTIO_HUGEROOM_INJ_FAR_GPA	BIT_ULL(50)

/*
 * Send a hostile HOLD of kind @what on eventq; the device must reject it
 * whole (ACK_INVALID) and discard nothing.  Only addresses that cannot
 * hurt the guest should a device accept them: far outside RAM, or blocks
 * the device holds (and so has discarded) already.
 */
static int virtio_hugeroom_inject_hold(struct virtio_hugeroom *vh, int what)
{
	struct virtio_hugeroom_evbuf *eb;
	struct virtio_hugeroom_blocks *msg;
	__le64 *gpas;
	u32 nr = 1, len;
	u64 held = 0;
	int rc;

	spin_lock(&vh->hold_lock);
	if (!list_empty(&vh->held))
		held = PFN_PHYS(page_to_pfn(list_first_entry(&vh->held,
							     struct page,
							     lru)));
	spin_unlock(&vh->hold_lock);
	if (!held && what != VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE &&
	    what != VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED)
		return -ENODATA;

	mutex_lock(&vh->event_lock);
	eb = virtio_hugeroom_event_get(vh);
	if (!eb) {
		mutex_unlock(&vh->event_lock);
		return -EBUSY;
	}
	msg = eb->msg;
	gpas = (void *)(msg + 1);
	memset(msg, 0, sizeof(*msg));
	msg->hdr.type = cpu_to_le16(VIRTIO_HUGEROOM_MSG_HOLD);
	msg->hdr.request_id = cpu_to_le64(VIRTIO_HUGEROOM_INJ_REQUEST);
	switch (what) {
	case VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE:
		gpas[0] = cpu_to_le64(VIRTIO_HUGEROOM_INJ_FAR_GPA);
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED:
		gpas[0] = cpu_to_le64(VIRTIO_HUGEROOM_INJ_FAR_GPA + PAGE_SIZE);
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE:
		gpas[0] = cpu_to_le64(held);
		gpas[1] = cpu_to_le64(held);
		nr = 2;
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_HELD:
		gpas[0] = cpu_to_le64(held);
		break;
	default:
		/* nr_blocks * 8 wraps to 8 in 32 bits: one gpa sent. */
		gpas[0] = cpu_to_le64(held);
		nr = 0x20000001;
		break;
	}
	len = sizeof(*msg) + sizeof(*gpas) *
	      (what == VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED ? 1 : nr);
	msg->hdr.len = cpu_to_le32(len);
	msg->nr_blocks = cpu_to_le32(nr);
	rc = virtio_hugeroom_event_send(vh, eb, len, NULL);
	mutex_unlock(&vh->event_lock);
	dev_info(&vh->vdev->dev, "injected %s (%u bytes): ack %d\n",
		 virtio_hugeroom_inject_names[what], len, rc);
	if (!rc)
		dev_warn(&vh->vdev->dev, "device accepted a hostile %s\n",
			 virtio_hugeroom_inject_names[what]);
	/* Rejected is the expected outcome; a transport failure is not. */
	return rc == -EINVAL || !rc ? 0 : rc;
}

/*
 * Derive a malformed STATUS of kind @what from the last report into
 * vh->inject.  Returns the number of bytes to send.  report_lock held.
 */
static u32 virtio_hugeroom_make_inject(struct virtio_hugeroom *vh, int what)
{
	struct virtio_hugeroom_status *st = vh->inject;
	struct virtio_hugeroom_zone *z = (void *)(st + 1);
	struct virtio_hugeroom_candidate *c;
	u32 len = vh->report_len;
	u16 nr_zones, nr_cands;
	unsigned int i;

	memcpy(st, vh->report, len);
	nr_zones = le16_to_cpu(st->nr_zones);
	nr_cands = le16_to_cpu(st->nr_candidates);
	c = (void *)&z[nr_zones];

	switch (what) {
	case VIRTIO_HUGEROOM_INJ_BAD_LEN:
		st->hdr.len = cpu_to_le32(len - sizeof(*c));
		break;
	case VIRTIO_HUGEROOM_INJ_BAD_TYPE:
		st->hdr.type = cpu_to_le16(0x7f);
		break;
	case VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE:
		if (!nr_cands) {
			memset(c, 0, sizeof(*c));
			c->free_pages = cpu_to_le16(1);
			c->migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
			st->nr_candidates = cpu_to_le16(1);
			len += sizeof(*c);
		}
		c->gpa = cpu_to_le64(le64_to_cpu(c->gpa) + PAGE_SIZE);
		break;
	case VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES:
		/* Consistent length, but more zones than any device accepts. */
		for (i = 1; i <= VIRTIO_HUGEROOM_MAX_ZONES; i++)
			z[i] = z[0];
		st->nr_zones = cpu_to_le16(VIRTIO_HUGEROOM_MAX_ZONES + 1);
		st->nr_candidates = 0;
		len = sizeof(*st) + (VIRTIO_HUGEROOM_MAX_ZONES + 1) * sizeof(*z);
		break;
	case VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME:
		/* Not NUL terminated, and not printable. */
		memset(z->name, 0x01, sizeof(z->name));
		break;
	case VIRTIO_HUGEROOM_INJ_TRUNCATED:
		/* hdr.len promises the whole report; half a zone arrives. */
		return sizeof(*st) + sizeof(*z) / 2;
	}
	if (what != VIRTIO_HUGEROOM_INJ_BAD_LEN)
		st->hdr.len = cpu_to_le32(len);
	return len;
}

static ssize_t virtio_hugeroom_inject_write(struct file *file,
					    const char __user *ubuf,
					    size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	char name[32];
	size_t n = min(count, sizeof(name) - 1);
	int what, rc;
	u32 len;

	if (copy_from_user(name, ubuf, n))
		return -EFAULT;
	name[n] = '\0';
	what = sysfs_match_string(virtio_hugeroom_inject_names, strim(name));
	if (what < 0)
		return what;
	if (what >= VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE) {
		if (!virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_HOLD))
			return -EOPNOTSUPP;
		rc = virtio_hugeroom_inject_hold(vh, what);
		return rc ? rc : count;
	}

	mutex_lock(&vh->report_lock);
	if (!vh->report_len) {
		/* Injections are derived from a report the device accepted. */
		rc = -ENODATA;
		goto out_unlock;
	}
	rc = virtio_hugeroom_status_reap(vh, true);
	if (rc)
		goto out_unlock;
	len = virtio_hugeroom_make_inject(vh, what);
	rc = virtio_hugeroom_status_send(vh, vh->inject, len);
	dev_info(&vh->vdev->dev, "injected %s (%u bytes): %d\n",
		 virtio_hugeroom_inject_names[what], len, rc);
out_unlock:
	mutex_unlock(&vh->report_lock);
	return rc ? rc : count;
}

static const struct file_operations virtio_hugeroom_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_inject_write,
	.llseek = noop_llseek,
};

/* "sweep_delay_ms": EVACUATE CHEAPEST's sweep, slowed down per batch. */
static void virtio_hugeroom_fault_scan(struct virtio_hugeroom_scan *s)
{
	unsigned int ms = READ_ONCE(s->fault_delay_ms);

	if (ms)
		msleep(ms);
}

/* Kick a chain held back by "event_stall", now that the next is written. */
static void virtio_hugeroom_fault_event_send(struct virtio_hugeroom *vh)
{
	if (!vh->fault_stalled)
		return;
	vh->fault_stalled = false;
	virtqueue_kick(vh->event_vq);
}

/* Should the chain just added stay unkicked ("event_stall")? */
static bool virtio_hugeroom_fault_event_stall(struct virtio_hugeroom *vh)
{
	if (!vh->fault_stall_next)
		return false;
	vh->fault_stall_next = false;
	vh->fault_stalled = true;
	return true;
}

/*
 * "fault_inject", a test aid: writing "event_stall" makes the device see
 * the next eventq chain only when the driver is about to send the one
 * after it, well past the ack timeout, as a stalled device would;
 * "sweep_delay_ms N" makes EVACUATE CHEAPEST's sweep sleep N ms every
 * VIRTIO_HUGEROOM_SCAN_BATCH blocks, as on a guest of many TiB.
 */
static ssize_t virtio_hugeroom_fault_write(struct file *file,
					   const char __user *ubuf,
					   size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	char buf[32], *p;
	size_t n = min(count, sizeof(buf) - 1);
	unsigned int ms;
	int rc;

	if (copy_from_user(buf, ubuf, n))
		return -EFAULT;
	buf[n] = '\0';
	p = strim(buf);
	if (str_has_prefix(p, "sweep_delay_ms ")) {
		rc = kstrtouint(strim(p + strlen("sweep_delay_ms ")), 0, &ms);
		if (rc)
			return rc;
		WRITE_ONCE(vh->evac_scan.fault_delay_ms, min(ms, 10000U));
		return count;
	}
	if (strcmp(p, "event_stall"))
		return -EINVAL;
	mutex_lock(&vh->event_lock);
	vh->fault_stall_next = true;
	mutex_unlock(&vh->event_lock);
	return count;
}

static const struct file_operations virtio_hugeroom_fault_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_fault_write,
	.llseek = noop_llseek,
};

static int virtio_hugeroom_test_init(struct virtio_hugeroom *vh)
{
	mutex_init(&vh->pin_lock);
	/* Virtqueue buffers must be in the linear map: kmalloc. */
	vh->inject = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
	return vh->inject ? 0 : -ENOMEM;
}

/* After the device is stopped. */
static void virtio_hugeroom_test_fini(struct virtio_hugeroom *vh)
{
	virtio_hugeroom_unpin(vh);
	kfree(vh->inject);
	vh->inject = NULL;
}

static void virtio_hugeroom_test_debugfs(struct virtio_hugeroom *vh,
					 struct dentry *dir)
{
	dev_warn(&vh->vdev->dev,
		 "test build: debugfs can pin memory and inject faults\n");
	debugfs_create_file("inject", 0200, dir, vh,
			    &virtio_hugeroom_inject_fops);
	debugfs_create_file("pin_unmovable", 0600, dir, vh,
			    &virtio_hugeroom_pin_fops);
	debugfs_create_file("fault_inject", 0200, dir, vh,
			    &virtio_hugeroom_fault_fops);
}
#else
static void virtio_hugeroom_fault_scan(struct virtio_hugeroom_scan *s)
{
}

static void virtio_hugeroom_fault_event_send(struct virtio_hugeroom *vh)
{
}

static bool virtio_hugeroom_fault_event_stall(struct virtio_hugeroom *vh)
{
	return false;
}

static int virtio_hugeroom_test_init(struct virtio_hugeroom *vh)
{
	return 0;
}

static void virtio_hugeroom_test_fini(struct virtio_hugeroom *vh)
{
}

static void virtio_hugeroom_test_debugfs(struct virtio_hugeroom *vh,
					 struct dentry *dir)
{
}
#endif /* CONFIG_VIRTIO_HUGEROOM_TEST */
static void virtio_hugeroom_debugfs_init(struct virtio_hugeroom *vh)
{
	struct dentry *dir;

	dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	if (IS_ERR(dir)) {
		/* A second device: only the first one gets debugfs files. */
		dev_info(&vh->vdev->dev, "no debugfs directory: %ld\n",
			 PTR_ERR(dir));
		return;
	}
	vh->debugfs = dir;
	debugfs_create_file("status", 0400, dir, vh,
			    &virtio_hugeroom_status_fops);
	debugfs_create_file("report_now", 0200, dir, vh,
			    &virtio_hugeroom_report_now_fops);
	debugfs_create_file("held", 0400, dir, vh, &virtio_hugeroom_held_fops);
	virtio_hugeroom_test_debugfs(vh, dir);
}

/* ---------------------------------------------------------------------- */
/* Device lifecycle */

static int virtio_hugeroom_init_vqs(struct virtio_hugeroom *vh)
{
	struct virtqueue *vqs[VIRTIO_HUGEROOM_NR_VQS];
	int rc;

#ifdef VIRTIO_HUGEROOM_HAVE_VQ_INFO
	struct virtqueue_info vqs_info[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = { "status",
						virtio_hugeroom_status_done },
		[VIRTIO_HUGEROOM_VQ_CMD] = { "cmd", virtio_hugeroom_cmd_ready },
		[VIRTIO_HUGEROOM_VQ_EVENT] = { "event",
					       virtio_hugeroom_event_done },
	};

	rc = virtio_find_vqs(vh->vdev, VIRTIO_HUGEROOM_NR_VQS, vqs, vqs_info,
			     NULL);
#else
	vq_callback_t *callbacks[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = virtio_hugeroom_status_done,
		[VIRTIO_HUGEROOM_VQ_CMD] = virtio_hugeroom_cmd_ready,
		[VIRTIO_HUGEROOM_VQ_EVENT] = virtio_hugeroom_event_done,
	};
	static const char * const names[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = "status",
		[VIRTIO_HUGEROOM_VQ_CMD] = "cmd",
		[VIRTIO_HUGEROOM_VQ_EVENT] = "event",
	};

	rc = virtio_find_vqs(vh->vdev, VIRTIO_HUGEROOM_NR_VQS, vqs, callbacks,
			     names, NULL);
#endif
	if (rc)
		return rc;
	vh->status_vq = vqs[VIRTIO_HUGEROOM_VQ_STATUS];
	vh->cmd_vq = vqs[VIRTIO_HUGEROOM_VQ_CMD];
	vh->event_vq = vqs[VIRTIO_HUGEROOM_VQ_EVENT];
	return 0;
}

/*
 * Bring the queues up and the device live: post the command buffers, set
 * DRIVER_OK, and send the first report.  Used by probe and restore.
 */
static int virtio_hugeroom_start(struct virtio_hugeroom *vh)
{
	unsigned long flags;
	int rc;

	rc = virtio_hugeroom_init_vqs(vh);
	if (rc)
		return rc;
	rc = virtio_hugeroom_post_cmd_bufs(vh);
	if (rc)
		goto out_del_vqs;

	virtio_hugeroom_read_config(vh);
	virtio_device_ready(vh->vdev);
	virtqueue_kick(vh->cmd_vq);

	mutex_lock(&vh->report_lock);
	mutex_lock(&vh->event_lock);
	vh->ready = true;
	mutex_unlock(&vh->event_lock);
	mutex_unlock(&vh->report_lock);

	spin_lock_irqsave(&vh->stop_lock, flags);
	vh->stop = false;
	spin_unlock_irqrestore(&vh->stop_lock, flags);
	/* Commands or config changes may have come before work could. */
	virtio_hugeroom_queue_work(vh, &vh->cmd_work);
	virtio_hugeroom_queue_work(vh, &vh->config_work);
	if (virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_STATUS))
		virtio_hugeroom_arm_status(vh, 0);
	return 0;

out_del_vqs:
	vh->vdev->config->del_vqs(vh->vdev);
	return rc;
}

/* Stop all work and take the device down; the inverse of _start(). */
static void virtio_hugeroom_stop(struct virtio_hugeroom *vh)
{
	unsigned long flags;
	u64 orphan = 0;

	spin_lock_irqsave(&vh->stop_lock, flags);
	vh->stop = true;
	spin_unlock_irqrestore(&vh->stop_lock, flags);
	/* A running EVACUATE/CAPTURE stops between blocks (SPEC 1.6.3.2 11). */
	spin_lock(&vh->job_lock);
	vh->job_cancel = true;
	spin_unlock(&vh->job_lock);
	cancel_work_sync(&vh->config_work);
	cancel_work_sync(&vh->cmd_work);
	cancel_delayed_work_sync(&vh->status_work);
	cancel_work_sync(&vh->job_work);
	/* A job that was accepted but never started still owes a RESULT. */
	spin_lock(&vh->job_lock);
	if (vh->job_busy)
		orphan = vh->job_id;
	vh->job_busy = false;
	vh->job_cancel = false;
	spin_unlock(&vh->job_lock);
	if (orphan)
		virtio_hugeroom_send_result(vh, orphan,
					    VIRTIO_HUGEROOM_S_CANCELLED);

	/*
	 * Give every held block back before the reset (SPEC 1.6.6.1 item 4).
	 * return_lock stays held until the lists are empty, so that no
	 * shrinker or OOM notifier has blocks in flight across the reset.
	 */
	mutex_lock(&vh->return_lock);
	virtio_hugeroom_return_locked(vh, NULL, UINT_MAX,
				      VIRTIO_HUGEROOM_RET_UNLOAD, 0, false);

	mutex_lock(&vh->report_lock);
	mutex_lock(&vh->event_lock);
	vh->ready = false;
	mutex_unlock(&vh->event_lock);
	mutex_unlock(&vh->report_lock);

	/* SPEC 1.6.7.1 item 4: the guest's own PCP sizing across the reset. */
	hr_pcp_restore(&vh->vdev->dev);
	virtio_reset_device(vh->vdev);
	/* All buffers are ours and preallocated: nothing to free per buffer. */
	vh->status_inflight = NULL;
	virtio_hugeroom_event_reset(vh);
	vh->vdev->config->del_vqs(vh->vdev);
	/*
	 * The reset emptied the device's held set: blocks a broken device
	 * did not take back, and blocks in limbo, are safe to reuse now.
	 */
	virtio_hugeroom_release_all(vh);
	mutex_unlock(&vh->return_lock);
}

/*
 * Before the freezer runs: end a running EVACUATE or CAPTURE (it sends its
 * S_CANCELLED RESULT while the device still works) and start none until
 * the guest is back.  The workqueue is not freezable, so nothing else
 * would stop a job that runs for minutes; ->freeze stops the rest.  Runs
 * in the suspending task; sleeps.
 */
static int virtio_hugeroom_pm_notify(struct notifier_block *nb,
				     unsigned long action, void *unused)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  pm_nb);

	switch (action) {
	case PM_HIBERNATION_PREPARE:
	case PM_SUSPEND_PREPARE:
		spin_lock(&vh->job_lock);
		vh->job_blocked = true;
		if (vh->job_busy)
			vh->job_cancel = true;
		spin_unlock(&vh->job_lock);
		flush_work(&vh->job_work);
		break;
	case PM_POST_HIBERNATION:
	case PM_POST_SUSPEND:
		spin_lock(&vh->job_lock);
		vh->job_blocked = false;
		spin_unlock(&vh->job_lock);
		break;
	}
	return NOTIFY_OK;
}

static void virtio_hugeroom_free(struct virtio_hugeroom *vh)
{
	unsigned int i;

	kvfree(vh->evac_scan.done);
	kvfree(vh->evac_scan.cur);
	kfree(vh->job_events);
	kfree(vh->job_cmd);
	kvfree(vh->scan.done);
	kvfree(vh->scan.cur);
	kfree(vh->vm_events);
	kfree(vh->cmd_copy);
	kfree(vh->cmd_bufs);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		kfree(vh->evbufs[i].ack);
		kfree(vh->evbufs[i].msg);
	}
	virtio_hugeroom_test_fini(vh);
	kfree(vh->report);
	kfree(vh);
}

static int virtio_hugeroom_probe(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh;
	u32 block_order;
	int rc;

	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_config) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_hdr) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_status) != 208);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_zone) != 256);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_candidate) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_result) != 80);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_ack) != 8);
	BUILD_BUG_ON(ARRAY_SIZE(virtio_hugeroom_vmstat_names) !=
		     VIRTIO_HUGEROOM_NR_VMSTAT);
	/* The largest injected message: one zone more than allowed. */
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_status) +
		     (VIRTIO_HUGEROOM_MAX_ZONES + 1) *
		     sizeof(struct virtio_hugeroom_zone) >
		     VIRTIO_HUGEROOM_MAX_MSG);

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config access disabled\n");
		return -EINVAL;
	}
	virtio_cread_le(vdev, struct virtio_hugeroom_config, block_order,
			&block_order);
	if (block_order != VIRTIO_HUGEROOM_BLOCK_ORDER ||
	    pageblock_order + PAGE_SHIFT != VIRTIO_HUGEROOM_BLOCK_ORDER) {
		dev_err(&vdev->dev,
			"device block order %u, guest pageblocks 2^%u bytes: need both %u\n",
			block_order, (unsigned int)(pageblock_order + PAGE_SHIFT),
			VIRTIO_HUGEROOM_BLOCK_ORDER);
		return -EINVAL;
	}

	vh = kzalloc(sizeof(*vh), GFP_KERNEL);
	if (!vh)
		return -ENOMEM;
	vdev->priv = vh;
	vh->vdev = vdev;
	spin_lock_init(&vh->stop_lock);
	vh->stop = true;
	mutex_init(&vh->report_lock);
	mutex_init(&vh->event_lock);
	init_waitqueue_head(&vh->status_acked);
	init_waitqueue_head(&vh->event_acked);
	INIT_WORK(&vh->cmd_work, virtio_hugeroom_cmd_work);
	INIT_WORK(&vh->config_work, virtio_hugeroom_config_work);
	INIT_DELAYED_WORK(&vh->status_work, virtio_hugeroom_status_work);
	INIT_WORK(&vh->job_work, virtio_hugeroom_job_work);
	vh->scan.nid = NUMA_NO_NODE;
	vh->evac_scan.nid = NUMA_NO_NODE;
	spin_lock_init(&vh->hold_lock);
	INIT_LIST_HEAD(&vh->held);
	INIT_LIST_HEAD(&vh->limbo);
	mutex_init(&vh->return_lock);
	spin_lock_init(&vh->job_lock);
	vh->oom_nb.notifier_call = virtio_hugeroom_oom_notify;
	vh->pm_nb.notifier_call = virtio_hugeroom_pm_notify;
	vh->memory_nb.notifier_call = virtio_hugeroom_memory_notify;

	rc = -ENOMEM;
	/* Virtqueue buffers must be in the linear map: kmalloc, not vmalloc. */
	vh->report = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
	vh->cmd_bufs = kcalloc(VIRTIO_HUGEROOM_NR_CMD_BUFS,
			       VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->cmd_copy = kmalloc(VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->vm_events = kcalloc(NR_VM_EVENT_ITEMS, sizeof(*vh->vm_events),
				GFP_KERNEL);
	vh->scan.cur = kvzalloc(sizeof(*vh->scan.cur), GFP_KERNEL);
	vh->scan.done = kvzalloc(sizeof(*vh->scan.done), GFP_KERNEL);
	vh->job_cmd = kmalloc(VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->job_events = kcalloc(NR_VM_EVENT_ITEMS, sizeof(*vh->job_events),
				 GFP_KERNEL);
	vh->evac_scan.cur = kvzalloc(sizeof(*vh->evac_scan.cur), GFP_KERNEL);
	vh->evac_scan.done = kvzalloc(sizeof(*vh->evac_scan.done), GFP_KERNEL);
	if (!vh->report || virtio_hugeroom_event_alloc(vh) ||
	    !vh->cmd_bufs || !vh->cmd_copy || !vh->vm_events ||
	    !vh->scan.cur || !vh->scan.done || !vh->job_cmd ||
	    !vh->job_events || !vh->evac_scan.cur || !vh->evac_scan.done ||
	    virtio_hugeroom_test_init(vh))
		goto out_free;

	/*
	 * Not ordered: job_work (EVACUATE, CAPTURE) runs for long, and
	 * cmd_work must still take CANCEL, RETURN and REPORT meanwhile.  Not
	 * freezable: the freezer would wait for a long job until suspend
	 * fails; the PM notifier ends the job first instead.
	 */
	vh->wq = alloc_workqueue("virtio_hugeroom", WQ_UNBOUND, 0);
	if (!vh->wq)
		goto out_free;

	if (!virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_STATUS))
		dev_info(&vdev->dev, "device does not take status reports\n");

	rc = virtio_hugeroom_start(vh);
	if (rc)
		goto out_destroy_wq;
	if (virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_HOLD)) {
		rc = virtio_hugeroom_shrinker_register(vh);
		if (rc)
			goto out_stop;
		rc = register_oom_notifier(&vh->oom_nb);
		if (rc)
			goto out_shrinker;
		vh->oom_registered = true;
		rc = register_memory_notifier(&vh->memory_nb);
		if (rc)
			goto out_oom;
		vh->memory_registered = true;
	}
	rc = register_pm_notifier(&vh->pm_nb);
	if (rc)
		goto out_memory;
	vh->pm_registered = true;
	virtio_hugeroom_debugfs_init(vh);
	return 0;

out_memory:
	if (vh->memory_registered)
		unregister_memory_notifier(&vh->memory_nb);
out_oom:
	if (vh->oom_registered)
		unregister_oom_notifier(&vh->oom_nb);
out_shrinker:
	virtio_hugeroom_shrinker_unregister(vh);
out_stop:
	virtio_hugeroom_stop(vh);
out_destroy_wq:
	destroy_workqueue(vh->wq);
out_free:
	virtio_hugeroom_free(vh);
	vdev->priv = NULL;
	return rc;
}

static void virtio_hugeroom_remove(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh = vdev->priv;

	/* Waits for debugfs readers and writers that are still inside. */
	debugfs_remove_recursive(vh->debugfs);
	if (vh->pm_registered)
		unregister_pm_notifier(&vh->pm_nb);
	if (vh->memory_registered)
		unregister_memory_notifier(&vh->memory_nb);
	if (vh->oom_registered)
		unregister_oom_notifier(&vh->oom_nb);
	virtio_hugeroom_shrinker_unregister(vh);
	virtio_hugeroom_stop(vh);
	destroy_workqueue(vh->wq);
	virtio_hugeroom_free(vh);
	vdev->priv = NULL;
}

#ifdef CONFIG_PM_SLEEP
static int virtio_hugeroom_freeze(struct virtio_device *vdev)
{
	virtio_hugeroom_stop(vdev->priv);
	return 0;
}

static int virtio_hugeroom_restore(struct virtio_device *vdev)
{
	return virtio_hugeroom_start(vdev->priv);
}
#endif

static unsigned int virtio_hugeroom_features[] = {
	VIRTIO_HUGEROOM_F_STATUS,
	VIRTIO_HUGEROOM_F_EVACUATE,
	VIRTIO_HUGEROOM_F_HOLD,
	VIRTIO_HUGEROOM_F_PCP,
	VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM,
};

/* SPEC 1.3.1 item 2: no EVACUATE or DEFLATE_ON_OOM without HOLD. */
static int virtio_hugeroom_validate(struct virtio_device *vdev)
{
	if (!virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_HOLD)) {
		__virtio_clear_bit(vdev, VIRTIO_HUGEROOM_F_EVACUATE);
		__virtio_clear_bit(vdev, VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM);
	}
	return 0;
}

static const struct virtio_device_id virtio_hugeroom_id_table[] = {
	{ VIRTIO_ID_HUGEROOM, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static struct virtio_driver virtio_hugeroom_driver = {
	.feature_table = virtio_hugeroom_features,
	.feature_table_size = ARRAY_SIZE(virtio_hugeroom_features),
	.driver.name = KBUILD_MODNAME,
	.id_table = virtio_hugeroom_id_table,
	.validate = virtio_hugeroom_validate,
	.probe = virtio_hugeroom_probe,
	.remove = virtio_hugeroom_remove,
	.config_changed = virtio_hugeroom_config_changed,
#ifdef CONFIG_PM_SLEEP
	.freeze = virtio_hugeroom_freeze,
	.restore = virtio_hugeroom_restore,
#endif
};

module_virtio_driver(virtio_hugeroom_driver);
MODULE_DEVICE_TABLE(virtio, virtio_hugeroom_id_table);
MODULE_DESCRIPTION("Virtio hugeroom driver: free-list reports and 2 MiB holds for the host");
MODULE_LICENSE("GPL");

/* One unit until the driver is split into objects (hr_*.o in Kbuild). */
#include "hr_pcp.c"
