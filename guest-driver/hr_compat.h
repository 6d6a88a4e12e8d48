/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-hugeroom guest driver: kernel-version and kernel-feature shims.
 *
 * One out-of-tree module serves Debian's 6.1 and 6.12 kernels.  Kernel
 * interfaces that differ between them are told apart here and in Kbuild,
 * by feature tests on the kernel's headers (VIRTIO_HUGEROOM_HAVE_*, set by
 * Kbuild), never by LINUX_VERSION_CODE: a distribution kernel may carry an
 * interface of a later release.  Interfaces only one file uses stay next
 * to their use, marked by their VIRTIO_HUGEROOM_HAVE_* test: the two
 * shrinker APIs (hr_evac.c), virtio_find_vqs() (hr_dev.c), the PCP high
 * bounds (hr_report.c).
 *
 * Locking: none; macros and build-time checks only.
 */
#ifndef _HR_COMPAT_H
#define _HR_COMPAT_H

#include <linux/log2.h>
#include <linux/mmzone.h>

#ifndef CONFIG_SPARSEMEM
#error "virtio_hugeroom reads pageblock flags from the SPARSEMEM usemap"
#endif

/* 6.17 changed two interfaces the driver uses; see the Kbuild tests. */
#if defined(VIRTIO_HUGEROOM_HAVE_PB_ISOLATE_BIT) || \
	defined(VIRTIO_HUGEROOM_HAVE_ACR_FLAGS)
#error "6.17 pageblock bits or alloc_contig_range() flags: review _block_mt(), _contig_alloc()"
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
/* The same for marking claimed pages movable_ops pages (hr_evac.c). */
#define VIRTIO_HUGEROOM_SET_MOVABLE(page, mops) \
	__PASTE(__, SetPageMovable)(page, mops)
#define VIRTIO_HUGEROOM_CLEAR_MOVABLE(page)	__PASTE(__, ClearPageMovable)(page)

#endif /* _HR_COMPAT_H */
