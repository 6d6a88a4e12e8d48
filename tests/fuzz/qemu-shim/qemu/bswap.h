/* SPDX-License-Identifier: GPL-2.0-or-later */
/* QEMU's little-endian loads (qemu/bswap.h), with QEMU's return types. */
#ifndef QEMU_BSWAP_H
#define QEMU_BSWAP_H

static inline int lduw_le_p(const void *ptr)
{
	uint16_t v;

	memcpy(&v, ptr, sizeof(v));
	return GUINT16_FROM_LE(v);
}

static inline int ldl_le_p(const void *ptr)
{
	uint32_t v;

	memcpy(&v, ptr, sizeof(v));
	return (int)GUINT32_FROM_LE(v);
}

static inline uint64_t ldq_le_p(const void *ptr)
{
	uint64_t v;

	memcpy(&v, ptr, sizeof(v));
	return GUINT64_FROM_LE(v);
}

#endif
