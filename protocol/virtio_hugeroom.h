/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * virtio-hugeroom: wire definitions shared by the guest driver, the QEMU
 * device and the host daemon.
 *
 * Contract (the full text is protocol/SPEC.md):
 *
 * The device gives the host a view of the guest's free lists and lets the
 * host order targeted compaction ("evacuation") of 2 MiB guest-physical
 * blocks, which the guest then holds like a balloon and the device discards.
 *
 * Three virtqueues, all little-endian, every message starts with
 * struct virtio_hugeroom_hdr:
 *
 *   statusq (0)  driver -> device, out buffers: STATUS reports.
 *   cmdq    (1)  device -> driver: the driver keeps VIRTIO_HUGEROOM_CMD_BUF
 *                sized in buffers posted; the device fills one per command.
 *   eventq  (2)  driver -> device: PROGRESS/RESULT, HOLD and RETURNED lists.
 *                Each eventq chain carries the message in its out part and a
 *                struct virtio_hugeroom_ack in its in part.  A HOLD is acked
 *                only after the device discarded every block it accepted.
 *
 * Every length, count and address is checked by the receiver: a message
 * whose hdr.len differs from the bytes received, whose counts overflow the
 * message, or whose addresses are not block aligned is rejected whole.
 *
 * The device <-> daemon channel (a stream socket) frames messages with
 * struct hr_chan_hdr; see the end of this file.
 */
#ifndef VIRTIO_HUGEROOM_H
#define VIRTIO_HUGEROOM_H

#if defined(QEMU_OSDEP_H)
#include "standard-headers/linux/types.h"
#else
#include <linux/types.h>
#endif

/* Not allocated by OASIS yet: see protocol/SPEC.md "Device ID". */
#ifndef VIRTIO_ID_HUGEROOM
#define VIRTIO_ID_HUGEROOM		57
#endif

/* Device <-> daemon protocol version (SPEC 2.7); 2 adds channel features. */
#define VIRTIO_HUGEROOM_VERSION		2

/* Feature bits. */
#define VIRTIO_HUGEROOM_F_STATUS	0	/* status reports on statusq */
#define VIRTIO_HUGEROOM_F_EVACUATE	1	/* EVACUATE and CAPTURE commands */
#define VIRTIO_HUGEROOM_F_HOLD		2	/* HOLD/RETURN lists, discard */
#define VIRTIO_HUGEROOM_F_PCP		3	/* SET_PCP command */
#define VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM 4	/* driver returns holds under pressure */
#define VIRTIO_HUGEROOM_F_BACKGROUND	5	/* EVACUATE takes EVAC_F_BACKGROUND */

/* Virtqueue indices. */
#define VIRTIO_HUGEROOM_VQ_STATUS	0
#define VIRTIO_HUGEROOM_VQ_CMD		1
#define VIRTIO_HUGEROOM_VQ_EVENT	2
#define VIRTIO_HUGEROOM_NR_VQS		3

/* Limits every party enforces. */
#define VIRTIO_HUGEROOM_BLOCK_ORDER	21	/* log2 of the block size: 2 MiB */
#define VIRTIO_HUGEROOM_BLOCK_SIZE	(1ULL << VIRTIO_HUGEROOM_BLOCK_ORDER)
#define VIRTIO_HUGEROOM_MAX_MSG		65536	/* any message, any queue */
#define VIRTIO_HUGEROOM_CMD_BUF		4096	/* size of each posted cmdq buffer */
#define VIRTIO_HUGEROOM_MAX_ZONES	64
#define VIRTIO_HUGEROOM_MAX_CANDIDATES	2048
#define VIRTIO_HUGEROOM_NR_ORDERS	11	/* orders 0..10 */
#define VIRTIO_HUGEROOM_MAX_CMD_BLOCKS	500	/* gpas in one command */
#define VIRTIO_HUGEROOM_MAX_CMD_RANGES	253	/* ranges in one EVACUATE */
#define VIRTIO_HUGEROOM_MAX_EVT_BLOCKS	8189	/* gpas in one HOLD/RETURNED */

struct virtio_hugeroom_config {
	/* Device -> driver: log2 of the block size, 21. Read-only. */
	__le32 block_order;
	/* Device -> driver: status period in ms, 0 = only on REPORT. */
	__le32 status_interval_ms;
	/* Device -> driver: the most candidates a report may carry. */
	__le32 max_candidates;
	/* Device -> driver: blocks the device currently counts as held. */
	__le32 num_held;
};

