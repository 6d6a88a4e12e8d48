/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrCompact"

#include "hr-compact.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <glib/gstdio.h>

static gboolean
node_snapshot(const gchar *root, guint node, HrCompactCounters *counters, guint64 *free_blocks,
	      guint64 *free_pages, guint *unusable, GError **error)
{
	g_autoptr(HrHostState) state = hr_monitor_read_host_lite(root, error);
	const HrNodeState *ns;

	if (state == NULL)
		return FALSE;
	ns = hr_host_state_get_node(state, node);
	if (ns == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
			    "the host has no memory on node %u", node);
		return FALSE;
	}
	*counters = state->compact;
	*free_blocks = ns->free_blocks;
	*free_pages = ns->free_pages;
	*unusable = ns->unusable_index;
	return TRUE;
}

static guint64
delta(guint64 before, guint64 after)
{
	return after >= before ? after - before : 0;
}

HrCompactResult *
hr_compact_node(const gchar *root, guint node, GCancellable *cancellable, GError **error)
{
	g_autofree HrCompactResult *result = g_new0(HrCompactResult, 1);
	g_autofree gchar *path = NULL;
	HrCompactCounters before, after;
	gint64 start;
	ssize_t n;
	int fd, saved;

	if (root == NULL)
		root = "/";
	result->node = node;
	path = g_strdup_printf("%s/sys/devices/system/node/node%u/compact", root, node);
	if (!node_snapshot(root, node, &before, &result->free_blocks_before,
			   &result->free_pages_before, &result->unusable_index_before, error)) {
		g_prefix_error(error, "compacting node %u: ", node);
		return NULL;
	}
	if (g_cancellable_set_error_if_cancelled(cancellable, error))
		return NULL;

	fd = g_open(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		saved = errno;
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "cannot open %s: %s%s",
			    path, g_strerror(saved),
			    saved == ENOENT
				? " (no such node, or a kernel without CONFIG_COMPACTION)"
			    : saved == EACCES ? " (needs root)"
					      : "");
		return NULL;
	}
	start = g_get_monotonic_time();
	do {
		n = write(fd, "1", 1);
	} while (n < 0 && errno == EINTR);
	saved = errno;
	result->wall_us = g_get_monotonic_time() - start;
	close(fd);
	if (n != 1) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "writing 1 to %s: %s",
			    path, n < 0 ? g_strerror(saved) : "short write");
		return NULL;
	}

	if (!node_snapshot(root, node, &after, &result->free_blocks_after,
			   &result->free_pages_after, &result->unusable_index_after, error)) {
		g_prefix_error(error, "after compacting node %u: ", node);
		return NULL;
	}
	result->migrate_scanned =
	    delta(before.compact_migrate_scanned, after.compact_migrate_scanned);
	result->free_scanned = delta(before.compact_free_scanned, after.compact_free_scanned);
	result->isolated = delta(before.compact_isolated, after.compact_isolated);
	result->migrated = delta(before.pgmigrate_success, after.pgmigrate_success);
	result->migrate_failed = delta(before.pgmigrate_fail, after.pgmigrate_fail);
	g_debug("node %u compacted in %" G_GINT64_FORMAT " us: %" G_GUINT64_FORMAT
		" -> %" G_GUINT64_FORMAT " free blocks, %" G_GUINT64_FORMAT
		" migrate-scanned, %" G_GUINT64_FORMAT " free-scanned, %" G_GUINT64_FORMAT
		" migrated",
		node, result->wall_us, result->free_blocks_before, result->free_blocks_after,
		result->migrate_scanned, result->free_scanned, result->migrated);
	return g_steal_pointer(&result);
}

/* what a worker thread works on: a node, and for a pool grow how many blocks */
typedef struct {
	gchar *root;
	guint node;
	guint64 blocks;
} NodeTaskData;

static void
node_task_data_free(NodeTaskData *data)
{
	g_free(data->root);
	g_free(data);
}

static NodeTaskData *
node_task_data_new(const gchar *root, guint node, guint64 blocks)
{
	NodeTaskData *data = g_new0(NodeTaskData, 1);

	data->root = g_strdup(root != NULL ? root : "/");
	data->node = node;
	data->blocks = blocks;
	return data;
}

static void
compact_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
	NodeTaskData *data = task_data;
	GError *error = NULL;
	HrCompactResult *result;

	(void)source;
	result = hr_compact_node(data->root, data->node, cancellable, &error);
	if (result == NULL)
		g_task_return_error(task, error);
	else
		g_task_return_pointer(task, result, g_free);
}

