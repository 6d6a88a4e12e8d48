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
} HrCompactResult;

/* @root: "/" (or NULL) for the live host; tests pass a fake tree */
HrCompactResult *
hr_compact_node(const gchar *root, guint node, GCancellable *cancellable, GError **error);
void
hr_compact_node_async(const gchar *root, guint node, GCancellable *cancellable,
		      GAsyncReadyCallback callback, gpointer user_data);
HrCompactResult *
hr_compact_node_finish(GAsyncResult *result, GError **error);

/* blocks gained (may be negative when the node was allocating meanwhile) */
gint64
hr_compact_result_blocks_gained(const HrCompactResult *result);

G_END_DECLS
