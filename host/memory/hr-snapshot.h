/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * What the reservation executor decides on, read off the main loop: the
 * host's memory state (hr_monitor_read_host_lite()) and, per guest, the
 * resident memory of its QEMU process and, when asked, which of its 2 MiB
 * blocks the host backs with a THP (hr_thpmap_scan()). Together they are
 * milliseconds of /proc and pagemap reads, more with every guest.
 *
 * hr_snapshot_read_async() reads in a GTask worker thread. What it reads
 * from (the host root, the guests' pids and RAM layouts) is copied into
 * the request on the caller's thread, and the snapshot goes back whole to
 * the caller's main context: the thread shares nothing with the main loop
 * and takes no lock.
 */

#include <gio/gio.h>

#include "hr-codec.h"
#include "hr-monitor.h"
#include "hr-thpmap.h"

G_BEGIN_DECLS

typedef struct _HrSnapshotRequest HrSnapshotRequest;

typedef struct {
	guint64 id;	  /* the caller's (HrGuest.id) */
	gint64 rss_kb;	  /* VmRSS of its process; -1 when not asked for or unknown */
	gboolean scanned; /* its backing was asked for: @map, or @error */
	HrThpMap *map;
	GError *error;
} HrSnapshotGuest;

typedef struct {
	guint64 epoch;	   /* the request's */
	HrHostState *host; /* NULL with @host_error */
	GError *host_error;
	GArray *guests; /* HrSnapshotGuest, in the order they were added */
	gint64 read_us; /* how long the read took */
} HrSnapshot;

/* @root: as hr_monitor_read_host(); @epoch: anything, handed back in the snapshot */
HrSnapshotRequest *
hr_snapshot_request_new(const gchar *root, guint64 epoch);
void
hr_snapshot_request_free(HrSnapshotRequest *request);
/* read @pid's resident memory and, with @scan, the host backing of @ranges */
void
hr_snapshot_request_add_guest(HrSnapshotRequest *request, guint64 id, gint pid,
			      const HrRamRange *ranges, guint n_ranges, gboolean scan);
guint
hr_snapshot_request_n_guests(const HrSnapshotRequest *request);

/* synchronous: what the thread runs */
HrSnapshot *
hr_snapshot_read(const HrSnapshotRequest *request);
/* takes @request; @callback runs on the caller's thread-default main context */
void
hr_snapshot_read_async(HrSnapshotRequest *request, GCancellable *cancellable,
		       GAsyncReadyCallback callback, gpointer user_data);
/* NULL only when cancelled */
HrSnapshot *
hr_snapshot_read_finish(GAsyncResult *result, GError **error);
void
hr_snapshot_free(HrSnapshot *snapshot);
/* NULL when the request did not name @id */
HrSnapshotGuest *
hr_snapshot_find_guest(HrSnapshot *snapshot, guint64 id);

/* VmRSS of @pid in KiB from /proc/PID/status, -1 when unknown */
gint64
hr_snapshot_process_rss_kb(gint pid);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrSnapshotRequest, hr_snapshot_request_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrSnapshot, hr_snapshot_free)

G_END_DECLS
