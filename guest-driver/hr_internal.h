/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-hugeroom guest driver: what the files of the module share.
 *
 * The module is one driver in several files, each with one job:
 *   hr_dev.c      the device: virtqueues, probe/remove/PM, the command
 *                 worker and its dispatch switch
 *   hr_event.c    the eventq senders: chains, acks, late acks handed up
 *   hr_cmd.c      the command decoder: the checks a host command passes
 *                 before it is acted on (also built in user space, for
 *                 tests/fuzz)
 *   hr_report.c   STATUS reports: the pageblock sweep, the free-list and
 *                 zone counts, the statusq
 *   hr_hold.c     holds and reclaim: holding blocks, RETURNED and RETURN,
 *                 the pressure trigger, the shrinker, the OOM and
 *                 memory-offline notifiers, the claims' storage
 *   hr_evac.c     EVACUATE and CAPTURE: the job, admission, hole claims
 *   hr_debugfs.c  the debugfs files every build has
 *   hr_test.c     the test aids (debugfs pin_unmovable, inject,
 *                 fault_inject), only in a test build
 *                 (CONFIG_VIRTIO_HUGEROOM_TEST=y); stubs below otherwise
 *   hr_compat.h   kernel-version and kernel-feature shims
 *
 * Lock order.  A lock on the left may be held while taking one on its
 * right, never the reverse:
 *
 *   return_lock -> report_lock -> event_lock -> hold_lock
 *
 * * return_lock (mutex) serializes everything that gives blocks back;
 *   taken before the others (the stop path holds it across the reset).
 * * report_lock (mutex) owns the statusq and the report; held while
 *   waiting for the device, and while zone->lock is taken to count free
 *   lists.  status_show takes event_lock and hold_lock under it.
 * * event_lock (mutex) owns the eventq; held while waiting for an ack.
 *   HOLD settling takes hold_lock under it.
 * * hold_lock (spinlock, from reclaim too) protects the held and limbo
 *   lists and the hold counters; nothing is taken under it.
 * * job_lock, stop_lock (irqsave: taken from virtqueue callbacks) and the
 *   test build's pin_lock are leaves: nothing else is taken under them,
 *   and they are not taken under hold_lock.
 *
 * No allocation that may reclaim runs under return_lock or event_lock:
 * the OOM notifier waits for both, and the shrinker only trylocks them.
 * Sleeping: report_lock and event_lock are held across waits of up to
 * VIRTIO_HUGEROOM_TX_TIMEOUT; work that sleeps runs on vh->wq (unbound,
 * not freezable), on vh->job_worker (EVACUATE and CAPTURE, not freezable
 * either) or in the notifying task.
 */
#ifndef _HR_INTERNAL_H
#define _HR_INTERNAL_H

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/memory.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/oom.h>
#include <linux/pageblock-flags.h>
#include <linux/page-flags.h>
#include <linux/pagemap.h>
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
#include "hr_compat.h"
#ifdef VIRTIO_HUGEROOM_CLAIMS_BALLOON
#include <linux/balloon.h>
#endif
#include "hr_cmd.h"

#define VIRTIO_HUGEROOM_NR_CMD_BUFS	8
/* eventq chains: one being sent, the rest for chains stuck with the device. */
#define VIRTIO_HUGEROOM_NR_EVENT_BUFS	4
/* How long the device may keep a statusq/eventq buffer before we give up. */
#define VIRTIO_HUGEROOM_TX_TIMEOUT	(5 * HZ)
/*
 * Per-report scan budget; see "Report contents" in hr_report.c.  The time
 * budget is 1% of the report period (SPEC 1.6.2.1 item 10), within these
 * bounds.
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
 * Evacuation and holds (see "Holding blocks" in hr_evac.c).  A HOLD goes
 * out every VIRTIO_HUGEROOM_HOLD_BATCH blocks or every second, a PROGRESS
 * every second or every VIRTIO_HUGEROOM_HOLD_BATCH blocks but at most ten a
 * second.
 */
