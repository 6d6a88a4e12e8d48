/* SPDX-License-Identifier: BSD-3-Clause */

#define G_LOG_DOMAIN "HrCodec"

#include "hr-codec.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(hr-codec-error-quark, hr_codec_error)

#define BLOCK_MASK (VIRTIO_HUGEROOM_BLOCK_SIZE - 1)
#define PAGES_PER_BLOCK 512
#define PAGE_SHIFT 12
#define MAX_PFN (G_GUINT64_CONSTANT(1) << 52)

#define STATUS_FLAGS (VIRTIO_HUGEROOM_STATUS_F_TRUNCATED | VIRTIO_HUGEROOM_STATUS_F_MT_PARTIAL)
#define EVAC_FLAGS                                                                                 \
	(VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES |                         \
	 VIRTIO_HUGEROOM_EVAC_F_BACKGROUND)

static gboolean
hr_codec_fail(GError **error, const gchar *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
hr_codec_fail(GError **error, const gchar *format, ...)
{
	va_list args;
	va_start(args, format);
	g_propagate_error(error,
			  g_error_new_valist(HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID, format, args));
	va_end(args);
	return FALSE;
}

/* ---------------------------------------------------------------------- */
/* Names */

const gchar *
hr_msg_type_to_string(guint16 type)
{
	switch (type) {
	case VIRTIO_HUGEROOM_MSG_STATUS:
		return "status";
	case VIRTIO_HUGEROOM_MSG_RESULT:
		return "result";
	case VIRTIO_HUGEROOM_MSG_PROGRESS:
		return "progress";
	case VIRTIO_HUGEROOM_MSG_HOLD:
		return "hold";
	case VIRTIO_HUGEROOM_MSG_RETURNED:
		return "returned";
	case VIRTIO_HUGEROOM_CMD_REPORT:
		return "report";
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
		return "evacuate";
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		return "capture";
	case VIRTIO_HUGEROOM_CMD_RETURN:
		return "return";
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		return "set-pcp";
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		return "cancel";
	default:
		return NULL;
	}
}

const gchar *
hr_mt_to_string(guint8 migratetype)
{
	static const gchar *names[] = {
	    [VIRTIO_HUGEROOM_MT_UNMOVABLE] = "unmovable",
	    [VIRTIO_HUGEROOM_MT_MOVABLE] = "movable",
	    [VIRTIO_HUGEROOM_MT_RECLAIMABLE] = "reclaimable",
	    [VIRTIO_HUGEROOM_MT_HIGHATOMIC] = "highatomic",
	    [VIRTIO_HUGEROOM_MT_CMA] = "cma",
	    [VIRTIO_HUGEROOM_MT_ISOLATE] = "isolate",
	};
	if (migratetype >= G_N_ELEMENTS(names))
		return NULL;
	return names[migratetype];
}

const gchar *
hr_vmstat_to_string(guint idx)
{
	static const gchar *names[] = {
	    [VIRTIO_HUGEROOM_VS_COMPACT_STALL] = "compact_stall",
	    [VIRTIO_HUGEROOM_VS_COMPACT_FAIL] = "compact_fail",
	    [VIRTIO_HUGEROOM_VS_COMPACT_SUCCESS] = "compact_success",
	    [VIRTIO_HUGEROOM_VS_COMPACT_MIGRATE_SCANNED] = "compact_migrate_scanned",
	    [VIRTIO_HUGEROOM_VS_COMPACT_FREE_SCANNED] = "compact_free_scanned",
	    [VIRTIO_HUGEROOM_VS_COMPACT_ISOLATED] = "compact_isolated",
	    [VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_WAKE] = "compact_daemon_wake",
	    [VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_MIGRATE_SCANNED] = "compact_daemon_migrate_scanned",
	    [VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_FREE_SCANNED] = "compact_daemon_free_scanned",
	    [VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS] = "pgmigrate_success",
	    [VIRTIO_HUGEROOM_VS_PGMIGRATE_FAIL] = "pgmigrate_fail",
	    [VIRTIO_HUGEROOM_VS_THP_FAULT_ALLOC] = "thp_fault_alloc",
	    [VIRTIO_HUGEROOM_VS_THP_FAULT_FALLBACK] = "thp_fault_fallback",
	    [VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC] = "thp_collapse_alloc",
	    [VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC_FAILED] = "thp_collapse_alloc_failed",
	    [VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE] = "thp_split_page",
	};
	G_STATIC_ASSERT(G_N_ELEMENTS(names) == VIRTIO_HUGEROOM_NR_VMSTAT);
	if (idx >= G_N_ELEMENTS(names))
		return NULL;
	return names[idx];
}

const gchar *
hr_result_status_to_string(guint32 status)
{
	static const gchar *names[] = {
	    [VIRTIO_HUGEROOM_S_OK] = "ok",
	    [VIRTIO_HUGEROOM_S_PARTIAL] = "partial",
	    [VIRTIO_HUGEROOM_S_BUDGET] = "budget",
	    [VIRTIO_HUGEROOM_S_CANCELLED] = "cancelled",
	    [VIRTIO_HUGEROOM_S_INVALID] = "invalid",
	    [VIRTIO_HUGEROOM_S_UNSUPPORTED] = "unsupported",
	    [VIRTIO_HUGEROOM_S_BUSY] = "busy",
	};
	if (status >= G_N_ELEMENTS(names))
		return NULL;
	return names[status];
}

const gchar *
hr_pcp_policy_to_string(guint32 policy)
{
	static const gchar *names[] = {
	    [VIRTIO_HUGEROOM_PCP_DEFAULT] = "default",
	    [VIRTIO_HUGEROOM_PCP_LATENCY] = "latency",
	    [VIRTIO_HUGEROOM_PCP_BALANCED] = "balanced",
	    [VIRTIO_HUGEROOM_PCP_DENSITY] = "density",
	    [VIRTIO_HUGEROOM_PCP_EXPLICIT] = "explicit",
	};
	if (policy >= G_N_ELEMENTS(names))
		return NULL;
	return names[policy];
}

gboolean
hr_pcp_policy_check(const HrPcpPolicy *policy, GError **error)
{
	if (hr_pcp_policy_to_string(policy->policy) == NULL) {
		g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
			    "PCP policy %u is unknown", policy->policy);
		return FALSE;
	}
	if ((policy->policy == VIRTIO_HUGEROOM_PCP_EXPLICIT) != (policy->high != 0)) {
		g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
			    policy->high != 0 ? "PCP high %u: only the explicit policy takes one"
					      : "the explicit PCP policy needs a high above 0",
			    policy->high);
		return FALSE;
	}
	return TRUE;
}

gboolean
hr_pcp_policy_parse(const gchar *text, HrPcpPolicy *policy, GError **error)
{
	const gchar *colon = strchr(text, ':');
	g_autofree gchar *name = g_strndup(text, colon != NULL ? (gsize)(colon - text) : strlen(text));
	guint64 high = 0;

	for (guint32 p = 0; hr_pcp_policy_to_string(p) != NULL; p++) {
		if (g_strcmp0(name, hr_pcp_policy_to_string(p)) != 0)
			continue;
		if (colon != NULL &&
		    !g_ascii_string_to_unsigned(colon + 1, 10, 1, G_MAXUINT32, &high, NULL)) {
			g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    "PCP policy '%s': '%s' is not a number of pages (1-%u)", text,
				    colon + 1, G_MAXUINT32);
			return FALSE;
		}
		policy->policy = p;
		policy->high = high;
		if (!hr_pcp_policy_check(policy, error)) {
			g_prefix_error(error, "'%s': ", text);
			return FALSE;
		}
		return TRUE;
	}
	g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
		    "PCP policy '%s' is unknown; use default, latency, balanced, density or "
		    "explicit:HIGH (per-CPU pages)",
		    text);
	return FALSE;
}

gchar *
hr_pcp_policy_format(const HrPcpPolicy *policy)
{
	const gchar *name = hr_pcp_policy_to_string(policy->policy);
	if (name == NULL)
		return g_strdup_printf("unknown(%u)", policy->policy);
	if (policy->policy == VIRTIO_HUGEROOM_PCP_EXPLICIT)
		return g_strdup_printf("%s:%u", name, policy->high);
	return g_strdup(name);
}

const gchar *
hr_reason_to_string(guint32 reason)
{
	static const gchar *names[] = {
	    [VIRTIO_HUGEROOM_R_UNMOVABLE] = "unmovable",
	    [VIRTIO_HUGEROOM_R_OFFLINE] = "offline",
	    [VIRTIO_HUGEROOM_R_ZONE] = "zone",
	    [VIRTIO_HUGEROOM_R_NOMEM] = "nomem",
	    [VIRTIO_HUGEROOM_R_BUDGET] = "budget",
	    [VIRTIO_HUGEROOM_R_HELD] = "held",
	    [VIRTIO_HUGEROOM_R_CANCELLED] = "cancelled",
	    [VIRTIO_HUGEROOM_R_OTHER] = "other",
	};
	G_STATIC_ASSERT(G_N_ELEMENTS(names) == VIRTIO_HUGEROOM_NR_REASONS);
	if (reason >= G_N_ELEMENTS(names))
		return NULL;
	return names[reason];
}

const gchar *
hr_chan_type_to_string(guint16 type)
{
	switch (type) {
	case HR_CHAN_HELLO:
		return "hello";
	case HR_CHAN_WELCOME:
		return "welcome";
	case HR_CHAN_GUEST_MSG:
		return "guest-msg";
	case HR_CHAN_HOST_CMD:
		return "host-cmd";
	case HR_CHAN_DEVICE_STATE:
		return "device-state";
	case HR_CHAN_SET_INTERVAL:
		return "set-interval";
	case HR_CHAN_LAYOUT:
		return "layout";
	default:
		return NULL;
	}
}

