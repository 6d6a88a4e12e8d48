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