#define VIRTIO_HUGEROOM_HOLD_BATCH	32
#define VIRTIO_HUGEROOM_HOLD_NS		NSEC_PER_SEC
#define VIRTIO_HUGEROOM_PROGRESS_NS	NSEC_PER_SEC
#define VIRTIO_HUGEROOM_PROGRESS_MIN_NS	(NSEC_PER_SEC / 10)
/* alloc_contig_range() attempts per block on -EBUSY, as virtio-mem does. */
#define VIRTIO_HUGEROOM_EVAC_TRIES	5
/* the most named blocks one alloc_contig_range() empties (hr_evac.c) */
#define VIRTIO_HUGEROOM_SPAN_MAX	64
/* A candidate with this many fewer free pages than its sweep counted. */
#define VIRTIO_HUGEROOM_STALE_PAGES	32
#define VIRTIO_HUGEROOM_STALE_SWEEPS	8
/* Blocks a pass claims the free pages of before it migrates (hr_evac.c). */
#define VIRTIO_HUGEROOM_MAX_CLAIMS	VIRTIO_HUGEROOM_MAX_CANDIDATES
/* Pages of a claimed block (one bit each, hr_evac.c): a pageblock. */
#define VIRTIO_HUGEROOM_CLAIM_BITS	512
/* Pages a command migrates before it weighs claims against migrations. */
#define VIRTIO_HUGEROOM_CLAIM_PROBE_PAGES	1024
/*
 * claim_holes=1 claims a block whose holes are expected to take this many
 * migrated pages whatever a claim costs, and the last blocks of a pass
 * until the double migrations expected of the rest are at most
 * 1/2^VIRTIO_HUGEROOM_CLAIM_REST_SHIFT of its pages, while the pass's
 * claims take less time than its migrations (hr_evac.c).
 */
#define VIRTIO_HUGEROOM_CLAIM_MIN_PAGES		16
#define VIRTIO_HUGEROOM_CLAIM_REST_SHIFT	5
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
/*
 * The pressure trigger (hr_evac.c, "Pressure trigger"): a poll every
 * VIRTIO_HUGEROOM_PRESSURE_MS while blocks are held.  A zone's margin is
 * 1/2^VIRTIO_HUGEROOM_PRESSURE_MARGIN_SHIFT of its managed pages, at least
 * VIRTIO_HUGEROOM_PRESSURE_MIN_BLOCKS blocks; a drop measured over a poll
 * older than VIRTIO_HUGEROOM_PRESSURE_STALE_MS predicts nothing.
 */
#define VIRTIO_HUGEROOM_PRESSURE_MS		100
#define VIRTIO_HUGEROOM_PRESSURE_STALE_MS	1000
#define VIRTIO_HUGEROOM_PRESSURE_MARGIN_SHIFT	8
#define VIRTIO_HUGEROOM_PRESSURE_MIN_BLOCKS	2
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

struct virtio_hugeroom_claim;

/* A pageblock seen by the scanner that may be worth evacuating. */
struct virtio_hugeroom_cand {
	unsigned long pfn;
	u16 free;
	u16 nid;
	u8 zid;
	u8 mt;			/* enum virtio_hugeroom_mt */
};

#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
/* One block an EVACUATE tried, for debugfs evac_log (a test aid). */
struct virtio_hugeroom_evac_rec {
	unsigned long pfn;
	u32 migrated;
	u16 chosen_free;	/* free pages when chosen */
	u16 free;		/* free pages just before the attempt */
	s8 rc;			/* alloc_contig_range(): 0 taken */
};

