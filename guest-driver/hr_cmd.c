// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: the command decoder.
 *
 * Every command the host puts on cmdq passes virtio_hugeroom_check_cmd()
 * before hr_dev.c acts on it: the common rules of SPEC 1.6.1.1 (length,
 * header, flags, request id, negotiated feature) and each type's layout
 * and argument rules.  The decoder reads only the copy of the buffer it
 * is given and the negotiated features; it keeps no state, takes no lock
 * and does not sleep.
 *
 * The same file is compiled in user space by the fuzz target
 * tests/fuzz/fuzz-guest-cmd.c: it includes only the headers below, which
 * tests/fuzz/kshim/ provides there, so it must not grow other kernel
 * dependencies.
 */

#include <linux/bits.h>
#include <linux/kernel.h>
#include <asm/byteorder.h>

#include "virtio_hugeroom.h"
#include "hr_cmd.h"

/* The feature a command needs (SPEC 1.6.1), or -1 for none. */
static int virtio_hugeroom_cmd_feature(u16 type)
{
	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		return VIRTIO_HUGEROOM_F_STATUS;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		return VIRTIO_HUGEROOM_F_EVACUATE;
	case VIRTIO_HUGEROOM_CMD_RETURN:
		return VIRTIO_HUGEROOM_F_HOLD;
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		return VIRTIO_HUGEROOM_F_PCP;
	default:
		return -1;
	}
}

/* Block-aligned, and no address repeated (n <= 500: quadratic is fine). */
static bool virtio_hugeroom_gpas_ok(const __le64 *gpas, u32 n)
{
	u32 i, j;

	for (i = 0; i < n; i++) {
		u64 gpa = le64_to_cpu(gpas[i]);

		if (!IS_ALIGNED(gpa, VIRTIO_HUGEROOM_BLOCK_SIZE))
			return false;
		for (j = 0; j < i; j++)
			if (gpas[j] == gpas[i])
				return false;
	}
	return true;
}

/*
 * The per-type rules of SPEC 1.6.3 (EVACUATE), 1.6.5 (CAPTURE) and 1.6.6
 * (RETURN), after virtio_hugeroom_check_cmd() checked the layout.
 */
static u32 virtio_hugeroom_check_args(const void *buf, u16 type)
{
	switch (type) {
	case VIRTIO_HUGEROOM_CMD_EVACUATE: {
		const struct virtio_hugeroom_evacuate *ev = buf;
		const struct virtio_hugeroom_range *rg = (const void *)(ev + 1);
		u16 flags = le16_to_cpu(ev->hdr.flags);
		u32 count = le32_to_cpu(ev->count);
		u32 nr_gpas = le32_to_cpu(ev->nr_gpas);
		u32 nr_ranges = le32_to_cpu(ev->nr_ranges);
		u64 prev_end = 0;
		u32 i;

		if (!count)
			return VIRTIO_HUGEROOM_S_INVALID;
		/* rule 2: BACKGROUND goes with any form */
		flags &= ~VIRTIO_HUGEROOM_EVAC_F_BACKGROUND;
		if (!(flags & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST)) {
			if (flags || nr_ranges || !nr_gpas ||
			    nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS ||
			    count > nr_gpas ||
			    !virtio_hugeroom_gpas_ok((const void *)(ev + 1),
						     nr_gpas))
				return VIRTIO_HUGEROOM_S_INVALID;
			return 0;
		}
		if (nr_gpas)
			return VIRTIO_HUGEROOM_S_INVALID;
		if (!(flags & VIRTIO_HUGEROOM_EVAC_F_RANGES))
			return nr_ranges ? VIRTIO_HUGEROOM_S_INVALID : 0;
		if (!nr_ranges || nr_ranges > VIRTIO_HUGEROOM_MAX_CMD_RANGES)
			return VIRTIO_HUGEROOM_S_INVALID;
		for (i = 0; i < nr_ranges; i++) {
			u64 start = le64_to_cpu(rg[i].start);
			u64 end = le64_to_cpu(rg[i].end);

			if (!IS_ALIGNED(start, VIRTIO_HUGEROOM_BLOCK_SIZE) ||
			    !IS_ALIGNED(end, VIRTIO_HUGEROOM_BLOCK_SIZE) ||
			    start >= end || (i && start < prev_end))
				return VIRTIO_HUGEROOM_S_INVALID;
			prev_end = end;
		}
		return 0;
	}
	case VIRTIO_HUGEROOM_CMD_CAPTURE: {
		const struct virtio_hugeroom_capture *cap = buf;

		return cap->count ? 0 : VIRTIO_HUGEROOM_S_INVALID;
	}
	case VIRTIO_HUGEROOM_CMD_RETURN: {
		const struct virtio_hugeroom_return *ret = buf;
		u32 count = le32_to_cpu(ret->count);
		u32 nr_gpas = le32_to_cpu(ret->nr_gpas);

		if (!nr_gpas)
			return count ? 0 : VIRTIO_HUGEROOM_S_INVALID;
		if (nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS ||
		    count != nr_gpas ||
		    !virtio_hugeroom_gpas_ok((const void *)(ret + 1), nr_gpas))
			return VIRTIO_HUGEROOM_S_INVALID;
		return 0;
	}
	case VIRTIO_HUGEROOM_CMD_SET_PCP: {
		const struct virtio_hugeroom_set_pcp *pcp = buf;
		u32 policy = le32_to_cpu(pcp->policy);
		bool explicit = policy == VIRTIO_HUGEROOM_PCP_EXPLICIT;

		/* SPEC 1.6.7: a high exactly with EXPLICIT */
		if (policy > VIRTIO_HUGEROOM_PCP_EXPLICIT || explicit != !!pcp->high)
			return VIRTIO_HUGEROOM_S_INVALID;
		return 0;
	}
	default:
		return 0;
	}
}