void
hr_compact_node_async(const gchar *root, guint node, GCancellable *cancellable,
		      GAsyncReadyCallback callback, gpointer user_data)
{
	g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);

	g_task_set_source_tag(task, hr_compact_node_async);
	g_task_set_name(task, "hr-compact-node");
	g_task_set_task_data(task, node_task_data_new(root, node, 0),
			     (GDestroyNotify)node_task_data_free);
	g_task_run_in_thread(task, compact_thread);
}

HrCompactResult *
hr_compact_node_finish(GAsyncResult *result, GError **error)
{
	g_return_val_if_fail(g_task_is_valid(result, NULL), NULL);
	g_return_val_if_fail(g_task_get_source_tag(G_TASK(result)) == hr_compact_node_async, NULL);
	return g_task_propagate_pointer(G_TASK(result), error);
}

gint64
hr_compact_result_blocks_gained(const HrCompactResult *result)
{
	return (gint64)result->free_blocks_after - (gint64)result->free_blocks_before;
}

/* ---------------------------------------------------------------------- */
/* The node's 2 MiB hugetlb pool */

static GMutex pool_lock;
static HrPoolLimit pool_limit;
static gpointer pool_limit_data;

void
hr_pool_set_limit_for_testing(HrPoolLimit limit, gpointer data)
{
	g_mutex_lock(&pool_lock);
	pool_limit = limit;
	pool_limit_data = data;
	g_mutex_unlock(&pool_lock);
}

static gchar *
pool_path(const gchar *root, guint node)
{
	return g_strdup_printf("%s/sys/devices/system/node/node%u/hugepages/hugepages-2048kB/"
			       "nr_hugepages",
			       root != NULL ? root : "/", node);
}

static gboolean
pool_read(const gchar *path, guint64 *nr, GError **error)
{
	g_autofree gchar *text = NULL;
	gchar *end = NULL;

	if (!g_file_get_contents(path, &text, NULL, error))
		return FALSE;
	*nr = g_ascii_strtoull(g_strstrip(text), &end, 10);
	if (end == text || *end != '\0') {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
			    "%s: \"%s\" is not a number of pages", path, text);
		return FALSE;
	}
	return TRUE;
}

/* the kernel's store: it allocates or frees before the write returns */
static gboolean
pool_write(const gchar *path, guint64 nr, GError **error)
{
	g_autofree gchar *text = g_strdup_printf("%" G_GUINT64_FORMAT "\n", nr);
	ssize_t len = (ssize_t)strlen(text), n;
	int fd = g_open(path, O_WRONLY | O_CLOEXEC, 0), saved;

	if (fd < 0) {
		saved = errno;
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved), "cannot open %s: %s%s",
			    path, g_strerror(saved), saved == EACCES ? " (needs root)" : "");
		return FALSE;
	}
	do {
		n = write(fd, text, (size_t)len);
	} while (n < 0 && errno == EINTR);
	saved = errno;
	close(fd);
	if (n != len) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(saved),
			    "writing %" G_GUINT64_FORMAT " to %s: %s", nr, path,
			    n < 0 ? g_strerror(saved) : "short write");
		return FALSE;
	}
	return TRUE;
}

gboolean
hr_pool_available(const gchar *root, guint node, GError **error)
{
	g_autofree gchar *path = pool_path(root, node);
	guint64 nr;

	if (!pool_read(path, &nr, error)) {
		g_prefix_error(error,
			       "the node's 2 MiB hugetlb pool (a kernel with CONFIG_HUGETLBFS): ");
		return FALSE;
	}
	if (g_access(path, W_OK) != 0) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
			    "%s is not writable (needs root)", path);
		return FALSE;
	}
	return TRUE;
}

gboolean
hr_pool_get(const gchar *root, guint node, guint64 *nr, GError **error)
{
	g_autofree gchar *path = pool_path(root, node);
	return pool_read(path, nr, error);
}

