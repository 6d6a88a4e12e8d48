/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-prepare.h"

G_BEGIN_DECLS

/* POST /v1/plan: {"plan": {...}, "input_us", "decision_us", "guests"} */
JsonNode *
hr_api_plan_trial_to_json(const HrPlanTrial *trial);

G_END_DECLS
