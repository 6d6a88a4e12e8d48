/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrThpmap"

#include "hr-thpmap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

G_DEFINE_QUARK(hr - thpmap - error - quark, hr_thpmap_error)

#define PAGE_SIZE 4096
#define PAGES_PER_BLOCK (HR_THPMAP_BLOCK_SIZE / PAGE_SIZE)

void
hr_thpmap_free(HrThpMap *map)
{
	if (map == NULL)
		return;
	g_free(map->ranges);
	g_free(map->first_block);
	g_free(map->bits);
	g_free(map);
}

const gchar *
hr_thp_block_to_string(HrThpBlock block)
{
	switch (block) {
	case HR_THP_BLOCK_ABSENT:
		return "absent";
	case HR_THP_BLOCK_SMALL:
		return "4k";
	case HR_THP_BLOCK_THP:
		return "thp";
	case HR_THP_BLOCK_HUGETLB:
		return "hugetlb";
	}
	return "unknown";
}

HrThpBlock
hr_thpmap_get(const HrThpMap *map, guint64 index)
{
	g_return_val_if_fail(index < map->n_blocks, HR_THP_BLOCK_ABSENT);
	return (HrThpBlock)((map->bits[index / 32] >> ((index % 32) * 2)) & 3);
}

static void
thpmap_set(HrThpMap *map, guint64 index, HrThpBlock block)
{
	map->bits[index / 32] |= (guint64)block << ((index % 32) * 2);
}

/* First 2 MiB-aligned gpa inside @r and the number of whole blocks. */
static guint64
range_blocks(const HrRamRange *r, guint64 *first_gpa)
{
	guint64 start = (r->gpa + HR_THPMAP_BLOCK_SIZE - 1) & ~(HR_THPMAP_BLOCK_SIZE - 1);
	guint64 end = (r->gpa + r->size) & ~(HR_THPMAP_BLOCK_SIZE - 1);

	*first_gpa = start;
	return end > start ? (end - start) / HR_THPMAP_BLOCK_SIZE : 0;
}

guint64
hr_thpmap_block_gpa(const HrThpMap *map, guint64 index)
{
	g_return_val_if_fail(index < map->n_blocks, 0);
	for (guint r = map->n_ranges; r-- > 0;) {
		if (index >= map->first_block[r]) {
			guint64 first_gpa;
			range_blocks(&map->ranges[r], &first_gpa);
			return first_gpa + (index - map->first_block[r]) * HR_THPMAP_BLOCK_SIZE;
		}
	}
	g_assert_not_reached();
}

gboolean
hr_thpmap_lookup(const HrThpMap *map, guint64 gpa, HrThpBlock *block)
{
	for (guint r = 0; r < map->n_ranges; r++) {
		guint64 first_gpa, n = range_blocks(&map->ranges[r], &first_gpa);
		if (gpa >= first_gpa && gpa < first_gpa + n * HR_THPMAP_BLOCK_SIZE &&
		    (gpa - first_gpa) % HR_THPMAP_BLOCK_SIZE == 0) {
			*block = hr_thpmap_get(map, map->first_block[r] +
							(gpa - first_gpa) / HR_THPMAP_BLOCK_SIZE);
			return TRUE;
		}
	}
	return FALSE;
}