#define VIRTIO_HUGEROOM_EVAC_LOG	8192
#endif

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
	unsigned int fault_block_ms;	/* debugfs fault_inject block_delay_ms */
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
	/*
	 * A chain the device gave back after its sender stopped waiting,
	 * settled under event_lock by the layer that sent it (hr_hold.c's
	 * virtio_hugeroom_settle_late(), set at probe): the eventq knows no
	 * message but its own and calls nothing above it.
	 */
	void (*event_late_ack)(struct virtio_hugeroom *vh,
			       struct virtio_hugeroom_evbuf *eb);

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
	/*
	 * Of the blocks taken: how many, their in-use pages when chosen (the
	 * CHEAPEST sweep's count, or the check's for a named block), and the
	 * pages migrated to empty them.  migrated / used above 1 means pages
	 * moved into them after they were chosen (and were moved twice).
	 */
	u64 evac_taken_blocks;
	u64 evac_taken_used;
	u64 evac_taken_migrated;
	/* claiming holes (hr_evac.c): time, alloc_contig_range() calls, failed */
	u64 evac_claim_ns;
	u64 evac_claim_calls;
	u64 evac_claim_failed;
	/*
	 * Where an evacuation's time goes (hr_evac.c, under hold_lock): the
	 * sweeps of the CHEAPEST form, alloc_contig_range() of the blocks
	 * (with its tries), taking a freed block offline, the HOLDs' round
	 * trips; the rest of the command's elapsed time is checks and claims.
	 */
	u64 evac_sweep_ns;
	u64 evac_block_ns;
	u64 evac_block_calls;
	/* of those, calls over several blocks and the blocks they took */
	u64 evac_span_calls;
	u64 evac_span_blocks;
	u64 evac_call_enomem;		/* alloc_contig_range() -ENOMEM */
	u64 evac_take_ns;
	u64 evac_hold_ns;
	u64 evac_hold_sends;
	/* claimed pages given back under pressure (under hold_lock) */
	u64 claims_pressure;
	/*
	 * The running pass's claims, @nr_claims of them, @nr_claimed pages
	 * now, and pages given up to someone's isolation, ever: under the
	 * claim lock (hr_evac.c), read locklessly as hints.
	 */
	struct virtio_hugeroom_claim *claims;
	unsigned int nr_claims;
	unsigned long nr_claimed;
	u64 claims_isolated;
	struct mutex return_lock;	/* see above */

	/*
	 * The pressure trigger, a delayed work queued while blocks are held
	 * (never once @stop is set).  Its fields are written by that work
	 * only; @pressure_ahead and the counters are read locklessly (the
	 * admission rule, debugfs).  @pages_taken: pages the job took from
	 * the allocator, ever; @pages_taking: those of the
	 * alloc_contig_range() call under way (its holes are isolated and its
	 * targets allocated before run_take() counts them), @taking_calls:
	 * such calls started, ever; written by job_work only.
	 */
	struct delayed_work pressure_work;
	unsigned long pressure_last[VIRTIO_HUGEROOM_MAX_ZONES];
	u64 pressure_last_ns;
	u64 pressure_taken_seen;
	u64 pressure_calls_seen;
	unsigned long pressure_ahead;	/* pages: the largest predicted drop */
	u64 pressure_polls;
	u64 pressure_idle_ns;		/* time spent in polls that gave none */
	u64 pressure_returns;		/* polls that gave blocks back */
	u64 pressure_blocks;		/* blocks they gave back */
	u64 pages_taken;
	u64 pages_taking;
	u64 taking_calls;

	/*
	 * The one EVACUATE or CAPTURE that may run, in job_work on the
	 * device's own kthread worker, job_worker (at evac_nice).  job_lock
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
	struct kthread_worker *job_worker;
	struct kthread_work job_work;
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
	/* debugfs evac_log: the blocks the last job tried, under hold_lock */
	struct virtio_hugeroom_evac_rec *evac_log;
	unsigned int nr_evac_log;
#endif

	struct dentry *debugfs;
};

/*
 * The free pages of a block a pass will empty, claimed (see "Claiming
 * holes" in hr_evac.c, "Claims" in hr_hold.c): pages we allocated.  With
 * movable_ops of our own (6.1, 6.12) one bit each in @map, each page's
 * page_private() pointing at its claim while it is claimed; as balloon
 * pages (7.x) on the list of @bal, their page_private() pointing at it.
 * Published in vh->claims, so that pressure gives them back before
 * anything else (virtio_hugeroom_claims_drop()).
 */
struct virtio_hugeroom_claim {
	struct virtio_hugeroom *vh;
	unsigned long pfn;
	/*
	 * Claimed now (on 7.x also while isolated by someone else), under
	 * the claim lock.
	 */
	unsigned int pages;
	unsigned int taken;		/* claimed by the pass, for pages_taken */
	unsigned int used;		/* its in-use pages when planned */
	unsigned int expect;		/* pages expected to move in, planned */
#ifdef VIRTIO_HUGEROOM_CLAIMS_BALLOON
	struct balloon_dev_info bal;
#else
	/* pages of the block claimed now, under the claim lock */
	DECLARE_BITMAP(map, VIRTIO_HUGEROOM_CLAIM_BITS);
#endif
};

/* Counts of one command, as RESULT and PROGRESS carry them. */
struct virtio_hugeroom_counts {
	u32 tried;
	u32 freed;
	u32 failed[VIRTIO_HUGEROOM_NR_REASONS];
	u64 migrated;
	u64 start_ns;
};

