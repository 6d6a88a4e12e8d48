/* SPDX-License-Identifier: GPL-2.0-only */
/* User-space stand-in for <asm/byteorder.h>; see kshim/linux/kernel.h. */
#ifndef HR_KSHIM_BYTEORDER_H
#define HR_KSHIM_BYTEORDER_H

#include <endian.h>

#define le16_to_cpu(x)	le16toh(x)
#define le32_to_cpu(x)	le32toh(x)
#define le64_to_cpu(x)	le64toh(x)

#endif
