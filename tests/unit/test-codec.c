/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "TestCodec"

#include <stddef.h>
#include <string.h>

#include "hr-codec.h"

#define MiB(x) ((guint64)(x) << 20)

/* ---------------------------------------------------------------------- */
/* helpers */

static HrStatus *
make_status(guint16 nr_zones, guint16 nr_candidates)
{
	HrStatus *s = hr_status_new(nr_zones, nr_candidates);
	s->hdr.flags = VIRTIO_HUGEROOM_STATUS_F_TRUNCATED;
	s->hdr.request_id = 77;
	s->seq = 42;
	s->uptime_ns = 123456789;
	s->build_ns = 5000;
	s->mem_total_pages = 262144;
	s->mem_free_pages = 200000;
	s->mem_available_pages = 210000;
	s->held_blocks = 3;
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		s->vmstat[i] = 1000 + i;
	for (guint z = 0; z < nr_zones; z++) {
		HrZone *zone = &s->zones[z];
		zone->nid = z / 2;
		zone->zone_idx = z % 4;
		g_strlcpy(zone->name, z == 0 ? "DMA32" : "Normal", sizeof(zone->name));
		zone->start_pfn = 0;
		zone->spanned_pages = 0x800000;
		zone->managed_pages = 0x3f000;
		zone->free_pages = 0x20000 + z;
		zone->wmark_min = 100;
		zone->wmark_low = 200;
		zone->wmark_high = 300;
		for (guint o = 0; o < VIRTIO_HUGEROOM_NR_ORDERS; o++)
			zone->nr_free[o] = 10 * o + z;
		for (guint m = 0; m < VIRTIO_HUGEROOM_NR_MT; m++)
			zone->nr_free_pb_mt[m] = 512 * m;
		for (guint h = 0; h < VIRTIO_HUGEROOM_NR_HIST; h++)
			zone->hist[h] = h + 1;
		zone->pcp_count = 31;
		zone->pcp_high = 186;
		zone->pcp_batch = 63;
		zone->pcp_high_min = 0;
		zone->pcp_high_max = 0;
		zone->pcp_policy = VIRTIO_HUGEROOM_PCP_EXPLICIT;
		zone->pcp_fraction = 120;
	}
	for (guint c = 0; c < nr_candidates; c++) {
		s->candidates[c].gpa = MiB(2) * (c + 1);
		s->candidates[c].free_pages = 512 - c / 4;
		s->candidates[c].migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
		s->candidates[c].zone = nr_zones > 0 ? c % nr_zones : 0;
	}
	return s;
}

/* an encoded valid status, as a mutable byte array */
static GByteArray *
status_wire(guint16 nr_zones, guint16 nr_candidates)
{
	g_autoptr(HrStatus) s = make_status(nr_zones, nr_candidates);
	g_autoptr(GBytes) bytes = hr_status_encode(s);
	return g_bytes_unref_to_array(g_steal_pointer(&bytes));
}

static void
put_le16(GByteArray *a, gsize off, guint16 v)
{
	guint16 le = GUINT16_TO_LE(v);
	g_assert_cmpuint(off + sizeof(le), <=, a->len);
	memcpy(a->data + off, &le, sizeof(le));
}

static void
put_le32(GByteArray *a, gsize off, guint32 v)
{
	guint32 le = GUINT32_TO_LE(v);
	g_assert_cmpuint(off + sizeof(le), <=, a->len);
	memcpy(a->data + off, &le, sizeof(le));
}

static void
put_le64(GByteArray *a, gsize off, guint64 v)
{
	guint64 le = GUINT64_TO_LE(v);
	g_assert_cmpuint(off + sizeof(le), <=, a->len);
	memcpy(a->data + off, &le, sizeof(le));
}

/* set hdr.len to the array length, as a sender that lies elsewhere would */
static void
fix_len(GByteArray *a)
{
	put_le32(a, offsetof(struct virtio_hugeroom_hdr, len), a->len);
}

#define ZONE_OFF(z) (sizeof(struct virtio_hugeroom_status) + (z) * sizeof(struct virtio_hugeroom_zone))
#define CAND_OFF(nz, c)                                                                            \
	(ZONE_OFF(nz) + (c) * sizeof(struct virtio_hugeroom_candidate))

static void
assert_status_rejected(GByteArray *a, const gchar *needle)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) s = hr_status_decode(a->data, a->len, &error);
	g_assert_null(s);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID);
	if (g_strstr_len(error->message, -1, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
	/* the generic guest-message decoder applies the same checks */
	{
		g_autoptr(GError) error2 = NULL;
		g_autoptr(HrGuestMsg) m = hr_guest_msg_decode(a->data, a->len, &error2);
		g_assert_null(m);
		g_assert_nonnull(error2);
	}
}

/* ---------------------------------------------------------------------- */
/* STATUS */

static void
test_status_roundtrip(void)
{
	g_autoptr(HrStatus) s = make_status(3, 5);
	g_autoptr(GBytes) bytes = hr_status_encode(s);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) d = NULL;
	gsize len = 0;
	const guint8 *buf = g_bytes_get_data(bytes, &len);

	g_assert_cmpuint(len, ==, 208 + 3 * 256 + 5 * 16);
	d = hr_status_decode(buf, len, &error);
	g_assert_no_error(error);
	g_assert_nonnull(d);
	g_assert_cmpuint(d->hdr.type, ==, VIRTIO_HUGEROOM_MSG_STATUS);
	g_assert_cmpuint(d->hdr.len, ==, len);
	g_assert_cmpuint(d->hdr.flags, ==, VIRTIO_HUGEROOM_STATUS_F_TRUNCATED);
	g_assert_cmpuint(d->hdr.request_id, ==, 77);
	g_assert_cmpuint(d->seq, ==, 42);
	g_assert_cmpuint(d->uptime_ns, ==, 123456789);
	g_assert_cmpuint(d->build_ns, ==, 5000);
	g_assert_cmpuint(d->mem_total_pages, ==, 262144);
	g_assert_cmpuint(d->mem_free_pages, ==, 200000);
	g_assert_cmpuint(d->mem_available_pages, ==, 210000);
	g_assert_cmpuint(d->held_blocks, ==, 3);
	g_assert_cmpuint(d->page_shift, ==, 12);
	g_assert_cmpuint(d->pageblock_order, ==, 9);
	g_assert_cmpuint(d->nr_zones, ==, 3);
	g_assert_cmpuint(d->nr_candidates, ==, 5);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		g_assert_cmpuint(d->vmstat[i], ==, 1000 + i);
	for (guint z = 0; z < 3; z++)
		g_assert_cmpmem(&d->zones[z], sizeof(HrZone), &s->zones[z], sizeof(HrZone));
	for (guint c = 0; c < 5; c++) {
		g_assert_cmpuint(d->candidates[c].gpa, ==, s->candidates[c].gpa);
		g_assert_cmpuint(d->candidates[c].free_pages, ==, s->candidates[c].free_pages);
		g_assert_cmpuint(d->candidates[c].migratetype, ==, s->candidates[c].migratetype);
		g_assert_cmpuint(d->candidates[c].zone, ==, s->candidates[c].zone);
	}
	g_assert_cmpstr(d->zones[0].name, ==, "DMA32");
	g_assert_cmpstr(d->zones[1].name, ==, "Normal");

	/* and the encoding is canonical: decode + encode gives the same bytes */
	{
		g_autoptr(GBytes) again = hr_status_encode(d);
		g_assert_true(g_bytes_equal(bytes, again));
	}
}

static void
test_status_wire_layout(void)
{
	/* fields sit where the header says, little-endian */
	g_autoptr(GByteArray) a = status_wire(1, 1);
	guint64 seq;
	guint16 type;
	memcpy(&type, a->data, sizeof(type));
	g_assert_cmpuint(GUINT16_FROM_LE(type), ==, VIRTIO_HUGEROOM_MSG_STATUS);
	memcpy(&seq, a->data + offsetof(struct virtio_hugeroom_status, seq), sizeof(seq));
	g_assert_cmpuint(GUINT64_FROM_LE(seq), ==, 42);
	g_assert_cmpuint(a->data[ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, name)], ==, 'D');
}

static void
test_status_empty(void)
{
	g_autoptr(GByteArray) a = status_wire(0, 0);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) s = hr_status_decode(a->data, a->len, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(s->nr_zones, ==, 0);
	g_assert_cmpuint(a->len, ==, 208);
}

static void
test_status_max(void)
{
	/* the largest report fits a message and decodes */
	g_autoptr(GByteArray) a = status_wire(VIRTIO_HUGEROOM_MAX_ZONES,
					      VIRTIO_HUGEROOM_MAX_CANDIDATES);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) s = hr_status_decode(a->data, a->len, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(s->nr_candidates, ==, VIRTIO_HUGEROOM_MAX_CANDIDATES);
	g_assert_cmpuint(a->len, <=, VIRTIO_HUGEROOM_MAX_MSG);
}

static void
test_status_copy(void)
{
	g_autoptr(HrStatus) s = make_status(2, 4);
	g_autoptr(HrStatus) c = hr_status_copy(s);
	g_autoptr(GBytes) b1 = hr_status_encode(s);
	g_autoptr(GBytes) b2 = hr_status_encode(c);
	g_assert_true(c->zones != s->zones);
	g_assert_true(g_bytes_equal(b1, b2));
}

