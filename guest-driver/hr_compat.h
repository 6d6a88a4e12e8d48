/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-hugeroom guest driver: kernel-version and kernel-feature shims.
 *
 * One out-of-tree module serves Debian's 6.1 and 6.12 kernels and the
 * newest one unstable has (7.x).  Kernel
 * interfaces that differ between them are told apart here and in Kbuild,
 * by feature tests on the kernel's headers (VIRTIO_HUGEROOM_HAVE_*, set by
 * Kbuild), never by LINUX_VERSION_CODE: a distribution kernel may carry an
 * interface of a later release.  Interfaces only one file uses stay next
 * to their use, marked by their VIRTIO_HUGEROOM_HAVE_* test: the two
 * shrinker APIs and movable_ops or balloon pages for the
 * hole claims (hr_hold.c), virtio_find_vqs() (hr_dev.c), the PCP high
 * bounds and the pageblock isolation bit (hr_report.c); alloc_contig_range()
 * has its one wrapper here, since two files call it.
 *
 * Locking: none; macros, inline helpers and build-time checks only.
 */
#ifndef _HR_COMPAT_H
#define _HR_COMPAT_H

#include <linux/gfp.h>
#include <linux/log2.h>
#include <linux/mmzone.h>
#include <linux/pageblock-flags.h>
#include <linux/page-flags.h>

#ifndef CONFIG_SPARSEMEM
#error "virtio_hugeroom reads pageblock flags from the SPARSEMEM usemap"
#endif

/*
 * The Kbuild greps, checked against what the headers define where they
 * can be, so a grep that stops matching fails the build instead of
 * choosing the other interface: MIGRATE_MOVABLE (1) passed as flags would
 * be ACR_FLAGS_CMA.  And every kernel has one of the two movable_ops
 * interfaces.
 */
#if defined(ACR_FLAGS_NONE) != defined(VIRTIO_HUGEROOM_HAVE_ACR_FLAGS)
#error "Kbuild's acr_flags_t test disagrees with gfp.h's ACR_FLAGS_NONE"
#endif
#if defined(PAGEBLOCK_MIGRATETYPE_MASK) != \
	defined(VIRTIO_HUGEROOM_HAVE_PB_ISOLATE_BIT)
#error "Kbuild's PB_migrate_isolate test disagrees with PAGEBLOCK_MIGRATETYPE_MASK"
#endif
#if !defined(VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE) && \
	!defined(VIRTIO_HUGEROOM_HAVE_PAGE_HAS_MOVABLE_OPS)
#error "neither __SetPageMovable() nor page_has_movable_ops(): review the Kbuild tests"
#endif

/*
 * Orders the buddy allocator has (MAX_ORDER before 6.4, MAX_ORDER + 1
 * until 6.8, NR_PAGE_ORDERS since), from the one definition that kept its
 * meaning: a MAX_ORDER_NR_PAGES buddy is the largest.
 */
#define VIRTIO_HUGEROOM_KERNEL_ORDERS	(ilog2(MAX_ORDER_NR_PAGES) + 1)

/*
 * The kernel names the page-type setters __SetPageOffline() and
 * __ClearPageOffline(); checkpatch --strict flags every use of that
 * upstream CamelCase, so they are spelt through this one macro.
 */
#define VIRTIO_HUGEROOM_SET_OFFLINE(page)	__PASTE(__, SetPageOffline)(page)
#define VIRTIO_HUGEROOM_CLEAR_OFFLINE(page)	__PASTE(__, ClearPageOffline)(page)
/*
 * The same for marking claimed pages movable_ops pages (hr_evac.c), on
 * kernels that let a driver do it (__SetPageMovable(), until 6.16).
 */
#ifdef VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE
#define VIRTIO_HUGEROOM_SET_MOVABLE(page, mops) \
	__PASTE(__, SetPageMovable)(page, mops)
#define VIRTIO_HUGEROOM_CLEAR_MOVABLE(page)	__PASTE(__, ClearPageMovable)(page)
#endif

/*
 * A movable_ops page (zsmalloc's) since 6.17 has a page flag and no
 * mapping; until then its mapping is set, which the caller tests.
 */
static inline bool virtio_hugeroom_movable_ops(const struct page *page)
{
#ifdef VIRTIO_HUGEROOM_HAVE_PAGE_HAS_MOVABLE_OPS
	return page_has_movable_ops(page);
#else
	return false;
#endif
}

/*
 * The one call of alloc_contig_range() (EVACUATE's blocks and hole
 * claims, hr_evac.c; SET_PCP's drain, hr_pcp.c): 6.1 and 6.12 take a
 * migratetype (6.12 through the alloc_hooks() macro), 6.17 and later
 * acr_flags_t, where ACR_FLAGS_NONE is what MIGRATE_MOVABLE was and 1,
 * MIGRATE_MOVABLE's value, is ACR_FLAGS_CMA.  acr_flags_t is an unsigned
 * int to the compiler (__bitwise is sparse's), so a call with the other
 * interface's argument builds without a word: the name is taken away
 * below, and any other call fails the build.
 */
static inline int virtio_hugeroom_acr(unsigned long start, unsigned long end,
				      gfp_t gfp)
{
#ifdef VIRTIO_HUGEROOM_HAVE_ACR_FLAGS
	return alloc_contig_range(start, end, ACR_FLAGS_NONE, gfp);
#else
	return alloc_contig_range(start, end, MIGRATE_MOVABLE, gfp);
#endif
}

#undef alloc_contig_range
#define alloc_contig_range(...) \
	virtio_hugeroom_use_virtio_hugeroom_acr(__VA_ARGS__)

/*
 * How claimed pages are movable (hr_hold.c "Claims"): movable_ops of our
 * own (__SetPageMovable(), until 6.16), or balloon pages on a
 * balloon_dev_info per claim (linux/balloon.h, 7.0, whose migratepage may
 * give a page up; only with CONFIG_BALLOON_MIGRATION, else balloon pages
 * are unmovable).  6.17 to 6.19, or 7.x without balloon migration: none,
 * and no claims.
 */
#if defined(VIRTIO_HUGEROOM_HAVE_SET_PAGE_MOVABLE)
#define VIRTIO_HUGEROOM_CLAIMS_MOVABLE_OPS
#elif defined(VIRTIO_HUGEROOM_HAVE_BALLOON_H) && \
	defined(CONFIG_BALLOON_MIGRATION)
#define VIRTIO_HUGEROOM_CLAIMS_BALLOON
#endif

/* Can EVACUATE claim holes (module param claim_holes, hr_evac.c)? */
static inline bool virtio_hugeroom_claims_supported(void)
{
#if defined(VIRTIO_HUGEROOM_CLAIMS_MOVABLE_OPS) || \
	defined(VIRTIO_HUGEROOM_CLAIMS_BALLOON)
	return true;
#else
	return false;
#endif
}

#endif /* _HR_COMPAT_H */
