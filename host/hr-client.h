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

G_END_DECLS
