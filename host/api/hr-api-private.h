/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * What the files of the API server share (host/api/README.md says which
 * file does what): the server's state, the answers every handler gives,
 * the parsing of request bodies, and the handlers the route table names.
 */

#include <libsoup/soup.h>

#include "hr-acceptor.h"
#include "hr-api-auth.h"
#include "hr-config.h"
#include "hr-core.h"
#include "hr-events.h"
#include "hr-metrics.h"
#include "hr-monitor.h"
#include "hr-prepare.h"
#include "hr-prometheus.h"

G_BEGIN_DECLS

/* hr-api.h's, which this header does not include: hr-api.c includes both */
typedef struct _HrApi HrApi;

/* a body larger than this is refused with 413 */
#define HR_API_MAX_BODY (64 * 1024)

/* what hr_api_accept() leaves on a connection's remote address for the dispatcher */
#define HR_API_ROLE_KEY "hr-api-role"
#define HR_API_TLS_KEY "hr-api-tls"
#define HR_API_REFUSED_KEY "hr-api-refused"
#define HR_API_PRINCIPAL_KEY "hr-api-principal"
/* the longest X-Request-Id kept from a client; a longer one is replaced */
#define HR_API_REQUEST_ID_MAX 128
#define HR_API_REQUEST_ID_KEY "hr-api-request-id"

/* what a request is handed to once its headers are in (hr_api_dispatch) */
typedef void (*HrApiDispatchFunc)(HrApi *api, SoupServerMessage *msg, const gchar *path,
				  GHashTable *query);

struct _HrApi {
	HrCore *core;
	HrPrepare *prepare;
	HrEventStream *events;
	SoupServer *server;
	HrApiDispatchFunc dispatch; /* the routes' (hr_api_dispatch) */
	HrAcceptor *acceptor;	    /* the Unix socket */
	GSocket *socket;
	GPtrArray *tcp_acceptors; /* HrAcceptor, one per address */
	GTlsCertificate *certificate;
	GThreadPool *handshake_pool; /* TLS handshakes (hr-api-tls.c) */
	GHashTable *handshakes;	     /* the handshakes waiting or running */
	guint64 n_handshake_failures;
	HrApiTokens *tokens; /* NULL without api_listen */
	gchar *tokens_path;  /* the file they were read from */
	gid_t admin_gid;
	gid_t read_gid;
	HrMetrics *metrics;
	HrMetricsHistogram *latency; /* request handling, by route */
	HrHostReader *host;	     /* the host's /proc and /sys, read in a thread */
	JsonNode *host_json;	     /* GET /v1/host's answer from the snapshot host_json_serial */
	guint64 host_json_serial;
	JsonNode *capacity; /* GET /v1/capacity's answer, made at capacity_at (monotonic us) */
	gint64 capacity_at;
	GHashTable *idle;      /* HrApiConn set: kept alive, waiting for a request */
	guint64 n_connections; /* accepted */
	guint64 n_reused;      /* answers on a connection after its first */
	guint trim_id;
	gint64 started_at; /* monotonic us, for /healthz's uptime */
};

/* a route's handler: @args are the values of its path's {} segments */
typedef void (*HrApiHandler)(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);

/*
 * hr-api-http.c: the HTTP server, its connections and answers. It hands
 * each request to @dispatch, which hr-api.c gives it: the routes are
 * above the server (they answer through it), so it does not call them by
 * name.
 */
SoupServer *
hr_api_server_new(HrApi *api, HrApiDispatchFunc dispatch);
void
hr_api_close_idle(HrApi *api);
void
hr_api_accept(HrApi *api, GIOStream *io, GSocketConnection *connection, HrApiRole role,
	      gboolean tls, const gchar *refused, const gchar *principal);
/* the request's X-Request-Id, the client's or one made for it */
const gchar *
hr_api_message_request_id(SoupServerMessage *msg);
void
hr_api_reply_json(SoupServerMessage *msg, guint status, JsonNode *node);
void
hr_api_reply_error(SoupServerMessage *msg, guint status, const gchar *code, const gchar *format,
		   ...) G_GNUC_PRINTF(4, 5);
void
hr_api_reply_gerror(SoupServerMessage *msg, const GError *error);

/* hr-api-routes.c: the route table and the dispatcher */
/* who sent @msg (hr_api_peer_role's principal, hr_api_token_principal), or NULL */
const gchar *
hr_api_message_principal(SoupServerMessage *msg);
void
hr_api_dispatch(HrApi *api, SoupServerMessage *msg, const gchar *path, GHashTable *query);

/* hr-api-body.c: request bodies, with errors that name the field */
JsonObject *
hr_api_parse_body(SoupServerMessage *msg, JsonParser *parser, GError **error);
gboolean
hr_api_check_members(JsonObject *obj, const gchar *what, const gchar *const *allowed,
		     GError **error);
gboolean
hr_api_get_uint(JsonObject *obj, const gchar *key, guint64 min, guint64 max, guint64 *value,
		GError **error);
gboolean
hr_api_get_bool(JsonObject *obj, const gchar *key, gboolean *value, GError **error);
gboolean
hr_api_parse_params(JsonObject *obj, HrRequestKind kind, HrRequestParams *p, GArray *gpas,
		    GArray *ranges, GError **error);
gboolean
hr_api_parse_reservation(JsonObject *obj, guint64 *bytes, gint *node, guint64 *deadline_s,
			 gboolean *strict, const gchar **requester, GError **error);

/* hr-api-tls.c: the TCP listener with TLS and bearer tokens */
gboolean
hr_api_listen_tcp(HrApi *api, const HrConfig *config, GError **error);
/* end the handshakes under way (before the TCP acceptors' free) */
void
hr_api_tls_free(HrApi *api);

/* the handlers, by resource */
void
hr_api_guests(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_guest(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_report(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_evacuate(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_capture(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_return(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_cancel(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_requests(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_request(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_pcp(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reservation_create(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reservations(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reservation(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reservation_release(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reservation_consume(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
/* GET and PUT /v1/reserve: the standing reserve (reservations/hr-reserve.c) */
void
hr_api_reserve(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_reserve_set(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_plan(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_host(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_metrics(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_capacity(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_events(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_version(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_health(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);
void
hr_api_openapi(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args);

G_END_DECLS