/* Message types. Commands travel on cmdq; all others on statusq/eventq. */
enum virtio_hugeroom_msg_type {
	VIRTIO_HUGEROOM_MSG_STATUS	= 1,	/* statusq */
	VIRTIO_HUGEROOM_MSG_RESULT	= 2,	/* eventq: final result */
	VIRTIO_HUGEROOM_MSG_PROGRESS	= 3,	/* eventq: interim result */
	VIRTIO_HUGEROOM_MSG_HOLD	= 4,	/* eventq: blocks now held */
	VIRTIO_HUGEROOM_MSG_RETURNED	= 5,	/* eventq: blocks taken back */

	VIRTIO_HUGEROOM_CMD_REPORT	= 16,	/* send a STATUS now */
	VIRTIO_HUGEROOM_CMD_EVACUATE	= 17,
	VIRTIO_HUGEROOM_CMD_CAPTURE	= 18,
	VIRTIO_HUGEROOM_CMD_RETURN	= 19,
	VIRTIO_HUGEROOM_CMD_SET_PCP	= 20,
	VIRTIO_HUGEROOM_CMD_CANCEL	= 21,
};

struct virtio_hugeroom_hdr {
	__le16 type;		/* enum virtio_hugeroom_msg_type */
	__le16 flags;		/* per type, unknown bits rejected */
	__le32 len;		/* whole message in bytes, header included */
	__le64 request_id;	/* command it answers; 0 if unsolicited */
};

/* Migratetypes as carried on the wire (the guest maps its own). */
enum virtio_hugeroom_mt {
	VIRTIO_HUGEROOM_MT_UNMOVABLE	= 0,
	VIRTIO_HUGEROOM_MT_MOVABLE	= 1,
	VIRTIO_HUGEROOM_MT_RECLAIMABLE	= 2,
	VIRTIO_HUGEROOM_MT_HIGHATOMIC	= 3,
	VIRTIO_HUGEROOM_MT_CMA		= 4,
	VIRTIO_HUGEROOM_MT_ISOLATE	= 5,
	VIRTIO_HUGEROOM_NR_MT		= 6,
};

/*
 * Movable pageblocks by free pages (of 512): [0] all 512 free, [1] >= 448,
 * [2] >= 256, [3] >= 64, [4] >= 1, [5] none free.  Buckets are disjoint.
 */
#define VIRTIO_HUGEROOM_NR_HIST		6

/* Guest VM event counters carried in a status, index = position. */
enum virtio_hugeroom_vmstat {
	VIRTIO_HUGEROOM_VS_COMPACT_STALL = 0,
	VIRTIO_HUGEROOM_VS_COMPACT_FAIL,
	VIRTIO_HUGEROOM_VS_COMPACT_SUCCESS,
	VIRTIO_HUGEROOM_VS_COMPACT_MIGRATE_SCANNED,
	VIRTIO_HUGEROOM_VS_COMPACT_FREE_SCANNED,
	VIRTIO_HUGEROOM_VS_COMPACT_ISOLATED,
	VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_WAKE,
	VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_MIGRATE_SCANNED,
	VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_FREE_SCANNED,
	VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS,
	VIRTIO_HUGEROOM_VS_PGMIGRATE_FAIL,
	VIRTIO_HUGEROOM_VS_THP_FAULT_ALLOC,
	VIRTIO_HUGEROOM_VS_THP_FAULT_FALLBACK,
	VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC,
	VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC_FAILED,
	VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE,
	VIRTIO_HUGEROOM_NR_VMSTAT	/* 16 */
};

struct virtio_hugeroom_zone {
	__le16 nid;
	__u8 zone_idx;		/* enum zone_type of the guest */
	__u8 pcp_policy;	/* enum virtio_hugeroom_pcp_policy in force */
	char name[12];		/* "DMA", "DMA32", "Normal", NUL padded */
	__le64 start_pfn;
	__le64 spanned_pages;
	__le64 managed_pages;
	__le64 free_pages;	/* NR_FREE_PAGES */
	__le64 wmark_min, wmark_low, wmark_high;
	__le64 nr_free[VIRTIO_HUGEROOM_NR_ORDERS];	/* blocks per order */
	/* free pages in blocks of order >= pageblock order, per migratetype */
	__le64 nr_free_pb_mt[VIRTIO_HUGEROOM_NR_MT];
	__le32 hist[VIRTIO_HUGEROOM_NR_HIST];
	/* per-CPU page lists, summed over CPUs (count, high), or as set */
	__le32 pcp_count;
	__le32 pcp_high;
	__le32 pcp_batch;
	__le32 pcp_high_min;	/* 0 where the kernel has none */
	__le32 pcp_high_max;
	__le32 pcp_fraction;	/* percpu_pagelist_high_fraction in force */
};