/* ---------------------------------------------------------------------- */
/* Header */

static void
hr_msg_hdr_from_wire(HrMsgHdr *hdr, const struct virtio_hugeroom_hdr *w)
{
	hdr->type = GUINT16_FROM_LE(w->type);
	hdr->flags = GUINT16_FROM_LE(w->flags);
	hdr->len = GUINT32_FROM_LE(w->len);
	hdr->request_id = GUINT64_FROM_LE(w->request_id);
}

static void
hr_msg_hdr_to_wire(struct virtio_hugeroom_hdr *w, guint16 type, guint16 flags, gsize len,
		   guint64 request_id)
{
	w->type = GUINT16_TO_LE(type);
	w->flags = GUINT16_TO_LE(flags);
	w->len = GUINT32_TO_LE((guint32)len);
	w->request_id = GUINT64_TO_LE(request_id);
}

/*
 * The checks every message shares: at least @fixed bytes, hdr.len equal to
 * the bytes received, the type one of @type_a/@type_b, no unknown flags.
 */
static gboolean
hr_msg_hdr_check(const guint8 *buf,
		 gsize len,
		 gsize fixed,
		 const gchar *what,
		 guint16 type_a,
		 guint16 type_b,
		 guint16 known_flags,
		 HrMsgHdr *hdr,
		 GError **error)
{
	struct virtio_hugeroom_hdr w;

	if (len < sizeof(w))
		return hr_codec_fail(error,
				     "%s: message of %" G_GSIZE_FORMAT
				     " bytes is shorter than the %" G_GSIZE_FORMAT " byte header",
				     what,
				     len,
				     sizeof(w));
	memcpy(&w, buf, sizeof(w));
	hr_msg_hdr_from_wire(hdr, &w);
	if (hdr->type != type_a && hdr->type != type_b)
		return hr_codec_fail(error, "%s: hdr.type %u is not %u", what, hdr->type, type_a);
	if (hdr->len != len)
		return hr_codec_fail(error,
				     "%s: hdr.len %u differs from the %" G_GSIZE_FORMAT
				     " bytes received",
				     what,
				     hdr->len,
				     len);
	if (len > VIRTIO_HUGEROOM_MAX_MSG)
		return hr_codec_fail(error,
				     "%s: hdr.len %u exceeds %u",
				     what,
				     hdr->len,
				     (guint)VIRTIO_HUGEROOM_MAX_MSG);
	if (len < fixed)
		return hr_codec_fail(error,
				     "%s: hdr.len %u is shorter than the %" G_GSIZE_FORMAT
				     " byte message",
				     what,
				     hdr->len,
				     fixed);
	if (hdr->flags & ~known_flags)
		return hr_codec_fail(error,
				     "%s: hdr.flags 0x%x has unknown bits 0x%x",
				     what,
				     hdr->flags,
				     (guint)(hdr->flags & ~known_flags));
	return TRUE;
}

static gboolean
hr_gpa_check(guint64 gpa, const gchar *what, const gchar *field, guint idx, GError **error)
{
	if (gpa & BLOCK_MASK)
		return hr_codec_fail(error,
				     "%s: %s[%u] 0x%" G_GINT64_MODIFIER
				     "x is not 2 MiB aligned",
				     what,
				     field,
				     idx,
				     gpa);
	return TRUE;
}

static guint64 *
hr_gpas_decode(const guint8 *buf, guint32 nr, const gchar *what, GError **error)
{
	g_autofree guint64 *gpas = g_new0(guint64, MAX(nr, 1));
	for (guint32 i = 0; i < nr; i++) {
		guint64 le;
		memcpy(&le, buf + i * sizeof(le), sizeof(le));
		gpas[i] = GUINT64_FROM_LE(le);
		if (!hr_gpa_check(gpas[i], what, "gpas", i, error))
			return NULL;
	}
	return g_steal_pointer(&gpas);
}

static gint
hr_u64_cmp(gconstpointer a, gconstpointer b)
{
	guint64 x = *(const guint64 *)a;
	guint64 y = *(const guint64 *)b;
	return x < y ? -1 : x > y;
}

/* rejects a gpa listed twice; sorts a copy, the order given is kept */
static gboolean
hr_gpas_unique_check(const guint64 *gpas, guint32 nr, const gchar *what, GError **error)
{
	g_autofree guint64 *sorted = NULL;

	if (nr < 2)
		return TRUE;
	sorted = g_memdup2(gpas, (gsize)nr * sizeof(guint64));
	qsort(sorted, nr, sizeof(guint64), hr_u64_cmp);
	for (guint32 i = 1; i < nr; i++) {
		if (sorted[i] == sorted[i - 1])
			return hr_codec_fail(error,
					     "%s: gpa 0x%" G_GINT64_MODIFIER "x is listed twice",
					     what,
					     sorted[i]);
	}
	return TRUE;
}

static void
hr_gpas_encode(guint8 *buf, const guint64 *gpas, guint32 nr)
{
	for (guint32 i = 0; i < nr; i++) {
		guint64 le = GUINT64_TO_LE(gpas[i]);
		memcpy(buf + i * sizeof(le), &le, sizeof(le));
	}
}

/* ---------------------------------------------------------------------- */
/* STATUS */

HrStatus *
hr_status_new(guint16 nr_zones, guint16 nr_candidates)
{
	HrStatus *status = g_new0(HrStatus, 1);
	status->hdr.type = VIRTIO_HUGEROOM_MSG_STATUS;
	status->page_shift = 12;
	status->pageblock_order = 9;
	status->nr_zones = nr_zones;
	status->nr_candidates = nr_candidates;
	status->zones = g_new0(HrZone, MAX(nr_zones, 1));
	status->candidates = g_new0(HrCandidate, MAX(nr_candidates, 1));
	return status;
}

void
hr_status_free(HrStatus *status)
{
	if (status == NULL)
		return;
	g_free(status->zones);
	g_free(status->candidates);
	g_free(status);
}

HrStatus *
hr_status_copy(const HrStatus *status)
{
	HrStatus *copy = g_memdup2(status, sizeof(*status));
	copy->zones = g_memdup2(status->zones, sizeof(HrZone) * MAX(status->nr_zones, 1));
	copy->candidates =
	    g_memdup2(status->candidates, sizeof(HrCandidate) * MAX(status->nr_candidates, 1));
	return copy;
}

static gboolean
hr_zone_decode(HrZone *z, const struct virtio_hugeroom_zone *w, guint idx, GError **error)
{
	guint64 hist_sum = 0;

	z->nid = GUINT16_FROM_LE(w->nid);
	z->zone_idx = w->zone_idx;
	if (memchr(w->name, '\0', sizeof(w->name)) == NULL)
		return hr_codec_fail(error, "status: zone %u: name is not NUL terminated", idx);
	memcpy(z->name, w->name, sizeof(z->name));
	z->start_pfn = GUINT64_FROM_LE(w->start_pfn);
	z->spanned_pages = GUINT64_FROM_LE(w->spanned_pages);
	z->managed_pages = GUINT64_FROM_LE(w->managed_pages);
	z->free_pages = GUINT64_FROM_LE(w->free_pages);
	z->wmark_min = GUINT64_FROM_LE(w->wmark_min);
	z->wmark_low = GUINT64_FROM_LE(w->wmark_low);
	z->wmark_high = GUINT64_FROM_LE(w->wmark_high);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_ORDERS; i++)
		z->nr_free[i] = GUINT64_FROM_LE(w->nr_free[i]);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_MT; i++)
		z->nr_free_pb_mt[i] = GUINT64_FROM_LE(w->nr_free_pb_mt[i]);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_HIST; i++)
		z->hist[i] = GUINT32_FROM_LE(w->hist[i]);
	z->pcp_count = GUINT32_FROM_LE(w->pcp_count);
	z->pcp_high = GUINT32_FROM_LE(w->pcp_high);
	z->pcp_batch = GUINT32_FROM_LE(w->pcp_batch);
	z->pcp_high_min = GUINT32_FROM_LE(w->pcp_high_min);
	z->pcp_high_max = GUINT32_FROM_LE(w->pcp_high_max);
	z->pcp_policy = w->pcp_policy;
	z->pcp_fraction = GUINT32_FROM_LE(w->pcp_fraction);

	if (z->managed_pages > z->spanned_pages)
		return hr_codec_fail(error,
				     "status: zone %u: managed_pages %" G_GUINT64_FORMAT
				     " exceeds spanned_pages %" G_GUINT64_FORMAT,
				     idx,
				     z->managed_pages,
				     z->spanned_pages);
	if (z->start_pfn > MAX_PFN || z->spanned_pages > MAX_PFN - z->start_pfn)
		return hr_codec_fail(error,
				     "status: zone %u: start_pfn 0x%" G_GINT64_MODIFIER
				     "x + spanned_pages 0x%" G_GINT64_MODIFIER "x exceeds 2^52",
				     idx,
				     z->start_pfn,
				     z->spanned_pages);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_HIST; i++)
		hist_sum += z->hist[i];
	if (hist_sum > (z->spanned_pages + PAGES_PER_BLOCK - 1) / PAGES_PER_BLOCK)
		return hr_codec_fail(error,
				     "status: zone %u: hist sums to %" G_GUINT64_FORMAT
				     " pageblocks, more than the %" G_GUINT64_FORMAT " it spans",
				     idx,
				     hist_sum,
				     (z->spanned_pages + PAGES_PER_BLOCK - 1) / PAGES_PER_BLOCK);
	return TRUE;
}

