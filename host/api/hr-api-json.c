/* SPDX-License-Identifier: GPL-2.0-only */
/* The API's JSON bodies: guests, their status and held blocks, events */

#include "hr-api-json.h"
#include "hr-api-view-request.h"

#include "hr-json.h"
#include "hr-pcp.h"

static const gchar *hist_names[VIRTIO_HUGEROOM_NR_HIST] = {"512", "448", "256", "64", "1", "0"};

static void
hr_api_add_status(JsonBuilder *b, const HrStatus *s)
{
	json_builder_begin_object(b);
	hr_json_add_int(b, "seq", s->seq);
	hr_json_add_int(b, "request_id", s->hdr.request_id);
	hr_json_add_int(b, "uptime_ns", s->uptime_ns);
	hr_json_add_int(b, "build_ns", s->build_ns);
	hr_json_add_int(b, "mem_total_pages", s->mem_total_pages);
	hr_json_add_int(b, "mem_free_pages", s->mem_free_pages);
	hr_json_add_int(b, "mem_available_pages", s->mem_available_pages);
	hr_json_add_int(b, "held_blocks", s->held_blocks);
	hr_json_add_int(b, "page_shift", s->page_shift);
	hr_json_add_int(b, "pageblock_order", s->pageblock_order);
	json_builder_set_member_name(b, "flags");
	json_builder_begin_array(b);
	if (s->hdr.flags & VIRTIO_HUGEROOM_STATUS_F_TRUNCATED)
		json_builder_add_string_value(b, "truncated");
	if (s->hdr.flags & VIRTIO_HUGEROOM_STATUS_F_MT_PARTIAL)
		json_builder_add_string_value(b, "mt_partial");
	json_builder_end_array(b);
	json_builder_set_member_name(b, "vmstat");
	json_builder_begin_object(b);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		hr_json_add_int(b, hr_vmstat_to_string(i), s->vmstat[i]);
	json_builder_end_object(b);

	json_builder_set_member_name(b, "zones");
	json_builder_begin_array(b);
	for (guint z = 0; z < s->nr_zones; z++) {
		const HrZone *zone = &s->zones[z];
		/* the guest's bytes; JSON needs UTF-8 */
		g_autofree gchar *name = g_utf8_make_valid(zone->name, -1);
		json_builder_begin_object(b);
		hr_json_add_int(b, "nid", zone->nid);
		json_builder_set_member_name(b, "zone");
		json_builder_add_string_value(b, name);
		hr_json_add_int(b, "zone_idx", zone->zone_idx);
		hr_json_add_int(b, "start_pfn", zone->start_pfn);
		hr_json_add_int(b, "spanned_pages", zone->spanned_pages);
		hr_json_add_int(b, "managed_pages", zone->managed_pages);
		hr_json_add_int(b, "free_pages", zone->free_pages);
		json_builder_set_member_name(b, "nr_free");
		json_builder_begin_array(b);
		for (guint o = 0; o < VIRTIO_HUGEROOM_NR_ORDERS; o++)
			json_builder_add_int_value(b, zone->nr_free[o]);
		json_builder_end_array(b);
		json_builder_set_member_name(b, "free_pageblock_by_mt");
		json_builder_begin_object(b);
		for (guint m = 0; m < VIRTIO_HUGEROOM_NR_MT; m++)
			hr_json_add_int(b, hr_mt_to_string(m), zone->nr_free_pb_mt[m]);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "pageblock_histogram");
		json_builder_begin_object(b);
		for (guint h = 0; h < VIRTIO_HUGEROOM_NR_HIST; h++)
			hr_json_add_int(b, hist_names[h], zone->hist[h]);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "pcp");
		json_builder_begin_object(b);
		hr_json_add_int(b, "count", zone->pcp_count);
		hr_json_add_int(b, "high", zone->pcp_high);
		hr_json_add_int(b, "batch", zone->pcp_batch);
		hr_json_add_int(b, "high_min", zone->pcp_high_min);
		hr_json_add_int(b, "high_max", zone->pcp_high_max);
		json_builder_set_member_name(b, "policy");
		json_builder_add_string_value(b, hr_pcp_policy_to_string(zone->pcp_policy) != NULL
						     ? hr_pcp_policy_to_string(zone->pcp_policy)
						     : "unknown");
		hr_json_add_int(b, "fraction", zone->pcp_fraction);
		json_builder_end_object(b);
		json_builder_set_member_name(b, "watermarks");
		json_builder_begin_object(b);
		hr_json_add_int(b, "min", zone->wmark_min);
		hr_json_add_int(b, "low", zone->wmark_low);
		hr_json_add_int(b, "high", zone->wmark_high);
		json_builder_end_object(b);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "candidates");
	json_builder_begin_array(b);
	for (guint c = 0; c < s->nr_candidates; c++) {
		const HrCandidate *cand = &s->candidates[c];
		json_builder_begin_object(b);
		hr_json_add_int(b, "gpa", cand->gpa);
		hr_json_add_int(b, "free_pages", cand->free_pages);
		json_builder_set_member_name(b, "migratetype");
		json_builder_add_string_value(b, hr_mt_to_string(cand->migratetype));
		hr_json_add_int(b, "zone", cand->zone);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
}

