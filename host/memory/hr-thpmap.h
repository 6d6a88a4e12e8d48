/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Which 2 MiB guest-physical blocks of a guest are backed by one host huge
 * page.
 *
 * A guest block whose host backing is one PMD-sized THP is worth a whole
 * free host 2 MiB block once the guest hands it over (QEMU discards it and
 * the THP goes back to the host's buddy allocator at order 9). A block
 * backed by 4 KiB pages only gives 512 scattered free host pages that host
 * compaction still has to assemble.
 *
 * For each 2 MiB-aligned block of each RAM range (the layout from the
 * device's HELLO: guest-physical address, size, QEMU virtual address) the
 * scan reads one /proc/PID/pagemap entry for the first page; when that page
 * is the head of a THP, one more for the last page, to tell a PMD-sized THP
 * from a smaller multi-size THP (KPF_THP is set for both); and the
 * /proc/kpageflags entry of each PFN read. A block that is not one THP
 * gets its 512 pagemap entries read at once (4 KiB) to count its resident
 * pages: a discard frees only those, so a block with few of them is worth
 * nothing to the host.
 *
 * Needs CAP_SYS_ADMIN: without it pagemap reports PFN 0 and /proc/kpageflags
 * cannot be opened; the scan then fails with HR_THPMAP_ERROR_PERMISSION.
 * The reads are synchronous procfs reads that do not wait for I/O but walk
 * page tables: 1.5 us per block measured on this host (2 GiB, half THP,
 * half untouched), so about 50 ms for a 64 GiB guest: the daemon scans in
 * worker threads (hr-snapshot's reads, hr_thpmap_scan_async()), never on
 * its main loop.
 */

#include <gio/gio.h>

#include "hr-codec.h"

G_BEGIN_DECLS

#define HR_THPMAP_ERROR (hr_thpmap_error_quark())
GQuark
hr_thpmap_error_quark(void);

typedef enum {
	HR_THPMAP_ERROR_IO,	    /* open/read failed, the process is gone, short read */
	HR_THPMAP_ERROR_PERMISSION, /* not CAP_SYS_ADMIN: PFNs hidden */
	HR_THPMAP_ERROR_INVALID,    /* ranges overlap, wrap or are empty */
} HrThpmapError;

/* pagemap and kpageflags bits (Documentation/admin-guide/mm/pagemap.rst) */
#define HR_PM_PFN_MASK ((G_GUINT64_CONSTANT(1) << 55) - 1)
#define HR_PM_SWAPPED (G_GUINT64_CONSTANT(1) << 62)
#define HR_PM_PRESENT (G_GUINT64_CONSTANT(1) << 63)
#define HR_KPF_COMPOUND_HEAD 15
#define HR_KPF_COMPOUND_TAIL 16
#define HR_KPF_HUGE 17
#define HR_KPF_THP 22

#define HR_THPMAP_BLOCK_SIZE (G_GUINT64_CONSTANT(2) * 1024 * 1024)

/* a block not backed by a host THP counts as SMALL with this many resident pages */
#define HR_THPMAP_SMALL_MIN_PAGES 448

typedef enum {
	/* (nearly) nothing in host RAM: never touched, swapped, discarded, or
	 * fewer than HR_THPMAP_SMALL_MIN_PAGES resident 4 KiB pages */
	HR_THP_BLOCK_ABSENT = 0,
	/* 4 KiB pages or smaller folios, nearly all resident, or hva not 2 MiB aligned */
	HR_THP_BLOCK_SMALL = 1,
	HR_THP_BLOCK_THP = 2,	 /* one PMD-sized transparent huge page */
	HR_THP_BLOCK_HUGETLB = 3 /* a hugetlbfs page (not given back by a discard) */
} HrThpBlock;

typedef struct {
	guint n_ranges;
	HrRamRange *ranges;
	guint64 *first_block; /* per range: index of its first block */
	guint64 n_blocks;     /* 2 MiB-aligned guest blocks inside the ranges */
	guint64 n_thp;
	guint64 n_small;
	guint64 n_absent;
	guint64 n_hugetlb;
	guint64 n_misaligned; /* of n_small: hva and gpa differ modulo 2 MiB */
	guint64 *bits;	      /* 2 bits per block: HrThpBlock */
	/* host NUMA node of the THP-backed blocks (from their PFNs and the
	 * nodes' memory blocks in sysfs); -1 when sysfs does not say */
	gint thp_node;	     /* the node most of them are on */
	guint64 thp_on_node; /* how many are there */
	gint64 scan_us;	     /* how long the scan took */
} HrThpMap;

/*
 * Scan the QEMU process @pid whose guest RAM is @ranges (gpa, size, hva).
 * Blocks are numbered in range order, ascending gpa within a range. Not on
 * the main loop: a scan grows with the guest (a critical says so when the
 * calling thread owns the default main context).
 */
HrThpMap *
hr_thpmap_scan(gint pid, const HrRamRange *ranges, guint n_ranges, GError **error);
/* The same over explicit files: tests, and a pagemap opened elsewhere. */
HrThpMap *
hr_thpmap_scan_files(const gchar *pagemap_path, const gchar *kpageflags_path, const gchar *sys_root,
		     const HrRamRange *ranges, guint n_ranges, GError **error);
void
hr_thpmap_free(HrThpMap *map);
/* hr_thpmap_scan() in a GTask worker thread, completing on the caller's context */
void
hr_thpmap_scan_async(gint pid, const HrRamRange *ranges, guint n_ranges, GCancellable *cancellable,
		     GAsyncReadyCallback callback, gpointer user_data);
HrThpMap *
hr_thpmap_scan_finish(GAsyncResult *result, GError **error);

HrThpBlock
hr_thpmap_get(const HrThpMap *map, guint64 index);
guint64
hr_thpmap_block_gpa(const HrThpMap *map, guint64 index);
/* FALSE when @gpa is not the start of a scanned block */
gboolean
hr_thpmap_lookup(const HrThpMap *map, guint64 gpa, HrThpBlock *block);
const gchar *
hr_thp_block_to_string(HrThpBlock block);

/*
 * The blocks of @kind as sorted, disjoint gpa ranges (each inside one RAM
 * range), as an EVACUATE's ranges take them: at most @max, the largest
 * when there are more. Returns how many were written to @out; @blocks
 * (may be NULL) gets the blocks they cover.
 */
guint
hr_thpmap_ranges(const HrThpMap *map, HrThpBlock kind, HrRange *out, guint max, guint64 *blocks);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrThpMap, hr_thpmap_free)

G_END_DECLS