static void
hr_zone_encode(struct virtio_hugeroom_zone *w, const HrZone *z)
{
	memset(w, 0, sizeof(*w));
	w->nid = GUINT16_TO_LE(z->nid);
	w->zone_idx = z->zone_idx;
	/* always NUL terminated on the wire, whatever the caller left */
	g_strlcpy(w->name, z->name, sizeof(w->name));
	w->start_pfn = GUINT64_TO_LE(z->start_pfn);
	w->spanned_pages = GUINT64_TO_LE(z->spanned_pages);
	w->managed_pages = GUINT64_TO_LE(z->managed_pages);
	w->free_pages = GUINT64_TO_LE(z->free_pages);
	w->wmark_min = GUINT64_TO_LE(z->wmark_min);
	w->wmark_low = GUINT64_TO_LE(z->wmark_low);
	w->wmark_high = GUINT64_TO_LE(z->wmark_high);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_ORDERS; i++)
		w->nr_free[i] = GUINT64_TO_LE(z->nr_free[i]);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_MT; i++)
		w->nr_free_pb_mt[i] = GUINT64_TO_LE(z->nr_free_pb_mt[i]);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_HIST; i++)
		w->hist[i] = GUINT32_TO_LE(z->hist[i]);
	w->pcp_count = GUINT32_TO_LE(z->pcp_count);
	w->pcp_high = GUINT32_TO_LE(z->pcp_high);
	w->pcp_batch = GUINT32_TO_LE(z->pcp_batch);
	w->pcp_high_min = GUINT32_TO_LE(z->pcp_high_min);
	w->pcp_high_max = GUINT32_TO_LE(z->pcp_high_max);
	w->pcp_policy = z->pcp_policy;
	w->pcp_fraction = GUINT32_TO_LE(z->pcp_fraction);
}

HrStatus *
hr_status_decode(const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_status w;
	HrMsgHdr hdr;
	g_autoptr(HrStatus) status = NULL;
	gsize expected;
	const guint8 *p;

	if (!hr_msg_hdr_check(buf,
			      len,
			      sizeof(w),
			      "status",
			      VIRTIO_HUGEROOM_MSG_STATUS,
			      VIRTIO_HUGEROOM_MSG_STATUS,
			      STATUS_FLAGS,
			      &hdr,
			      error))
		return NULL;
	memcpy(&w, buf, sizeof(w));
	if (GUINT16_FROM_LE(w.nr_zones) > VIRTIO_HUGEROOM_MAX_ZONES) {
		hr_codec_fail(error,
			      "status: nr_zones %u exceeds %u",
			      GUINT16_FROM_LE(w.nr_zones),
			      (guint)VIRTIO_HUGEROOM_MAX_ZONES);
		return NULL;
	}
	if (GUINT16_FROM_LE(w.nr_candidates) > VIRTIO_HUGEROOM_MAX_CANDIDATES) {
		hr_codec_fail(error,
			      "status: nr_candidates %u exceeds %u",
			      GUINT16_FROM_LE(w.nr_candidates),
			      (guint)VIRTIO_HUGEROOM_MAX_CANDIDATES);
		return NULL;
	}
	expected = sizeof(w) + GUINT16_FROM_LE(w.nr_zones) * sizeof(struct virtio_hugeroom_zone) +
		   GUINT16_FROM_LE(w.nr_candidates) * sizeof(struct virtio_hugeroom_candidate);
	if (expected != len) {
		hr_codec_fail(error,
			      "status: hdr.len %u differs from the %" G_GSIZE_FORMAT
			      " bytes nr_zones %u and nr_candidates %u need",
			      hdr.len,
			      expected,
			      GUINT16_FROM_LE(w.nr_zones),
			      GUINT16_FROM_LE(w.nr_candidates));
		return NULL;
	}
	if (GUINT32_FROM_LE(w.page_shift) != 12) {
		hr_codec_fail(error, "status: page_shift %u is not 12", GUINT32_FROM_LE(w.page_shift));
		return NULL;
	}
	if (GUINT32_FROM_LE(w.pb_order) != 9) {
		hr_codec_fail(error,
			      "status: pb_order %u is not 9",
			      GUINT32_FROM_LE(w.pb_order));
		return NULL;
	}

	status = hr_status_new(GUINT16_FROM_LE(w.nr_zones), GUINT16_FROM_LE(w.nr_candidates));
	status->hdr = hdr;
	status->seq = GUINT64_FROM_LE(w.seq);
	status->uptime_ns = GUINT64_FROM_LE(w.uptime_ns);
	status->build_ns = GUINT64_FROM_LE(w.build_ns);
	status->mem_total_pages = GUINT64_FROM_LE(w.mem_total_pages);
	status->mem_free_pages = GUINT64_FROM_LE(w.mem_free_pages);
	status->mem_available_pages = GUINT64_FROM_LE(w.mem_available_pages);
	status->held_blocks = GUINT32_FROM_LE(w.held_blocks);
	status->page_shift = GUINT32_FROM_LE(w.page_shift);
	status->pageblock_order = GUINT32_FROM_LE(w.pb_order);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		status->vmstat[i] = GUINT64_FROM_LE(w.vmstat[i]);

	p = buf + sizeof(w);
	for (guint i = 0; i < status->nr_zones; i++) {
		struct virtio_hugeroom_zone wz;
		memcpy(&wz, p, sizeof(wz));
		p += sizeof(wz);
		if (!hr_zone_decode(&status->zones[i], &wz, i, error))
			return NULL;
	}
	for (guint i = 0; i < status->nr_candidates; i++) {
		struct virtio_hugeroom_candidate wc;
		HrCandidate *c = &status->candidates[i];
		const HrZone *z;
		memcpy(&wc, p, sizeof(wc));
		p += sizeof(wc);
		c->gpa = GUINT64_FROM_LE(wc.gpa);
		c->free_pages = GUINT16_FROM_LE(wc.free_pages);
		c->migratetype = wc.migratetype;
		c->zone = wc.zone;
		if (c->gpa & BLOCK_MASK) {
			hr_codec_fail(error,
				      "status: candidate %u: gpa 0x%" G_GINT64_MODIFIER
				      "x is not 2 MiB aligned",
				      i,
				      c->gpa);
			return NULL;
		}
		if (c->zone >= status->nr_zones) {
			hr_codec_fail(error,
				      "status: candidate %u: zone %u is not below nr_zones %u",
				      i,
				      c->zone,
				      status->nr_zones);
			return NULL;
		}
		if (c->migratetype >= VIRTIO_HUGEROOM_NR_MT) {
			hr_codec_fail(error,
				      "status: candidate %u: migratetype %u is not below %u",
				      i,
				      c->migratetype,
				      (guint)VIRTIO_HUGEROOM_NR_MT);
			return NULL;
		}
		if (c->free_pages > PAGES_PER_BLOCK) {
			hr_codec_fail(error,
				      "status: candidate %u: free_pages %u exceeds %u",
				      i,
				      c->free_pages,
				      (guint)PAGES_PER_BLOCK);
			return NULL;
		}
		z = &status->zones[c->zone];
		if ((c->gpa >> PAGE_SHIFT) < z->start_pfn ||
		    (c->gpa >> PAGE_SHIFT) + PAGES_PER_BLOCK > z->start_pfn + z->spanned_pages) {
			hr_codec_fail(error,
				      "status: candidate %u: gpa 0x%" G_GINT64_MODIFIER
				      "x is outside the span of zone %u (pfn 0x%" G_GINT64_MODIFIER
				      "x + 0x%" G_GINT64_MODIFIER "x)",
				      i,
				      c->gpa,
				      c->zone,
				      z->start_pfn,
				      z->spanned_pages);
			return NULL;
		}
		if (i > 0 && c->free_pages > status->candidates[i - 1].free_pages) {
			hr_codec_fail(error,
				      "status: candidate %u: free_pages %u is above the %u of "
				      "candidate %u (they must not increase)",
				      i,
				      c->free_pages,
				      status->candidates[i - 1].free_pages,
				      i - 1);
			return NULL;
		}
	}
	return g_steal_pointer(&status);
}

GBytes *
hr_status_encode(const HrStatus *status)
{
	struct virtio_hugeroom_status w = {0};
	gsize len = sizeof(w) + status->nr_zones * sizeof(struct virtio_hugeroom_zone) +
		    status->nr_candidates * sizeof(struct virtio_hugeroom_candidate);
	guint8 *buf = g_malloc0(len);
	guint8 *p;

	hr_msg_hdr_to_wire(&w.hdr,
			   VIRTIO_HUGEROOM_MSG_STATUS,
			   status->hdr.flags,
			   len,
			   status->hdr.request_id);
	w.seq = GUINT64_TO_LE(status->seq);
	w.uptime_ns = GUINT64_TO_LE(status->uptime_ns);
	w.build_ns = GUINT64_TO_LE(status->build_ns);
	w.mem_total_pages = GUINT64_TO_LE(status->mem_total_pages);
	w.mem_free_pages = GUINT64_TO_LE(status->mem_free_pages);
	w.mem_available_pages = GUINT64_TO_LE(status->mem_available_pages);
	w.held_blocks = GUINT32_TO_LE(status->held_blocks);
	w.page_shift = GUINT32_TO_LE(status->page_shift);
	w.pb_order = GUINT32_TO_LE(status->pageblock_order);
	w.nr_zones = GUINT16_TO_LE(status->nr_zones);
	w.nr_candidates = GUINT16_TO_LE(status->nr_candidates);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		w.vmstat[i] = GUINT64_TO_LE(status->vmstat[i]);
	memcpy(buf, &w, sizeof(w));
	p = buf + sizeof(w);
	for (guint i = 0; i < status->nr_zones; i++) {
		struct virtio_hugeroom_zone wz;
		hr_zone_encode(&wz, &status->zones[i]);
		memcpy(p, &wz, sizeof(wz));
		p += sizeof(wz);
	}
	for (guint i = 0; i < status->nr_candidates; i++) {
		struct virtio_hugeroom_candidate wc = {0};
		const HrCandidate *c = &status->candidates[i];
		wc.gpa = GUINT64_TO_LE(c->gpa);
		wc.free_pages = GUINT16_TO_LE(c->free_pages);
		wc.migratetype = c->migratetype;
		wc.zone = c->zone;
		memcpy(p, &wc, sizeof(wc));
		p += sizeof(wc);
	}
	return g_bytes_new_take(buf, len);
}