/* hr_event.c: the eventq senders */
int virtio_hugeroom_ack_errno(u32 status);
struct virtio_hugeroom_evbuf *
virtio_hugeroom_event_get(struct virtio_hugeroom *vh);
int virtio_hugeroom_event_send(struct virtio_hugeroom *vh,
			       struct virtio_hugeroom_evbuf *eb,
			       u32 len, struct virtio_hugeroom_ack *ack);
void virtio_hugeroom_event_settle(struct virtio_hugeroom *vh);
bool virtio_hugeroom_event_stuck(struct virtio_hugeroom *vh);
int virtio_hugeroom_send_counts(struct virtio_hugeroom *vh, u16 type,
				u64 request_id, u32 status,
				const struct virtio_hugeroom_counts *c);
int virtio_hugeroom_send_result(struct virtio_hugeroom *vh, u64 request_id,
				u32 status);
void virtio_hugeroom_event_reset(struct virtio_hugeroom *vh);
int virtio_hugeroom_event_alloc(struct virtio_hugeroom *vh);

/* hr_report.c: the pageblock sweep and STATUS reports */
u8 virtio_hugeroom_wire_mt(int mt);
int virtio_hugeroom_block_mt(unsigned long pfn);
unsigned int virtio_hugeroom_buddy_order(struct page *page);
unsigned int virtio_hugeroom_block_free(struct page *head, unsigned long pfn);
bool virtio_hugeroom_block_reported(struct page *head, unsigned long pfn);
void virtio_hugeroom_scan(struct virtio_hugeroom_scan *s,
			  unsigned long budget, u64 deadline_ns);
int virtio_hugeroom_status_reap(struct virtio_hugeroom *vh, bool wait);
int virtio_hugeroom_status_send(struct virtio_hugeroom *vh, void *buf,
				u32 len);
int virtio_hugeroom_report(struct virtio_hugeroom *vh, u64 request_id,
			   bool wait);

/* hr_hold.c: holds, claims, giving blocks back */
void virtio_hugeroom_block_offline(unsigned long pfn);
void virtio_hugeroom_block_put(unsigned long pfn, bool managed);
bool virtio_hugeroom_is_held_locked(struct virtio_hugeroom *vh,
				    unsigned long pfn);
int virtio_hugeroom_send_blocks(struct virtio_hugeroom *vh, u16 type,
				u64 request_id, u32 reason,
				struct list_head *list, unsigned int nr,
				u32 *done, bool trylock);
void virtio_hugeroom_settle_late(struct virtio_hugeroom *vh,
				 struct virtio_hugeroom_evbuf *eb);
unsigned int virtio_hugeroom_return_locked(struct virtio_hugeroom *vh,
					   struct list_head *list,
					   unsigned int want,
					   u32 reason, u64 request_id,
					   bool trylock);
void virtio_hugeroom_release_all(struct virtio_hugeroom *vh);
void virtio_hugeroom_do_return(struct virtio_hugeroom *vh,
			       const struct virtio_hugeroom_return *ret);
unsigned long virtio_hugeroom_zone_floor(struct zone *zone);
unsigned long virtio_hugeroom_zone_margin(struct zone *zone);
void virtio_hugeroom_pressure_arm(struct virtio_hugeroom *vh);
void virtio_hugeroom_pressure_work(struct work_struct *work);
int virtio_hugeroom_shrinker_register(struct virtio_hugeroom *vh);
void virtio_hugeroom_shrinker_unregister(struct virtio_hugeroom *vh);
int virtio_hugeroom_oom_notify(struct notifier_block *nb,
			       unsigned long dummy, void *parm);
int virtio_hugeroom_memory_notify(struct notifier_block *nb,
				  unsigned long action, void *arg);
void virtio_hugeroom_claim_add(struct virtio_hugeroom_claim *cl,
			       unsigned long start, unsigned long end);
void virtio_hugeroom_claim_init(struct virtio_hugeroom *vh,
				struct virtio_hugeroom_claim *cl);
unsigned int virtio_hugeroom_claim_release(struct virtio_hugeroom_claim *cl);
void virtio_hugeroom_claims_publish(struct virtio_hugeroom *vh,
				    struct virtio_hugeroom_claim *claims,
				    unsigned int nr);
unsigned long virtio_hugeroom_claims_drop(struct virtio_hugeroom *vh,
					  struct zone *zone,
					  unsigned long want);

/* hr_evac.c: EVACUATE and CAPTURE */
void virtio_hugeroom_job_work(struct kthread_work *work);