static void
test_status_reject_short(void)
{
	g_autoptr(GByteArray) a = status_wire(0, 0);
	g_byte_array_set_size(a, 10);
	assert_status_rejected(a, "shorter than the 16 byte header");
	g_byte_array_set_size(a, 0);
	assert_status_rejected(a, "0 bytes");
}

static void
test_status_reject_short_fixed(void)
{
	g_autoptr(GByteArray) a = status_wire(0, 0);
	g_byte_array_set_size(a, 100);
	fix_len(a);
	assert_status_rejected(a, "shorter than the 208 byte message");
}

static void
test_status_reject_bad_type(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, type), VIRTIO_HUGEROOM_MSG_RESULT);
	{
		g_autoptr(GError) error = NULL;
		g_autoptr(HrStatus) s = hr_status_decode(a->data, a->len, &error);
		g_assert_null(s);
		g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID);
		g_assert_nonnull(strstr(error->message, "hdr.type 2"));
	}
}

static void
test_status_reject_bad_len(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le32(a, offsetof(struct virtio_hugeroom_hdr, len), a->len + 16);
	assert_status_rejected(a, "hdr.len 496 differs from the 480 bytes received");
}

static void
test_status_reject_trailing(void)
{
	/* bytes beyond what the counts need, hdr.len agreeing */
	g_autoptr(GByteArray) a = status_wire(1, 1);
	guint8 pad[16] = {0};
	g_byte_array_append(a, pad, sizeof(pad));
	fix_len(a);
	assert_status_rejected(a, "nr_zones 1 and nr_candidates 1 need");
}

static void
test_status_reject_counts_overflow(void)
{
	/* counts that claim more than the message carries */
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_status, nr_candidates), 2);
	assert_status_rejected(a, "differs from the 496 bytes");
}

static void
test_status_reject_flags(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, flags), 0x8001);
	assert_status_rejected(a, "hdr.flags 0x8001 has unknown bits 0x8000");
}

static void
test_status_reject_too_many_zones(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_status, nr_zones), 65);
	assert_status_rejected(a, "nr_zones 65 exceeds 64");
}

static void
test_status_reject_too_many_candidates(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_status, nr_candidates), 3000);
	assert_status_rejected(a, "status: nr_candidates 3000 exceeds 2048");
}

static void
test_status_reject_oversize(void)
{
	g_autoptr(GByteArray) a = status_wire(0, 0);
	g_byte_array_set_size(a, VIRTIO_HUGEROOM_MAX_MSG + 16);
	fix_len(a);
	assert_status_rejected(a, "exceeds 65536");
}

static void
test_status_reject_page_shift(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le32(a, offsetof(struct virtio_hugeroom_status, page_shift), 16);
	assert_status_rejected(a, "page_shift 16 is not 12");
}

static void
test_status_reject_pageblock_order(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le32(a, offsetof(struct virtio_hugeroom_status, pb_order), 10);
	assert_status_rejected(a, "pb_order 10 is not 9");
}

static void
test_status_reject_zone_name(void)
{
	g_autoptr(GByteArray) a = status_wire(2, 1);
	memset(a->data + ZONE_OFF(1) + offsetof(struct virtio_hugeroom_zone, name), 'A', 12);
	assert_status_rejected(a, "zone 1: name is not NUL terminated");
}

static void
test_status_zone_name_binary(void)
{
	/* any bytes before the NUL are the guest's business; readers sanitise */
	g_autoptr(GByteArray) a = status_wire(1, 1);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrStatus) s = NULL;
	a->data[ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, name)] = 0xff;
	s = hr_status_decode(a->data, a->len, &error);
	g_assert_no_error(error);
	g_assert_cmpuint((guint8)s->zones[0].name[0], ==, 0xff);
}

static void
test_status_reject_managed(void)
{
	g_autoptr(GByteArray) a = status_wire(2, 1);
	put_le64(a, ZONE_OFF(1) + offsetof(struct virtio_hugeroom_zone, managed_pages), 0x800001);
	assert_status_rejected(a, "zone 1: managed_pages 8388609 exceeds spanned_pages 8388608");
}

static void
test_status_reject_span(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, start_pfn),
		 G_MAXUINT64 - 5);
	assert_status_rejected(a, "zone 0: start_pfn 0xfffffffffffffffa + spanned_pages 0x800000 "
				  "exceeds 2^52");
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, start_pfn),
		 (G_GUINT64_CONSTANT(1) << 52) - 0x1000);
	assert_status_rejected(a, "exceeds 2^52");
}

static void
test_status_reject_hist(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	/* 0x800000 pages span 16384 pageblocks */
	put_le32(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, hist) + 8, 16384);
	assert_status_rejected(a, "zone 0: hist sums to 16402 pageblocks, more than the 16384");
}

static void
test_status_reject_outside_zone(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, start_pfn), 0x1000);
	assert_status_rejected(a, "candidate 0: gpa 0x200000 is outside the span of zone 0");
	/* the block's last page must be inside too */
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, start_pfn), 0);
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, spanned_pages), 1000);
	put_le64(a, ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, managed_pages), 1000);
	memset(a->data + ZONE_OFF(0) + offsetof(struct virtio_hugeroom_zone, hist), 0,
	       sizeof(((struct virtio_hugeroom_zone *)NULL)->hist));
	assert_status_rejected(a, "outside the span of zone 0 (pfn 0x0 + 0x3e8)");
}

static void
test_status_reject_unsorted(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 3);
	put_le16(a, CAND_OFF(1, 2) + offsetof(struct virtio_hugeroom_candidate, free_pages), 512);
	put_le16(a, CAND_OFF(1, 1) + offsetof(struct virtio_hugeroom_candidate, free_pages), 300);
	assert_status_rejected(a, "candidate 2: free_pages 512 is above the 300 of candidate 1");
}

static void
test_status_reject_unaligned(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 3);
	put_le64(a, CAND_OFF(1, 2) + offsetof(struct virtio_hugeroom_candidate, gpa), MiB(2) + 4096);
	assert_status_rejected(a, "candidate 2: gpa 0x201000 is not 2 MiB aligned");
}

static void
test_status_reject_zone_index(void)
{
	g_autoptr(GByteArray) a = status_wire(2, 2);
	a->data[CAND_OFF(2, 1) + offsetof(struct virtio_hugeroom_candidate, zone)] = 2;
	assert_status_rejected(a, "candidate 1: zone 2 is not below nr_zones 2");
}

static void
test_status_reject_migratetype(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	a->data[CAND_OFF(1, 0) + offsetof(struct virtio_hugeroom_candidate, migratetype)] = 6;
	assert_status_rejected(a, "candidate 0: migratetype 6 is not below 6");
}

static void
test_status_reject_free_pages(void)
{
	g_autoptr(GByteArray) a = status_wire(1, 1);
	put_le16(a, CAND_OFF(1, 0) + offsetof(struct virtio_hugeroom_candidate, free_pages), 513);
	assert_status_rejected(a, "candidate 0: free_pages 513 exceeds 512");
}

static void
test_status_reject_candidates_without_zones(void)
{
	/* a candidate must name a zone, so none may come without zones */
	g_autoptr(GByteArray) a = status_wire(0, 1);
	assert_status_rejected(a, "candidate 0: zone 0 is not below nr_zones 0");
}

/* ---------------------------------------------------------------------- */
/* RESULT / PROGRESS */

static HrResult *
make_result(guint16 type)
{
	HrResult *r = g_new0(HrResult, 1);
	r->hdr.type = type;
	r->hdr.request_id = 9;
	r->status = type == VIRTIO_HUGEROOM_MSG_RESULT ? VIRTIO_HUGEROOM_S_PARTIAL : 0;
	r->blocks_tried = 10;
	r->blocks_freed = 7;
	r->failed[VIRTIO_HUGEROOM_R_UNMOVABLE] = 1;
	r->failed[VIRTIO_HUGEROOM_R_NOMEM] = 1;
	r->failed[VIRTIO_HUGEROOM_R_OTHER] = 1;
	r->pages_migrated = 1234;
	r->elapsed_us = 5678;
	return r;
}

static void
test_result_roundtrip(void)
{
	for (guint16 type = VIRTIO_HUGEROOM_MSG_RESULT; type <= VIRTIO_HUGEROOM_MSG_PROGRESS;
	     type++) {
		g_autoptr(HrResult) r = make_result(type);
		g_autoptr(GBytes) b = hr_result_encode(r);
		g_autoptr(GError) error = NULL;
		g_autoptr(HrGuestMsg) m = NULL;
		g_assert_cmpuint(g_bytes_get_size(b), ==, 80);
		m = hr_guest_msg_decode(g_bytes_get_data(b, NULL), g_bytes_get_size(b), &error);
		g_assert_no_error(error);
		g_assert_cmpuint(m->type, ==, type);
		g_assert_nonnull(m->result);
		g_assert_cmpuint(m->result->hdr.type, ==, type);
		g_assert_cmpuint(m->result->hdr.request_id, ==, 9);
		g_assert_cmpuint(m->result->status,
				 ==,
				 type == VIRTIO_HUGEROOM_MSG_RESULT ? VIRTIO_HUGEROOM_S_PARTIAL : 0);
		g_assert_cmpuint(m->result->blocks_tried, ==, 10);
		g_assert_cmpuint(m->result->blocks_freed, ==, 7);
		g_assert_cmpuint(m->result->failed[7], ==, 1);
		g_assert_cmpuint(m->result->pages_migrated, ==, 1234);
		g_assert_cmpuint(m->result->elapsed_us, ==, 5678);
	}
}

