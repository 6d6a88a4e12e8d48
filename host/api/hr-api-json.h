/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

/* GET /v1/guests */
JsonNode *
hr_api_guests_to_json(HrCore *core);
/* GET /v1/guests/{name} */
JsonNode *
hr_api_guest_to_json(HrGuest *guest);
/* the 202 answer to a request's POST */
JsonNode *
hr_api_request_ref_to_json(HrGuest *guest, HrRequest *request);

/* hr-api-view-request.c: the full JSON object of GET /v1/guests/{name}/requests/{id} */
void
hr_api_request_add_json(HrRequest *request, JsonBuilder *b);
/* a PROGRESS or RESULT's counts: blocks_tried, blocks_freed, failed{}, pages, time */
void
hr_api_request_add_counts(JsonBuilder *b, const HrResult *r);
/* the short form in a guest's detail */
void
hr_api_request_add_summary_json(HrRequest *request, JsonBuilder *b);

/* hr-api-view-plan.c: POST /v1/plan, {"plan": {...}, "input_us", "decision_us", "guests"} */
JsonNode *
hr_api_plan_trial_to_json(const HrPlanTrial *trial);

/* GET /v1/reserve: {"bytes", "node", "blocks_ready", "blocks_filling", "parts", "paused", ...} */
void
hr_api_reserve_add_json(HrReserve *reserve, JsonBuilder *b);

/* a reservation, with its steps and holds when @with_steps */
void
hr_api_reservation_add_json(HrReservation *r, JsonBuilder *b, gboolean with_steps);

/* GET /v1/host: @host's state per node, with the reservations' promises */
JsonNode *
hr_api_host_to_json(const HrHostState *host, HrReservationStore *store, HrBackingMode backing);

/* the data of a /v1/events event (hr-events.h) */
JsonNode *
hr_api_event_to_json(const HrEvent *event, guint64 seq);
JsonNode *
hr_api_prepare_event_to_json(const HrPrepareEvent *event, guint64 seq);

G_END_DECLS