/*
 * May @zone hold blocks: populated and not ZONE_DMA (EVACUATE refuses
 * ZONE_DMA blocks with R_ZONE)?
 */
static inline bool virtio_hugeroom_zone_blocks(struct zone *zone)
{
#ifdef CONFIG_ZONE_DMA
	if (zone_idx(zone) == ZONE_DMA)
		return false;
#endif
	return populated_zone(zone);
}

/* hr_debugfs.c */
void virtio_hugeroom_debugfs_init(struct virtio_hugeroom *vh);

/*
 * hr_test.c: test aids, or nothing in the build users load.  The fault
 * hooks the sweep, the job and the eventq call are inline here, on state
 * debugfs fault_inject sets, so that no file below hr_test.c calls it.
 */
#ifdef CONFIG_VIRTIO_HUGEROOM_TEST
/* "sweep_delay_ms": EVACUATE CHEAPEST's sweep, slowed down per batch. */
static inline void virtio_hugeroom_fault_scan(struct virtio_hugeroom_scan *s)
{
	unsigned int ms = READ_ONCE(s->fault_delay_ms);

	if (ms)
		msleep(ms);
}

/* "block_delay_ms": EVACUATE sleeps before each block, claims in place. */
static inline void virtio_hugeroom_fault_block(struct virtio_hugeroom_scan *s)
{
	unsigned int ms = READ_ONCE(s->fault_block_ms);

	if (ms)
		msleep(ms);
}

/* Under "block_delay_ms" each block goes alone, delayed: no spans. */
static inline bool virtio_hugeroom_fault_no_span(struct virtio_hugeroom_scan *s)
{
	return READ_ONCE(s->fault_block_ms) != 0;
}

/*
 * Kick a chain held back by "event_stall", now that the next is written.
 * event_lock held.
 */
static inline void virtio_hugeroom_fault_event_send(struct virtio_hugeroom *vh)
{
	if (!vh->fault_stalled)
		return;
	vh->fault_stalled = false;
	virtqueue_kick(vh->event_vq);
}

/* Should the chain just added stay unkicked ("event_stall")? */
static inline bool
virtio_hugeroom_fault_event_stall(struct virtio_hugeroom *vh)
{
	if (!vh->fault_stall_next)
		return false;
	vh->fault_stall_next = false;
	vh->fault_stalled = true;
	return true;
}

int virtio_hugeroom_test_init(struct virtio_hugeroom *vh);
void virtio_hugeroom_test_fini(struct virtio_hugeroom *vh);
void virtio_hugeroom_test_debugfs(struct virtio_hugeroom *vh,
				  struct dentry *dir);
void virtio_hugeroom_test_evac_start(struct virtio_hugeroom *vh);
void virtio_hugeroom_claims_list(struct virtio_hugeroom *vh,
				 struct seq_file *m);
void virtio_hugeroom_test_evac_rec(struct virtio_hugeroom *vh,
				   unsigned long pfn, unsigned int chosen_free,
				   unsigned int free, u64 migrated, int rc);
#else
static inline void virtio_hugeroom_fault_scan(struct virtio_hugeroom_scan *s)
{
}

static inline void virtio_hugeroom_fault_block(struct virtio_hugeroom_scan *s)
{
}

static inline bool virtio_hugeroom_fault_no_span(struct virtio_hugeroom_scan *s)
{
	return false;
}

static inline void virtio_hugeroom_fault_event_send(struct virtio_hugeroom *vh)
{
}

static inline bool
virtio_hugeroom_fault_event_stall(struct virtio_hugeroom *vh)
{
	return false;
}

static inline int virtio_hugeroom_test_init(struct virtio_hugeroom *vh)
{
	return 0;
}

static inline void virtio_hugeroom_test_fini(struct virtio_hugeroom *vh)
{
}

static inline void virtio_hugeroom_test_debugfs(struct virtio_hugeroom *vh,
						struct dentry *dir)
{
}

static inline void virtio_hugeroom_test_evac_start(struct virtio_hugeroom *vh)
{
}

static inline void
virtio_hugeroom_test_evac_rec(struct virtio_hugeroom *vh, unsigned long pfn,
			      unsigned int chosen_free, unsigned int free,
			      u64 migrated, int rc)
{
}
#endif /* CONFIG_VIRTIO_HUGEROOM_TEST */

#endif /* _HR_INTERNAL_H */