static gint
range_len_cmp(gconstpointer a, gconstpointer b)
{
	const HrRange *x = a, *y = b;
	guint64 lx = x->end - x->start, ly = y->end - y->start;

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

static gint
range_start_cmp(gconstpointer a, gconstpointer b)
{
	const HrRange *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

guint
hr_thpmap_ranges(const HrThpMap *map, HrThpBlock kind, HrRange *out, guint max, guint64 *blocks_out)
{
	g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(HrRange));
	guint64 blocks = 0;
	guint n;

	for (guint r = 0; r < map->n_ranges; r++) {
		guint64 first_gpa, nb = range_blocks(&map->ranges[r], &first_gpa);
		HrRange cur = {0};
		gboolean open = FALSE;

		for (guint64 b = 0; b <= nb; b++) {
			gboolean in = b < nb && hr_thpmap_get(map, map->first_block[r] + b) == kind;
			guint64 gpa = first_gpa + b * HR_THPMAP_BLOCK_SIZE;

			if (in && !open) {
				cur.start = gpa;
				open = TRUE;
			} else if (!in && open) {
				cur.end = gpa;
				g_array_append_val(all, cur);
				open = FALSE;
			}
		}
	}
	if (all->len > max) {
		/* the largest ones, given back in address order */
		g_array_sort(all, range_len_cmp);
		g_array_set_size(all, max);
		g_array_sort(all, range_start_cmp);
	}
	n = all->len;
	for (guint i = 0; i < n; i++) {
		const HrRange *rg = &g_array_index(all, HrRange, i);
		out[i] = *rg;
		blocks += (rg->end - rg->start) / HR_THPMAP_BLOCK_SIZE;
	}
	if (blocks_out != NULL)
		*blocks_out = blocks;
	return n;
}

static gboolean
read_u64(int fd, const gchar *path, guint64 index, guint64 *value, GError **error)
{
	ssize_t n = pread(fd, value, sizeof(*value), (off_t)(index * sizeof(*value)));

	if (n == (ssize_t)sizeof(*value))
		return TRUE;
	if (n < 0) {
		int saved = errno;
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO,
			    "reading entry %" G_GUINT64_FORMAT " of %s: %s", index, path,
			    g_strerror(saved));
	} else {
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO,
			    "short read of entry %" G_GUINT64_FORMAT " of %s (%zd bytes; the "
			    "process exited or the address is outside it)",
			    index, path, n);
	}
	return FALSE;
}

/*
 * PFN -> host node, from /sys/devices/system/node/nodeN/memoryM (memory
 * block M covers PFNs M * block_size / 4096 on). Empty when sysfs has no
 * nodes (not Linux, or a test tree).
 */
typedef struct {
	guint64 block_pages;
	GHashTable *block_node; /* memory block number -> node + 1 */
} NodeMap;

static void
node_map_init(NodeMap *nm, const gchar *sys_root)
{
	g_autofree gchar *bs_path =
	    g_build_filename(sys_root, "devices/system/memory/block_size_bytes", NULL);
	g_autofree gchar *nodes = g_build_filename(sys_root, "devices/system/node", NULL);
	g_autofree gchar *text = NULL;
	g_autoptr(GDir) dir = NULL;
	const gchar *name;

	nm->block_pages = 0;
	nm->block_node = g_hash_table_new(g_int64_hash, g_int64_equal);
	if (!g_file_get_contents(bs_path, &text, NULL, NULL))
		return;
	nm->block_pages = g_ascii_strtoull(text, NULL, 16) / PAGE_SIZE;
	dir = g_dir_open(nodes, 0, NULL);
	while (nm->block_pages > 0 && dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
		g_autofree gchar *ndir = NULL;
		g_autoptr(GDir) nd = NULL;
		const gchar *m;
		guint64 node;

		if (!g_str_has_prefix(name, "node") ||
		    !g_ascii_string_to_unsigned(name + 4, 10, 0, 1023, &node, NULL))
			continue;
		ndir = g_build_filename(nodes, name, NULL);
		nd = g_dir_open(ndir, 0, NULL);
		while (nd != NULL && (m = g_dir_read_name(nd)) != NULL) {
			guint64 block;
			gint64 *key;
			if (!g_str_has_prefix(m, "memory") ||
			    !g_ascii_string_to_unsigned(m + 6, 10, 0, G_MAXUINT32, &block, NULL))
				continue;
			key = g_new(gint64, 1);
			*key = (gint64)block;
			g_hash_table_insert(nm->block_node, key, GUINT_TO_POINTER((guint)node + 1));
		}
	}
}

static gint
node_map_lookup(const NodeMap *nm, guint64 pfn)
{
	gint64 block;
	if (nm->block_pages == 0)
		return -1;
	block = (gint64)(pfn / nm->block_pages);
	return (gint)GPOINTER_TO_UINT(g_hash_table_lookup(nm->block_node, &block)) - 1;
}

