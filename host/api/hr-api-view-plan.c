/* SPDX-License-Identifier: GPL-2.0-only */

/* The JSON view of a plan the planner made without acting on it (POST /v1/plan). */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api-view-plan.h"

#include "hr-json.h"

static void
hr_api_plan_add_json(const HrPlan *plan, GPtrArray *step_guests, JsonBuilder *b)
{
	json_builder_begin_object(b);
	hr_json_add_int(b, "node", plan->node);
	hr_json_add_int(b, "need_blocks", plan->need_blocks);
	hr_json_add_int(b, "gain_milli", plan->gain_milli);
	hr_json_add_int(b, "cost_pages", plan->cost_pages);
	hr_json_add_int(b, "est_ms", plan->est_ms);
	json_builder_set_member_name(b, "complete");
	json_builder_add_boolean_value(b, plan->complete);
	json_builder_set_member_name(b, "summary");
	json_builder_add_string_value(b, plan->summary != NULL ? plan->summary : "");
	hr_json_add_int(b, "guests_considered", plan->guests_considered);
	hr_json_add_int(b, "guests_deferred", plan->guests_deferred);
	json_builder_set_member_name(b, "steps");
	json_builder_begin_array(b);
	for (guint i = 0; i < plan->steps->len; i++) {
		const HrPlanStep *s = g_ptr_array_index(plan->steps, i);
		json_builder_begin_object(b);
		json_builder_set_member_name(b, "kind");
		json_builder_add_string_value(b, hr_plan_step_kind_to_string(s->kind));
		hr_json_add_int(b, "node", s->node);
		if (s->kind == HR_PLAN_STEP_DONATE) {
			const gchar *guest = g_ptr_array_index(step_guests, i);
			hr_json_add_int(b, "guest_id", s->guest_id);
			json_builder_set_member_name(b, "guest");
			if (guest != NULL)
				json_builder_add_string_value(b, guest);
			else
				json_builder_add_null_value(b);
			hr_json_add_int(b, "blocks", s->picks->len);
			hr_json_add_int(b, "thp", s->n_thp);
			hr_json_add_int(b, "small", s->n_small);
		} else {
			hr_json_add_int(b, "blocks", s->blocks);
		}
		if (s->kind == HR_PLAN_STEP_COMPACT) {
			json_builder_set_member_name(b, "after_donations");
			json_builder_add_boolean_value(b, s->after_donations);
		}
		hr_json_add_int(b, "gain_milli", s->gain_milli);
		hr_json_add_int(b, "cost_pages", s->cost_pages);
		hr_json_add_int(b, "est_ms", s->est_ms);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
	json_builder_end_object(b);
}

JsonNode *
hr_api_plan_trial_to_json(const HrPlanTrial *trial)
{
	g_autoptr(JsonBuilder) b = json_builder_new();

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "plan");
	hr_api_plan_add_json(trial->plan, trial->step_guests, b);
	hr_json_add_int(b, "guests", trial->n_guests);
	hr_json_add_int(b, "input_us", trial->input_us);
	hr_json_add_int(b, "decision_us", trial->decision_us);
	json_builder_end_object(b);
	return json_builder_get_root(b);
}
