/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * A blocking call to hugeroomd's API, for programs without a main loop to
 * keep responsive (hugeroomctl, the libvirt hook).
 */

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/*
 * @method @path with the JSON @body (or none) on the API socket
 * @socket_path; no answer within @timeout_s is an error. The answer's JSON,
 * whatever its HTTP status (in @status); NULL when there was no answer in
 * JSON.
 */
JsonNode *
hr_client_request(const gchar *socket_path, const gchar *method, const gchar *path,
		  const gchar *body, guint timeout_s, guint *status, GError **error);
/* the "error" of an error answer, or a fallback naming @status */
gchar *
hr_client_error_message(JsonNode *root, guint status);

/*
 * hugeroomd's event stream (GET /v1/events?@query, host/API.md "Events"),
 * read without a main loop.
 */
typedef struct _HrClientEvents HrClientEvents;

HrClientEvents *
hr_client_events_open(const gchar *socket_path, const gchar *query, GError **error);
void
hr_client_events_close(HrClientEvents *events);
/*
 * The next event within @timeout_ms: TRUE with its type and data; FALSE
 * without @error set when the time ran out, with @error when the stream
 * broke.
 */
gboolean
hr_client_events_next(HrClientEvents *events, gint64 timeout_ms, gchar **type, gchar **data,
		      GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrClientEvents, hr_client_events_close)

G_END_DECLS