static GByteArray *
result_wire(void)
{
	g_autoptr(HrResult) r = make_result(VIRTIO_HUGEROOM_MSG_RESULT);
	return g_bytes_unref_to_array(hr_result_encode(r));
}

static void
assert_result_rejected(GByteArray *a, const gchar *needle)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrResult) r = hr_result_decode(a->data, a->len, &error);
	g_assert_null(r);
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
}

static void
test_result_reject_len(void)
{
	g_autoptr(GByteArray) a = result_wire();
	guint8 pad[8] = {0};
	g_byte_array_append(a, pad, sizeof(pad));
	fix_len(a);
	assert_result_rejected(a, "result: hdr.len 88 is not 80");
	g_byte_array_set_size(a, 40);
	fix_len(a);
	assert_result_rejected(a, "shorter than the 80 byte message");
}

static void
test_result_reject_status(void)
{
	g_autoptr(GByteArray) a = result_wire();
	put_le32(a, offsetof(struct virtio_hugeroom_result, status), 7);
	assert_result_rejected(a, "result: status 7 is unknown");
}

static void
test_result_reject_request_id(void)
{
	g_autoptr(GByteArray) a = result_wire();
	put_le64(a, offsetof(struct virtio_hugeroom_hdr, request_id), 0);
	assert_result_rejected(a, "result: hdr.request_id 0 names no command");
}

static void
test_result_reject_sums(void)
{
	g_autoptr(GByteArray) a = result_wire();
	g_autoptr(HrResult) p = make_result(VIRTIO_HUGEROOM_MSG_PROGRESS);
	g_autoptr(GByteArray) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrResult) d = NULL;

	/* a RESULT accounts for every block tried */
	put_le32(a, offsetof(struct virtio_hugeroom_result, blocks_tried), 11);
	assert_result_rejected(a, "result: blocks_freed + failed[] = 10 differs from blocks_tried 11");
	/* in 64 bits: counters that wrap a 32-bit sum do not slip through */
	put_le32(a, offsetof(struct virtio_hugeroom_result, blocks_tried), 6);
	put_le32(a, offsetof(struct virtio_hugeroom_result, failed), G_MAXUINT32 - 2);
	assert_result_rejected(a, "= 4294967302 differs from blocks_tried 6");

	/* a PROGRESS may trail, but not exceed */
	p->blocks_tried = 20;
	b = g_bytes_unref_to_array(hr_result_encode(p));
	d = hr_result_decode(b->data, b->len, &error);
	g_assert_no_error(error);
	g_clear_pointer(&d, g_free);
	put_le32(b, offsetof(struct virtio_hugeroom_result, blocks_tried), 9);
	assert_result_rejected(b, "progress: blocks_freed + failed[] = 10 exceeds blocks_tried 9");
	put_le32(b, offsetof(struct virtio_hugeroom_result, blocks_tried), 10);
	put_le32(b, offsetof(struct virtio_hugeroom_result, status), VIRTIO_HUGEROOM_S_OK + 1);
	assert_result_rejected(b, "progress: status 1 is not 0");
}

static void
test_result_reject_flags(void)
{
	g_autoptr(GByteArray) a = result_wire();
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, flags), 1);
	assert_result_rejected(a, "hdr.flags 0x1");
}

static void
test_result_reject_type(void)
{
	g_autoptr(GByteArray) a = result_wire();
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, type), VIRTIO_HUGEROOM_MSG_HOLD);
	assert_result_rejected(a, "hdr.type 4");
}

/* ---------------------------------------------------------------------- */
/* HOLD / RETURNED */

static GByteArray *
blocks_wire(guint16 type, guint32 nr)
{
	g_autoptr(HrBlocks) b = hr_blocks_new(type, nr);
	b->reason = type == VIRTIO_HUGEROOM_MSG_RETURNED ? VIRTIO_HUGEROOM_RET_PRESSURE : 0;
	for (guint32 i = 0; i < nr; i++)
		b->gpas[i] = MiB(2) * (100 + i);
	return g_bytes_unref_to_array(hr_blocks_encode(b));
}

static void
test_blocks_roundtrip(void)
{
	for (guint16 type = VIRTIO_HUGEROOM_MSG_HOLD; type <= VIRTIO_HUGEROOM_MSG_RETURNED; type++) {
		g_autoptr(GByteArray) a = blocks_wire(type, 5);
		g_autoptr(GError) error = NULL;
		g_autoptr(HrGuestMsg) m = hr_guest_msg_decode(a->data, a->len, &error);
		g_assert_no_error(error);
		g_assert_cmpuint(a->len, ==, 24 + 5 * 8);
		g_assert_nonnull(m->blocks);
		g_assert_cmpuint(m->blocks->hdr.type, ==, type);
		g_assert_cmpuint(m->blocks->nr_blocks, ==, 5);
		g_assert_cmpuint(m->blocks->gpas[4], ==, MiB(2) * 104);
		g_assert_cmpuint(m->blocks->reason,
				 ==,
				 type == VIRTIO_HUGEROOM_MSG_RETURNED ? 1 : 0);
	}
}

static void
test_blocks_max(void)
{
	/* 8189 gpas make exactly 65536 bytes */
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD,
					      VIRTIO_HUGEROOM_MAX_EVT_BLOCKS);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrBlocks) b = hr_blocks_decode(a->data, a->len, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(a->len, ==, VIRTIO_HUGEROOM_MAX_MSG);
	g_assert_cmpuint(b->nr_blocks, ==, 8189);
}

static void
assert_blocks_rejected(GByteArray *a, const gchar *needle);

static void
test_blocks_reject_empty(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 0);
	assert_blocks_rejected(a, "hold: nr_blocks is 0");
}

static void
test_blocks_reject_duplicate(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 4);
	put_le64(a, sizeof(struct virtio_hugeroom_blocks) + 3 * 8, MiB(2) * 101);
	assert_blocks_rejected(a, "hold: gpa 0xca00000 is listed twice");
}

static void
test_blocks_reject_hold_reason(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 1);
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, reason), 1);
	assert_blocks_rejected(a, "hold: reason 1 is not 0");
}

static void
test_blocks_reject_returned_request_id(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_RETURNED, 1);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrBlocks) b = NULL;
	/* pressure comes with no request id ... */
	put_le64(a, offsetof(struct virtio_hugeroom_hdr, request_id), 5);
	assert_blocks_rejected(a, "returned: hdr.request_id 5 does not go with reason 1");
	/* ... a host RETURN with its own */
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, reason), VIRTIO_HUGEROOM_RET_HOST);
	b = hr_blocks_decode(a->data, a->len, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(b->hdr.request_id, ==, 5);
	put_le64(a, offsetof(struct virtio_hugeroom_hdr, request_id), 0);
	assert_blocks_rejected(a, "returned: hdr.request_id 0 does not go with reason 0");
}

static void
assert_blocks_rejected(GByteArray *a, const gchar *needle)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrBlocks) b = hr_blocks_decode(a->data, a->len, &error);
	g_assert_null(b);
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
}

static void
test_blocks_reject_count(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 2);
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, nr_blocks), 3);
	assert_blocks_rejected(a, "hold: hdr.len 40 differs from the 48 bytes nr_blocks 3 needs");
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, nr_blocks), 8190);
	assert_blocks_rejected(a, "hold: nr_blocks 8190 exceeds 8189");
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, nr_blocks), G_MAXUINT32);
	assert_blocks_rejected(a, "exceeds 8189");
}

static void
test_blocks_reject_oversize(void)
{
	/* 8190 gpas need 65544 bytes, 8 more than any message may have */
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD,
					      VIRTIO_HUGEROOM_MAX_EVT_BLOCKS + 1);
	assert_blocks_rejected(a, "hdr.len 65544 exceeds 65536");
}

static void
test_blocks_reject_unaligned(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 3);
	put_le64(a, sizeof(struct virtio_hugeroom_blocks) + 8, MiB(3));
	assert_blocks_rejected(a, "hold: gpas[1] 0x300000 is not 2 MiB aligned");
}

static void
test_blocks_reject_reason(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_RETURNED, 1);
	put_le32(a, offsetof(struct virtio_hugeroom_blocks, reason), 3);
	assert_blocks_rejected(a, "returned: reason 3 is unknown");
}

static void
test_blocks_reject_flags(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 1);
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, flags), 4);
	assert_blocks_rejected(a, "hdr.flags 0x4");
}

static void
test_guest_msg_reject_unknown(void)
{
	g_autoptr(GByteArray) a = blocks_wire(VIRTIO_HUGEROOM_MSG_HOLD, 1);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrGuestMsg) m = NULL;
	put_le16(a, offsetof(struct virtio_hugeroom_hdr, type), VIRTIO_HUGEROOM_CMD_REPORT);
	m = hr_guest_msg_decode(a->data, a->len, &error);
	g_assert_null(m);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_UNKNOWN_TYPE);
	g_clear_error(&error);
	m = hr_guest_msg_decode(a->data, 3, &error);
	g_assert_null(m);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID);
}

