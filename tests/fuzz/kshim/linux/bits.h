/* SPDX-License-Identifier: GPL-2.0-only */
/* User-space stand-in for <linux/bits.h>; see kshim/linux/kernel.h. */
#ifndef HR_KSHIM_BITS_H
#define HR_KSHIM_BITS_H

#define BIT_ULL(nr)	(1ULL << (nr))

#endif