static void
hr_api_add_summary_members(JsonBuilder *b, HrGuest *guest)
{
	const HrStatus *status = hr_guest_get_status(guest);

	json_builder_set_member_name(b, "name");
	json_builder_add_string_value(b, hr_guest_get_name(guest));
	json_builder_set_member_name(b, "uuid");
	json_builder_add_string_value(b, hr_guest_get_uuid(guest));
	hr_json_add_int(b, "pid", hr_guest_get_pid(guest));
	json_builder_set_member_name(b, "connected");
	json_builder_add_boolean_value(b, hr_guest_is_connected(guest));
	json_builder_set_member_name(b, "seq");
	if (status != NULL)
		json_builder_add_int_value(b, status->seq);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "age_ms");
	if (status != NULL)
		json_builder_add_int_value(b, hr_guest_status_age_ms(guest));
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_total_pages");
	if (status != NULL)
		json_builder_add_int_value(b, status->mem_total_pages);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_free_pages");
	if (status != NULL)
		json_builder_add_int_value(b, status->mem_free_pages);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "mem_available_pages");
	if (status != NULL)
		json_builder_add_int_value(b, status->mem_available_pages);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "held_blocks", g_hash_table_size(hr_guest_get_held(guest)));
	hr_json_add_int(b, "rejected", hr_guest_get_rejected(guest));
}

JsonNode *
hr_api_guests_to_json(HrCore *core)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	GPtrArray *guests = hr_core_get_guests(core);

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "guests");
	json_builder_begin_array(b);
	for (guint i = 0; i < guests->len; i++) {
		json_builder_begin_object(b);
		hr_api_add_summary_members(b, g_ptr_array_index(guests, i));
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	hr_json_add_int(b, "rejected_unidentified", hr_core_get_rejected_unidentified(core));
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

static void
hr_api_add_held(JsonBuilder *b, HrGuest *guest)
{
	g_autoptr(GArray) gpas = hr_guest_held_sorted(guest);

	json_builder_begin_object(b);
	hr_json_add_int(b, "blocks", gpas->len);
	json_builder_set_member_name(b, "gpas");
	json_builder_begin_array(b);
	for (guint i = 0; i < gpas->len; i++) {
		g_autofree gchar *str =
		    g_strdup_printf("0x%" G_GINT64_MODIFIER "x", g_array_index(gpas, guint64, i));
		json_builder_add_string_value(b, str);
	}
	json_builder_end_array(b);
	json_builder_set_member_name(b, "returned");
	json_builder_begin_object(b);
	for (guint r = 0; r < HR_GUEST_N_RETURN_REASONS; r++)
		hr_json_add_int(b, hr_guest_return_reason_to_string(r),
				hr_guest_get_blocks_returned(guest, r));
	json_builder_end_object(b);
	hr_json_add_int(b, "blocks_freed_total", hr_guest_get_blocks_freed_total(guest));
	hr_json_add_int(b, "pages_migrated_total", hr_guest_get_pages_migrated_total(guest));
	json_builder_end_object(b);
}

static void
hr_api_add_pcp_policy(JsonBuilder *b, const gchar *member, gboolean set, const HrPcpPolicy *policy)
{
	g_autofree gchar *text = set ? hr_pcp_policy_format(policy) : NULL;

	json_builder_set_member_name(b, member);
	if (text != NULL)
		json_builder_add_string_value(b, text);
	else
		json_builder_add_null_value(b);
}

/* "pcp": {"supported", "wanted", "applied", "donating", "in_force", "fraction"} */
static void
hr_api_add_pcp(JsonBuilder *b, HrGuest *guest)
{
	const HrStatus *status = hr_guest_get_status(guest);
	HrPcpView view;

	hr_pcp_get_view(guest, &view);
	json_builder_set_member_name(b, "pcp");
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "supported");
	json_builder_add_boolean_value(b, view.supported);
	hr_api_add_pcp_policy(b, "wanted", view.wanted_set, &view.wanted);
	hr_api_add_pcp_policy(b, "applied", view.applied_set, &view.applied);
	json_builder_set_member_name(b, "donating");
	json_builder_add_boolean_value(b, view.donating);
	/* the guest's own word, from its latest report */
	json_builder_set_member_name(b, "in_force");
	if (status != NULL && status->nr_zones > 0) {
		const HrZone *zone = &status->zones[0];
		const gchar *name = hr_pcp_policy_to_string(zone->pcp_policy);
		json_builder_add_string_value(b, name != NULL ? name : "unknown");
		hr_json_add_int(b, "fraction", zone->pcp_fraction);
	} else {
		json_builder_add_null_value(b);
	}
	json_builder_end_object(b);
}