/* ---------------------------------------------------------------------- */
/* Commands */

static HrCmd *
decode_cmd_bytes(GBytes *b, GError **error)
{
	return hr_cmd_decode(g_bytes_get_data(b, NULL), g_bytes_get_size(b), error);
}

static void
test_cmd_report_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 5);
	g_autoptr(GBytes) b = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 16);
	g_assert_cmpuint(d->hdr.type, ==, VIRTIO_HUGEROOM_CMD_REPORT);
	g_assert_cmpuint(d->hdr.request_id, ==, 5);
}

static void
test_cmd_cancel_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CANCEL, 33);
	g_autoptr(GBytes) b = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->hdr.type, ==, VIRTIO_HUGEROOM_CMD_CANCEL);
	g_assert_cmpuint(d->hdr.request_id, ==, 33);
}

static void
test_cmd_evacuate_gpas_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 6);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->count = 3;
	c->nr_gpas = 3;
	c->gpas = g_new0(guint64, 3);
	c->gpas[0] = MiB(2);
	c->gpas[1] = MiB(4);
	c->gpas[2] = MiB(1024);
	c->budget_ms = 500;
	c->budget_pages = 100000;
	b = hr_cmd_encode(c);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 40 + 24);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->count, ==, 3);
	g_assert_cmpuint(d->nr_gpas, ==, 3);
	g_assert_cmpuint(d->gpas[2], ==, MiB(1024));
	g_assert_cmpuint(d->budget_ms, ==, 500);
	g_assert_cmpuint(d->budget_pages, ==, 100000);
	g_assert_cmpuint(d->nr_ranges, ==, 0);
}

static HrCmd *
make_evac_ranges(void)
{
	HrCmd *c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 7);
	c->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES;
	c->count = 16;
	c->nr_ranges = 2;
	c->ranges = g_new0(HrRange, 2);
	c->ranges[0].start = 0;
	c->ranges[0].end = MiB(512);
	c->ranges[1].start = MiB(4096);
	c->ranges[1].end = MiB(8192);
	return c;
}

static void
test_cmd_evacuate_ranges_roundtrip(void)
{
	g_autoptr(HrCmd) c = make_evac_ranges();
	g_autoptr(GBytes) b = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 40 + 32);
	g_assert_cmpuint(d->hdr.flags, ==, 3);
	g_assert_cmpuint(d->count, ==, 16);
	g_assert_cmpuint(d->nr_ranges, ==, 2);
	g_assert_cmpuint(d->ranges[1].start, ==, MiB(4096));
	g_assert_cmpuint(d->ranges[1].end, ==, MiB(8192));
}

static void
test_cmd_evacuate_cheapest_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 8);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST;
	c->count = 4;
	b = hr_cmd_encode(c);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->count, ==, 4);
}

/* EVAC_F_BACKGROUND goes with every form (SPEC 1.6.3 rule 2) */
static void
test_cmd_evacuate_background_roundtrip(void)
{
	static const guint16 forms[] = {
	    0, VIRTIO_HUGEROOM_EVAC_F_CHEAPEST,
	    VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES};

	for (guint i = 0; i < G_N_ELEMENTS(forms); i++) {
		g_autoptr(HrCmd) c = forms[i] & VIRTIO_HUGEROOM_EVAC_F_RANGES
					 ? make_evac_ranges()
					 : hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 9);
		g_autoptr(GBytes) b = NULL;
		g_autoptr(GError) error = NULL;
		g_autoptr(HrCmd) d = NULL;

		c->count = 1;
		if (forms[i] == 0) {
			c->nr_gpas = 1;
			c->gpas = g_new0(guint64, 1);
			c->gpas[0] = MiB(2);
		}
		c->hdr.flags = forms[i] | VIRTIO_HUGEROOM_EVAC_F_BACKGROUND;
		b = hr_cmd_encode(c);
		d = decode_cmd_bytes(b, &error);
		g_assert_no_error(error);
		g_assert_cmpuint(d->hdr.flags, ==, c->hdr.flags);
	}
}

static void
test_cmd_capture_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CAPTURE, 10);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->count = 12;
	c->budget_ms = 3000;
	b = hr_cmd_encode(c);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 24);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->count, ==, 12);
	g_assert_cmpuint(d->budget_ms, ==, 3000);
}

static void
test_cmd_return_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 11);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->nr_gpas = 2;
	c->gpas = g_new0(guint64, 2);
	c->gpas[0] = MiB(6);
	c->gpas[1] = MiB(8);
	c->count = 2;
	b = hr_cmd_encode(c);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 24 + 16);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->nr_gpas, ==, 2);
	g_assert_cmpuint(d->gpas[1], ==, MiB(8));

	/* by count */
	hr_cmd_free(g_steal_pointer(&d));
	g_bytes_unref(g_steal_pointer(&b));
	g_clear_pointer(&c->gpas, g_free);
	c->nr_gpas = 0;
	c->count = 5;
	b = hr_cmd_encode(c);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->count, ==, 5);
}

static void
test_cmd_set_pcp_roundtrip(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_SET_PCP, 12);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->policy = VIRTIO_HUGEROOM_PCP_EXPLICIT;
	c->high = 2000;
	b = hr_cmd_encode(c);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 24);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->policy, ==, VIRTIO_HUGEROOM_PCP_EXPLICIT);
	g_assert_cmpuint(d->high, ==, 2000);
}

static void
assert_cmd_rejected(const HrCmd *c, const gchar *needle)
{
	g_autoptr(GBytes) b = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = decode_cmd_bytes(b, &error);
	g_assert_null(d);
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
}

static void
test_cmd_reject_unknown_type(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_MSG_STATUS, 1);
	g_autoptr(GBytes) b = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = decode_cmd_bytes(b, &error);
	g_assert_null(d);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_UNKNOWN_TYPE);
	g_clear_error(&error);
	c->hdr.type = 22;
	assert_cmd_rejected(c, "hdr.type 22 is not a command");
}

static void
test_cmd_reject_len(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 1);
	g_autoptr(GByteArray) a = g_bytes_unref_to_array(hr_cmd_encode(c));
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	put_le32(a, offsetof(struct virtio_hugeroom_hdr, len), 24);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "report: hdr.len 24 differs from the 16 bytes"));
	g_clear_error(&error);
	d = hr_cmd_decode(a->data, 8, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "shorter than the 16 byte header"));
	g_clear_error(&error);
	/* a report with a body */
	g_byte_array_set_size(a, 24);
	fix_len(a);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "report: hdr.len 24 is not 16"));
}

static void
test_cmd_reject_flags(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 1);
	c->hdr.flags = 1;
	assert_cmd_rejected(c, "report: hdr.flags 0x1");
	c->hdr.type = VIRTIO_HUGEROOM_CMD_EVACUATE;
	c->hdr.flags = 8; /* bit 2 is EVAC_F_BACKGROUND */
	assert_cmd_rejected(c, "evacuate: hdr.flags 0x8 has unknown bits 0x8");
}

static void
test_cmd_reject_cancel_zero(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CANCEL, 0);
	assert_cmd_rejected(c, "cancel: hdr.request_id 0 names no command");
}

static void
test_cmd_reject_evacuate(void)
{
	g_autoptr(HrCmd) c = make_evac_ranges();

	/* unaligned range */
	c->ranges[1].end = MiB(8193);
	assert_cmd_rejected(c, "evacuate: ranges.end[1] 0x200100000 is not 2 MiB aligned");
	c->ranges[1].end = MiB(8192);
	c->ranges[0].start = 4096;
	assert_cmd_rejected(c, "ranges.start[0] 0x1000");
	c->ranges[0].start = 0;
	/* empty range */
	c->ranges[1].end = c->ranges[1].start;
	assert_cmd_rejected(c, "evacuate: ranges[1] end 0x100000000 is not above start");
	c->ranges[1].end = MiB(8192);
	/* RANGES without CHEAPEST */
	c->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_RANGES;
	assert_cmd_rejected(c, "EVAC_F_RANGES without EVAC_F_CHEAPEST");
	/* ranges without RANGES */
	c->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST;
	assert_cmd_rejected(c, "nr_ranges 2 without EVAC_F_RANGES");
	/* RANGES with no ranges */
	c->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES;
	c->nr_ranges = 0;
	assert_cmd_rejected(c, "nr_ranges 0 with EVAC_F_RANGES");
	c->nr_ranges = 2;
	/* overlapping and unsorted ranges */
	c->ranges[1].start = MiB(510);
	assert_cmd_rejected(c, "evacuate: ranges[1] start 0x1fe00000 is below the end 0x20000000 "
			       "of ranges[0]");
	c->ranges[1].start = MiB(4096);
	c->ranges[0].start = MiB(8192);
	c->ranges[0].end = MiB(8194);
	assert_cmd_rejected(c, "ranges[1] start 0x100000000 is below the end 0x200200000");
	c->ranges[0].start = 0;
	c->ranges[0].end = MiB(512);
	/* cheapest with count 0 */
	c->count = 0;
	assert_cmd_rejected(c, "evacuate: count 0 asks for nothing");
	c->count = 1;
	/* cheapest with gpas */
	c->nr_gpas = 1;
	c->gpas = g_new0(guint64, 1);
	assert_cmd_rejected(c, "nr_gpas 1 with EVAC_F_CHEAPEST");
}