/*
 * Check a command of @len bytes (the used length the device gave) against
 * the common rules of SPEC 1.6.1.1 and the layout rules of its type.
 * Returns 0, or the RESULT status that answers it: S_UNSUPPORTED for an
 * unknown type or a feature not negotiated, S_INVALID for anything else.
 * @buf holds at least min(@len, VIRTIO_HUGEROOM_CMD_BUF) bytes.  Bit F of
 * @features is set if feature F was negotiated.
 */
u32 virtio_hugeroom_check_cmd(const void *buf, u32 len, u64 features)
{
	const struct virtio_hugeroom_hdr *hdr = buf;
	u16 type, flags, known_flags = 0;
	u64 expect;
	int feature;

	/* Nothing of the header is read before it is known to be there. */
	if (len < sizeof(*hdr) || len > VIRTIO_HUGEROOM_CMD_BUF ||
	    le32_to_cpu(hdr->len) != len)
		return VIRTIO_HUGEROOM_S_INVALID;
	type = le16_to_cpu(hdr->type);
	flags = le16_to_cpu(hdr->flags);

	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		expect = sizeof(*hdr);
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE: {
		const struct virtio_hugeroom_evacuate *ev = buf;

		known_flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST |
			      VIRTIO_HUGEROOM_EVAC_F_RANGES;
		/* SPEC 1.6.3 rule 1: bit 2 only with F_BACKGROUND */
		if (features & BIT_ULL(VIRTIO_HUGEROOM_F_BACKGROUND))
			known_flags |= VIRTIO_HUGEROOM_EVAC_F_BACKGROUND;
		if (len < sizeof(*ev))
			return VIRTIO_HUGEROOM_S_INVALID;
		expect = sizeof(*ev) +
			 (u64)le32_to_cpu(ev->nr_gpas) * sizeof(__le64) +
			 (u64)le32_to_cpu(ev->nr_ranges) *
			 sizeof(struct virtio_hugeroom_range);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		expect = sizeof(struct virtio_hugeroom_capture);
		break;
	case VIRTIO_HUGEROOM_CMD_RETURN: {
		const struct virtio_hugeroom_return *ret = buf;

		if (len < sizeof(*ret))
			return VIRTIO_HUGEROOM_S_INVALID;
		expect = sizeof(*ret) +
			 (u64)le32_to_cpu(ret->nr_gpas) * sizeof(__le64);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		expect = sizeof(struct virtio_hugeroom_set_pcp);
		break;
	default:
		return VIRTIO_HUGEROOM_S_UNSUPPORTED;
	}

	feature = virtio_hugeroom_cmd_feature(type);
	if (feature >= 0 && !(features & BIT_ULL(feature)))
		return VIRTIO_HUGEROOM_S_UNSUPPORTED;
	if ((flags & ~known_flags) || len != expect || !hdr->request_id)
		return VIRTIO_HUGEROOM_S_INVALID;
	return virtio_hugeroom_check_args(buf, type);
}
