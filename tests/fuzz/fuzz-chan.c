/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libFuzzer target: a device's byte stream as the daemon reads it. The
 * first byte picks the chunk size the stream arrives in; every frame the
 * reader yields goes through the decoder for its type.
 */
#include <string.h>

#include "hr-codec.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static void
decode_frame(HrChanFrame *frame)
{
	g_autoptr(GError) error = NULL;

	g_assert(g_bytes_get_size(frame->payload) <= HR_CHAN_MAX_PAYLOAD);
	switch (frame->type) {
	case HR_CHAN_HELLO: {
		g_autoptr(HrChanHello) hello = hr_chan_hello_decode(frame->payload, &error);
		if (hello != NULL) {
			g_autofree gchar *uuid = hr_chan_hello_uuid_to_string(hello);
			g_assert(strlen(uuid) == 36);
			g_assert(hello->nr_ram >= 1 && hello->nr_ram <= HR_CHAN_MAX_RAM);
		}
		break;
	}
	case HR_CHAN_WELCOME: {
		HrChanWelcome welcome;
		hr_chan_welcome_decode(frame->payload, &welcome, &error);
		break;
	}
	case HR_CHAN_GUEST_MSG: {
		g_autoptr(HrGuestMsg) msg = hr_chan_guest_msg_decode(frame->payload, &error);
		if (msg != NULL)
			g_assert((msg->status != NULL) + (msg->result != NULL) +
				     (msg->blocks != NULL) ==
				 1);
		break;
	}
	case HR_CHAN_HOST_CMD: {
		g_autoptr(HrCmd) cmd = hr_chan_host_cmd_decode(frame->payload, &error);
		if (cmd != NULL)
			g_assert(cmd->hdr.len <= VIRTIO_HUGEROOM_CMD_BUF);
		break;
	}
	case HR_CHAN_DEVICE_STATE: {
		HrChanDeviceState state;
		hr_chan_device_state_decode(frame->payload, &state, &error);
		break;
	}
	case HR_CHAN_LAYOUT: {
		g_autoptr(HrChanLayout) layout = hr_chan_layout_decode(frame->payload, &error);
		if (layout != NULL) {
			g_assert(layout->nr_ram >= 1 && layout->nr_ram <= HR_CHAN_MAX_RAM);
			for (guint32 i = 0; i < layout->nr_ram; i++) {
				g_assert(layout->ram[i].size > 0 && layout->ram[i].size % 4096 == 0);
				g_assert(i == 0 || layout->ram[i].gpa >= layout->ram[i - 1].gpa +
									       layout->ram[i - 1].size);
			}
		}
		break;
	}
	case HR_CHAN_SET_INTERVAL: {
		guint32 ms;
		hr_chan_set_interval_decode(frame->payload, &ms, &error);
		break;
	}
	default:
		g_assert_not_reached();
	}
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(HrFrameReader) reader = hr_frame_reader_new();
	gsize chunk;

	if (size < 1)
		return 0;
	chunk = data[0] == 0 ? size : data[0];
	data++;
	size--;
	for (gsize off = 0; off < size; off += chunk) {
		hr_frame_reader_push(reader, data + off, MIN(chunk, size - off));
		for (;;) {
			g_autoptr(GError) error = NULL;
			g_autoptr(HrChanFrame) frame = hr_frame_reader_next(reader, &error);
			if (frame == NULL) {
				if (error != NULL)
					return 0;
				break;
			}
			decode_frame(frame);
		}
		g_assert(hr_frame_reader_get_pending(reader) <=
			 sizeof(struct hr_chan_hdr) + HR_CHAN_MAX_PAYLOAD + chunk);
	}
	return 0;
}