static void
test_cmd_reject_evacuate_gpas(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 3);
	g_autoptr(GByteArray) a = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;

	assert_cmd_rejected(c, "evacuate: count 0 asks for nothing");
	c->count = 1;
	assert_cmd_rejected(c, "nr_gpas 0 without EVAC_F_CHEAPEST");
	c->nr_gpas = 2;
	c->gpas = g_new0(guint64, 2);
	c->gpas[1] = MiB(1);
	c->count = 2;
	assert_cmd_rejected(c, "evacuate: gpas[1] 0x100000 is not 2 MiB aligned");
	c->gpas[1] = 0;
	assert_cmd_rejected(c, "evacuate: gpa 0x0 is listed twice");
	c->gpas[1] = MiB(2);
	c->count = 3;
	assert_cmd_rejected(c, "count 3 exceeds nr_gpas 2");
	c->count = 2;

	/* a count that claims more than the message holds */
	a = g_bytes_unref_to_array(hr_cmd_encode(c));
	put_le32(a, offsetof(struct virtio_hugeroom_evacuate, nr_gpas), 3);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "differs from the 64 bytes nr_gpas 3 and nr_ranges 0"));
	g_clear_error(&error);
	put_le32(a, offsetof(struct virtio_hugeroom_evacuate, nr_gpas), 501);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "evacuate: nr_gpas 501 exceeds 500"));
	g_clear_error(&error);
	put_le32(a, offsetof(struct virtio_hugeroom_evacuate, nr_gpas), 2);
	put_le32(a, offsetof(struct virtio_hugeroom_evacuate, nr_ranges), 0x10000000);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "nr_ranges 268435456 exceeds 253"));
	g_clear_error(&error);

	/* short */
	g_byte_array_set_size(a, 30);
	fix_len(a);
	d = hr_cmd_decode(a->data, a->len, &error);
	g_assert_null(d);
	g_assert_nonnull(strstr(error->message, "shorter than the 40 byte message"));
}

static void
test_cmd_reject_oversize(void)
{
	/* 500 gpas fit a cmdq buffer; anything bigger is refused by length */
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 3);
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrCmd) d = NULL;
	c->nr_gpas = VIRTIO_HUGEROOM_MAX_CMD_BLOCKS;
	c->count = c->nr_gpas;
	c->gpas = g_new0(guint64, c->nr_gpas);
	for (guint i = 0; i < c->nr_gpas; i++)
		c->gpas[i] = MiB(2) * i;
	b = hr_cmd_encode(c);
	d = decode_cmd_bytes(b, &error);
	g_assert_no_error(error);
	g_clear_pointer(&d, hr_cmd_free);
	g_clear_pointer(&b, g_bytes_unref);
	c->nr_gpas = 600;
	c->gpas = g_renew(guint64, c->gpas, 600);
	memset(c->gpas, 0, 600 * sizeof(guint64));
	assert_cmd_rejected(c, "return: hdr.len 4824 exceeds the 4096 byte cmdq buffer");
	c->nr_gpas = 501;
	assert_cmd_rejected(c, "return: nr_gpas 501 exceeds 500");
}

static void
test_cmd_reject_return(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 3);
	assert_cmd_rejected(c, "return: count 0 and nr_gpas 0 ask for nothing");
	c->nr_gpas = 1;
	c->gpas = g_new0(guint64, 1);
	c->gpas[0] = 12345;
	assert_cmd_rejected(c, "return: count 0 differs from nr_gpas 1");
	c->count = 1;
	assert_cmd_rejected(c, "return: gpas[0] 0x3039 is not 2 MiB aligned");
	c->gpas[0] = 0;
	c->hdr.flags = 2;
	assert_cmd_rejected(c, "return: hdr.flags 0x2");
}

static void
test_cmd_reject_capture(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CAPTURE, 3);
	assert_cmd_rejected(c, "capture: count 0 asks for nothing");
	c->count = 1;
	c->hdr.flags = 1;
	assert_cmd_rejected(c, "capture: hdr.flags 0x1");
}

static void
test_cmd_reject_request_id(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CAPTURE, 0);
	c->count = 1;
	assert_cmd_rejected(c, "capture: hdr.request_id 0 names no command");
}

static void
test_cmd_reject_return_duplicate(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 3);
	c->nr_gpas = c->count = 3;
	c->gpas = g_new0(guint64, 3);
	c->gpas[0] = MiB(4);
	c->gpas[1] = MiB(2);
	c->gpas[2] = MiB(4);
	assert_cmd_rejected(c, "return: gpa 0x400000 is listed twice");
}

static void
test_cmd_reject_set_pcp(void)
{
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_SET_PCP, 3);
	c->policy = 5;
	assert_cmd_rejected(c, "set-pcp: PCP policy 5 is unknown");
	c->policy = VIRTIO_HUGEROOM_PCP_EXPLICIT;
	assert_cmd_rejected(c, "set-pcp: the explicit PCP policy needs a high above 0");
	c->policy = VIRTIO_HUGEROOM_PCP_LATENCY;
	c->high = 100;
	assert_cmd_rejected(c, "set-pcp: PCP high 100: only the explicit policy takes one");
}

/* the text form config, CLI and hook share */
static void
test_pcp_policy_parse(void)
{
	static const struct {
		const gchar *text;
		guint32 policy, high;
		const gchar *error;
	} cases[] = {
	    {"default", VIRTIO_HUGEROOM_PCP_DEFAULT, 0, NULL},
	    {"latency", VIRTIO_HUGEROOM_PCP_LATENCY, 0, NULL},
	    {"balanced", VIRTIO_HUGEROOM_PCP_BALANCED, 0, NULL},
	    {"density", VIRTIO_HUGEROOM_PCP_DENSITY, 0, NULL},
	    {"explicit:1500", VIRTIO_HUGEROOM_PCP_EXPLICIT, 1500, NULL},
	    {"explicit", 0, 0, "'explicit': the explicit PCP policy needs a high above 0"},
	    {"explicit:0", 0, 0, "'0' is not a number of pages"},
	    {"explicit:lots", 0, 0, "'lots' is not a number of pages"},
	    {"latency:5", 0, 0, "only the explicit policy takes one"},
	    {"throughput", 0, 0, "PCP policy 'throughput' is unknown; use default, latency"},
	    {"", 0, 0, "is unknown"},
	};
	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GError) error = NULL;
		g_autofree gchar *text = NULL;
		HrPcpPolicy p = {99, 99};
		gboolean ok = hr_pcp_policy_parse(cases[i].text, &p, &error);
		if (cases[i].error != NULL) {
			g_assert_false(ok);
			g_assert_nonnull(strstr(error->message, cases[i].error));
			continue;
		}
		g_assert_no_error(error);
		g_assert_cmpuint(p.policy, ==, cases[i].policy);
		g_assert_cmpuint(p.high, ==, cases[i].high);
		text = hr_pcp_policy_format(&p);
		g_assert_cmpstr(text, ==, cases[i].text);
	}
}

/* ---------------------------------------------------------------------- */
/* Channel */

static HrChanHello *
make_hello(guint32 nr_ram)
{
	HrChanHello *h = hr_chan_hello_new(nr_ram);
	for (guint i = 0; i < 16; i++)
		h->uuid[i] = 0x10 + i;
	g_strlcpy(h->name, "guest-één", sizeof(h->name));
	h->ram_size = MiB(4096);
	h->guest_features = 0xf;
	for (guint32 i = 0; i < nr_ram; i++) {
		h->ram[i].gpa = i == 0 ? 0 : MiB(4096);
		h->ram[i].size = MiB(2048);
		h->ram[i].hva = 0x7f0000000000ULL + i * MiB(2048);
	}
	return h;
}

static void
test_chan_hello_roundtrip(void)
{
	g_autoptr(HrChanHello) h = make_hello(2);
	g_autoptr(GBytes) b = hr_chan_hello_encode(h);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanHello) d = hr_chan_hello_decode(b, &error);
	g_autofree gchar *uuid = NULL;
	g_assert_no_error(error);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 104 + 2 * 24);
	g_assert_cmpuint(d->proto_version, ==, VIRTIO_HUGEROOM_VERSION);
	g_assert_cmpstr(d->name, ==, "guest-één");
	g_assert_cmpmem(d->uuid, 16, h->uuid, 16);
	g_assert_cmpuint(d->ram_size, ==, MiB(4096));
	g_assert_cmpuint(d->guest_features, ==, 0xf);
	g_assert_cmpuint(d->nr_ram, ==, 2);
	g_assert_cmpuint(d->ram[1].gpa, ==, MiB(4096));
	g_assert_cmpuint(d->ram[1].size, ==, MiB(2048));
	g_assert_cmpuint(d->ram[1].hva, ==, 0x7f0000000000ULL + MiB(2048));
	uuid = hr_chan_hello_uuid_to_string(d);
	g_assert_cmpstr(uuid, ==, "10111213-1415-1617-1819-1a1b1c1d1e1f");
}

static void
assert_hello_rejected(GByteArray *a, const gchar *needle)
{
	g_autoptr(GBytes) b = g_bytes_new(a->data, a->len);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanHello) h = hr_chan_hello_decode(b, &error);
	g_assert_null(h);
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
}