JsonNode *
hr_api_guest_to_json(HrGuest *guest)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	const HrChanDeviceState *state = hr_guest_get_state(guest);
	const HrResult *last_result = hr_guest_get_last_result(guest);
	const HrRamRange *ram;
	guint n_ram;

	json_builder_begin_object(b);
	hr_api_add_summary_members(b, guest);
	hr_json_add_time(b, "connected_at", hr_guest_get_connected_at(guest));
	hr_json_add_time(b, "disconnected_at", hr_guest_get_disconnected_at(guest));
	hr_json_add_int(b, "connections", hr_guest_get_connections(guest));
	json_builder_set_member_name(b, "uuid_known");
	json_builder_add_boolean_value(b, hr_guest_get_known_uuid(guest) != NULL);
	hr_json_add_int(b, "proto_version", hr_guest_get_proto_version(guest));
	hr_json_add_int(b, "ram_size", hr_guest_get_ram_size(guest));
	json_builder_set_member_name(b, "ram");
	json_builder_begin_array(b);
	ram = hr_guest_get_ram(guest, &n_ram);
	for (guint i = 0; i < n_ram; i++) {
		const HrRamRange *r = &ram[i];
		json_builder_begin_object(b);
		hr_json_add_int(b, "gpa", r->gpa);
		hr_json_add_int(b, "size", r->size);
		hr_json_add_int(b, "hva", r->hva);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "device");
	if (state != NULL) {
		json_builder_begin_object(b);
		hr_json_add_int(b, "guest_features", state->guest_features);
		hr_json_add_int(b, "msgs_relayed", state->msgs_relayed);
		hr_json_add_int(b, "msgs_rejected", state->msgs_rejected);
		hr_json_add_int(b, "cmds_dropped", state->cmds_dropped);
		hr_json_add_int(b, "num_held", state->num_held);
		json_builder_set_member_name(b, "driver_ok");
		json_builder_add_boolean_value(b, state->driver_ok);
		json_builder_set_member_name(b, "discard_disabled");
		json_builder_add_boolean_value(b, state->discard_disabled);
		json_builder_end_object(b);
	} else {
		json_builder_add_null_value(b);
	}

	json_builder_set_member_name(b, "daemon_counters");
	json_builder_begin_object(b);
	hr_json_add_int(b, "frames", hr_guest_get_frames(guest));
	hr_json_add_int(b, "guest_msgs", hr_guest_get_guest_msgs(guest));
	hr_json_add_int(b, "rejected", hr_guest_get_rejected(guest));
	json_builder_set_member_name(b, "last_reject_reason");
	if (hr_guest_get_last_reject_reason(guest) != NULL)
		json_builder_add_string_value(b, hr_guest_get_last_reject_reason(guest));
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "cmds_sent", hr_guest_get_cmds_sent(guest));
	hr_json_add_int(b, "cmds_pending", hr_guest_get_cmds_pending(guest));
	hr_json_add_int(b, "cmds_lost", hr_guest_get_cmds_lost(guest));
	/* what the guest said that nothing on our side accounts for (reconciled) */
	hr_json_add_int(b, "holds_unknown", hr_guest_get_holds_unknown(guest));
	hr_json_add_int(b, "returns_unknown", hr_guest_get_returns_unknown(guest));
	hr_json_add_int(b, "orphans_returned", hr_guest_get_orphans_returned(guest));
	json_builder_end_object(b);

	json_builder_set_member_name(b, "last_result");
	if (last_result != NULL) {
		const HrResult *r = last_result;
		json_builder_begin_object(b);
		hr_json_add_int(b, "request_id", r->hdr.request_id);
		json_builder_set_member_name(b, "final");
		json_builder_add_boolean_value(b, r->hdr.type == VIRTIO_HUGEROOM_MSG_RESULT);
		json_builder_set_member_name(b, "status");
		json_builder_add_string_value(b, hr_result_status_to_string(r->status));
		hr_api_request_add_counts(b, r);
		json_builder_end_object(b);
	} else {
		json_builder_add_null_value(b);
	}

	json_builder_set_member_name(b, "held");
	hr_api_add_held(b, guest);
	hr_api_add_pcp(b, guest);

	json_builder_set_member_name(b, "requests");
	json_builder_begin_array(b);
	{
		g_autoptr(GPtrArray) requests = hr_guest_list_requests(guest);
		for (guint i = 0; i < requests->len; i++)
			hr_api_request_add_summary_json(g_ptr_array_index(requests, i), b);
	}
	json_builder_end_array(b);

	json_builder_set_member_name(b, "status");
	if (hr_guest_get_status(guest) != NULL)
		hr_api_add_status(b, hr_guest_get_status(guest));
	else
		json_builder_add_null_value(b);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

