/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* human tables for hugeroomctl, from the API's JSON */
gboolean
hr_ctl_render_guests(JsonNode *root, GString *out, GError **error);
gboolean
hr_ctl_render_guest(JsonNode *root, GString *out, GError **error);
/* GET /v1/guests/{name}/requests as a table */
gboolean
hr_ctl_render_requests(JsonNode *root, GString *out, GError **error);
/* one request (GET .../requests/{id}): what was asked, what it did */
gboolean
hr_ctl_render_request(JsonNode *root, GString *out, GError **error);
/*
 * One line of progress for a request, @width columns at most: a bar when
 * the target is known, then state, blocks, failures, pages and time.
 */
gchar *
hr_ctl_progress_line(JsonNode *root, guint width, gboolean bar);
/* "1.2 s", "350 ms", "12 us" */
gchar *
hr_ctl_format_us(gint64 us);
/* "3.0 GiB"-style size from 4 KiB pages */
gchar *
hr_ctl_format_pages(gint64 pages);

/* reservations: GET /v1/reservations, one reservation with its steps */
gboolean
hr_ctl_render_reservations(JsonNode *root, GString *out, GError **error);
gboolean
hr_ctl_render_reservation(JsonNode *root, GString *out, GError **error);
gchar *
hr_ctl_reservation_progress_line(JsonNode *root, guint width, gboolean bar);
/* GET /v1/host, per node */
gboolean
hr_ctl_render_host(JsonNode *root, GString *out, GError **error);

/*
 * hugeroomctl status: {"host": GET /v1/host, "reservations": GET
 * /v1/reservations, "guests": GET /v1/guests} in one view
 */
gboolean
hr_ctl_render_status(JsonNode *root, GString *out, GError **error);
/* POST /v1/plan: what the planner would ask of which donors */
gboolean
hr_ctl_render_plan(JsonNode *root, GString *out, GError **error);

G_END_DECLS