static void
node_map_clear(NodeMap *nm)
{
	GHashTableIter it;
	gpointer key;
	g_hash_table_iter_init(&it, nm->block_node);
	while (g_hash_table_iter_next(&it, &key, NULL))
		g_free(key);
	g_hash_table_unref(nm->block_node);
}

static gboolean
check_ranges(const HrRamRange *ranges, guint n_ranges, GError **error)
{
	if (n_ranges == 0) {
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID, "no RAM ranges");
		return FALSE;
	}
	for (guint i = 0; i < n_ranges; i++) {
		const HrRamRange *a = &ranges[i];
		if (a->size == 0 || a->gpa + a->size < a->gpa || a->hva + a->size < a->hva) {
			g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID,
				    "RAM range %u (gpa 0x%" G_GINT64_MODIFIER
				    "x, size 0x%" G_GINT64_MODIFIER "x) is empty or wraps",
				    i, a->gpa, a->size);
			return FALSE;
		}
		for (guint j = 0; j < i; j++) {
			const HrRamRange *b = &ranges[j];
			if (a->gpa < b->gpa + b->size && b->gpa < a->gpa + a->size) {
				g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID,
					    "RAM ranges %u and %u overlap", j, i);
				return FALSE;
			}
		}
	}
	return TRUE;
}

/*
 * A block not backed by one host THP: what a discard of it frees is its
 * resident 4 KiB pages. Only a block that is (nearly) all resident counts
 * as SMALL; one with fewer resident pages than HR_THPMAP_SMALL_MIN_PAGES
 * frees too little to be worth a guest's migrations and counts as ABSENT.
 * One pread of the block's 512 pagemap entries.
 */
static gboolean
classify_small(int pm_fd, const gchar *pm_path, guint64 hva, HrThpBlock *block, GError **error)
{
	guint64 pm[PAGES_PER_BLOCK];
	ssize_t n = pread(pm_fd, pm, sizeof(pm), (off_t)(hva / PAGE_SIZE * sizeof(guint64)));
	guint resident = 0;

	if (n != (ssize_t)sizeof(pm)) {
		int saved = errno;
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO,
			    "reading the pagemap entries of hva 0x%" G_GINT64_MODIFIER
			    "x from %s: %s",
			    hva, pm_path, n < 0 ? g_strerror(saved) : "short read");
		return FALSE;
	}
	for (guint i = 0; i < PAGES_PER_BLOCK; i++)
		resident += (pm[i] & HR_PM_PRESENT) != 0;
	*block = resident >= HR_THPMAP_SMALL_MIN_PAGES ? HR_THP_BLOCK_SMALL : HR_THP_BLOCK_ABSENT;
	return TRUE;
}

/*
 * Classify the block at @hva. Reads the head page's pagemap entry and
 * flags, and for a THP head the last page's too: a PMD-sized THP has its
 * last page at head + 511 as a tail of the same folio.
 */