JsonNode *
hr_api_request_ref_to_json(HrGuest *guest, HrRequest *request)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	hr_json_add_int(b, "request_id", request->id);
	json_builder_set_member_name(b, "guest");
	json_builder_add_string_value(b, hr_guest_get_name(guest));
	json_builder_set_member_name(b, "kind");
	json_builder_add_string_value(b, hr_request_kind_to_string(request->kind));
	json_builder_set_member_name(b, "state");
	json_builder_add_string_value(b, hr_request_state_to_string(request->state));
	json_builder_set_member_name(b, "cancel_requested");
	json_builder_add_boolean_value(b, request->cancel_sent);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

void
hr_api_reserve_add_json(HrReserve *reserve, JsonBuilder *b)
{
	HrReserveView view;

	hr_reserve_get_view(reserve, &view);
	json_builder_begin_object(b);
	hr_json_add_int(b, "bytes", (gint64)view.bytes);
	json_builder_set_member_name(b, "node");
	if (view.node >= 0)
		json_builder_add_int_value(b, view.node);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "blocks", (gint64)view.blocks);
	hr_json_add_int(b, "blocks_ready", (gint64)view.blocks_ready);
	hr_json_add_int(b, "blocks_filling", (gint64)view.blocks_filling);
	hr_json_add_int(b, "parts", view.parts);
	json_builder_set_member_name(b, "paused");
	if (view.paused != NULL)
		json_builder_add_string_value(b, view.paused);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "taken_blocks", (gint64)view.taken_blocks);
	hr_json_add_int(b, "given_back_blocks", (gint64)view.given_back_blocks);
	json_builder_set_member_name(b, "last_refill_ms");
	if (view.last_refill_ms >= 0)
		json_builder_add_int_value(b, view.last_refill_ms);
	else
		json_builder_add_null_value(b);
	json_builder_end_object(b);
}

/* what every event begins with */
static void
hr_api_event_head(JsonBuilder *b, guint64 seq, const gchar *type)
{
	hr_json_add_int(b, "seq", seq);
	json_builder_set_member_name(b, "type");
	json_builder_add_string_value(b, type);
	/* wall clock, so that a client can measure the delivery */
	hr_json_add_int(b, "time_us", g_get_real_time());
}

JsonNode *
hr_api_event_to_json(const HrEvent *event, guint64 seq)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	HrGuest *guest = event->guest;

	json_builder_begin_object(b);
	hr_api_event_head(b, seq, hr_event_kind_to_string(event->kind));
	if (guest != NULL) {
		json_builder_set_member_name(b, "guest");
		json_builder_add_string_value(b, hr_guest_get_name(guest));
		json_builder_set_member_name(b, "uuid");
		json_builder_add_string_value(b, hr_guest_get_uuid(guest));
		json_builder_set_member_name(b, "connected");
		json_builder_add_boolean_value(b, hr_guest_is_connected(guest));
		hr_json_add_int(b, "held_blocks", g_hash_table_size(hr_guest_get_held(guest)));
	}
	switch (event->kind) {
	case HR_EVENT_STATUS_CHANGED:
		hr_json_add_int(b, "status_seq", hr_guest_get_status(guest)->seq);
		hr_json_add_int(b, "mem_free_pages", hr_guest_get_status(guest)->mem_free_pages);
		hr_json_add_int(b, "mem_available_pages",
				hr_guest_get_status(guest)->mem_available_pages);
		break;
	case HR_EVENT_REQUEST_CHANGED:
		json_builder_set_member_name(b, "request");
		hr_api_request_add_json(event->request, b);
		break;
	default:
		break;
	}
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

