/* SPDX-License-Identifier: GPL-2.0-only */
/* libFuzzer target: any guest message (RESULT, PROGRESS, HOLD, RETURNED). */
#include "hr-codec.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrGuestMsg) msg = hr_guest_msg_decode(data, size, &error);
	g_autoptr(GBytes) again = NULL;

	if (msg == NULL) {
		g_assert(error != NULL);
		return 0;
	}
	if (msg->blocks != NULL) {
		g_assert(msg->blocks->nr_blocks <= VIRTIO_HUGEROOM_MAX_EVT_BLOCKS);
		for (guint32 i = 0; i < msg->blocks->nr_blocks; i++)
			g_assert((msg->blocks->gpas[i] & (VIRTIO_HUGEROOM_BLOCK_SIZE - 1)) == 0);
		again = hr_blocks_encode(msg->blocks);
	} else if (msg->result != NULL) {
		again = hr_result_encode(msg->result);
	} else {
		again = hr_status_encode(msg->status);
	}
	g_assert(g_bytes_get_size(again) == size);
	return 0;
}