static gboolean
classify(int pm_fd, const gchar *pm_path, int kpf_fd, const gchar *kpf_path, guint64 hva,
	 HrThpBlock *block, guint64 *head_pfn, GError **error)
{
	guint64 pm, pfn, flags, tail_pm, tail_flags;

	if (!read_u64(pm_fd, pm_path, hva / PAGE_SIZE, &pm, error))
		return FALSE;
	if (!(pm & HR_PM_PRESENT))
		return classify_small(pm_fd, pm_path, hva, block, error);
	pfn = pm & HR_PM_PFN_MASK;
	*head_pfn = pfn;
	if (pfn == 0) {
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_PERMISSION,
			    "%s hides page frame numbers: reading them needs CAP_SYS_ADMIN",
			    pm_path);
		return FALSE;
	}
	if (!read_u64(kpf_fd, kpf_path, pfn, &flags, error))
		return FALSE;
	if (flags & (G_GUINT64_CONSTANT(1) << HR_KPF_HUGE)) {
		*block = HR_THP_BLOCK_HUGETLB;
		return TRUE;
	}
	if (!(flags & (G_GUINT64_CONSTANT(1) << HR_KPF_THP)) ||
	    !(flags & (G_GUINT64_CONSTANT(1) << HR_KPF_COMPOUND_HEAD)))
		return classify_small(pm_fd, pm_path, hva, block, error);
	if (!read_u64(pm_fd, pm_path, hva / PAGE_SIZE + PAGES_PER_BLOCK - 1, &tail_pm, error))
		return FALSE;
	if (!(tail_pm & HR_PM_PRESENT) || (tail_pm & HR_PM_PFN_MASK) != pfn + PAGES_PER_BLOCK - 1)
		return classify_small(pm_fd, pm_path, hva, block, error);
	if (!read_u64(kpf_fd, kpf_path, pfn + PAGES_PER_BLOCK - 1, &tail_flags, error))
		return FALSE;
	if ((tail_flags & (G_GUINT64_CONSTANT(1) << HR_KPF_COMPOUND_TAIL)) &&
	    (tail_flags & (G_GUINT64_CONSTANT(1) << HR_KPF_THP))) {
		*block = HR_THP_BLOCK_THP;
		return TRUE;
	}
	return classify_small(pm_fd, pm_path, hva, block, error);
}

static int
open_ro(const gchar *path, GError **error)
{
	int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		int saved = errno;
		g_set_error(error, HR_THPMAP_ERROR,
			    saved == EACCES || saved == EPERM ? HR_THPMAP_ERROR_PERMISSION
							      : HR_THPMAP_ERROR_IO,
			    "cannot open %s: %s%s", path, g_strerror(saved),
			    saved == EACCES || saved == EPERM ? " (needs root)" : "");
	}
	return fd;
}

HrThpMap *
hr_thpmap_scan_files(const gchar *pagemap_path, const gchar *kpageflags_path, const gchar *sys_root,
		     const HrRamRange *ranges, guint n_ranges, GError **error)
{
	g_autoptr(HrThpMap) map = NULL;
	gint64 start = g_get_monotonic_time();
	int pm_fd = -1, kpf_fd = -1;
	gboolean ok = TRUE;
	guint64 on_node[64] = {0};
	NodeMap nm;

	/*
	 * A scan reads a pagemap entry per block of guest RAM: it grows with
	 * the guest and is a worker's job (hr-snapshot.c), never the main
	 * loop's, which it would stall.
	 */
	if (g_main_context_is_owner(g_main_context_default()))
		g_critical("the host THP map of %s is scanned on the main loop", pagemap_path);
	if (!check_ranges(ranges, n_ranges, error))
		return NULL;
	map = g_new0(HrThpMap, 1);
	map->n_ranges = n_ranges;
	map->ranges = g_memdup2(ranges, sizeof(*ranges) * n_ranges);
	map->first_block = g_new0(guint64, n_ranges);
	for (guint r = 0; r < n_ranges; r++) {
		guint64 first_gpa;
		map->first_block[r] = map->n_blocks;
		map->n_blocks += range_blocks(&ranges[r], &first_gpa);
	}
	map->bits = g_new0(guint64, (map->n_blocks + 31) / 32 + 1);

	pm_fd = open_ro(pagemap_path, error);
	if (pm_fd < 0)
		return NULL;
	kpf_fd = open_ro(kpageflags_path, error);
	if (kpf_fd < 0) {
		close(pm_fd);
		return NULL;
	}
	node_map_init(&nm, sys_root);
	for (guint r = 0; r < n_ranges && ok; r++) {
		const HrRamRange *range = &ranges[r];
		guint64 first_gpa, n = range_blocks(range, &first_gpa);
		gboolean aligned = (range->hva - range->gpa) % HR_THPMAP_BLOCK_SIZE == 0;

		for (guint64 b = 0; b < n; b++) {
			guint64 hva =
			    range->hva + (first_gpa - range->gpa) + b * HR_THPMAP_BLOCK_SIZE;
			HrThpBlock block;
			guint64 pfn = 0;

			if (!classify(pm_fd, pagemap_path, kpf_fd, kpageflags_path, hva, &block,
				      &pfn, error)) {
				ok = FALSE;
				break;
			}
			/* a block across two host huge pages never frees a whole one */
			if (!aligned && block == HR_THP_BLOCK_THP)
				block = HR_THP_BLOCK_SMALL;
			if (!aligned && block == HR_THP_BLOCK_SMALL)
				map->n_misaligned++;
			thpmap_set(map, map->first_block[r] + b, block);
			switch (block) {
			case HR_THP_BLOCK_ABSENT:
				map->n_absent++;
				break;
			case HR_THP_BLOCK_SMALL:
				map->n_small++;
				break;
			case HR_THP_BLOCK_THP: {
				gint node = node_map_lookup(&nm, pfn);
				map->n_thp++;
				if (node >= 0 && node < (gint)G_N_ELEMENTS(on_node))
					on_node[node]++;
				break;
			}
			case HR_THP_BLOCK_HUGETLB:
				map->n_hugetlb++;
				break;
			}
		}
	}
	close(pm_fd);
	close(kpf_fd);
	node_map_clear(&nm);
	if (!ok)
		return NULL;
	map->thp_node = -1;
	for (guint n = 0; n < G_N_ELEMENTS(on_node); n++) {
		if (on_node[n] > map->thp_on_node) {
			map->thp_on_node = on_node[n];
			map->thp_node = (gint)n;
		}
	}
	map->scan_us = g_get_monotonic_time() - start;
	return g_steal_pointer(&map);
}