JsonNode *
hr_api_prepare_event_to_json(const HrPrepareEvent *event, guint64 seq)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	hr_api_event_head(b, seq, hr_prepare_event_kind_to_string(event->kind));
	switch (event->kind) {
	case HR_PREPARE_RESERVATION_CHANGED:
		json_builder_set_member_name(b, "reservation");
		hr_api_reservation_add_json(event->reservation, b, FALSE);
		break;
	case HR_PREPARE_PLAN_MADE:
		json_builder_set_member_name(b, "reservation_id");
		json_builder_add_string_value(b, event->reservation->id);
		hr_json_add_int(b, "decision_us", event->duration_us);
		break;
	default:
		break;
	}
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

JsonNode *
hr_api_host_to_json(const HrHostState *host, HrReservationStore *store, HrBackingMode backing)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	const HrCompactCounters *c;

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "nodes");
	json_builder_begin_array(b);
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		json_builder_begin_object(b);
		hr_json_add_int(b, "node", ns->node);
		hr_json_add_int(b, "free_pages", ns->free_pages);
		hr_json_add_int(b, "free_blocks", ns->free_blocks);
		hr_json_add_int(b, "available_blocks", hr_prepare_node_available(ns));
		hr_json_add_int(b, "promised_blocks",
				hr_reservation_store_promised(store, ns->node, NULL));
		hr_json_add_int(b, "wmark_min", ns->wmark_min);
		hr_json_add_int(b, "wmark_low", ns->wmark_low);
		hr_json_add_int(b, "wmark_high", ns->wmark_high);
		hr_json_add_int(b, "managed", ns->managed);
		hr_json_add_int(b, "present", ns->present);
		hr_json_add_int(b, "unusable_index", ns->unusable_index);
		if (ns->has_meminfo) {
			hr_json_add_int(b, "mem_total_kb", ns->mem_total_kb);
			hr_json_add_int(b, "mem_free_kb", ns->mem_free_kb);
		}
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	c = &host->compact;
	json_builder_set_member_name(b, "compaction");
	json_builder_begin_object(b);
	hr_json_add_int(b, "compact_stall", c->compact_stall);
	hr_json_add_int(b, "compact_fail", c->compact_fail);
	hr_json_add_int(b, "compact_success", c->compact_success);
	hr_json_add_int(b, "compact_migrate_scanned", c->compact_migrate_scanned);
	hr_json_add_int(b, "compact_free_scanned", c->compact_free_scanned);
	hr_json_add_int(b, "compact_isolated", c->compact_isolated);
	hr_json_add_int(b, "compact_daemon_wake", c->compact_daemon_wake);
	hr_json_add_int(b, "pgmigrate_success", c->pgmigrate_success);
	hr_json_add_int(b, "pgmigrate_fail", c->pgmigrate_fail);
	hr_json_add_int(b, "thp_fault_alloc", c->thp_fault_alloc);
	hr_json_add_int(b, "thp_fault_fallback", c->thp_fault_fallback);
	hr_json_add_int(b, "thp_collapse_alloc", c->thp_collapse_alloc);
	hr_json_add_int(b, "thp_split_page", c->thp_split_page);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "thp");
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "enabled");
	json_builder_add_string_value(b, host->thp.enabled);
	json_builder_set_member_name(b, "defrag");
	json_builder_add_string_value(b, host->thp.defrag);
	json_builder_set_member_name(b, "khugepaged_defrag");
	if (host->thp.khugepaged_defrag != NULL)
		json_builder_add_string_value(b, host->thp.khugepaged_defrag);
	else
		json_builder_add_null_value(b);
	hr_json_add_int(b, "hpage_pmd_size", host->thp.hpage_pmd_size);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "backing");
	json_builder_add_string_value(b, hr_backing_mode_to_string(backing));
	json_builder_end_object(b);
	return json_builder_get_root(b);
}

/* ---------------------------------------------------------------------- */
/* Reservations: GET /v1/reservations, /v1/reservations/{id}, events */

/*
 * What the API shows of a reservation is, field for field, what the state
 * file keeps (hr_reservation_add_json): one writer of those fields. A field
 * only the API should show, or one it should not, is added or left out
 * here.
 */
void
hr_api_reservation_add_json(HrReservation *r, JsonBuilder *b, gboolean with_steps)
{
	hr_reservation_add_json(r, b, with_steps);
}
