/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Host compaction of one NUMA node, with what it cost.
 *
 * Writing "1" to /sys/devices/system/node/nodeN/compact runs a full,
 * synchronous compaction of every zone of the node in the writing thread
 * and returns when it is done: hundreds of milliseconds to seconds on a
 * large node. hr_compact_node_async() therefore does the write in a GTask
 * worker thread and completes on the caller's main context.
 *
 * The cost is measured around the write: wall time and the deltas of the
 * host's compaction and migration counters (/proc/vmstat; they are global,
 * so whatever else compacts or migrates at the same time, kcompactd or
 * direct compaction of an allocating process, is counted too), and the
 * node's free 2 MiB blocks and unusable index before and after.
 *
 * Cancellation only works before the write starts: the kernel finishes a
 * compaction once it has begun.
 */

#include <gio/gio.h>

#include "hr-monitor.h"

G_BEGIN_DECLS

typedef struct {
	guint node;
	gint64 wall_us;
	/* /proc/vmstat deltas over the write */
	guint64 migrate_scanned; /* compact_migrate_scanned */
	guint64 free_scanned;	 /* compact_free_scanned */
	guint64 isolated;	 /* compact_isolated */
	guint64 migrated;	 /* pgmigrate_success */
	guint64 migrate_failed;	 /* pgmigrate_fail */
	/* the node before and after */
	guint64 free_blocks_before;
	guint64 free_blocks_after;
	guint64 free_pages_before;
	guint64 free_pages_after;
	guint unusable_index_before;
	guint unusable_index_after;
	/* hr_pool_grow(): what was asked and what the pool grew by */
	guint64 pool_asked;
	guint64 pool_got;
} HrCompactResult;

/* @root: "/" (or NULL) for the live host; tests pass a fake tree */
HrCompactResult *
hr_compact_node(const gchar *root, guint node, GCancellable *cancellable, GError **error);
void
hr_compact_node_async(const gchar *root, guint node, GCancellable *cancellable,
		      GAsyncReadyCallback callback, gpointer user_data);
HrCompactResult *
hr_compact_node_finish(GAsyncResult *result, GError **error);

/*
 * Assembling 2 MiB blocks and holding them: the node's 2 MiB hugetlb pool.
 *
 * Growing /sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/
 * nr_hugepages by K makes the kernel allocate K order-9 pages on that node
 * (__GFP_THISNODE | __GFP_RETRY_MAYFAIL: it may compact and reclaim, never
 * OOM-kill): free 2 MiB blocks first, then direct compaction at order 9,
 * which stops as soon as one block is free. That is host work for exactly
 * the blocks asked, not a compaction of the whole node; and the blocks are
 * then held, out of every other allocation's reach, until shrinking the
 * pool gives them back to the buddy allocator as free 2 MiB blocks, just
 * before the VM they were assembled for allocates its memory.
 *
 * The pool is shared with the host's admin: the daemon only ever adds and
 * removes its own pages (a read-modify-write under one lock, in chunks so
 * that a shrink never waits long for a grow), and a shrink never takes the
 * pool below what it was before the daemon added to it... as far as it can
 * tell: pages the admin's own users took count as theirs.
 */
#define HR_POOL_CHUNK_BLOCKS 128

/* the node's pool file exists and is writable */
gboolean
hr_pool_available(const gchar *root, guint node, GError **error);
/* nr_hugepages of the node's 2 MiB pool */
gboolean
hr_pool_get(const gchar *root, guint node, guint64 *nr, GError **error);
/*
 * Grow the pool by up to @blocks, in chunks, stopping at the first chunk
 * the kernel could not fill, or when @cancellable is cancelled (then it
 * returns what it got so far: those pages are in the pool). @result->pool_got is how many it added,
 * @result->pool_asked what was asked; the vmstat deltas are the cost.
 */
HrCompactResult *
hr_pool_grow(const gchar *root, guint node, guint64 blocks, GCancellable *cancellable,
	     GError **error);
void
hr_pool_grow_async(const gchar *root, guint node, guint64 blocks, GCancellable *cancellable,
		   GAsyncReadyCallback callback, gpointer user_data);
HrCompactResult *
hr_pool_grow_finish(GAsyncResult *result, GError **error);
/*
 * Tests only: a fake root's pool file takes whatever is written, where the
 * kernel assembles what it can. @limit is called under the pool's lock
 * with what a chunk's write added and returns what the kernel would have
 * (the rest is taken back at once). NULL: no limit.
 */
typedef guint64 (*HrPoolLimit)(guint node, guint64 added, gpointer data);
void
hr_pool_set_limit_for_testing(HrPoolLimit limit, gpointer data);
/* give @blocks of the pool back (fewer when others use them); *@freed: how many */
gboolean
hr_pool_shrink(const gchar *root, guint node, guint64 blocks, guint64 *freed, GError **error);

/* blocks gained (may be negative when the node was allocating meanwhile) */
gint64
hr_compact_result_blocks_gained(const HrCompactResult *result);

G_END_DECLS