HrThpMap *
hr_thpmap_scan(gint pid, const HrRamRange *ranges, guint n_ranges, GError **error)
{
	g_autofree gchar *pagemap = g_strdup_printf("/proc/%d/pagemap", pid);
	HrThpMap *map;

	if (pid <= 0) {
		g_set_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID, "no process id (%d)",
			    pid);
		return NULL;
	}
	map = hr_thpmap_scan_files(pagemap, "/proc/kpageflags", "/sys", ranges, n_ranges, error);
	if (map == NULL)
		g_prefix_error(error, "host THP map of pid %d: ", pid);
	return map;
}

typedef struct {
	gint pid;
	HrRamRange *ranges;
	guint n_ranges;
} ScanTaskData;

static void
scan_task_data_free(ScanTaskData *data)
{
	g_free(data->ranges);
	g_free(data);
}

static void
scan_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
	ScanTaskData *data = task_data;
	GError *error = NULL;
	HrThpMap *map;

	(void)source;
	(void)cancellable; /* checked once: a scan, once started, runs to its end */
	if (g_task_return_error_if_cancelled(task))
		return;
	map = hr_thpmap_scan(data->pid, data->ranges, data->n_ranges, &error);
	if (map == NULL)
		g_task_return_error(task, error);
	else
		g_task_return_pointer(task, map, (GDestroyNotify)hr_thpmap_free);
}

void
hr_thpmap_scan_async(gint pid, const HrRamRange *ranges, guint n_ranges, GCancellable *cancellable,
		     GAsyncReadyCallback callback, gpointer user_data)
{
	g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);
	ScanTaskData *data = g_new0(ScanTaskData, 1);

	data->pid = pid;
	data->ranges = n_ranges > 0 ? g_memdup2(ranges, sizeof(*ranges) * n_ranges) : NULL;
	data->n_ranges = n_ranges;
	g_task_set_source_tag(task, hr_thpmap_scan_async);
	g_task_set_name(task, "hr-thpmap-scan");
	g_task_set_task_data(task, data, (GDestroyNotify)scan_task_data_free);
	g_task_run_in_thread(task, scan_thread);
}

HrThpMap *
hr_thpmap_scan_finish(GAsyncResult *result, GError **error)
{
	g_return_val_if_fail(g_task_is_valid(result, NULL), NULL);
	g_return_val_if_fail(g_task_get_source_tag(G_TASK(result)) == hr_thpmap_scan_async, NULL);
	return g_task_propagate_pointer(G_TASK(result), error);
}