struct virtio_hugeroom_candidate {
	__le64 gpa;		/* block aligned */
	__le16 free_pages;	/* of 512 */
	__u8 migratetype;	/* enum virtio_hugeroom_mt */
	__u8 zone;		/* index into the status' zone array */
	__le32 reserved;
};

/* Status flags (hdr.flags). */
#define VIRTIO_HUGEROOM_STATUS_F_TRUNCATED	(1 << 0) /* candidates capped */
#define VIRTIO_HUGEROOM_STATUS_F_MT_PARTIAL	(1 << 1) /* mt walk capped */

/*
 * STATUS: hdr, then this, then nr_zones zones, then nr_candidates
 * candidates (cheapest first: most free pages).
 */
struct virtio_hugeroom_status {
	struct virtio_hugeroom_hdr hdr;
	__le64 seq;		/* increments per report */
	__le64 uptime_ns;	/* guest monotonic clock */
	__le64 build_ns;	/* time spent building this report */
	__le64 mem_total_pages;	/* managed pages (MemTotal) */
	__le64 mem_free_pages;
	__le64 mem_available_pages;
	__le32 held_blocks;
	__le32 page_shift;	/* 12 */
	__le32 pb_order;	/* the guest's pageblock order, 9 */
	__le16 nr_zones;
	__le16 nr_candidates;
	__le64 vmstat[VIRTIO_HUGEROOM_NR_VMSTAT];
};

/* Per-block failure reasons in results. */
enum virtio_hugeroom_reason {
	VIRTIO_HUGEROOM_R_UNMOVABLE	= 0,	/* -EBUSY after retries */
	VIRTIO_HUGEROOM_R_OFFLINE	= 1,	/* not online guest RAM */
	VIRTIO_HUGEROOM_R_ZONE		= 2,	/* crosses zones, or not movable */
	VIRTIO_HUGEROOM_R_NOMEM		= 3,	/* -ENOMEM migrating */
	VIRTIO_HUGEROOM_R_BUDGET	= 4,	/* page or time budget spent */
	VIRTIO_HUGEROOM_R_HELD		= 5,	/* already held */
	VIRTIO_HUGEROOM_R_CANCELLED	= 6,
	VIRTIO_HUGEROOM_R_OTHER		= 7,
	VIRTIO_HUGEROOM_NR_REASONS	= 8,
};

/* Final status of a command (RESULT.status). */
enum virtio_hugeroom_result_status {
	VIRTIO_HUGEROOM_S_OK		= 0,	/* did all that was asked */
	VIRTIO_HUGEROOM_S_PARTIAL	= 1,	/* some blocks failed */
	VIRTIO_HUGEROOM_S_BUDGET	= 2,	/* stopped at a budget */
	VIRTIO_HUGEROOM_S_CANCELLED	= 3,
	VIRTIO_HUGEROOM_S_INVALID	= 4,	/* command malformed */
	VIRTIO_HUGEROOM_S_UNSUPPORTED	= 5,	/* feature not negotiated */
	VIRTIO_HUGEROOM_S_BUSY		= 6,	/* another command runs */
};

/* RESULT and PROGRESS: answer hdr.request_id. */
struct virtio_hugeroom_result {
	struct virtio_hugeroom_hdr hdr;
	__le32 status;		/* enum virtio_hugeroom_result_status */
	__le32 blocks_tried;
	__le32 blocks_freed;	/* now held, see the HOLD that precedes */
	__le32 reserved;
	__le32 failed[VIRTIO_HUGEROOM_NR_REASONS];
	__le64 pages_migrated;
	__le64 elapsed_us;
};

/* HOLD and RETURNED: hdr, this, then nr_blocks __le64 gpas. */
struct virtio_hugeroom_blocks {
	struct virtio_hugeroom_hdr hdr;
	__le32 nr_blocks;
	__le32 reason;		/* enum virtio_hugeroom_return_reason (RETURNED) */
};

enum virtio_hugeroom_return_reason {
	VIRTIO_HUGEROOM_RET_HOST	= 0,	/* the host sent RETURN */
	VIRTIO_HUGEROOM_RET_PRESSURE	= 1,	/* guest memory pressure */
	VIRTIO_HUGEROOM_RET_UNLOAD	= 2,	/* driver removed or reset */
};

