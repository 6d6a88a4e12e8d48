/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target: the QEMU device's checks of what the guest and the
 * daemon send (hw/virtio/virtio-hugeroom-check.c, taken from
 * qemu-patches/ by run-fuzz.sh and built against tests/fuzz/qemu-shim),
 * dispatched on hdr.type as the device does: STATUS from the statusq,
 * RESULT/PROGRESS/HOLD/RETURNED from the eventq, commands from the
 * daemon; and every input as the daemon's WELCOME.  ASan sees every read beyond the message; an accepted message
 * must also have every property the device relies on afterwards.
 */
#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "standard-headers/linux/virtio_hugeroom.h"
#include "virtio-hugeroom-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Guest RAM as a pc machine with 6 GiB has it: below 3 GiB and from 4 GiB. */
static bool
fuzz_in_ram(void *opaque, uint64_t gpa)
{
	guint *calls = opaque;

	(*calls)++;
	return gpa + VIRTIO_HUGEROOM_BLOCK_SIZE <= (3ull << 30) ||
	       (gpa >= (4ull << 30) && gpa + VIRTIO_HUGEROOM_BLOCK_SIZE <= (7ull << 30));
}

/* An accepted RESULT or PROGRESS keeps SPEC 1.6.3.2 rules 1 to 3. */
static void
check_result(const uint8_t *data, uint32_t len)
{
	const struct virtio_hugeroom_result *res = (const void *)data;
	uint64_t sum;

	if (!virtio_hugeroom_check_result(data, len))
		return;
	g_assert(len == sizeof(*res));
	g_assert(lduw_le_p(&res->hdr.flags) == 0);
	g_assert(ldq_le_p(&res->hdr.request_id) != 0);
	sum = (uint32_t)ldl_le_p(&res->blocks_freed);
	for (int i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
		sum += (uint32_t)ldl_le_p(&res->failed[i]);
	if (lduw_le_p(&res->hdr.type) == VIRTIO_HUGEROOM_MSG_PROGRESS) {
		g_assert(ldl_le_p(&res->status) == 0);
		g_assert(sum <= (uint32_t)ldl_le_p(&res->blocks_tried));
	} else {
		g_assert((uint32_t)ldl_le_p(&res->status) <= VIRTIO_HUGEROOM_S_BUSY);
		g_assert(sum == (uint32_t)ldl_le_p(&res->blocks_tried));
	}
}

static void
check_status(const uint8_t *data, uint32_t len)
{
	const struct virtio_hugeroom_status *st = (const void *)data;
	const struct virtio_hugeroom_zone *zones;
	const struct virtio_hugeroom_candidate *cands;
	uint32_t nr_zones, nr_cands;
	guint calls = 0;

	if (virtio_hugeroom_check_status(data, len, VIRTIO_HUGEROOM_MAX_CANDIDATES,
					 fuzz_in_ram, &calls) != NULL)
		return;
	nr_zones = lduw_le_p(&st->nr_zones);
	nr_cands = lduw_le_p(&st->nr_candidates);
	g_assert(nr_zones <= VIRTIO_HUGEROOM_MAX_ZONES);
	g_assert(nr_cands <= VIRTIO_HUGEROOM_MAX_CANDIDATES);
	g_assert(len == sizeof(*st) + nr_zones * sizeof(*zones) + nr_cands * sizeof(*cands));
	g_assert((uint32_t)ldl_le_p(&st->hdr.len) == len);
	g_assert(calls == nr_cands);
	zones = (const void *)(st + 1);
	for (uint32_t i = 0; i < nr_zones; i++)
		g_assert(memchr(zones[i].name, '\0', sizeof(zones[i].name)) != NULL);
	cands = (const void *)(zones + nr_zones);
	for (uint32_t i = 0; i < nr_cands; i++) {
		uint64_t gpa = ldq_le_p(&cands[i].gpa);

		g_assert(gpa % VIRTIO_HUGEROOM_BLOCK_SIZE == 0);
		g_assert(fuzz_in_ram(&calls, gpa));
		g_assert(cands[i].zone < nr_zones);
		g_assert(cands[i].migratetype < VIRTIO_HUGEROOM_NR_MT);
	}
}

static void
check_blocks(const uint8_t *data, uint32_t len)
{
	const struct virtio_hugeroom_blocks *blk = (const void *)data;
	g_autoptr(GHashTable) seen = NULL;
	const uint8_t *gpas;
	uint32_t nr;

	if (virtio_hugeroom_check_blocks_hdr(data, len) != NULL)
		return;
	nr = ldl_le_p(&blk->nr_blocks);
	g_assert(nr >= 1 && nr <= VIRTIO_HUGEROOM_MAX_EVT_BLOCKS);
	g_assert(len == sizeof(*blk) + (uint64_t)nr * sizeof(uint64_t));
	gpas = data + sizeof(*blk);
	seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	for (uint32_t i = 0; i < nr; i++) {
		gint64 *gpa = g_new(gint64, 1);

		*gpa = (gint64)ldq_le_p(gpas + i * sizeof(uint64_t));
		g_hash_table_add(seen, gpa);
	}
	g_assert((virtio_hugeroom_check_unique(gpas, nr) == NULL) ==
		 (g_hash_table_size(seen) == nr));
}

/*
 * An accepted EVACUATE (SPEC 1.6.3.3): known flags only, BACKGROUND with
 * any form; the form's lists agree with its counts and its length; blocks
 * aligned, listed once; ranges aligned, sorted, apart.
 */
static void
check_evacuate(const uint8_t *data, uint32_t len)
{
	const struct virtio_hugeroom_evacuate *ev = (const void *)data;
	uint16_t flags = lduw_le_p(&ev->hdr.flags);
	uint16_t form = flags & ~VIRTIO_HUGEROOM_EVAC_F_BACKGROUND;
	uint32_t count = ldl_le_p(&ev->count), nr_gpas = ldl_le_p(&ev->nr_gpas);
	uint32_t nr_ranges = ldl_le_p(&ev->nr_ranges);
	const uint8_t *tail = data + sizeof(*ev);
	const struct virtio_hugeroom_range *ranges = (const void *)(tail + nr_gpas * 8ull);
	g_autoptr(GHashTable) seen =
	    g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

	g_assert(form == 0 || form == VIRTIO_HUGEROOM_EVAC_F_CHEAPEST ||
		 form == (VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES));
	g_assert(count >= 1);
	g_assert(len == sizeof(*ev) + (uint64_t)nr_gpas * 8 + (uint64_t)nr_ranges * sizeof(*ranges));
	if (form == 0)
		g_assert(nr_gpas >= 1 && nr_gpas <= VIRTIO_HUGEROOM_MAX_CMD_BLOCKS &&
			 count <= nr_gpas && nr_ranges == 0);
	else
		g_assert(nr_gpas == 0 &&
			 (form & VIRTIO_HUGEROOM_EVAC_F_RANGES ? nr_ranges >= 1 &&
								 nr_ranges <= VIRTIO_HUGEROOM_MAX_CMD_RANGES
							       : nr_ranges == 0));
	for (uint32_t i = 0; i < nr_gpas; i++) {
		gint64 *gpa = g_new(gint64, 1);

		*gpa = (gint64)ldq_le_p(tail + i * 8);
		g_assert(*gpa % VIRTIO_HUGEROOM_BLOCK_SIZE == 0);
		g_hash_table_add(seen, gpa);
	}
	g_assert(g_hash_table_size(seen) == nr_gpas);
	for (uint32_t i = 0; i < nr_ranges; i++) {
		uint64_t start = ldq_le_p(&ranges[i].start), end = ldq_le_p(&ranges[i].end);

		g_assert(start % VIRTIO_HUGEROOM_BLOCK_SIZE == 0 &&
			 end % VIRTIO_HUGEROOM_BLOCK_SIZE == 0 && end > start);
		g_assert(i == 0 || start >= ldq_le_p(&ranges[i - 1].end));
	}
}

static void
check_cmd(const uint8_t *data, uint32_t len)
{
	const struct virtio_hugeroom_hdr *hdr = (const void *)data;

	if (virtio_hugeroom_check_cmd(data, len) != NULL)
		return;
	g_assert(len >= sizeof(*hdr) && len <= VIRTIO_HUGEROOM_CMD_BUF);
	g_assert((uint32_t)ldl_le_p(&hdr->len) == len);
	if (lduw_le_p(&hdr->type) == VIRTIO_HUGEROOM_CMD_EVACUATE)
		check_evacuate(data, len);
}

/* a WELCOME the device accepts has the length and features its version has */
static void
check_welcome(const uint8_t *data, uint32_t len)
{
	uint32_t version, features;
	const char *err = virtio_hugeroom_check_welcome(data, len, &version, &features);

	if (err != NULL) {
		g_assert(version == (len < sizeof(struct hr_chan_welcome) ? 0 : (uint32_t)ldl_le_p(data)));
		return;
	}
	g_assert(version >= 1 && version <= VIRTIO_HUGEROOM_VERSION);
	g_assert(version == (uint32_t)ldl_le_p(data));
	if (version == 1)
		g_assert(len == sizeof(struct hr_chan_welcome) && features == 0);
	else
		g_assert(len == sizeof(struct hr_chan_welcome2) &&
			 features == (uint32_t)ldl_le_p(data + 8));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t len = size;

	/* The device never hands the checks more than a message can be. */
	if (size > VIRTIO_HUGEROOM_MAX_MSG)
		return 0;
	/* Any bytes can come as the daemon's WELCOME. */
	check_welcome(data, len);
	/* Too short for a type: the statusq and the daemon still check it. */
	if (size < sizeof(uint16_t)) {
		check_status(data, len);
		check_cmd(data, len);
		return 0;
	}
	switch (lduw_le_p(data)) {
	case VIRTIO_HUGEROOM_MSG_STATUS:
		check_status(data, len);
		break;
	case VIRTIO_HUGEROOM_MSG_RESULT:
	case VIRTIO_HUGEROOM_MSG_PROGRESS:
		check_result(data, len);
		break;
	case VIRTIO_HUGEROOM_MSG_HOLD:
	case VIRTIO_HUGEROOM_MSG_RETURNED:
		check_blocks(data, len);
		break;
	default:
		check_cmd(data, len);
		break;
	}
	return 0;
}