/* ---------------------------------------------------------------------- */
/* RESULT, PROGRESS */

HrResult *
hr_result_decode(const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_result w;
	g_autoptr(HrResult) result = g_new0(HrResult, 1);
	const gchar *what;
	guint64 accounted;

	if (!hr_msg_hdr_check(buf,
			      len,
			      sizeof(w),
			      "result",
			      VIRTIO_HUGEROOM_MSG_RESULT,
			      VIRTIO_HUGEROOM_MSG_PROGRESS,
			      0,
			      &result->hdr,
			      error))
		return NULL;
	if (len != sizeof(w)) {
		hr_codec_fail(error,
			      "result: hdr.len %u is not %" G_GSIZE_FORMAT,
			      result->hdr.len,
			      sizeof(w));
		return NULL;
	}
	memcpy(&w, buf, sizeof(w));
	what = hr_msg_type_to_string(result->hdr.type);
	if (result->hdr.request_id == 0) {
		hr_codec_fail(error, "%s: hdr.request_id 0 names no command", what);
		return NULL;
	}
	result->status = GUINT32_FROM_LE(w.status);
	if (result->hdr.type == VIRTIO_HUGEROOM_MSG_PROGRESS && result->status != 0) {
		hr_codec_fail(error, "progress: status %u is not 0", result->status);
		return NULL;
	}
	if (hr_result_status_to_string(result->status) == NULL) {
		hr_codec_fail(error, "result: status %u is unknown", result->status);
		return NULL;
	}
	result->blocks_tried = GUINT32_FROM_LE(w.blocks_tried);
	result->blocks_freed = GUINT32_FROM_LE(w.blocks_freed);
	accounted = result->blocks_freed;
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++) {
		result->failed[i] = GUINT32_FROM_LE(w.failed[i]);
		accounted += result->failed[i];
	}
	result->pages_migrated = GUINT64_FROM_LE(w.pages_migrated);
	result->elapsed_us = GUINT64_FROM_LE(w.elapsed_us);
	if (result->hdr.type == VIRTIO_HUGEROOM_MSG_RESULT && accounted != result->blocks_tried) {
		hr_codec_fail(error,
			      "result: blocks_freed + failed[] = %" G_GUINT64_FORMAT
			      " differs from blocks_tried %u",
			      accounted,
			      result->blocks_tried);
		return NULL;
	}
	if (accounted > result->blocks_tried) {
		hr_codec_fail(error,
			      "progress: blocks_freed + failed[] = %" G_GUINT64_FORMAT
			      " exceeds blocks_tried %u",
			      accounted,
			      result->blocks_tried);
		return NULL;
	}
	return g_steal_pointer(&result);
}

GBytes *
hr_result_encode(const HrResult *result)
{
	struct virtio_hugeroom_result w = {0};
	guint16 type = result->hdr.type == VIRTIO_HUGEROOM_MSG_PROGRESS
			   ? VIRTIO_HUGEROOM_MSG_PROGRESS
			   : VIRTIO_HUGEROOM_MSG_RESULT;

	hr_msg_hdr_to_wire(&w.hdr, type, result->hdr.flags, sizeof(w), result->hdr.request_id);
	w.status = GUINT32_TO_LE(result->status);
	w.blocks_tried = GUINT32_TO_LE(result->blocks_tried);
	w.blocks_freed = GUINT32_TO_LE(result->blocks_freed);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
		w.failed[i] = GUINT32_TO_LE(result->failed[i]);
	w.pages_migrated = GUINT64_TO_LE(result->pages_migrated);
	w.elapsed_us = GUINT64_TO_LE(result->elapsed_us);
	return g_bytes_new(&w, sizeof(w));
}

/* ---------------------------------------------------------------------- */
/* HOLD, RETURNED */

HrBlocks *
hr_blocks_new(guint16 type, guint32 nr_blocks)
{
	HrBlocks *blocks = g_new0(HrBlocks, 1);
	blocks->hdr.type = type;
	blocks->nr_blocks = nr_blocks;
	blocks->gpas = g_new0(guint64, MAX(nr_blocks, 1));
	return blocks;
}

void
hr_blocks_free(HrBlocks *blocks)
{
	if (blocks == NULL)
		return;
	g_free(blocks->gpas);
	g_free(blocks);
}

HrBlocks *
hr_blocks_decode(const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_blocks w;
	HrMsgHdr hdr;
	g_autoptr(HrBlocks) blocks = NULL;
	guint32 nr;
	const gchar *what;

	if (!hr_msg_hdr_check(buf,
			      len,
			      sizeof(w),
			      "blocks",
			      VIRTIO_HUGEROOM_MSG_HOLD,
			      VIRTIO_HUGEROOM_MSG_RETURNED,
			      0,
			      &hdr,
			      error))
		return NULL;
	what = hr_msg_type_to_string(hdr.type);
	memcpy(&w, buf, sizeof(w));
	nr = GUINT32_FROM_LE(w.nr_blocks);
	if (nr == 0) {
		hr_codec_fail(error, "%s: nr_blocks is 0", what);
		return NULL;
	}
	if (nr > VIRTIO_HUGEROOM_MAX_EVT_BLOCKS) {
		hr_codec_fail(error,
			      "%s: nr_blocks %u exceeds %u",
			      what,
			      nr,
			      (guint)VIRTIO_HUGEROOM_MAX_EVT_BLOCKS);
		return NULL;
	}
	if (len != sizeof(w) + (gsize)nr * sizeof(guint64)) {
		hr_codec_fail(error,
			      "%s: hdr.len %u differs from the %" G_GSIZE_FORMAT
			      " bytes nr_blocks %u needs",
			      what,
			      hdr.len,
			      sizeof(w) + (gsize)nr * sizeof(guint64),
			      nr);
		return NULL;
	}
	if (hdr.type == VIRTIO_HUGEROOM_MSG_HOLD && GUINT32_FROM_LE(w.reason) != 0) {
		hr_codec_fail(error, "hold: reason %u is not 0", GUINT32_FROM_LE(w.reason));
		return NULL;
	}
	if (hdr.type == VIRTIO_HUGEROOM_MSG_RETURNED) {
		guint32 reason = GUINT32_FROM_LE(w.reason);
		if (reason > VIRTIO_HUGEROOM_RET_UNLOAD) {
			hr_codec_fail(error, "returned: reason %u is unknown", reason);
			return NULL;
		}
		/* only a RETURN from the host has a request id to answer */
		if ((reason == VIRTIO_HUGEROOM_RET_HOST) != (hdr.request_id != 0)) {
			hr_codec_fail(error,
				      "returned: hdr.request_id %" G_GUINT64_FORMAT
				      " does not go with reason %u",
				      hdr.request_id,
				      reason);
			return NULL;
		}
	}
	blocks = g_new0(HrBlocks, 1);
	blocks->hdr = hdr;
	blocks->nr_blocks = nr;
	blocks->reason = GUINT32_FROM_LE(w.reason);
	blocks->gpas = hr_gpas_decode(buf + sizeof(w), nr, what, error);
	if (blocks->gpas == NULL)
		return NULL;
	if (hdr.type == VIRTIO_HUGEROOM_MSG_HOLD &&
	    !hr_gpas_unique_check(blocks->gpas, nr, what, error))
		return NULL;
	return g_steal_pointer(&blocks);
}

GBytes *
hr_blocks_encode(const HrBlocks *blocks)
{
	struct virtio_hugeroom_blocks w = {0};
	gsize len = sizeof(w) + (gsize)blocks->nr_blocks * sizeof(guint64);
	guint8 *buf = g_malloc0(len);

	hr_msg_hdr_to_wire(&w.hdr, blocks->hdr.type, blocks->hdr.flags, len, blocks->hdr.request_id);
	w.nr_blocks = GUINT32_TO_LE(blocks->nr_blocks);
	w.reason = GUINT32_TO_LE(blocks->reason);
	memcpy(buf, &w, sizeof(w));
	hr_gpas_encode(buf + sizeof(w), blocks->gpas, blocks->nr_blocks);
	return g_bytes_new_take(buf, len);
}

/* ---------------------------------------------------------------------- */
/* Commands */

HrCmd *
hr_cmd_new(guint16 type, guint64 request_id)
{
	HrCmd *cmd = g_new0(HrCmd, 1);
	cmd->hdr.type = type;
	cmd->hdr.request_id = request_id;
	return cmd;
}

