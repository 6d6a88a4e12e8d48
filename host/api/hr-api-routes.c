/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The route table (checked against host/openapi.json by
 * tests/unit/test-openapi.c) and the dispatcher: who asks (hr-api-auth),
 * which route, then its handler.
 */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api.h"

#include "hr-api-private.h"

typedef struct {
	HrApiRoute info;
	HrApiHandler handler;
} HrApiRouteEntry;

/* ---------------------------------------------------------------------- */
/* The route table */

#define ADMIN TRUE
#define READ FALSE

static const HrApiRouteEntry routes[] = {
    {{"GET", "/v1/guests", READ, "200", "listGuests"}, hr_api_guests},
    {{"GET", "/v1/guests/{name}", READ, "200 404", "getGuest"}, hr_api_guest},
    {{"POST", "/v1/guests/{name}/report", ADMIN, "202 404 409", "requestReport"}, hr_api_report},
    {{"POST", "/v1/guests/{name}/evacuate", ADMIN, "202 400 404 409", "evacuateBlocks"},
     hr_api_evacuate},
    {{"POST", "/v1/guests/{name}/capture", ADMIN, "202 400 404 409", "captureBlocks"},
     hr_api_capture},
    {{"POST", "/v1/guests/{name}/return", ADMIN, "202 400 404 409", "returnBlocks"}, hr_api_return},
    {{"POST", "/v1/guests/{name}/cancel", ADMIN, "202 400 404 409", "cancelRequest"},
     hr_api_cancel},
    {{"GET", "/v1/guests/{name}/requests", READ, "200 404", "listRequests"}, hr_api_requests},
    {{"GET", "/v1/guests/{name}/requests/{id}", READ, "200 404", "getRequest"}, hr_api_request},
    {{"PUT", "/v1/guests/{name}/pcp", ADMIN, "200 202 400 409 504", "setPcpPolicy"}, hr_api_pcp},
    {{"POST", "/v1/reservations", ADMIN, "201 400 409 422", "createReservation"},
     hr_api_reservation_create},
    {{"GET", "/v1/reservations", READ, "200 400", "listReservations"}, hr_api_reservations},
    {{"GET", "/v1/reservations/{id}", READ, "200 404", "getReservation"}, hr_api_reservation},
    {{"DELETE", "/v1/reservations/{id}", ADMIN, "200 400 404 409", "deleteReservation"},
     hr_api_reservation_release},
    {{"POST", "/v1/reservations/{id}/release", ADMIN, "200 400 404 409", "releaseReservation"},
     hr_api_reservation_release},
    {{"POST", "/v1/reservations/{id}/consume", ADMIN, "200 400 404 409", "consumeReservation"},
     hr_api_reservation_consume},
    {{"GET", "/v1/reserve", READ, "200", "getReserve"}, hr_api_reserve},
    {{"PUT", "/v1/reserve", ADMIN, "200 400 409", "setReserve"}, hr_api_reserve_set},
    {{"POST", "/v1/plan", READ, "200 400 500", "planReservation"}, hr_api_plan},
    {{"GET", "/v1/host", READ, "200 500", "getHost"}, hr_api_host},
    {{"GET", "/v1/capacity", READ, "200 500", "getCapacity"}, hr_api_capacity},
    {{"GET", "/v1/events", READ, "200 400", "streamEvents"}, hr_api_events},
    {{"GET", "/v1/version", READ, "200", "getVersion"}, hr_api_version},
    {{"GET", "/healthz", READ, "200 503", "getHealth"}, hr_api_health},
    {{"GET", "/openapi.json", READ, "200", "getOpenApi"}, hr_api_openapi},
    {{"GET", "/metrics", READ, "200", "getMetrics"}, hr_api_metrics},
};

#undef ADMIN
#undef READ

const HrApiRoute *
hr_api_get_route(guint i)
{
	return i < G_N_ELEMENTS(routes) ? &routes[i].info : NULL;
}

/* @args gets the {} segments' values (at most 2) */
static gboolean
hr_api_route_matches(const gchar *pattern, gchar **segments, gchar **args)
{
	g_auto(GStrv) want = g_strsplit(pattern, "/", -1);
	guint n = 0;
	guint i;

	for (i = 0; want[i] != NULL && segments[i] != NULL; i++) {
		if (want[i][0] == '{') {
			if (segments[i][0] == '\0' || n >= 2)
				return FALSE;
			args[n++] = segments[i];
		} else if (g_strcmp0(want[i], segments[i]) != 0) {
			return FALSE;
		}
	}
	return want[i] == NULL && segments[i] == NULL;
}

/* ---------------------------------------------------------------------- */
/* Dispatch: who asks, which route, then the handler */

const gchar *
hr_api_message_principal(SoupServerMessage *msg)
{
	GSocketAddress *remote = soup_server_message_get_remote_address(msg);
	const gchar *principal = g_object_get_data(G_OBJECT(msg), HR_API_PRINCIPAL_KEY);

	if (principal == NULL && remote != NULL)
		principal = g_object_get_data(G_OBJECT(remote), HR_API_PRINCIPAL_KEY);
	return principal;
}