/* Written by the device into the in part of each eventq chain. */
struct virtio_hugeroom_ack {
	__le32 status;		/* 0 accepted; else enum virtio_hugeroom_ack_status */
	__le32 nr_done;		/* HOLD: blocks discarded */
};

enum virtio_hugeroom_ack_status {
	VIRTIO_HUGEROOM_ACK_OK		= 0,
	VIRTIO_HUGEROOM_ACK_INVALID	= 1,	/* message rejected */
	VIRTIO_HUGEROOM_ACK_NO_DISCARD	= 2,	/* discard disabled on host */
};

/* EVACUATE flags (hdr.flags). */
#define VIRTIO_HUGEROOM_EVAC_F_CHEAPEST	(1 << 0) /* pick count blocks itself */
#define VIRTIO_HUGEROOM_EVAC_F_RANGES	(1 << 1) /* only inside ranges[] */
/* nobody waits for it: below the guest's own tasks (F_BACKGROUND) */
#define VIRTIO_HUGEROOM_EVAC_F_BACKGROUND (1 << 2)

/*
 * EVACUATE: hdr, this, then either nr_gpas __le64 block gpas (explicit) or,
 * with EVAC_F_CHEAPEST, nr_ranges struct virtio_hugeroom_range the guest
 * must stay within (EVAC_F_RANGES) and nr_gpas == 0.
 */
struct virtio_hugeroom_evacuate {
	struct virtio_hugeroom_hdr hdr;
	__le32 count;		/* blocks wanted */
	__le32 nr_gpas;
	__le32 nr_ranges;
	__le32 budget_ms;	/* 0 = no time budget */
	__le64 budget_pages;	/* pages to migrate, 0 = no page budget */
};

struct virtio_hugeroom_range {
	__le64 start;		/* block aligned */
	__le64 end;		/* exclusive, block aligned, > start */
};

/* CAPTURE: let the guest's own compaction find count free blocks. */
struct virtio_hugeroom_capture {
	struct virtio_hugeroom_hdr hdr;
	__le32 count;
	__le32 budget_ms;
};

/* RETURN: hdr, this, then nr_gpas gpas; nr_gpas == 0 with count blocks. */
struct virtio_hugeroom_return {
	struct virtio_hugeroom_hdr hdr;
	__le32 count;		/* how many to give back when nr_gpas == 0 */
	__le32 nr_gpas;
};

enum virtio_hugeroom_pcp_policy {
	VIRTIO_HUGEROOM_PCP_DEFAULT	= 0,	/* restore the kernel's own */
	VIRTIO_HUGEROOM_PCP_LATENCY	= 1,	/* large lists */
	VIRTIO_HUGEROOM_PCP_BALANCED	= 2,
	VIRTIO_HUGEROOM_PCP_DENSITY	= 3,	/* small lists, less hoarding */
	VIRTIO_HUGEROOM_PCP_EXPLICIT	= 4,	/* per-CPU high as given */
};

struct virtio_hugeroom_set_pcp {
	struct virtio_hugeroom_hdr hdr;
	__le32 policy;
	__le32 high;		/* EXPLICIT: per-CPU high, largest zone; else 0 */
};

/* CANCEL: hdr only; hdr.request_id names the command to stop. */

/* ---------------------------------------------------------------------- */
/* Device <-> daemon channel (stream socket, QEMU chardev). */

#define HR_CHAN_MAGIC		0x48524348	/* "HRCH" as a number; LE bytes "HCRH" */
#define HR_CHAN_VERSION		1
#define HR_CHAN_MAX_PAYLOAD	VIRTIO_HUGEROOM_MAX_MSG
#define HR_CHAN_MAX_RAM		64		/* RAM ranges in a hello */

/* Channel features (version 2): WELCOME offers, DEVICE_STATE accepts. */
#define HR_CHAN_F_LAYOUT	(1u << 0)	/* LAYOUT instead of reconnect */
#define HR_CHAN_FEATURES	HR_CHAN_F_LAYOUT /* all defined ones */

enum hr_chan_type {
	HR_CHAN_HELLO		= 1,	/* device -> daemon, first frame */
	HR_CHAN_WELCOME		= 2,	/* daemon -> device */
	HR_CHAN_GUEST_MSG	= 3,	/* device -> daemon: validated guest msg */
	HR_CHAN_HOST_CMD	= 4,	/* daemon -> device: forward to cmdq */
	HR_CHAN_DEVICE_STATE	= 5,	/* device -> daemon: counters */
	HR_CHAN_SET_INTERVAL	= 6,	/* daemon -> device */
	HR_CHAN_LAYOUT		= 7,	/* device -> daemon: guest RAM changed */
};

