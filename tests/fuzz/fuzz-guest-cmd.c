/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libFuzzer target: the guest driver's own command decoder,
 * guest-driver/hr_cmd.c, compiled in user space against tests/fuzz/kshim/
 * (run-fuzz.sh builds it instrumented, as a separate object).
 *
 * Input: byte 0 is the negotiated feature bits (bit F = feature F); byte 1
 * bit 0 says whether bytes 2..5 carry the used length the device claims
 * (le32, any value, as a hostile device may write) instead of the real
 * size. The rest is the cmdq buffer. As in hr_dev.c's cmd_work, the
 * decoder gets exactly min(used length, VIRTIO_HUGEROOM_CMD_BUF) bytes, in
 * an allocation of that size so that ASan sees any read past them.
 *
 * Checked besides memory safety:
 * - the answer is 0, S_INVALID or S_UNSUPPORTED, and the same for the
 *   same input (no hidden state), and the buffer is left unchanged;
 * - an accepted command has the used length in hdr.len, fits the buffer,
 *   names a request, and needs only negotiated features;
 * - the guest accepts no command the host's codec (protocol/hr-codec.c,
 *   what the daemon encodes and checks) refuses, and with every feature
 *   negotiated it refuses none the codec accepts: the two decoders of one
 *   SPEC agree.
 */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hr-codec.h"

typedef uint32_t u32;
typedef uint64_t u64;
#include "hr_cmd.h"

#define ALL_FEATURES                                                                       \
	((1ULL << VIRTIO_HUGEROOM_F_STATUS) | (1ULL << VIRTIO_HUGEROOM_F_EVACUATE) |       \
	 (1ULL << VIRTIO_HUGEROOM_F_HOLD) | (1ULL << VIRTIO_HUGEROOM_F_PCP) |              \
	 (1ULL << VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM) | (1ULL << VIRTIO_HUGEROOM_F_BACKGROUND))

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

/*
 * The feature a command needs, as SPEC 1.6.1 lists them; -1 for none.
 * Restated from the SPEC on purpose, not shared with hr_cmd.c: a check
 * against the decoder's own table could not catch a wrong entry in it.
 */
static int
needed_feature(guint16 type)
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

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) host = NULL;
	u64 features;
	u32 used, have, status, again, all;
	guint8 *buf, *copy;
	size_t off = 2;

	if (size < 2)
		return 0;
	features = data[0];
	if (data[1] & 1) {
		guint32 le;

		if (size < 6)
			return 0;
		memcpy(&le, data + 2, sizeof(le));
		used = le32toh(le);
		off = 6;
	} else {
		used = (u32)MIN(size - 2, (size_t)UINT32_MAX);
	}
	data += off;
	size -= off;

	/* What cmd_work copies out: at most one buffer, zeros past the data. */
	have = MIN(used, (u32)VIRTIO_HUGEROOM_CMD_BUF);
	buf = malloc(have ? have : 1);
	copy = malloc(have ? have : 1);
	g_assert(buf != NULL && copy != NULL);
	memset(buf, 0, have);
	memcpy(buf, data, MIN((size_t)have, size));
	memcpy(copy, buf, have);

	status = virtio_hugeroom_check_cmd(buf, used, features);
	g_assert(status == 0 || status == VIRTIO_HUGEROOM_S_INVALID ||
		 status == VIRTIO_HUGEROOM_S_UNSUPPORTED);
	again = virtio_hugeroom_check_cmd(buf, used, features);
	g_assert(again == status);
	g_assert(memcmp(buf, copy, have) == 0);
	all = virtio_hugeroom_check_cmd(buf, used, ALL_FEATURES);

	if (status == 0) {
		struct virtio_hugeroom_hdr hdr;
		int f;

		g_assert(used >= sizeof(hdr) && used <= VIRTIO_HUGEROOM_CMD_BUF);
		memcpy(&hdr, buf, sizeof(hdr));
		g_assert(le32toh(hdr.len) == used);
		g_assert(hdr.request_id != 0);
		f = needed_feature(le16toh(hdr.type));
		g_assert(f < 0 || (features & (1ULL << f)));
		/* EVAC_F_BACKGROUND only with F_BACKGROUND (SPEC 1.6.3 rule 1) */
		g_assert(le16toh(hdr.type) != VIRTIO_HUGEROOM_CMD_EVACUATE ||
			 !(le16toh(hdr.flags) & VIRTIO_HUGEROOM_EVAC_F_BACKGROUND) ||
			 (features & (1ULL << VIRTIO_HUGEROOM_F_BACKGROUND)));
		/* More features never make a command invalid. */
		g_assert(all == 0);
	}

	/* The host codec is only ever handed whole messages. */
	if (used <= VIRTIO_HUGEROOM_CMD_BUF)
		host = hr_cmd_decode(buf, used, &error);
	g_assert((host != NULL) == (all == 0));

	free(copy);
	free(buf);
	return 0;
}