static HrApiRole
hr_api_message_role(HrApi *api, SoupServerMessage *msg)
{
	GSocketAddress *remote = soup_server_message_get_remote_address(msg);
	SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
	const gchar *auth;
	HrApiRole role;

	if (remote == NULL)
		return HR_API_ROLE_NONE;
	if (g_object_get_data(G_OBJECT(remote), HR_API_TLS_KEY) == NULL) {
		const gchar *why = g_object_get_data(G_OBJECT(remote), HR_API_REFUSED_KEY);
		if (why == NULL)
			return GPOINTER_TO_INT(
			    g_object_get_data(G_OBJECT(remote), HR_API_ROLE_KEY));
		/* nothing it sends will be answered otherwise */
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "Connection", "close");
		hr_api_reply_error(msg, SOUP_STATUS_FORBIDDEN, "forbidden",
				   "%s: run it as root, as the user hugeroomd runs as, or as a "
				   "member of api_group or api_read_group",
				   why);
		return HR_API_ROLE_NONE;
	}
	auth = soup_message_headers_get_one(headers, "Authorization");
	if (auth == NULL) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "WWW-Authenticate", "Bearer realm=\"hugeroomd\"");
		hr_api_reply_error(msg, SOUP_STATUS_UNAUTHORIZED, "unauthenticated",
				   "this API needs a bearer token: send \"Authorization: Bearer "
				   "TOKEN\" with a token from the daemon's api_tokens file");
		return HR_API_ROLE_NONE;
	}
	role = HR_API_ROLE_NONE;
	if (g_ascii_strncasecmp(auth, "Bearer ", 7) == 0) {
		g_autofree gchar *token = g_strstrip(g_strdup(auth + 7));
		role = hr_api_tokens_lookup(api->tokens, token);
		if (role != HR_API_ROLE_NONE)
			g_object_set_data_full(G_OBJECT(msg), HR_API_PRINCIPAL_KEY,
					       hr_api_token_principal(token), g_free);
	}
	if (role == HR_API_ROLE_NONE) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "WWW-Authenticate",
					     "Bearer realm=\"hugeroomd\", error=\"invalid_token\"");
		hr_api_reply_error(msg, SOUP_STATUS_UNAUTHORIZED, "bad_token",
				   "the bearer token is not in the daemon's api_tokens file");
	}
	return role;
}

void
hr_api_dispatch(HrApi *api, SoupServerMessage *msg, const gchar *path, GHashTable *query)
{
	const gchar *method = soup_server_message_get_method(msg);
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	g_auto(GStrv) segments = g_strsplit(path, "/", -1);
	g_autoptr(GString) allow = g_string_new(NULL);
	HrApiRole role;

	role = hr_api_message_role(api, msg);
	if (role == HR_API_ROLE_NONE)
		return;
	if ((body != NULL && body->length > HR_API_MAX_BODY) ||
	    soup_message_headers_get_content_length(soup_server_message_get_request_headers(msg)) >
		HR_API_MAX_BODY) {
		/* a client that sends that much is not kept */
		soup_message_headers_replace(soup_server_message_get_response_headers(msg),
					     "Connection", "close");
		hr_api_reply_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "body_too_large",
				   "the body is larger than the %d bytes the API takes",
				   HR_API_MAX_BODY);
		return;
	}
	for (guint i = 0; i < G_N_ELEMENTS(routes); i++) {
		const HrApiRouteEntry *route = &routes[i];
		gchar *args[3] = {NULL};
		gint64 start;

		if (!hr_api_route_matches(route->info.path, segments, args))
			continue;
		if (g_strcmp0(route->info.method, method) != 0) {
			g_string_append_printf(allow, "%s%s", allow->len > 0 ? ", " : "",
					       route->info.method);
			continue;
		}
		if (route->info.admin && role != HR_API_ROLE_ADMIN) {
			hr_api_reply_error(msg, SOUP_STATUS_FORBIDDEN, "read_only",
					   "%s %s changes the daemon's state: it needs the admin "
					   "role, this client has read",
					   method, route->info.path);
			return;
		}
		start = g_get_monotonic_time();
		route->handler(api, msg, query, args);
		hr_metrics_histogram_observe(api->latency, i,
					     (g_get_monotonic_time() - start) / 1e6);
		return;
	}
	if (allow->len > 0) {
		soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Allow",
					     allow->str);
		hr_api_reply_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "method_not_allowed",
				   "%s %s is not supported; use %s", method, path, allow->str);
		return;
	}
	hr_api_reply_error(msg, SOUP_STATUS_NOT_FOUND, "not_found",
			   "no such resource %s; try /v1/guests, /v1/reservations, /v1/host, "
			   "/v1/events or /metrics (openapi.json lists every route)",
			   path);
}