void
hr_cmd_free(HrCmd *cmd)
{
	if (cmd == NULL)
		return;
	g_free(cmd->gpas);
	g_free(cmd->ranges);
	g_free(cmd);
}

/* every command must fit one posted cmdq buffer */
static gboolean
hr_cmd_len_check(const gchar *what, gsize len, GError **error)
{
	if (len > VIRTIO_HUGEROOM_CMD_BUF)
		return hr_codec_fail(error,
				     "%s: hdr.len %" G_GSIZE_FORMAT " exceeds the %u byte cmdq buffer",
				     what,
				     len,
				     (guint)VIRTIO_HUGEROOM_CMD_BUF);
	return TRUE;
}

static gboolean
hr_cmd_decode_evacuate(HrCmd *cmd, const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_evacuate w;
	const guint8 *p;
	gsize expected;

	if (len < sizeof(w))
		return hr_codec_fail(error,
				     "evacuate: hdr.len %" G_GSIZE_FORMAT
				     " is shorter than the %" G_GSIZE_FORMAT " byte message",
				     len,
				     sizeof(w));
	if (cmd->hdr.flags & ~EVAC_FLAGS)
		return hr_codec_fail(error,
				     "evacuate: hdr.flags 0x%x has unknown bits 0x%x",
				     cmd->hdr.flags,
				     (guint)(cmd->hdr.flags & ~EVAC_FLAGS));
	memcpy(&w, buf, sizeof(w));
	cmd->count = GUINT32_FROM_LE(w.count);
	cmd->budget_ms = GUINT32_FROM_LE(w.budget_ms);
	cmd->budget_pages = GUINT64_FROM_LE(w.budget_pages);
	cmd->nr_gpas = GUINT32_FROM_LE(w.nr_gpas);
	cmd->nr_ranges = GUINT32_FROM_LE(w.nr_ranges);
	if (cmd->nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS)
		return hr_codec_fail(error,
				     "evacuate: nr_gpas %u exceeds %u",
				     cmd->nr_gpas,
				     (guint)VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
	if (cmd->nr_ranges > VIRTIO_HUGEROOM_MAX_CMD_RANGES)
		return hr_codec_fail(error,
				     "evacuate: nr_ranges %u exceeds %u",
				     cmd->nr_ranges,
				     (guint)VIRTIO_HUGEROOM_MAX_CMD_RANGES);
	expected = sizeof(w) + (gsize)cmd->nr_gpas * sizeof(guint64) +
		   (gsize)cmd->nr_ranges * sizeof(struct virtio_hugeroom_range);
	if (expected != len)
		return hr_codec_fail(error,
				     "evacuate: hdr.len %" G_GSIZE_FORMAT
				     " differs from the %" G_GSIZE_FORMAT
				     " bytes nr_gpas %u and nr_ranges %u need",
				     len,
				     expected,
				     cmd->nr_gpas,
				     cmd->nr_ranges);
	if (cmd->count == 0)
		return hr_codec_fail(error, "evacuate: count 0 asks for nothing");
	if (cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_CHEAPEST) {
		if (cmd->nr_gpas != 0)
			return hr_codec_fail(error,
					     "evacuate: nr_gpas %u with EVAC_F_CHEAPEST, must be 0",
					     cmd->nr_gpas);
	} else {
		if (cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_RANGES)
			return hr_codec_fail(error,
					     "evacuate: EVAC_F_RANGES without EVAC_F_CHEAPEST");
		if (cmd->nr_gpas == 0)
			return hr_codec_fail(error,
					     "evacuate: nr_gpas 0 without EVAC_F_CHEAPEST");
		if (cmd->count > cmd->nr_gpas)
			return hr_codec_fail(error,
					     "evacuate: count %u exceeds nr_gpas %u",
					     cmd->count,
					     cmd->nr_gpas);
	}
	if ((cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_RANGES) && cmd->nr_ranges == 0)
		return hr_codec_fail(error, "evacuate: nr_ranges 0 with EVAC_F_RANGES");
	if (!(cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_RANGES) && cmd->nr_ranges != 0)
		return hr_codec_fail(error,
				     "evacuate: nr_ranges %u without EVAC_F_RANGES",
				     cmd->nr_ranges);

	p = buf + sizeof(w);
	cmd->gpas = hr_gpas_decode(p, cmd->nr_gpas, "evacuate", error);
	if (cmd->gpas == NULL)
		return FALSE;
	if (!hr_gpas_unique_check(cmd->gpas, cmd->nr_gpas, "evacuate", error))
		return FALSE;
	p += (gsize)cmd->nr_gpas * sizeof(guint64);
	cmd->ranges = g_new0(HrRange, MAX(cmd->nr_ranges, 1));
	for (guint32 i = 0; i < cmd->nr_ranges; i++) {
		struct virtio_hugeroom_range wr;
		memcpy(&wr, p, sizeof(wr));
		p += sizeof(wr);
		cmd->ranges[i].start = GUINT64_FROM_LE(wr.start);
		cmd->ranges[i].end = GUINT64_FROM_LE(wr.end);
		if (!hr_gpa_check(cmd->ranges[i].start, "evacuate", "ranges.start", i, error) ||
		    !hr_gpa_check(cmd->ranges[i].end, "evacuate", "ranges.end", i, error))
			return FALSE;
		if (cmd->ranges[i].end <= cmd->ranges[i].start)
			return hr_codec_fail(error,
					     "evacuate: ranges[%u] end 0x%" G_GINT64_MODIFIER
					     "x is not above start 0x%" G_GINT64_MODIFIER "x",
					     i,
					     cmd->ranges[i].end,
					     cmd->ranges[i].start);
		if (i > 0 && cmd->ranges[i].start < cmd->ranges[i - 1].end)
			return hr_codec_fail(error,
					     "evacuate: ranges[%u] start 0x%" G_GINT64_MODIFIER
					     "x is below the end 0x%" G_GINT64_MODIFIER
					     "x of ranges[%u] (ranges must be sorted, not overlap)",
					     i,
					     cmd->ranges[i].start,
					     cmd->ranges[i - 1].end,
					     i - 1);
	}
	return TRUE;
}

static gboolean
hr_cmd_decode_return(HrCmd *cmd, const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_return w;

	if (len < sizeof(w))
		return hr_codec_fail(error,
				     "return: hdr.len %" G_GSIZE_FORMAT
				     " is shorter than the %" G_GSIZE_FORMAT " byte message",
				     len,
				     sizeof(w));
	if (cmd->hdr.flags != 0)
		return hr_codec_fail(error,
				     "return: hdr.flags 0x%x has unknown bits 0x%x",
				     cmd->hdr.flags,
				     cmd->hdr.flags);
	memcpy(&w, buf, sizeof(w));
	cmd->count = GUINT32_FROM_LE(w.count);
	cmd->nr_gpas = GUINT32_FROM_LE(w.nr_gpas);
	if (cmd->nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS)
		return hr_codec_fail(error,
				     "return: nr_gpas %u exceeds %u",
				     cmd->nr_gpas,
				     (guint)VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
	if (len != sizeof(w) + (gsize)cmd->nr_gpas * sizeof(guint64))
		return hr_codec_fail(error,
				     "return: hdr.len %" G_GSIZE_FORMAT
				     " differs from the %" G_GSIZE_FORMAT " bytes nr_gpas %u needs",
				     len,
				     sizeof(w) + (gsize)cmd->nr_gpas * sizeof(guint64),
				     cmd->nr_gpas);
	if (cmd->nr_gpas == 0 && cmd->count == 0)
		return hr_codec_fail(error, "return: count 0 and nr_gpas 0 ask for nothing");
	if (cmd->nr_gpas != 0 && cmd->count != cmd->nr_gpas)
		return hr_codec_fail(error,
				     "return: count %u differs from nr_gpas %u",
				     cmd->count,
				     cmd->nr_gpas);
	cmd->gpas = hr_gpas_decode(buf + sizeof(w), cmd->nr_gpas, "return", error);
	if (cmd->gpas == NULL)
		return FALSE;
	return hr_gpas_unique_check(cmd->gpas, cmd->nr_gpas, "return", error);
}

static gboolean
hr_cmd_fixed_check(HrCmd *cmd, const gchar *what, gsize len, gsize fixed, GError **error)
{
	if (len != fixed)
		return hr_codec_fail(error,
				     "%s: hdr.len %" G_GSIZE_FORMAT " is not %" G_GSIZE_FORMAT,
				     what,
				     len,
				     fixed);
	if (cmd->hdr.flags != 0)
		return hr_codec_fail(error,
				     "%s: hdr.flags 0x%x has unknown bits 0x%x",
				     what,
				     cmd->hdr.flags,
				     cmd->hdr.flags);
	return TRUE;
}

HrCmd *
hr_cmd_decode(const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_hdr wh;
	g_autoptr(HrCmd) cmd = g_new0(HrCmd, 1);
	const gchar *what;

	if (len < sizeof(wh)) {
		hr_codec_fail(error,
			      "command: message of %" G_GSIZE_FORMAT
			      " bytes is shorter than the %" G_GSIZE_FORMAT " byte header",
			      len,
			      sizeof(wh));
		return NULL;
	}
	memcpy(&wh, buf, sizeof(wh));
	hr_msg_hdr_from_wire(&cmd->hdr, &wh);
	if (cmd->hdr.type < VIRTIO_HUGEROOM_CMD_REPORT ||
	    hr_msg_type_to_string(cmd->hdr.type) == NULL) {
		g_set_error(error,
			    HR_CODEC_ERROR,
			    HR_CODEC_ERROR_UNKNOWN_TYPE,
			    "command: hdr.type %u is not a command",
			    cmd->hdr.type);
		return NULL;
	}
	what = hr_msg_type_to_string(cmd->hdr.type);
	if (cmd->hdr.len != len) {
		hr_codec_fail(error,
			      "%s: hdr.len %u differs from the %" G_GSIZE_FORMAT " bytes received",
			      what,
			      cmd->hdr.len,
			      len);
		return NULL;
	}
	if (!hr_cmd_len_check(what, len, error))
		return NULL;
	if (cmd->hdr.request_id == 0) {
		hr_codec_fail(error, "%s: hdr.request_id 0 names no command", what);
		return NULL;
	}

	switch (cmd->hdr.type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		if (!hr_cmd_fixed_check(cmd, what, len, sizeof(wh), error))
			return NULL;
		break;
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		if (!hr_cmd_fixed_check(cmd, what, len, sizeof(wh), error))
			return NULL;
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
		if (!hr_cmd_decode_evacuate(cmd, buf, len, error))
			return NULL;
		break;
	case VIRTIO_HUGEROOM_CMD_CAPTURE: {
		struct virtio_hugeroom_capture w;
		if (!hr_cmd_fixed_check(cmd, what, len, sizeof(w), error))
			return NULL;
		memcpy(&w, buf, sizeof(w));
		cmd->count = GUINT32_FROM_LE(w.count);
		cmd->budget_ms = GUINT32_FROM_LE(w.budget_ms);
		if (cmd->count == 0) {
			hr_codec_fail(error, "capture: count 0 asks for nothing");
			return NULL;
		}
		break;
	}
	case VIRTIO_HUGEROOM_CMD_RETURN:
		if (!hr_cmd_decode_return(cmd, buf, len, error))
			return NULL;
		break;
	case VIRTIO_HUGEROOM_CMD_SET_PCP: {
		struct virtio_hugeroom_set_pcp w;
		if (!hr_cmd_fixed_check(cmd, what, len, sizeof(w), error))
			return NULL;
		memcpy(&w, buf, sizeof(w));
		cmd->policy = GUINT32_FROM_LE(w.policy);
		cmd->high = GUINT32_FROM_LE(w.high);
		if (!hr_pcp_policy_check(&(HrPcpPolicy){cmd->policy, cmd->high}, error)) {
			g_prefix_error(error, "set-pcp: ");
			return NULL;
		}
		break;
	}
	default:
		g_assert_not_reached();
	}
	return g_steal_pointer(&cmd);
}

GBytes *
hr_cmd_encode(const HrCmd *cmd)
{
	guint8 *buf;
	gsize len;

	switch (cmd->hdr.type) {
	case VIRTIO_HUGEROOM_CMD_EVACUATE: {
		struct virtio_hugeroom_evacuate w = {0};
		guint8 *p;
		len = sizeof(w) + (gsize)cmd->nr_gpas * sizeof(guint64) +
		      (gsize)cmd->nr_ranges * sizeof(struct virtio_hugeroom_range);
		buf = g_malloc0(len);
		hr_msg_hdr_to_wire(&w.hdr, cmd->hdr.type, cmd->hdr.flags, len, cmd->hdr.request_id);
		w.count = GUINT32_TO_LE(cmd->count);
		w.nr_gpas = GUINT32_TO_LE(cmd->nr_gpas);
		w.nr_ranges = GUINT32_TO_LE(cmd->nr_ranges);
		w.budget_ms = GUINT32_TO_LE(cmd->budget_ms);
		w.budget_pages = GUINT64_TO_LE(cmd->budget_pages);
		memcpy(buf, &w, sizeof(w));
		p = buf + sizeof(w);
		hr_gpas_encode(p, cmd->gpas, cmd->nr_gpas);
		p += (gsize)cmd->nr_gpas * sizeof(guint64);
		for (guint32 i = 0; i < cmd->nr_ranges; i++) {
			struct virtio_hugeroom_range wr;
			wr.start = GUINT64_TO_LE(cmd->ranges[i].start);
			wr.end = GUINT64_TO_LE(cmd->ranges[i].end);
			memcpy(p, &wr, sizeof(wr));
			p += sizeof(wr);
		}
		break;
	}
	case VIRTIO_HUGEROOM_CMD_CAPTURE: {
		struct virtio_hugeroom_capture w = {0};
		len = sizeof(w);
		hr_msg_hdr_to_wire(&w.hdr, cmd->hdr.type, cmd->hdr.flags, len, cmd->hdr.request_id);
		w.count = GUINT32_TO_LE(cmd->count);
		w.budget_ms = GUINT32_TO_LE(cmd->budget_ms);
		buf = g_memdup2(&w, len);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_RETURN: {
		struct virtio_hugeroom_return w = {0};
		len = sizeof(w) + (gsize)cmd->nr_gpas * sizeof(guint64);
		buf = g_malloc0(len);
		hr_msg_hdr_to_wire(&w.hdr, cmd->hdr.type, cmd->hdr.flags, len, cmd->hdr.request_id);
		w.count = GUINT32_TO_LE(cmd->count);
		w.nr_gpas = GUINT32_TO_LE(cmd->nr_gpas);
		memcpy(buf, &w, sizeof(w));
		hr_gpas_encode(buf + sizeof(w), cmd->gpas, cmd->nr_gpas);
		break;
	}
	case VIRTIO_HUGEROOM_CMD_SET_PCP: {
		struct virtio_hugeroom_set_pcp w = {0};
		len = sizeof(w);
		hr_msg_hdr_to_wire(&w.hdr, cmd->hdr.type, cmd->hdr.flags, len, cmd->hdr.request_id);
		w.policy = GUINT32_TO_LE(cmd->policy);
		w.high = GUINT32_TO_LE(cmd->high);
		buf = g_memdup2(&w, len);
		break;
	}
	default: {
		/* REPORT, CANCEL, and whatever a test wants as a bare header */
		struct virtio_hugeroom_hdr w;
		len = sizeof(w);
		hr_msg_hdr_to_wire(&w, cmd->hdr.type, cmd->hdr.flags, len, cmd->hdr.request_id);
		buf = g_memdup2(&w, len);
		break;
	}
	}
	return g_bytes_new_take(buf, len);
}

/* ---------------------------------------------------------------------- */
/* Any guest message */

void
hr_guest_msg_free(HrGuestMsg *msg)
{
	if (msg == NULL)
		return;
	hr_status_free(msg->status);
	g_free(msg->result);
	hr_blocks_free(msg->blocks);
	g_free(msg);
}

HrGuestMsg *
hr_guest_msg_decode(const guint8 *buf, gsize len, GError **error)
{
	struct virtio_hugeroom_hdr wh;
	g_autoptr(HrGuestMsg) msg = g_new0(HrGuestMsg, 1);

	if (len < sizeof(wh)) {
		hr_codec_fail(error,
			      "guest message: %" G_GSIZE_FORMAT
			      " bytes is shorter than the %" G_GSIZE_FORMAT " byte header",
			      len,
			      sizeof(wh));
		return NULL;
	}
	memcpy(&wh, buf, sizeof(wh));
	msg->type = GUINT16_FROM_LE(wh.type);
	switch (msg->type) {
	case VIRTIO_HUGEROOM_MSG_STATUS:
		msg->status = hr_status_decode(buf, len, error);
		if (msg->status == NULL)
			return NULL;
		break;
	case VIRTIO_HUGEROOM_MSG_RESULT:
	case VIRTIO_HUGEROOM_MSG_PROGRESS:
		msg->result = hr_result_decode(buf, len, error);
		if (msg->result == NULL)
			return NULL;
		break;
	case VIRTIO_HUGEROOM_MSG_HOLD:
	case VIRTIO_HUGEROOM_MSG_RETURNED:
		msg->blocks = hr_blocks_decode(buf, len, error);
		if (msg->blocks == NULL)
			return NULL;
		break;
	default:
		g_set_error(error,
			    HR_CODEC_ERROR,
			    HR_CODEC_ERROR_UNKNOWN_TYPE,
			    "guest message: hdr.type %u is not a guest message",
			    msg->type);
		return NULL;
	}
	return g_steal_pointer(&msg);
}

/* ---------------------------------------------------------------------- */
/* Channel */

HrChanFrame *
hr_chan_frame_new(guint16 type, GBytes *payload)
{
	HrChanFrame *frame = g_new0(HrChanFrame, 1);
	frame->type = type;
	frame->payload = payload != NULL ? g_bytes_ref(payload) : g_bytes_new(NULL, 0);
	return frame;
}

void
hr_chan_frame_free(HrChanFrame *frame)
{
	if (frame == NULL)
		return;
	g_bytes_unref(frame->payload);
	g_free(frame);
}

GBytes *
hr_chan_frame_encode(guint16 type, GBytes *payload)
{
	struct hr_chan_hdr w = {0};
	gsize plen = payload != NULL ? g_bytes_get_size(payload) : 0;
	guint8 *buf = g_malloc(sizeof(w) + plen);

	w.magic = GUINT32_TO_LE(HR_CHAN_MAGIC);
	w.version = GUINT16_TO_LE(HR_CHAN_VERSION);
	w.type = GUINT16_TO_LE(type);
	w.len = GUINT32_TO_LE((guint32)plen);
	memcpy(buf, &w, sizeof(w));
	if (plen > 0)
		memcpy(buf + sizeof(w), g_bytes_get_data(payload, NULL), plen);
	return g_bytes_new_take(buf, sizeof(w) + plen);
}

gboolean
hr_chan_hdr_decode(const guint8 *buf, gsize len, guint16 *type, guint32 *payload_len,
		   GError **error)
{
	struct hr_chan_hdr w;
	guint32 magic;
	guint16 version;

	if (len < sizeof(w))
		return hr_codec_fail(error,
				     "frame: %" G_GSIZE_FORMAT
				     " bytes is shorter than the %" G_GSIZE_FORMAT " byte header",
				     len,
				     sizeof(w));
	memcpy(&w, buf, sizeof(w));
	magic = GUINT32_FROM_LE(w.magic);
	version = GUINT16_FROM_LE(w.version);
	if (magic != HR_CHAN_MAGIC)
		return hr_codec_fail(error,
				     "frame: magic 0x%08x is not 0x%08x (\"HRCH\")",
				     magic,
				     (guint)HR_CHAN_MAGIC);
	if (version != HR_CHAN_VERSION)
		return hr_codec_fail(error,
				     "frame: version %u is not %u",
				     version,
				     (guint)HR_CHAN_VERSION);
	*type = GUINT16_FROM_LE(w.type);
	*payload_len = GUINT32_FROM_LE(w.len);
	if (hr_chan_type_to_string(*type) == NULL) {
		g_set_error(error,
			    HR_CODEC_ERROR,
			    HR_CODEC_ERROR_UNKNOWN_TYPE,
			    "frame: type %u is unknown",
			    *type);
		return FALSE;
	}
	if (*payload_len > HR_CHAN_MAX_PAYLOAD)
		return hr_codec_fail(error,
				     "frame: len %u exceeds %u",
				     *payload_len,
				     (guint)HR_CHAN_MAX_PAYLOAD);
	return TRUE;
}

static gboolean
hr_chan_payload_check(GBytes *payload, const gchar *what, gsize want, GError **error)
{
	if (g_bytes_get_size(payload) != want)
		return hr_codec_fail(error,
				     "%s: payload of %" G_GSIZE_FORMAT " bytes is not %" G_GSIZE_FORMAT,
				     what,
				     g_bytes_get_size(payload),
				     want);
	return TRUE;
}

/*
 * A payload of a @fixed byte message, then as many ranges as its field at
 * @nr_off says, 1-HR_CHAN_MAX_RAM (HELLO and LAYOUT rule 1).
 */
static gboolean
hr_chan_ram_payload_check(const guint8 *buf, gsize len, const gchar *what, gsize fixed,
			  gsize nr_off, guint32 *nr_ram, GError **error)
{
	guint32 nr;

	if (len < fixed)
		return hr_codec_fail(error,
				     "%s: payload of %" G_GSIZE_FORMAT
				     " bytes is shorter than the %" G_GSIZE_FORMAT " byte message",
				     what, len, fixed);
	memcpy(&nr, buf + nr_off, sizeof(nr));
	nr = GUINT32_FROM_LE(nr);
	if (nr == 0)
		return hr_codec_fail(error, "%s: nr_ram is 0", what);
	if (nr > HR_CHAN_MAX_RAM)
		return hr_codec_fail(error, "%s: nr_ram %u exceeds %u", what, nr,
				     (guint)HR_CHAN_MAX_RAM);
	if (len != fixed + (gsize)nr * sizeof(struct hr_chan_ram_range))
		return hr_codec_fail(error,
				     "%s: payload of %" G_GSIZE_FORMAT " bytes differs from the %" G_GSIZE_FORMAT
				     " bytes nr_ram %u needs",
				     what, len, fixed + (gsize)nr * sizeof(struct hr_chan_ram_range), nr);
	*nr_ram = nr;
	return TRUE;
}

/*
 * The @nr ranges at @buf, as HELLO rule 4 (and LAYOUT rule 2) wants them:
 * not empty, no overflow, sorted, no overlap; every field a multiple of
 * @align.
 */
static gboolean
hr_chan_ram_decode(const guint8 *buf, guint32 nr, const gchar *what, guint64 align,
		   HrRamRange *ram, GError **error)
{
	for (guint32 i = 0; i < nr; i++) {
		struct hr_chan_ram_range wr;
		HrRamRange *r = &ram[i];
		memcpy(&wr, buf + i * sizeof(wr), sizeof(wr));
		r->gpa = GUINT64_FROM_LE(wr.gpa);
		r->size = GUINT64_FROM_LE(wr.size);
		r->hva = GUINT64_FROM_LE(wr.hva);
		if (r->size == 0)
			return hr_codec_fail(error, "%s: ram[%u] size is 0", what, i);
		if (r->gpa + r->size < r->gpa)
			return hr_codec_fail(error,
					     "%s: ram[%u] gpa 0x%" G_GINT64_MODIFIER
					     "x + size 0x%" G_GINT64_MODIFIER "x overflows",
					     what, i, r->gpa, r->size);
		if (r->hva + r->size < r->hva)
			return hr_codec_fail(error,
					     "%s: ram[%u] hva 0x%" G_GINT64_MODIFIER
					     "x + size 0x%" G_GINT64_MODIFIER "x overflows",
					     what, i, r->hva, r->size);
		if ((r->gpa | r->size | r->hva) % align != 0)
			return hr_codec_fail(error,
					     "%s: ram[%u] gpa 0x%" G_GINT64_MODIFIER
					     "x, size 0x%" G_GINT64_MODIFIER "x or hva 0x%" G_GINT64_MODIFIER
					     "x is not a multiple of %" G_GUINT64_FORMAT,
					     what, i, r->gpa, r->size, r->hva, align);
		if (i > 0 && r->gpa < ram[i - 1].gpa + ram[i - 1].size)
			return hr_codec_fail(error,
					     "%s: ram[%u] gpa 0x%" G_GINT64_MODIFIER
					     "x is below the end of ram[%u] (ranges must be sorted, "
					     "not overlap)",
					     what, i, r->gpa, i - 1);
	}
	return TRUE;
}

static void
hr_chan_ram_encode(guint8 *buf, const HrRamRange *ram, guint32 nr)
{
	for (guint32 i = 0; i < nr; i++) {
		struct hr_chan_ram_range wr;
		wr.gpa = GUINT64_TO_LE(ram[i].gpa);
		wr.size = GUINT64_TO_LE(ram[i].size);
		wr.hva = GUINT64_TO_LE(ram[i].hva);
		memcpy(buf + i * sizeof(wr), &wr, sizeof(wr));
	}
}

HrChanHello *
hr_chan_hello_new(guint32 nr_ram)
{
	HrChanHello *hello = g_new0(HrChanHello, 1);
	hello->proto_version = VIRTIO_HUGEROOM_VERSION;
	hello->nr_ram = nr_ram;
	hello->ram = g_new0(HrRamRange, MAX(nr_ram, 1));
	return hello;
}

void
hr_chan_hello_free(HrChanHello *hello)
{
	if (hello == NULL)
		return;
	g_free(hello->ram);
	g_free(hello);
}

HrChanHello *
hr_chan_hello_decode(GBytes *payload, GError **error)
{
	struct hr_chan_hello w;
	gsize len = 0;
	const guint8 *buf = g_bytes_get_data(payload, &len);
	g_autoptr(HrChanHello) hello = NULL;
	guint32 nr_ram;

	if (!hr_chan_ram_payload_check(buf, len, "hello", sizeof(w),
				       offsetof(struct hr_chan_hello, nr_ram), &nr_ram, error))
		return NULL;
	memcpy(&w, buf, sizeof(w));
	/* the device's highest version; the daemon picks one at or below */
	if (GUINT32_FROM_LE(w.proto_version) < 1) {
		hr_codec_fail(error, "hello: proto_version 0 is below 1");
		return NULL;
	}
	if (memchr(w.name, '\0', sizeof(w.name)) == NULL) {
		hr_codec_fail(error, "hello: name is not NUL terminated");
		return NULL;
	}
	hello = hr_chan_hello_new(nr_ram);
	hello->proto_version = GUINT32_FROM_LE(w.proto_version);
	memcpy(hello->uuid, w.uuid, sizeof(hello->uuid));
	memcpy(hello->name, w.name, sizeof(hello->name));
	hello->ram_size = GUINT64_FROM_LE(w.ram_size);
	hello->guest_features = GUINT64_FROM_LE(w.guest_features);
	if (!hr_chan_ram_decode(buf + sizeof(w), nr_ram, "hello", 1, hello->ram, error))
		return NULL;
	return g_steal_pointer(&hello);
}

GBytes *
hr_chan_hello_encode(const HrChanHello *hello)
{
	struct hr_chan_hello w = {0};
	gsize len = sizeof(w) + (gsize)hello->nr_ram * sizeof(struct hr_chan_ram_range);
	guint8 *buf = g_malloc0(len);

	w.proto_version = GUINT32_TO_LE(hello->proto_version);
	w.nr_ram = GUINT32_TO_LE(hello->nr_ram);
	memcpy(w.uuid, hello->uuid, sizeof(w.uuid));
	g_strlcpy(w.name, hello->name, sizeof(w.name));
	w.ram_size = GUINT64_TO_LE(hello->ram_size);
	w.guest_features = GUINT64_TO_LE(hello->guest_features);
	memcpy(buf, &w, sizeof(w));
	hr_chan_ram_encode(buf + sizeof(w), hello->ram, hello->nr_ram);
	return g_bytes_new_take(buf, len);
}

void
hr_chan_layout_free(HrChanLayout *layout)
{
	if (layout == NULL)
		return;
	g_free(layout->ram);
	g_free(layout);
}

HrChanLayout *
hr_chan_layout_decode(GBytes *payload, GError **error)
{
	struct hr_chan_layout w;
	gsize len = 0;
	const guint8 *buf = g_bytes_get_data(payload, &len);
	g_autoptr(HrChanLayout) layout = NULL;
	guint32 nr_ram;

	if (!hr_chan_ram_payload_check(buf, len, "layout", sizeof(w),
				       offsetof(struct hr_chan_layout, nr_ram), &nr_ram, error))
		return NULL;
	memcpy(&w, buf, sizeof(w));
	layout = g_new0(HrChanLayout, 1);
	layout->nr_ram = nr_ram;
	layout->ram_size = GUINT64_FROM_LE(w.ram_size);
	layout->ram = g_new0(HrRamRange, nr_ram);
	/* plugged memory is page granular, and so is any RAM QEMU has */
	if (!hr_chan_ram_decode(buf + sizeof(w), nr_ram, "layout", 4096, layout->ram, error))
		return NULL;
	return g_steal_pointer(&layout);
}

GBytes *
hr_chan_layout_encode(const HrChanLayout *layout)
{
	struct hr_chan_layout w = {0};
	gsize len = sizeof(w) + (gsize)layout->nr_ram * sizeof(struct hr_chan_ram_range);
	guint8 *buf = g_malloc0(len);

	w.nr_ram = GUINT32_TO_LE(layout->nr_ram);
	w.ram_size = GUINT64_TO_LE(layout->ram_size);
	memcpy(buf, &w, sizeof(w));
	hr_chan_ram_encode(buf + sizeof(w), layout->ram, layout->nr_ram);
	return g_bytes_new_take(buf, len);
}

gchar *
hr_chan_hello_uuid_to_string(const HrChanHello *hello)
{
	const guint8 *u = hello->uuid;
	return g_strdup_printf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			       "%02x%02x%02x%02x%02x%02x",
			       u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7],
			       u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

gboolean
hr_ram_contains(const HrRamRange *ram, guint32 nr_ram, guint64 gpa, guint64 size)
{
	if (gpa + size < gpa)
		return FALSE;
	for (guint32 i = 0; i < nr_ram; i++) {
		if (gpa >= ram[i].gpa && gpa + size <= ram[i].gpa + ram[i].size)
			return TRUE;
	}
	return FALSE;
}

gboolean
hr_chan_welcome_decode(GBytes *payload, HrChanWelcome *welcome, GError **error)
{
	struct hr_chan_welcome2 w = {0};
	gsize len = g_bytes_get_size(payload);

	if (len < sizeof(w.v1))
		return hr_chan_payload_check(payload, "welcome", sizeof(w.v1), error);
	memcpy(&w, g_bytes_get_data(payload, NULL), MIN(len, sizeof(w)));
	welcome->proto_version = GUINT32_FROM_LE(w.v1.proto_version);
	welcome->status_interval_ms = GUINT32_FROM_LE(w.v1.status_interval_ms);
	welcome->chan_features = 0;
	if (welcome->proto_version < 1 || welcome->proto_version > VIRTIO_HUGEROOM_VERSION)
		return hr_codec_fail(error,
				     "welcome: proto_version %u is not one this side speaks (1-%u)",
				     welcome->proto_version,
				     (guint)VIRTIO_HUGEROOM_VERSION);
	/* version 1's is 8 bytes, version 2 appends the channel features */
	if (!hr_chan_payload_check(payload, "welcome",
				   welcome->proto_version == 1 ? sizeof(w.v1) : sizeof(w), error))
		return FALSE;
	if (welcome->proto_version >= 2)
		welcome->chan_features = GUINT32_FROM_LE(w.chan_features);
	return TRUE;
}

GBytes *
hr_chan_welcome_encode(const HrChanWelcome *welcome)
{
	struct hr_chan_welcome2 w = {0};
	w.v1.proto_version = GUINT32_TO_LE(welcome->proto_version);
	w.v1.status_interval_ms = GUINT32_TO_LE(welcome->status_interval_ms);
	w.chan_features = GUINT32_TO_LE(welcome->chan_features);
	return g_bytes_new(&w, welcome->proto_version == 1 ? sizeof(w.v1) : sizeof(w));
}

gboolean
hr_chan_set_interval_decode(GBytes *payload, guint32 *interval_ms, GError **error)
{
	struct hr_chan_set_interval w;
	if (!hr_chan_payload_check(payload, "set-interval", sizeof(w), error))
		return FALSE;
	memcpy(&w, g_bytes_get_data(payload, NULL), sizeof(w));
	*interval_ms = GUINT32_FROM_LE(w.status_interval_ms);
	return TRUE;
}

GBytes *
hr_chan_set_interval_encode(guint32 interval_ms)
{
	struct hr_chan_set_interval w = {0};
	w.status_interval_ms = GUINT32_TO_LE(interval_ms);
	return g_bytes_new(&w, sizeof(w));
}

gboolean
hr_chan_device_state_decode(GBytes *payload, HrChanDeviceState *state, GError **error)
{
	struct hr_chan_device_state w;
	if (!hr_chan_payload_check(payload, "device-state", sizeof(w), error))
		return FALSE;
	memcpy(&w, g_bytes_get_data(payload, NULL), sizeof(w));
	state->guest_features = GUINT64_FROM_LE(w.guest_features);
	state->msgs_relayed = GUINT64_FROM_LE(w.msgs_relayed);
	state->msgs_rejected = GUINT64_FROM_LE(w.msgs_rejected);
	state->cmds_dropped = GUINT64_FROM_LE(w.cmds_dropped);
	state->num_held = GUINT32_FROM_LE(w.num_held);
	state->driver_ok = GUINT32_FROM_LE(w.driver_ok);
	state->discard_disabled = GUINT32_FROM_LE(w.discard_disabled);
	state->chan_features = GUINT32_FROM_LE(w.chan_features);
	if (state->driver_ok > 1)
		return hr_codec_fail(error, "device-state: driver_ok %u is not 0 or 1",
				     state->driver_ok);
	if (state->discard_disabled > 1)
		return hr_codec_fail(error, "device-state: discard_disabled %u is not 0 or 1",
				     state->discard_disabled);
	return TRUE;
}

GBytes *
hr_chan_device_state_encode(const HrChanDeviceState *state)
{
	struct hr_chan_device_state w = {0};
	w.guest_features = GUINT64_TO_LE(state->guest_features);
	w.msgs_relayed = GUINT64_TO_LE(state->msgs_relayed);
	w.msgs_rejected = GUINT64_TO_LE(state->msgs_rejected);
	w.cmds_dropped = GUINT64_TO_LE(state->cmds_dropped);
	w.num_held = GUINT32_TO_LE(state->num_held);
	w.driver_ok = GUINT32_TO_LE(state->driver_ok);
	w.discard_disabled = GUINT32_TO_LE(state->discard_disabled);
	w.chan_features = GUINT32_TO_LE(state->chan_features);
	return g_bytes_new(&w, sizeof(w));
}

HrGuestMsg *
hr_chan_guest_msg_decode(GBytes *payload, GError **error)
{
	gsize len = 0;
	const guint8 *buf = g_bytes_get_data(payload, &len);
	return hr_guest_msg_decode(buf, len, error);
}

HrCmd *
hr_chan_host_cmd_decode(GBytes *payload, GError **error)
{
	gsize len = 0;
	const guint8 *buf = g_bytes_get_data(payload, &len);
	return hr_cmd_decode(buf, len, error);
}

/* ---------------------------------------------------------------------- */
/* Frame reader */

struct _HrFrameReader {
	GByteArray *buf;
	GError *broken; /* set once the stream cannot be resynchronised */
};

HrFrameReader *
hr_frame_reader_new(void)
{
	HrFrameReader *reader = g_new0(HrFrameReader, 1);
	reader->buf = g_byte_array_new();
	return reader;
}

void
hr_frame_reader_free(HrFrameReader *reader)
{
	if (reader == NULL)
		return;
	g_byte_array_unref(reader->buf);
	g_clear_error(&reader->broken);
	g_free(reader);
}

void
hr_frame_reader_push(HrFrameReader *reader, const guint8 *data, gsize len)
{
	/* a broken stream keeps nothing: a peer must not grow our memory */
	if (reader->broken != NULL)
		return;
	g_byte_array_append(reader->buf, data, len);
}

gsize
hr_frame_reader_get_pending(HrFrameReader *reader)
{
	return reader->buf->len;
}

HrChanFrame *
hr_frame_reader_next(HrFrameReader *reader, GError **error)
{
	guint16 type = 0;
	guint32 plen = 0;
	g_autoptr(GBytes) payload = NULL;
	HrChanFrame *frame;

	if (reader->broken != NULL) {
		g_propagate_error(error, g_error_copy(reader->broken));
		return NULL;
	}
	if (reader->buf->len < sizeof(struct hr_chan_hdr))
		return NULL;
	if (!hr_chan_hdr_decode(reader->buf->data, reader->buf->len, &type, &plen,
				&reader->broken)) {
		g_byte_array_set_size(reader->buf, 0);
		g_propagate_error(error, g_error_copy(reader->broken));
		return NULL;
	}
	if (reader->buf->len < sizeof(struct hr_chan_hdr) + plen)
		return NULL;
	payload = g_bytes_new(reader->buf->data + sizeof(struct hr_chan_hdr), plen);
	frame = hr_chan_frame_new(type, payload);
	g_byte_array_remove_range(reader->buf, 0, sizeof(struct hr_chan_hdr) + plen);
	return frame;
}
