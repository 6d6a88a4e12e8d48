/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrSnapshot"

#include "hr-snapshot.h"

#include <string.h>

typedef struct {
	guint64 id;
	gint pid;
	gboolean scan;
	HrRamRange *ranges;
	guint n_ranges;
} HrSnapshotWanted;

struct _HrSnapshotRequest {
	gchar *root;
	guint64 epoch;
	GArray *guests; /* HrSnapshotWanted */
};

static void
hr_snapshot_wanted_clear(HrSnapshotWanted *w)
{
	g_free(w->ranges);
}

static void
hr_snapshot_guest_clear(HrSnapshotGuest *g)
{
	g_clear_pointer(&g->map, hr_thpmap_free);
	g_clear_error(&g->error);
}

HrSnapshotRequest *
hr_snapshot_request_new(const gchar *root, guint64 epoch)
{
	HrSnapshotRequest *request = g_new0(HrSnapshotRequest, 1);

	request->root = g_strdup(root != NULL ? root : "/");
	request->epoch = epoch;
	request->guests = g_array_new(FALSE, TRUE, sizeof(HrSnapshotWanted));
	g_array_set_clear_func(request->guests, (GDestroyNotify)hr_snapshot_wanted_clear);
	return request;
}

void
hr_snapshot_request_free(HrSnapshotRequest *request)
{
	if (request == NULL)
		return;
	g_array_unref(request->guests);
	g_free(request->root);
	g_free(request);
}

void
hr_snapshot_request_add_guest(HrSnapshotRequest *request, guint64 id, gint pid,
			      const HrRamRange *ranges, guint n_ranges, gboolean scan)
{
	HrSnapshotWanted w = {id, pid, scan, NULL, 0};

	if (scan && n_ranges > 0) {
		w.ranges = g_memdup2(ranges, sizeof(*ranges) * n_ranges);
		w.n_ranges = n_ranges;
	}
	g_array_append_val(request->guests, w);
}

guint
hr_snapshot_request_n_guests(const HrSnapshotRequest *request)
{
	return request->guests->len;
}

gint64
hr_snapshot_process_rss_kb(gint pid)
{
	g_autofree gchar *path = NULL;
	g_autofree gchar *text = NULL;
	const gchar *line;

	if (pid <= 0)
		return -1;
	path = g_strdup_printf("/proc/%d/status", pid);
	if (!g_file_get_contents(path, &text, NULL, NULL))
		return -1;
	line = strstr(text, "\nVmRSS:");
	return line != NULL ? g_ascii_strtoll(line + 7, NULL, 10) : -1;
}

HrSnapshot *
hr_snapshot_read(const HrSnapshotRequest *request)
{
	HrSnapshot *snapshot = g_new0(HrSnapshot, 1);
	gint64 t0 = g_get_monotonic_time();

	snapshot->epoch = request->epoch;
	snapshot->host = hr_monitor_read_host_lite(request->root, &snapshot->host_error);
	snapshot->guests =
	    g_array_sized_new(FALSE, TRUE, sizeof(HrSnapshotGuest), request->guests->len);
	g_array_set_clear_func(snapshot->guests, (GDestroyNotify)hr_snapshot_guest_clear);
	for (guint i = 0; i < request->guests->len; i++) {
		const HrSnapshotWanted *w = &g_array_index(request->guests, HrSnapshotWanted, i);
		HrSnapshotGuest g = {w->id, hr_snapshot_process_rss_kb(w->pid), w->scan, NULL,
				     NULL};

		if (w->scan)
			g.map = hr_thpmap_scan(w->pid, w->ranges, w->n_ranges, &g.error);
		g_array_append_val(snapshot->guests, g);
	}
	snapshot->read_us = g_get_monotonic_time() - t0;
	return snapshot;
}

void
hr_snapshot_free(HrSnapshot *snapshot)
{
	if (snapshot == NULL)
		return;
	hr_host_state_free(snapshot->host);
	g_clear_error(&snapshot->host_error);
	g_array_unref(snapshot->guests);
	g_free(snapshot);
}

HrSnapshotGuest *
hr_snapshot_find_guest(HrSnapshot *snapshot, guint64 id)
{
	for (guint i = 0; i < snapshot->guests->len; i++) {
		HrSnapshotGuest *g = &g_array_index(snapshot->guests, HrSnapshotGuest, i);
		if (g->id == id)
			return g;
	}
	return NULL;
}

static void
hr_snapshot_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
	(void)source;
	(void)cancellable; /* a read, once started, runs to its end: milliseconds */
	g_task_return_pointer(task, hr_snapshot_read(task_data), (GDestroyNotify)hr_snapshot_free);
}

void
hr_snapshot_read_async(HrSnapshotRequest *request, GCancellable *cancellable,
		       GAsyncReadyCallback callback, gpointer user_data)
{
	g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);

	g_task_set_source_tag(task, hr_snapshot_read_async);
	g_task_set_name(task, "hr-snapshot-read");
	g_task_set_task_data(task, request, (GDestroyNotify)hr_snapshot_request_free);
	g_task_run_in_thread(task, hr_snapshot_thread);
}

HrSnapshot *
hr_snapshot_read_finish(GAsyncResult *result, GError **error)
{
	g_return_val_if_fail(g_task_is_valid(result, NULL), NULL);
	g_return_val_if_fail(g_task_get_source_tag(G_TASK(result)) == hr_snapshot_read_async, NULL);
	return g_task_propagate_pointer(G_TASK(result), error);
}
