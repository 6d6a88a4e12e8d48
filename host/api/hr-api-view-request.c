/* SPDX-License-Identifier: GPL-2.0-only */

/* The JSON views of a guest's request (HrRequest), the API's. */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api-view-request.h"

#include "hr-json.h"

static void
hr_api_request_add_gpa(JsonBuilder *b, guint64 gpa)
{
	g_autofree gchar *str = g_strdup_printf("0x%" G_GINT64_MODIFIER "x", gpa);
	json_builder_add_string_value(b, str);
}

void
hr_api_request_add_counts(JsonBuilder *b, const HrResult *r)
{
	hr_json_add_int(b, "blocks_tried", r->blocks_tried);
	hr_json_add_int(b, "blocks_freed", r->blocks_freed);
	json_builder_set_member_name(b, "failed");
	json_builder_begin_object(b);
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
		hr_json_add_int(b, hr_reason_to_string(i), r->failed[i]);
	json_builder_end_object(b);
	hr_json_add_int(b, "pages_migrated", r->pages_migrated);
	hr_json_add_int(b, "elapsed_us", r->elapsed_us);
}

static void
hr_api_request_add_params(HrRequest *request, JsonBuilder *b)
{
	const HrCmd *cmd = request->cmd;

	json_builder_begin_object(b);
	if (request->all) {
		json_builder_set_member_name(b, "all");
		json_builder_add_boolean_value(b, TRUE);
	} else {
		hr_json_add_int(b, "blocks", cmd->count);
	}
	if (cmd->nr_gpas > 0) {
		json_builder_set_member_name(b, "gpas");
		json_builder_begin_array(b);
		for (guint32 i = 0; i < cmd->nr_gpas; i++)
			hr_api_request_add_gpa(b, cmd->gpas[i]);
		json_builder_end_array(b);
	}
	if (cmd->nr_ranges > 0) {
		json_builder_set_member_name(b, "ranges");
		json_builder_begin_array(b);
		for (guint32 i = 0; i < cmd->nr_ranges; i++) {
			json_builder_begin_object(b);
			json_builder_set_member_name(b, "start");
			hr_api_request_add_gpa(b, cmd->ranges[i].start);
			json_builder_set_member_name(b, "end");
			hr_api_request_add_gpa(b, cmd->ranges[i].end);
			json_builder_end_object(b);
		}
		json_builder_end_array(b);
	}
	if (request->kind == HR_REQUEST_EVACUATE) {
		hr_json_add_int(b, "budget_pages", cmd->budget_pages);
		/* the standing reserve's: the guest runs it below its own tasks */
		json_builder_set_member_name(b, "background");
		json_builder_add_boolean_value(
		    b, (cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_BACKGROUND) != 0);
	}
	if (request->kind != HR_REQUEST_RETURN)
		hr_json_add_int(b, "budget_ms", cmd->budget_ms);
	hr_json_add_int(b, "timeout_s", request->timeout_s);
	json_builder_end_object(b);
}

static void
hr_api_request_add_head(HrRequest *request, JsonBuilder *b)
{
	hr_json_add_int(b, "request_id", request->id);
	json_builder_set_member_name(b, "kind");
	json_builder_add_string_value(b, hr_request_kind_to_string(request->kind));
	json_builder_set_member_name(b, "state");
	json_builder_add_string_value(b, hr_request_state_to_string(request->state));
}

void
hr_api_request_add_json(HrRequest *request, JsonBuilder *b)
{
	json_builder_begin_object(b);
	hr_api_request_add_head(request, b);
	json_builder_set_member_name(b, "params");
	hr_api_request_add_params(request, b);
	hr_json_add_int(b, "target_blocks", hr_request_target(request));
	json_builder_set_member_name(b, "progress");
	json_builder_begin_object(b);
	hr_api_request_add_counts(b, &request->progress);
	json_builder_end_object(b);
	json_builder_set_member_name(b, "result");
	if (request->have_result) {
		const gchar *status = hr_result_status_to_string(request->result.status);
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "status");
		json_builder_add_string_value(b, status != NULL ? status : "unknown");
		hr_api_request_add_counts(b, &request->result);
		json_builder_end_object(b);
	} else {
		json_builder_add_null_value(b);
	}
	json_builder_set_member_name(b, "error");
	if (request->error != NULL)
		json_builder_add_string_value(b, request->error);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "blocks");
	json_builder_begin_array(b);
	for (guint i = 0; i < request->blocks->len; i++)
		hr_api_request_add_gpa(b, g_array_index(request->blocks, guint64, i));
	json_builder_end_array(b);
	hr_json_add_int(b, "busy_retries", request->busy_retries);
	json_builder_set_member_name(b, "cancel_requested");
	json_builder_add_boolean_value(b, request->cancel_sent);
	hr_json_add_time(b, "created_at", request->created_at);
	hr_json_add_time(b, "sent_at", request->sent_at);
	hr_json_add_time(b, "started_at", request->started_at);
	hr_json_add_time(b, "finished_at", request->finished_at);
	json_builder_end_object(b);
}

void
hr_api_request_add_summary_json(HrRequest *request, JsonBuilder *b)
{
	json_builder_begin_object(b);
	hr_api_request_add_head(request, b);
	hr_json_add_int(b, "target_blocks", hr_request_target(request));
	hr_json_add_int(b, "blocks_tried", request->progress.blocks_tried);
	hr_json_add_int(b, "blocks_freed", request->progress.blocks_freed);
	hr_json_add_int(b, "pages_migrated", request->progress.pages_migrated);
	hr_json_add_time(b, "created_at", request->created_at);
	hr_json_add_time(b, "finished_at", request->finished_at);
	json_builder_end_object(b);
}
