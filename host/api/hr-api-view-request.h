/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-request.h"

G_BEGIN_DECLS

/* the full JSON object of GET /v1/guests/{name}/requests/{id} */
void
hr_api_request_add_json(HrRequest *request, JsonBuilder *b);
/* a PROGRESS or RESULT's counts: blocks_tried, blocks_freed, failed{}, pages, time */
void
hr_api_request_add_counts(JsonBuilder *b, const HrResult *r);
/* the short form in a guest's detail */
void
hr_api_request_add_summary_json(HrRequest *request, JsonBuilder *b);

G_END_DECLS