struct hr_chan_hdr {
	__le32 magic;
	__le16 version;
	__le16 type;		/* enum hr_chan_type */
	__le32 len;		/* payload bytes after this header */
	__le32 reserved;
};

struct hr_chan_ram_range {
	__le64 gpa;
	__le64 size;
	__le64 hva;		/* address in the QEMU process */
};

/* HELLO: this, then nr_ram hr_chan_ram_range. */
struct hr_chan_hello {
	__le32 proto_version;	/* VIRTIO_HUGEROOM_VERSION */
	__le32 nr_ram;
	__u8 uuid[16];
	char name[64];		/* NUL terminated VM name */
	__le64 ram_size;
	__le64 guest_features;	/* negotiated, 0 before DRIVER_OK */
};

struct hr_chan_welcome {
	__le32 proto_version;
	__le32 status_interval_ms;
};

/* WELCOME of proto_version 2 and later: version 1's, then these. */
struct hr_chan_welcome2 {
	struct hr_chan_welcome v1;
	__le32 chan_features;	/* HR_CHAN_F_*: the daemon offers */
	__le32 reserved;
};

/* LAYOUT (HR_CHAN_F_LAYOUT): this, then nr_ram hr_chan_ram_range. */
struct hr_chan_layout {
	__le32 nr_ram;
	__le32 reserved;
	__le64 ram_size;	/* guest RAM now: boot RAM + plugged memory */
};

struct hr_chan_set_interval {
	__le32 status_interval_ms;
	__le32 reserved;
};

/* DEVICE_STATE: the device's view, sent on change and after HELLO. */
struct hr_chan_device_state {
	__le64 guest_features;
	__le64 msgs_relayed;
	__le64 msgs_rejected;	/* malformed guest messages dropped */
	__le64 cmds_dropped;	/* no cmdq buffer posted */
	__le32 num_held;
	__le32 driver_ok;
	__le32 discard_disabled;
	__le32 chan_features;	/* HR_CHAN_F_* in use, within WELCOME's */
};

/* C11: the kernel (gnu11), QEMU and user space all have it. */
#define VIRTIO_HUGEROOM_ASSERT(e, m) _Static_assert(e, m)

VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_config) == 16, "config");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_hdr) == 16, "hdr");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_zone) == 256, "zone");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_candidate) == 16, "cand");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_status) == 208, "status");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_result) == 80, "result");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_blocks) == 24, "blocks");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_ack) == 8, "ack");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_evacuate) == 40, "evac");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_range) == 16, "range");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_capture) == 24, "capture");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_return) == 24, "return");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_set_pcp) == 24, "pcp");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_hdr) == 16, "chan hdr");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_ram_range) == 24, "ram");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_hello) == 104, "hello");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_welcome) == 8, "welcome");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_welcome2) == 16, "welcome2");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_layout) == 16, "layout");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct hr_chan_device_state) == 48, "state");
/* The largest report fits VIRTIO_HUGEROOM_MAX_MSG. */
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_status) +
		       VIRTIO_HUGEROOM_MAX_ZONES *
		       sizeof(struct virtio_hugeroom_zone) +
		       VIRTIO_HUGEROOM_MAX_CANDIDATES *
		       sizeof(struct virtio_hugeroom_candidate) <=
		       VIRTIO_HUGEROOM_MAX_MSG, "report bound");
/* The largest command fits one posted cmdq buffer. */
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_evacuate) +
		       VIRTIO_HUGEROOM_MAX_CMD_BLOCKS * sizeof(__le64) <=
		       VIRTIO_HUGEROOM_CMD_BUF, "evacuate gpas bound");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_evacuate) +
		       VIRTIO_HUGEROOM_MAX_CMD_RANGES *
		       sizeof(struct virtio_hugeroom_range) <=
		       VIRTIO_HUGEROOM_CMD_BUF, "evacuate ranges bound");
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_return) +
		       VIRTIO_HUGEROOM_MAX_CMD_BLOCKS * sizeof(__le64) <=
		       VIRTIO_HUGEROOM_CMD_BUF, "return bound");
/* The largest HOLD/RETURNED fits VIRTIO_HUGEROOM_MAX_MSG. */
VIRTIO_HUGEROOM_ASSERT(sizeof(struct virtio_hugeroom_blocks) +
		       VIRTIO_HUGEROOM_MAX_EVT_BLOCKS * sizeof(__le64) <=
		       VIRTIO_HUGEROOM_MAX_MSG, "hold bound");

#endif /* VIRTIO_HUGEROOM_H */
