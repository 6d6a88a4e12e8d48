/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-config.h"
#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

typedef struct _HrApi HrApi;

/* One route of the API; host/API.md and openapi.json describe each. */
typedef struct {
	const gchar *method;
	const gchar *path;	/* "/v1/guests/{name}": {} is one path segment */
	gboolean admin;		/* needs the admin role; else read is enough */
	const gchar *statuses;	/* what the handler answers, "200 404" */
	const gchar *operation; /* its operationId in openapi.json */
} HrApiRoute;

/* the route table, for the tests: NULL past the end */
const HrApiRoute *
hr_api_get_route(guint i);

/*
 * The /v1 API and /metrics over the core and the reservation executor,
 * on the Unix socket api_socket (root, our uid, api_group, api_read_group)
 * and, with api_listen, on TCP with TLS and bearer tokens.
 */
HrApi *
hr_api_new(HrCore *core, HrPrepare *prepare);
void
hr_api_free(HrApi *api);
gboolean
hr_api_listen(HrApi *api, const HrConfig *config, GError **error);
/*
 * Read @config's api_tokens again (a reload): the new tokens take effect
 * for requests from now on. A file that cannot be read or parsed keeps
 * the tokens in use and fails. Nothing to do without api_listen.
 */
gboolean
hr_api_reload_tokens(HrApi *api, const HrConfig *config, GError **error);

G_END_DECLS