static void
test_chan_hello_reject(void)
{
	g_autoptr(HrChanHello) h = make_hello(1);
	g_autoptr(GByteArray) a = g_bytes_unref_to_array(hr_chan_hello_encode(h));
	gsize ram0 = sizeof(struct hr_chan_hello);

	put_le32(a, offsetof(struct hr_chan_hello, proto_version), 0);
	assert_hello_rejected(a, "hello: proto_version 0 is below 1");
	put_le32(a, offsetof(struct hr_chan_hello, proto_version), 1);

	put_le32(a, offsetof(struct hr_chan_hello, nr_ram), 0);
	assert_hello_rejected(a, "hello: nr_ram is 0");

	put_le32(a, offsetof(struct hr_chan_hello, nr_ram), 65);
	assert_hello_rejected(a, "hello: nr_ram 65 exceeds 64");
	put_le32(a, offsetof(struct hr_chan_hello, nr_ram), 2);
	assert_hello_rejected(a, "hello: payload of 128 bytes differs from the 152 bytes nr_ram 2");
	put_le32(a, offsetof(struct hr_chan_hello, nr_ram), 1);

	memset(a->data + offsetof(struct hr_chan_hello, name), 'x', 64);
	assert_hello_rejected(a, "hello: name is not NUL terminated");
	memcpy(a->data + offsetof(struct hr_chan_hello, name), "vm\0", 3);

	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, size), 0);
	assert_hello_rejected(a, "hello: ram[0] size is 0");
	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, gpa), G_MAXUINT64 - 10);
	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, size), 4096);
	assert_hello_rejected(a, "hello: ram[0] gpa 0xfffffffffffffff5 + size 0x1000 overflows");
	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, gpa), 0);
	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, hva), G_MAXUINT64);
	assert_hello_rejected(a, "hva 0xffffffffffffffff + size 0x1000 overflows");
	put_le64(a, ram0 + offsetof(struct hr_chan_ram_range, hva), 0);

	g_byte_array_set_size(a, 50);
	assert_hello_rejected(a, "hello: payload of 50 bytes is shorter than the 104 byte message");
}

static void
test_chan_hello_newer_and_ranges(void)
{
	g_autoptr(HrChanHello) h = make_hello(2);
	g_autoptr(GByteArray) a = NULL;
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanHello) d = NULL;

	/* a newer device is fine: the daemon answers with the version it speaks */
	h->proto_version = 7;
	b = hr_chan_hello_encode(h);
	d = hr_chan_hello_decode(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->proto_version, ==, 7);

	/* unsorted or overlapping RAM ranges are refused */
	h->ram[1].gpa = MiB(1024);
	a = g_bytes_unref_to_array(hr_chan_hello_encode(h));
	assert_hello_rejected(a, "hello: ram[1] gpa 0x40000000 is below the end of ram[0]");
}

static void
test_chan_ram_contains(void)
{
	g_autoptr(HrChanHello) h = make_hello(2);
	/* [0, 2 GiB) and [4 GiB, 6 GiB) */
	g_assert_true(hr_ram_contains(h->ram, 2, 0, MiB(2)));
	g_assert_true(hr_ram_contains(h->ram, 2, MiB(2046), MiB(2)));
	g_assert_false(hr_ram_contains(h->ram, 2, MiB(2048), MiB(2)));
	g_assert_false(hr_ram_contains(h->ram, 2, MiB(2047), MiB(2)));
	g_assert_true(hr_ram_contains(h->ram, 2, MiB(4096), MiB(2)));
	g_assert_false(hr_ram_contains(h->ram, 2, MiB(6144), MiB(2)));
	g_assert_false(hr_ram_contains(h->ram, 2, G_MAXUINT64 - 1, MiB(2)));
	g_assert_false(hr_ram_contains(h->ram, 0, 0, MiB(2)));
}

static void
test_chan_welcome_roundtrip(void)
{
	HrChanWelcome w = {.proto_version = 1, .status_interval_ms = 250};
	HrChanWelcome d = {0};
	g_autoptr(GBytes) b = hr_chan_welcome_encode(&w);
	g_autoptr(GBytes) bad = g_bytes_new("abc", 3);
	g_autoptr(GError) error = NULL;
	g_assert_true(hr_chan_welcome_decode(b, &d, &error));
	g_assert_no_error(error);
	g_assert_cmpuint(d.status_interval_ms, ==, 250);
	g_assert_false(hr_chan_welcome_decode(bad, &d, &error));
	g_assert_nonnull(strstr(error->message, "welcome: payload of 3 bytes is not 8"));
	g_clear_error(&error);
	w.proto_version = 9;
	g_bytes_unref(b);
	b = hr_chan_welcome_encode(&w);
	g_assert_false(hr_chan_welcome_decode(b, &d, &error));
	g_assert_nonnull(strstr(error->message, "welcome: proto_version 9 is not one this side speaks"));
}

/* version 2's WELCOME is 16 bytes and carries the channel features (SPEC 2.4) */
static void
test_chan_welcome_v2(void)
{
	HrChanWelcome w = {.proto_version = 2, .status_interval_ms = 250,
			   .chan_features = HR_CHAN_F_LAYOUT};
	HrChanWelcome d = {0};
	g_autoptr(GBytes) b = hr_chan_welcome_encode(&w);
	g_autoptr(GBytes) v1 = NULL;
	g_autoptr(GBytes) short2 = g_bytes_new_from_bytes(b, 0, 8);
	g_autoptr(GError) error = NULL;

	g_assert_cmpuint(g_bytes_get_size(b), ==, 16);
	g_assert_true(hr_chan_welcome_decode(b, &d, &error));
	g_assert_cmpuint(d.proto_version, ==, 2);
	g_assert_cmphex(d.chan_features, ==, HR_CHAN_F_LAYOUT);
	/* 8 bytes are version 1's length, not version 2's */
	g_assert_false(hr_chan_welcome_decode(short2, &d, &error));
	g_assert_nonnull(strstr(error->message, "welcome: payload of 8 bytes is not 16"));
	g_clear_error(&error);
	/* version 1 has no features, whatever the caller asked */
	w.proto_version = 1;
	v1 = hr_chan_welcome_encode(&w);
	g_assert_cmpuint(g_bytes_get_size(v1), ==, 8);
	g_assert_true(hr_chan_welcome_decode(v1, &d, &error));
	g_assert_cmphex(d.chan_features, ==, 0);
}

static void
test_chan_layout(void)
{
	g_autoptr(HrChanLayout) l = g_new0(HrChanLayout, 1);
	g_autoptr(HrChanLayout) d = NULL;
	g_autoptr(GBytes) b = NULL;
	g_autoptr(GError) error = NULL;

	l->nr_ram = 2;
	l->ram_size = MiB(1024) + MiB(4);
	l->ram = g_new0(HrRamRange, 2);
	l->ram[0] = (HrRamRange){.gpa = 0, .size = MiB(1024), .hva = 0x7f0000000000ULL};
	l->ram[1] = (HrRamRange){.gpa = MiB(4096), .size = MiB(4), .hva = 0x7e0000200000ULL};
	b = hr_chan_layout_encode(l);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 16 + 2 * 24);
	d = hr_chan_layout_decode(b, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->nr_ram, ==, 2);
	g_assert_cmpuint(d->ram_size, ==, l->ram_size);
	g_assert_cmpmem(d->ram, 2 * sizeof(HrRamRange), l->ram, 2 * sizeof(HrRamRange));
	g_clear_pointer(&d, hr_chan_layout_free);
	g_clear_pointer(&b, g_bytes_unref);

	/* HELLO takes byte ranges, LAYOUT pages only */
	l->ram[1].size = MiB(4) + 1;
	b = hr_chan_layout_encode(l);
	g_assert_null(hr_chan_layout_decode(b, &error));
	g_assert_nonnull(strstr(error->message, "layout: ram[1] gpa 0x100000000, size 0x400001 "
						"or hva 0x7e0000200000 is not a multiple of 4096"));
	g_clear_error(&error);
	g_clear_pointer(&b, g_bytes_unref);
	b = g_bytes_new("0123456789abcde", 15);
	g_assert_null(hr_chan_layout_decode(b, &error));
	g_assert_nonnull(strstr(error->message, "layout: payload of 15 bytes is shorter than the 16"));
}

static void
test_chan_device_state_features(void)
{
	HrChanDeviceState s = {.num_held = 3, .chan_features = HR_CHAN_F_LAYOUT};
	HrChanDeviceState d = {0};
	g_autoptr(GBytes) b = hr_chan_device_state_encode(&s);
	g_autoptr(GError) error = NULL;

	g_assert_true(hr_chan_device_state_decode(b, &d, &error));
	g_assert_cmphex(d.chan_features, ==, HR_CHAN_F_LAYOUT);
	/* the field was version 1's reserved, at the same place */
	g_assert_cmpuint(((const guint8 *)g_bytes_get_data(b, NULL))[44], ==, HR_CHAN_F_LAYOUT);
}

