/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * User-space stand-ins for the kernel headers guest-driver/hr_cmd.c
 * includes, so that the fuzz target compiles the driver's own decoder.
 * Only what hr_cmd.c uses; a new kernel dependency there fails the build
 * here, on purpose.
 */
#ifndef HR_KSHIM_KERNEL_H
#define HR_KSHIM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;

#define IS_ALIGNED(x, a)	(((x) & ((__typeof__(x))(a) - 1)) == 0)

#endif
