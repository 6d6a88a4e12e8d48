/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * A blocking call to hugeroomd's API, for programs without a main loop to
 * keep responsive (hugeroomctl, the libvirt hook).
 */

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* the daemon answered, and said no: hr_client_events_open() */
#define HR_CLIENT_ERROR (hr_client_error_quark())
GQuark
hr_client_error_quark(void);
typedef enum {
	HR_CLIENT_ERROR_REFUSED,
} HrClientError;

/*
 * Where hugeroomd's API is: its Unix socket, or its HTTPS listener
 * (api_listen) with a bearer token.
 */
typedef struct _HrClient HrClient;

HrClient *
hr_client_new_unix(const gchar *socket_path);
/*
 * @url is https://HOST:PORT (nothing after the port); @token the bearer
 * token; @ca_file the PEM of the CA that signed the daemon's certificate,
 * or NULL for the system's trust store.
 */
HrClient *
hr_client_new_url(const gchar *url, const gchar *token, const gchar *ca_file, GError **error);
void
hr_client_free(HrClient *client);
/* "hugeroomd at /run/hugeroom/api.sock", "hugeroomd at https://h:8443", for messages */
const gchar *
hr_client_describe(HrClient *client);
gboolean
hr_client_is_remote(HrClient *client);

/*
 * @method @path with the JSON @body (or none); no answer within
 * @timeout_s is an error. The answer's JSON, whatever its HTTP status (in
 * @status); NULL when there was no answer in JSON. An error in
 * G_IO_ERROR (but INVALID_ARGUMENT) or G_TLS_ERROR means there was no
 * answer at all.
 */
JsonNode *
hr_client_call(HrClient *client, const gchar *method, const gchar *path, const gchar *body,
	       guint timeout_s, guint *status, GError **error);
/* hr_client_call() on the Unix socket @socket_path */
JsonNode *
hr_client_request(const gchar *socket_path, const gchar *method, const gchar *path,
		  const gchar *body, guint timeout_s, guint *status, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrClient, hr_client_free)

/* hr_text_escape(): @text made safe for a terminal (hr-text.h) */
gchar *
hr_client_escape(const gchar *text);

/* the "error" of an error answer, or a fallback naming @status */
gchar *
hr_client_error_message(JsonNode *root, guint status);

/*
 * hugeroomd's event stream (GET /v1/events?@query, host/API.md "Events"),
 * read without a main loop.
 */
typedef struct _HrClientEvents HrClientEvents;

HrClientEvents *
hr_client_events_open(HrClient *client, const gchar *query, GError **error);
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
