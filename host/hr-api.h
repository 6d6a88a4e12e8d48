/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

typedef struct _HrApi HrApi;

/*
 * The HTTP/JSON API on a Unix socket (peer credentials: root or our uid):
 *   GET  /v1/guests                  list
 *   GET  /v1/guests/{name-or-uuid}   detail, with the latest status decoded
 *   POST /v1/guests/{name}/report    send CMD_REPORT
 *   POST /v1/guests/{name}/evacuate  {"blocks":N} or {"gpas":[..]} (+ "blocks"
 *                                    to stop after N), "ranges":[{"start","end"}],
 *                                    "budget_pages", "budget_ms", "timeout_s"
 *   POST /v1/guests/{name}/capture   {"blocks":N, "budget_ms", "timeout_s"}
 *   POST /v1/guests/{name}/return    {"blocks":N} or {"gpas":[..]} or {"all":true}
 *                                    -> 202 {"request_id","guest","kind","state"}
 *   POST /v1/guests/{name}/cancel    {"request_id":N}
 *   GET  /v1/guests/{name}/requests  every known request, in full
 *   GET  /v1/guests/{name}/requests/{id}
 *   POST /v1/reservations            {"size":"4G"|"bytes":N, "node", "deadline_s",
 *                                    "strict", "requester"} -> 202 reservation
 *   GET  /v1/reservations[/{id}]     list, or one with steps and holds
 *   DELETE /v1/reservations/{id}, POST .../release, POST .../consume
 *   POST /v1/plan                    the planner's choice now, nothing done
 *   GET  /v1/host                    the host's memory per node
 *   GET  /metrics                    Prometheus text
 */
HrApi *
hr_api_new(HrCore *core, HrPrepare *prepare);
void
hr_api_free(HrApi *api);
gboolean
hr_api_listen(HrApi *api, const gchar *path, GError **error);

G_END_DECLS