HrCompactResult *
hr_pool_grow(const gchar *root, guint node, guint64 blocks, GCancellable *cancellable,
	     GError **error)
{
	g_autofree HrCompactResult *result = g_new0(HrCompactResult, 1);
	g_autofree gchar *path = pool_path(root, node);
	HrCompactCounters before, after;
	gint64 start = g_get_monotonic_time();

	if (root == NULL)
		root = "/";
	result->node = node;
	result->pool_asked = blocks;
	if (!node_snapshot(root, node, &before, &result->free_blocks_before,
			   &result->free_pages_before, &result->unusable_index_before, error)) {
		g_prefix_error(error, "growing the hugetlb pool of node %u: ", node);
		return NULL;
	}
	while (result->pool_got < blocks) {
		guint64 chunk = MIN(blocks - result->pool_got, HR_POOL_CHUNK_BLOCKS), nr, now;
		gboolean ok;

		/* stopped: what the pool got so far is the caller's to account for */
		if (g_cancellable_is_cancelled(cancellable))
			break;
		g_mutex_lock(&pool_lock);
		ok = pool_read(path, &nr, error) && pool_write(path, nr + chunk, error) &&
		     pool_read(path, &now, error);
		if (ok && pool_limit != NULL && now > nr) {
			guint64 kept = MIN(pool_limit(node, now - nr, pool_limit_data), now - nr);
			if (nr + kept < now) {
				now = nr + kept;
				ok = pool_write(path, now, error);
			}
		}
		g_mutex_unlock(&pool_lock);
		if (!ok && result->pool_got == 0) {
			g_prefix_error(error, "growing the hugetlb pool of node %u: ", node);
			return NULL;
		}
		if (!ok) {
			/* earlier chunks are in the pool: report them, not the error */
			g_warning("growing the hugetlb pool of node %u: %s", node,
				  (*error)->message);
			g_clear_error(error);
			break;
		}
		result->pool_got += now > nr ? now - nr : 0;
		if (now < nr + chunk)
			break; /* the kernel could not assemble more */
	}
	result->wall_us = g_get_monotonic_time() - start;
	if (!node_snapshot(root, node, &after, &result->free_blocks_after,
			   &result->free_pages_after, &result->unusable_index_after, error)) {
		g_prefix_error(error, "after growing the hugetlb pool of node %u: ", node);
		/* the pages are in the pool all the same: the caller must know */
		g_clear_error(error);
		after = before;
	}
	result->migrate_scanned =
	    delta(before.compact_migrate_scanned, after.compact_migrate_scanned);
	result->free_scanned = delta(before.compact_free_scanned, after.compact_free_scanned);
	result->isolated = delta(before.compact_isolated, after.compact_isolated);
	result->migrated = delta(before.pgmigrate_success, after.pgmigrate_success);
	result->migrate_failed = delta(before.pgmigrate_fail, after.pgmigrate_fail);
	g_debug("node %u pool grown by %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
		" in %" G_GINT64_FORMAT " us, %" G_GUINT64_FORMAT " migrate-scanned",
		node, result->pool_got, blocks, result->wall_us, result->migrate_scanned);
	return g_steal_pointer(&result);
}

static void
pool_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
	NodeTaskData *data = task_data;
	GError *error = NULL;
	HrCompactResult *result;
	(void)source;

	result = hr_pool_grow(data->root, data->node, data->blocks, cancellable, &error);
	if (result == NULL)
		g_task_return_error(task, error);
	else
		g_task_return_pointer(task, result, g_free);
}

void
hr_pool_grow_async(const gchar *root, guint node, guint64 blocks, GCancellable *cancellable,
		   GAsyncReadyCallback callback, gpointer user_data)
{
	g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);

	g_task_set_source_tag(task, hr_pool_grow_async);
	g_task_set_name(task, "hr-pool-grow");
	g_task_set_task_data(task, node_task_data_new(root, node, blocks),
			     (GDestroyNotify)node_task_data_free);
	g_task_run_in_thread(task, pool_thread);
}

HrCompactResult *
hr_pool_grow_finish(GAsyncResult *result, GError **error)
{
	g_return_val_if_fail(g_task_is_valid(result, NULL), NULL);
	g_return_val_if_fail(g_task_get_source_tag(G_TASK(result)) == hr_pool_grow_async, NULL);
	return g_task_propagate_pointer(G_TASK(result), error);
}

gboolean
hr_pool_shrink(const gchar *root, guint node, guint64 blocks, guint64 *freed, GError **error)
{
	g_autofree gchar *path = pool_path(root, node);
	guint64 nr = 0, now = 0;
	gboolean ok;

	*freed = 0;
	if (blocks == 0)
		return TRUE;
	g_mutex_lock(&pool_lock);
	ok = pool_read(path, &nr, error) && pool_write(path, nr - MIN(nr, blocks), error) &&
	     pool_read(path, &now, error);
	g_mutex_unlock(&pool_lock);
	if (!ok) {
		g_prefix_error(error,
			       "giving back %" G_GUINT64_FORMAT
			       " blocks of the hugetlb pool of node %u: ",
			       blocks, node);
		return FALSE;
	}
	/* pages in use by hugetlbfs users stay (as surplus) until they are freed */
	*freed = nr > now ? nr - now : 0;
	return TRUE;
}