static void
test_chan_set_interval_roundtrip(void)
{
	g_autoptr(GBytes) b = hr_chan_set_interval_encode(4000);
	g_autoptr(GBytes) bad = g_bytes_new("abcdefghijkl", 12);
	g_autoptr(GError) error = NULL;
	guint32 ms = 0;
	g_assert_true(hr_chan_set_interval_decode(b, &ms, &error));
	g_assert_cmpuint(ms, ==, 4000);
	g_assert_false(hr_chan_set_interval_decode(bad, &ms, &error));
	g_assert_nonnull(strstr(error->message, "set-interval: payload of 12 bytes is not 8"));
}

static void
test_chan_device_state_roundtrip(void)
{
	HrChanDeviceState s = {
	    .guest_features = 0x1f,
	    .msgs_relayed = 100,
	    .msgs_rejected = 2,
	    .cmds_dropped = 1,
	    .num_held = 12,
	    .driver_ok = 1,
	    .discard_disabled = 0,
	};
	HrChanDeviceState d = {0};
	g_autoptr(GBytes) b = hr_chan_device_state_encode(&s);
	g_autoptr(GError) error = NULL;
	g_autoptr(GByteArray) a = NULL;
	g_autoptr(GBytes) bad = NULL;
	g_assert_cmpuint(g_bytes_get_size(b), ==, 48);
	g_assert_true(hr_chan_device_state_decode(b, &d, &error));
	g_assert_cmpuint(d.guest_features, ==, 0x1f);
	g_assert_cmpuint(d.msgs_relayed, ==, 100);
	g_assert_cmpuint(d.msgs_rejected, ==, 2);
	g_assert_cmpuint(d.cmds_dropped, ==, 1);
	g_assert_cmpuint(d.num_held, ==, 12);
	g_assert_cmpuint(d.driver_ok, ==, 1);
	g_assert_cmpuint(d.discard_disabled, ==, 0);

	a = g_bytes_unref_to_array(g_bytes_ref(b));
	put_le32(a, offsetof(struct hr_chan_device_state, driver_ok), 2);
	bad = g_bytes_new(a->data, a->len);
	g_assert_false(hr_chan_device_state_decode(bad, &d, &error));
	g_assert_nonnull(strstr(error->message, "device-state: driver_ok 2 is not 0 or 1"));
	g_clear_error(&error);
	g_clear_pointer(&bad, g_bytes_unref);
	put_le32(a, offsetof(struct hr_chan_device_state, driver_ok), 1);
	put_le32(a, offsetof(struct hr_chan_device_state, discard_disabled), 7);
	bad = g_bytes_new(a->data, a->len);
	g_assert_false(hr_chan_device_state_decode(bad, &d, &error));
	g_assert_nonnull(strstr(error->message, "discard_disabled 7"));
	g_clear_error(&error);
	g_clear_pointer(&bad, g_bytes_unref);
	bad = g_bytes_new(a->data, 40);
	g_assert_false(hr_chan_device_state_decode(bad, &d, &error));
	g_assert_nonnull(strstr(error->message, "device-state: payload of 40 bytes is not 48"));
}

static void
test_chan_guest_msg_host_cmd(void)
{
	g_autoptr(HrStatus) s = make_status(1, 1);
	g_autoptr(GBytes) sb = hr_status_encode(s);
	g_autoptr(HrCmd) c = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 99);
	g_autoptr(GBytes) cb = hr_cmd_encode(c);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrGuestMsg) m = hr_chan_guest_msg_decode(sb, &error);
	g_autoptr(HrCmd) d = NULL;
	g_assert_no_error(error);
	g_assert_nonnull(m->status);
	d = hr_chan_host_cmd_decode(cb, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(d->hdr.request_id, ==, 99);
	/* a status is not a command, a command is not a guest message */
	g_clear_pointer(&d, hr_cmd_free);
	d = hr_chan_host_cmd_decode(sb, &error);
	g_assert_null(d);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_UNKNOWN_TYPE);
	g_clear_error(&error);
	g_clear_pointer(&m, hr_guest_msg_free);
	m = hr_chan_guest_msg_decode(cb, &error);
	g_assert_null(m);
	g_assert_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_UNKNOWN_TYPE);
}

/* a stream of frames, fed to the reader one byte at a time and in one go */
static void
test_chan_reader_stream(void)
{
	g_autoptr(HrChanHello) h = make_hello(1);
	g_autoptr(GBytes) hp = hr_chan_hello_encode(h);
	g_autoptr(HrStatus) s = make_status(2, 2);
	g_autoptr(GBytes) sp = hr_status_encode(s);
	g_autoptr(GByteArray) stream = g_byte_array_new();
	guint16 types[] = {HR_CHAN_HELLO, HR_CHAN_GUEST_MSG, HR_CHAN_DEVICE_STATE, HR_CHAN_GUEST_MSG};
	GBytes *payloads[4];
	HrChanDeviceState ds = {.driver_ok = 1};

	payloads[0] = hp;
	payloads[1] = sp;
	payloads[2] = hr_chan_device_state_encode(&ds);
	payloads[3] = sp;
	for (guint i = 0; i < 4; i++) {
		g_autoptr(GBytes) f = hr_chan_frame_encode(types[i], payloads[i]);
		g_byte_array_append(stream, g_bytes_get_data(f, NULL), g_bytes_get_size(f));
	}

	for (guint chunk = 1; chunk <= stream->len; chunk = chunk < 7 ? chunk + 1 : stream->len) {
		g_autoptr(HrFrameReader) r = hr_frame_reader_new();
		guint got = 0;
		for (gsize off = 0; off < stream->len; off += chunk) {
			hr_frame_reader_push(r, stream->data + off, MIN(chunk, stream->len - off));
			for (;;) {
				g_autoptr(GError) error = NULL;
				g_autoptr(HrChanFrame) f = hr_frame_reader_next(r, &error);
				g_assert_no_error(error);
				if (f == NULL)
					break;
				g_assert_cmpuint(got, <, 4);
				g_assert_cmpuint(f->type, ==, types[got]);
				g_assert_true(g_bytes_equal(f->payload, payloads[got]));
				got++;
			}
		}
		g_assert_cmpuint(got, ==, 4);
		g_assert_cmpuint(hr_frame_reader_get_pending(r), ==, 0);
		if (chunk == stream->len)
			break;
	}
	g_bytes_unref(payloads[2]);
}

static void
test_chan_reader_empty_payload(void)
{
	g_autoptr(GBytes) f = hr_chan_frame_encode(HR_CHAN_WELCOME, NULL);
	g_autoptr(HrFrameReader) r = hr_frame_reader_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanFrame) frame = NULL;
	hr_frame_reader_push(r, g_bytes_get_data(f, NULL), g_bytes_get_size(f));
	frame = hr_frame_reader_next(r, &error);
	g_assert_no_error(error);
	g_assert_nonnull(frame);
	g_assert_cmpuint(g_bytes_get_size(frame->payload), ==, 0);
}

static void
assert_reader_rejects(GByteArray *a, const gchar *needle)
{
	g_autoptr(HrFrameReader) r = hr_frame_reader_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanFrame) f = NULL;
	hr_frame_reader_push(r, a->data, a->len);
	f = hr_frame_reader_next(r, &error);
	g_assert_null(f);
	g_assert_nonnull(error);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
	/* poisoned: keeps failing, keeps nothing */
	g_clear_error(&error);
	hr_frame_reader_push(r, a->data, a->len);
	g_assert_cmpuint(hr_frame_reader_get_pending(r), ==, 0);
	f = hr_frame_reader_next(r, &error);
	g_assert_null(f);
	g_assert_nonnull(error);
}

static void
test_chan_reader_reject(void)
{
	g_autoptr(GBytes) p = hr_chan_set_interval_encode(5);
	g_autoptr(GByteArray) a = g_bytes_unref_to_array(hr_chan_frame_encode(HR_CHAN_SET_INTERVAL, p));

	put_le32(a, offsetof(struct hr_chan_hdr, magic), 0x41414141);
	assert_reader_rejects(a, "frame: magic 0x41414141 is not 0x48524348");
	put_le32(a, offsetof(struct hr_chan_hdr, magic), HR_CHAN_MAGIC);
	put_le16(a, offsetof(struct hr_chan_hdr, version), 2);
	assert_reader_rejects(a, "frame: version 2 is not 1");
	put_le16(a, offsetof(struct hr_chan_hdr, version), 1);
	put_le16(a, offsetof(struct hr_chan_hdr, type), 0);
	assert_reader_rejects(a, "frame: type 0 is unknown");
	put_le16(a, offsetof(struct hr_chan_hdr, type), HR_CHAN_LAYOUT + 1);
	assert_reader_rejects(a, "frame: type 8 is unknown");
	put_le16(a, offsetof(struct hr_chan_hdr, type), HR_CHAN_GUEST_MSG);
	/* oversize is refused from the header alone, before any payload */
	put_le32(a, offsetof(struct hr_chan_hdr, len), HR_CHAN_MAX_PAYLOAD + 1);
	g_byte_array_set_size(a, sizeof(struct hr_chan_hdr));
	assert_reader_rejects(a, "frame: len 65537 exceeds 65536");
}

static void
test_chan_reader_partial_header(void)
{
	g_autoptr(HrFrameReader) r = hr_frame_reader_new();
	g_autoptr(GError) error = NULL;
	g_autoptr(HrChanFrame) f = NULL;
	hr_frame_reader_push(r, (const guint8 *)"HRC", 3);
	f = hr_frame_reader_next(r, &error);
	g_assert_null(f);
	g_assert_no_error(error);
	g_assert_cmpuint(hr_frame_reader_get_pending(r), ==, 3);
}

