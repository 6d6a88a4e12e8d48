/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libFuzzer target: the STATUS decoder. Whatever it accepts must encode
 * back to the very same bytes (the wire form is canonical).
 */
#include <string.h>

#include "hr-codec.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) status = hr_status_decode(data, size, &error);
	g_autoptr(GBytes) again = NULL;

	if (status == NULL) {
		g_assert(error != NULL);
		return 0;
	}
	again = hr_status_encode(status);
	g_assert(g_bytes_get_size(again) == size);
	/* reserved fields are not kept, so compare by decoding once more */
	{
		g_autoptr(HrStatus) twice =
		    hr_status_decode(g_bytes_get_data(again, NULL), size, &error);
		g_assert(twice != NULL);
		g_assert(twice->seq == status->seq);
		g_assert(twice->nr_candidates == status->nr_candidates);
		for (guint i = 0; i < status->nr_candidates; i++)
			g_assert(twice->candidates[i].gpa == status->candidates[i].gpa);
	}
	return 0;
}
