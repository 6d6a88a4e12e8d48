/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PUT /v1/guests/NAME/pcp: a guest's per-CPU page list policy, answered
 * once the guest has applied it (or kept for a guest not connected yet).
 */

#define G_LOG_DOMAIN "HrApi"

#include "hr-api-private.h"
#include "hr-pcp.h"

/* ---------------------------------------------------------------------- */
/* PUT /v1/guests/NAME/pcp {"policy": "latency"}: answered once the guest has */

typedef struct {
	SoupServerMessage *msg;
	HrPcpPolicy policy;
} HrApiPcpCall;

static void
hr_api_reply_pcp(SoupServerMessage *msg, guint status, const gchar *name, const HrPcpPolicy *policy,
		 gboolean applied)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *text = hr_pcp_policy_format(policy);

	json_builder_begin_object(b);
	json_builder_set_member_name(b, "guest");
	json_builder_add_string_value(b, name);
	json_builder_set_member_name(b, "policy");
	json_builder_add_string_value(b, text);
	json_builder_set_member_name(b, "applied");
	json_builder_add_boolean_value(b, applied);
	json_builder_end_object(b);
	node = json_builder_get_root(b);
	hr_api_reply_json(msg, status, node);
}

/* the batch of the guest's largest zone, from its latest report; 0 unknown */
static guint32
hr_api_pcp_batch(HrGuest *guest)
{
	const HrStatus *status = hr_guest_get_status(guest);
	const HrZone *big = NULL;

	for (guint z = 0; status != NULL && z < status->nr_zones; z++)
		if (big == NULL || status->zones[z].managed_pages > big->managed_pages)
			big = &status->zones[z];
	return big != NULL ? big->pcp_batch : 0;
}

static void
hr_api_pcp_done(HrGuest *guest, gint status, gpointer user_data)
{
	HrApiPcpCall *call = user_data;
	g_autofree gchar *text = hr_pcp_policy_format(&call->policy);

	if (status == VIRTIO_HUGEROOM_S_OK) {
		hr_pcp_set_wanted(guest, &call->policy);
		hr_api_reply_pcp(call->msg, SOUP_STATUS_OK, hr_guest_get_name(guest), &call->policy,
				 TRUE);
	} else if (status < 0) {
		hr_api_reply_error(call->msg, SOUP_STATUS_GATEWAY_TIMEOUT, "guest_timeout",
				   "guest %s did not answer PCP policy %s in time; see its next "
				   "report (pcp.in_force) for what it runs",
				   hr_guest_get_name(guest), text);
	} else if (status == VIRTIO_HUGEROOM_S_INVALID) {
		hr_api_reply_error(
		    call->msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument",
		    "guest %s refused PCP policy %s: its kernel cannot set it (an "
		    "explicit high must be at least 4 * batch = %u pages and at most "
		    "the largest zone's managed pages / (8 * CPUs)); nothing changed",
		    hr_guest_get_name(guest), text, 4 * hr_api_pcp_batch(guest));
	} else {
		hr_api_reply_error(call->msg, SOUP_STATUS_CONFLICT, "conflict",
				   "guest %s answered PCP policy %s with '%s'; nothing changed",
				   hr_guest_get_name(guest), text,
				   hr_result_status_to_string((guint32)status) != NULL
				       ? hr_result_status_to_string((guint32)status)
				       : "an unknown status");
	}
	soup_server_message_unpause(call->msg);
	g_object_unref(call->msg);
	g_free(call);
}

static gboolean
hr_api_parse_pcp(JsonObject *obj, HrPcpPolicy *policy, GError **error)
{
	static const gchar *const allowed[] = {"policy", "high", "batch", NULL};
	g_autoptr(GError) error_local = NULL;
	const gchar *text;
	guint64 high = 0;

	if (!hr_api_check_members(obj, "pcp", allowed, error))
		return FALSE;
	if (json_object_has_member(obj, "batch"))
		return hr_request_invalid(
		    error, "batch: no guest kernel hugeroom supports (6.1, 6.12) can "
			   "change it (zone_batchsize() sets it); set high only");
	if (!json_object_has_member(obj, "policy") ||
	    json_node_get_value_type(json_object_get_member(obj, "policy")) != G_TYPE_STRING)
		return hr_request_invalid(error, "policy: missing or not a string; for example "
						 "{\"policy\":\"latency\"} or "
						 "{\"policy\":\"explicit\",\"high\":2000}");
	text = json_object_get_string_member(obj, "policy");
	if (!hr_api_get_uint(obj, "high", 1, G_MAXUINT32, &high, error))
		return FALSE;
	if (high != 0 && g_strcmp0(text, "explicit") == 0) {
		*policy = (HrPcpPolicy){VIRTIO_HUGEROOM_PCP_EXPLICIT, (guint32)high};
		return TRUE;
	}
	if (!hr_pcp_policy_parse(text, policy, &error_local) ||
	    (high != 0 &&
	     !hr_pcp_policy_check(&(HrPcpPolicy){policy->policy, (guint32)high}, &error_local)))
		return hr_request_invalid(error, "policy: %s", error_local->message);
	return TRUE;
}

/* a guest not seen yet, called {name}: kept for it (the libvirt hook at prepare) */
void
hr_api_pcp(HrApi *api, SoupServerMessage *msg, GHashTable *query, gchar **args)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	HrGuest *guest = hr_core_find_guest(api->core, args[0]);
	HrPcpPolicy policy;
	HrApiPcpCall *call;
	JsonObject *obj;
	(void)query;

	obj = hr_api_parse_body(msg, parser, &error);
	if (obj == NULL || !hr_api_parse_pcp(obj, &policy, &error)) {
		hr_api_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "invalid_argument", "%s",
				   error->message);
		return;
	}
	if (guest == NULL) {
		hr_pcp_stash(args[0], &policy);
		hr_api_reply_pcp(msg, SOUP_STATUS_ACCEPTED, args[0], &policy, FALSE);
		return;
	}
	if (!hr_pcp_supported(guest, &error) || hr_pcp_evacuating(guest)) {
		if (error != NULL &&
		    !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED)) {
			hr_api_reply_gerror(msg, error);
			return;
		}
		/* sent when its driver comes up, or when its donation ends */
		hr_pcp_set_wanted(guest, &policy);
		hr_api_reply_pcp(msg, SOUP_STATUS_ACCEPTED, hr_guest_get_name(guest), &policy,
				 FALSE);
		return;
	}
	call = g_new0(HrApiPcpCall, 1);
	call->msg = g_object_ref(msg);
	call->policy = policy;
	if (!hr_pcp_send(hr_core_get_config(api->core), guest, &policy, hr_api_pcp_done, call,
			 &error)) {
		g_object_unref(call->msg);
		g_free(call);
		hr_api_reply_gerror(msg, error);
		return;
	}
	soup_server_message_pause(msg);
}
