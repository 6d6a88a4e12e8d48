/* SPDX-License-Identifier: GPL-2.0-only */
/* libFuzzer target: the command decoder (what the daemon would forward). */
#include "hr-codec.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) cmd = hr_cmd_decode(data, size, &error);
	g_autoptr(GBytes) again = NULL;
	g_autoptr(HrCmd) twice = NULL;

	if (cmd == NULL) {
		g_assert(error != NULL);
		return 0;
	}
	g_assert(size <= VIRTIO_HUGEROOM_CMD_BUF);
	again = hr_cmd_encode(cmd);
	g_assert(g_bytes_get_size(again) == size);
	twice = hr_cmd_decode(g_bytes_get_data(again, NULL), size, &error);
	g_assert(twice != NULL);
	g_assert(twice->nr_gpas == cmd->nr_gpas && twice->nr_ranges == cmd->nr_ranges);
	return 0;
}