static void
test_names(void)
{
	g_assert_cmpstr(hr_mt_to_string(VIRTIO_HUGEROOM_MT_MOVABLE), ==, "movable");
	g_assert_null(hr_mt_to_string(VIRTIO_HUGEROOM_NR_MT));
	g_assert_cmpstr(hr_vmstat_to_string(VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE), ==, "thp_split_page");
	g_assert_null(hr_vmstat_to_string(VIRTIO_HUGEROOM_NR_VMSTAT));
	g_assert_cmpstr(hr_chan_type_to_string(HR_CHAN_SET_INTERVAL), ==, "set-interval");
	g_assert_cmpstr(hr_msg_type_to_string(VIRTIO_HUGEROOM_CMD_CANCEL), ==, "cancel");
	g_assert_cmpstr(hr_result_status_to_string(VIRTIO_HUGEROOM_S_BUSY), ==, "busy");
	g_assert_cmpstr(hr_reason_to_string(VIRTIO_HUGEROOM_R_OTHER), ==, "other");
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

	g_test_add_func("/codec/status/roundtrip", test_status_roundtrip);
	g_test_add_func("/codec/status/wire-layout", test_status_wire_layout);
	g_test_add_func("/codec/status/empty", test_status_empty);
	g_test_add_func("/codec/status/max", test_status_max);
	g_test_add_func("/codec/status/copy", test_status_copy);
	g_test_add_func("/codec/status/reject/short", test_status_reject_short);
	g_test_add_func("/codec/status/reject/short-fixed", test_status_reject_short_fixed);
	g_test_add_func("/codec/status/reject/bad-type", test_status_reject_bad_type);
	g_test_add_func("/codec/status/reject/bad-len", test_status_reject_bad_len);
	g_test_add_func("/codec/status/reject/trailing", test_status_reject_trailing);
	g_test_add_func("/codec/status/reject/counts-overflow", test_status_reject_counts_overflow);
	g_test_add_func("/codec/status/reject/flags", test_status_reject_flags);
	g_test_add_func("/codec/status/reject/too-many-zones", test_status_reject_too_many_zones);
	g_test_add_func("/codec/status/reject/too-many-candidates",
			test_status_reject_too_many_candidates);
	g_test_add_func("/codec/status/reject/oversize", test_status_reject_oversize);
	g_test_add_func("/codec/status/reject/page-shift", test_status_reject_page_shift);
	g_test_add_func("/codec/status/reject/pageblock-order", test_status_reject_pageblock_order);
	g_test_add_func("/codec/status/reject/zone-name", test_status_reject_zone_name);
	g_test_add_func("/codec/status/zone-name-binary", test_status_zone_name_binary);
	g_test_add_func("/codec/status/reject/managed", test_status_reject_managed);
	g_test_add_func("/codec/status/reject/span", test_status_reject_span);
	g_test_add_func("/codec/status/reject/hist", test_status_reject_hist);
	g_test_add_func("/codec/status/reject/outside-zone", test_status_reject_outside_zone);
	g_test_add_func("/codec/status/reject/unsorted", test_status_reject_unsorted);
	g_test_add_func("/codec/status/reject/unaligned", test_status_reject_unaligned);
	g_test_add_func("/codec/status/reject/zone-index", test_status_reject_zone_index);
	g_test_add_func("/codec/status/reject/migratetype", test_status_reject_migratetype);
	g_test_add_func("/codec/status/reject/free-pages", test_status_reject_free_pages);
	g_test_add_func("/codec/status/reject/candidates-without-zones",
			test_status_reject_candidates_without_zones);

	g_test_add_func("/codec/result/roundtrip", test_result_roundtrip);
	g_test_add_func("/codec/result/reject/len", test_result_reject_len);
	g_test_add_func("/codec/result/reject/status", test_result_reject_status);
	g_test_add_func("/codec/result/reject/flags", test_result_reject_flags);
	g_test_add_func("/codec/result/reject/request-id", test_result_reject_request_id);
	g_test_add_func("/codec/result/reject/sums", test_result_reject_sums);
	g_test_add_func("/codec/result/reject/type", test_result_reject_type);

	g_test_add_func("/codec/blocks/roundtrip", test_blocks_roundtrip);
	g_test_add_func("/codec/blocks/max", test_blocks_max);
	g_test_add_func("/codec/blocks/reject/empty", test_blocks_reject_empty);
	g_test_add_func("/codec/blocks/reject/duplicate", test_blocks_reject_duplicate);
	g_test_add_func("/codec/blocks/reject/hold-reason", test_blocks_reject_hold_reason);
	g_test_add_func("/codec/blocks/reject/returned-request-id",
			test_blocks_reject_returned_request_id);
	g_test_add_func("/codec/blocks/reject/count", test_blocks_reject_count);
	g_test_add_func("/codec/blocks/reject/oversize", test_blocks_reject_oversize);
	g_test_add_func("/codec/blocks/reject/unaligned", test_blocks_reject_unaligned);
	g_test_add_func("/codec/blocks/reject/reason", test_blocks_reject_reason);
	g_test_add_func("/codec/blocks/reject/flags", test_blocks_reject_flags);
	g_test_add_func("/codec/guest-msg/reject/unknown", test_guest_msg_reject_unknown);

	g_test_add_func("/codec/cmd/report/roundtrip", test_cmd_report_roundtrip);
	g_test_add_func("/codec/cmd/cancel/roundtrip", test_cmd_cancel_roundtrip);
	g_test_add_func("/codec/cmd/evacuate/gpas-roundtrip", test_cmd_evacuate_gpas_roundtrip);
	g_test_add_func("/codec/cmd/evacuate/ranges-roundtrip", test_cmd_evacuate_ranges_roundtrip);
	g_test_add_func("/codec/cmd/evacuate/cheapest-roundtrip",
			test_cmd_evacuate_cheapest_roundtrip);
	g_test_add_func("/codec/cmd/evacuate/background-roundtrip",
			test_cmd_evacuate_background_roundtrip);
	g_test_add_func("/codec/cmd/capture/roundtrip", test_cmd_capture_roundtrip);
	g_test_add_func("/codec/cmd/return/roundtrip", test_cmd_return_roundtrip);
	g_test_add_func("/codec/cmd/set-pcp/roundtrip", test_cmd_set_pcp_roundtrip);
	g_test_add_func("/codec/pcp-policy/parse", test_pcp_policy_parse);
	g_test_add_func("/codec/cmd/reject/unknown-type", test_cmd_reject_unknown_type);
	g_test_add_func("/codec/cmd/reject/len", test_cmd_reject_len);
	g_test_add_func("/codec/cmd/reject/flags", test_cmd_reject_flags);
	g_test_add_func("/codec/cmd/reject/cancel-zero", test_cmd_reject_cancel_zero);
	g_test_add_func("/codec/cmd/reject/evacuate", test_cmd_reject_evacuate);
	g_test_add_func("/codec/cmd/reject/evacuate-gpas", test_cmd_reject_evacuate_gpas);
	g_test_add_func("/codec/cmd/reject/oversize", test_cmd_reject_oversize);
	g_test_add_func("/codec/cmd/reject/return", test_cmd_reject_return);
	g_test_add_func("/codec/cmd/reject/capture", test_cmd_reject_capture);
	g_test_add_func("/codec/cmd/reject/set-pcp", test_cmd_reject_set_pcp);
	g_test_add_func("/codec/cmd/reject/request-id", test_cmd_reject_request_id);
	g_test_add_func("/codec/cmd/reject/return-duplicate", test_cmd_reject_return_duplicate);

	g_test_add_func("/codec/chan/hello/roundtrip", test_chan_hello_roundtrip);
	g_test_add_func("/codec/chan/hello/reject", test_chan_hello_reject);
	g_test_add_func("/codec/chan/hello/newer-and-ranges", test_chan_hello_newer_and_ranges);
	g_test_add_func("/codec/chan/ram-contains", test_chan_ram_contains);
	g_test_add_func("/codec/chan/welcome/roundtrip", test_chan_welcome_roundtrip);
	g_test_add_func("/codec/chan/welcome/v2", test_chan_welcome_v2);
	g_test_add_func("/codec/chan/layout", test_chan_layout);
	g_test_add_func("/codec/chan/device-state/features", test_chan_device_state_features);
	g_test_add_func("/codec/chan/set-interval/roundtrip", test_chan_set_interval_roundtrip);
	g_test_add_func("/codec/chan/device-state/roundtrip", test_chan_device_state_roundtrip);
	g_test_add_func("/codec/chan/guest-msg-host-cmd", test_chan_guest_msg_host_cmd);
	g_test_add_func("/codec/chan/reader/stream", test_chan_reader_stream);
	g_test_add_func("/codec/chan/reader/empty-payload", test_chan_reader_empty_payload);
	g_test_add_func("/codec/chan/reader/reject", test_chan_reader_reject);
	g_test_add_func("/codec/chan/reader/partial-header", test_chan_reader_partial_header);
	g_test_add_func("/codec/names", test_names);

	return g_test_run();
}
