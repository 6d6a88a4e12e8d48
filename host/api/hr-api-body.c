/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Request bodies: JSON objects whose members are checked one by one, with
 * errors that name the field, its value and the range it must be in.
 */

#define G_LOG_DOMAIN "HrApi"

#include <string.h>

#include "hr-api-private.h"

/* ---------------------------------------------------------------------- */
/* Bodies */

static gchar *
hr_api_node_to_string(JsonNode *node)
{
	g_autofree gchar *text = json_to_string(node, FALSE);
	if (strlen(text) > 40)
		return g_strdup_printf("%.37s...", text);
	return g_steal_pointer(&text);
}

JsonObject *
hr_api_parse_body(SoupServerMessage *msg, JsonParser *parser, GError **error)
{
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	g_autoptr(GError) error_local = NULL;
	JsonNode *root;

	if (body == NULL || body->length == 0) {
		hr_request_invalid(error, "the request needs a JSON object body, for example "
					  "{\"blocks\":4}");
		return NULL;
	}
	if (!json_parser_load_from_data(parser, body->data, body->length, &error_local)) {
		hr_request_invalid(error, "the body is not JSON: %s", error_local->message);
		return NULL;
	}
	root = json_parser_get_root(parser);
	if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
		hr_request_invalid(error,
				   "the body must be a JSON object, for example {\"blocks\":4}");
		return NULL;
	}
	return json_node_get_object(root);
}

gboolean
hr_api_check_members(JsonObject *obj, const gchar *what, const gchar *const *allowed,
		     GError **error)
{
	g_autoptr(GList) members = json_object_get_members(obj);

	for (GList *l = members; l != NULL; l = l->next) {
		if (!g_strv_contains(allowed, l->data)) {
			g_autofree gchar *list = g_strjoinv(", ", (gchar **)allowed);
			return hr_request_invalid(error, "%s: unknown field; %s takes %s",
						  (const gchar *)l->data, what, list);
		}
	}
	return TRUE;
}

/* a JSON integer in [min, max]; absent members leave @value alone */
gboolean
hr_api_get_uint(JsonObject *obj, const gchar *key, guint64 min, guint64 max, guint64 *value,
		GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);
	gint64 v;

	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
		g_autofree gchar *text = hr_api_node_to_string(node);
		return hr_request_invalid(error,
					  "%s: %s is not a whole number from %" G_GUINT64_FORMAT
					  " to %" G_GUINT64_FORMAT,
					  key, text, min, max);
	}
	v = json_node_get_int(node);
	if (v < 0 || (guint64)v < min || (guint64)v > max)
		return hr_request_invalid(error,
					  "%s: %" G_GINT64_FORMAT
					  " is out of range %" G_GUINT64_FORMAT
					  "-%" G_GUINT64_FORMAT,
					  key, v, min, max);
	*value = v;
	return TRUE;
}

/* an address: a JSON integer, or a string in hex ("0x...") or decimal */
static gboolean
hr_api_parse_addr(JsonNode *node, const gchar *field, guint64 *value, GError **error)
{
	if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64 &&
	    json_node_get_int(node) >= 0) {
		*value = json_node_get_int(node);
		return TRUE;
	}
	if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING) {
		const gchar *str = json_node_get_string(node);
		guint base = 10;
		if (g_str_has_prefix(str, "0x") || g_str_has_prefix(str, "0X")) {
			str += 2;
			base = 16;
		}
		if (*str != '\0' &&
		    g_ascii_string_to_unsigned(str, base, 0, G_MAXUINT64, value, NULL))
			return TRUE;
	}
	{
		g_autofree gchar *text = hr_api_node_to_string(node);
		return hr_request_invalid(
		    error,
		    "%s: %s is not an address (a whole number, or a string such as "
		    "\"0x40000000\")",
		    field, text);
	}
}

/* a true or false member; absent members leave @value alone */
gboolean
hr_api_get_bool(JsonObject *obj, const gchar *key, gboolean *value, GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);

	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN)
		return hr_request_invalid(error, "%s: must be true or false", key);
	*value = json_node_get_boolean(node);
	return TRUE;
}

/*
 * A non-empty array member; @usage says what it must hold. An absent
 * member sets @array to NULL.
 */
static gboolean
hr_api_get_list(JsonObject *obj, const gchar *key, const gchar *usage, JsonArray **array,
		GError **error)
{
	JsonNode *node = json_object_get_member(obj, key);

	*array = NULL;
	if (node == NULL)
		return TRUE;
	if (!JSON_NODE_HOLDS_ARRAY(node))
		return hr_request_invalid(error, "%s: must be an array of %s", key, usage);
	if (json_array_get_length(json_node_get_array(node)) == 0)
		return hr_request_invalid(error, "%s: the list is empty", key);
	*array = json_node_get_array(node);
	return TRUE;
}

static gboolean
hr_api_get_gpas(JsonObject *obj, GArray *gpas, GError **error)
{
	JsonArray *array;

	if (!hr_api_get_list(obj, "gpas", "addresses", &array, error))
		return FALSE;
	if (array == NULL)
		return TRUE;
	for (guint i = 0; i < json_array_get_length(array); i++) {
		g_autofree gchar *field = g_strdup_printf("gpas[%u]", i);
		guint64 gpa;
		if (!hr_api_parse_addr(json_array_get_element(array, i), field, &gpa, error))
			return FALSE;
		g_array_append_val(gpas, gpa);
	}
	return TRUE;
}

static gboolean
hr_api_get_ranges(JsonObject *obj, GArray *ranges, GError **error)
{
	JsonArray *array;

	if (!hr_api_get_list(obj, "ranges", "{\"start\":..,\"end\":..}", &array, error))
		return FALSE;
	if (array == NULL)
		return TRUE;
	for (guint i = 0; i < json_array_get_length(array); i++) {
		JsonNode *elem = json_array_get_element(array, i);
		const gchar *keys[] = {"start", "end"};
		HrRange range = {0};
		guint64 *values[] = {&range.start, &range.end};
		if (!JSON_NODE_HOLDS_OBJECT(elem))
			return hr_request_invalid(
			    error, "ranges[%u]: must be {\"start\":..,\"end\":..}", i);
		for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
			JsonNode *v = json_object_get_member(json_node_get_object(elem), keys[k]);
			g_autofree gchar *field = g_strdup_printf("ranges[%u].%s", i, keys[k]);
			if (v == NULL)
				return hr_request_invalid(error, "%s: missing", field);
			if (!hr_api_parse_addr(v, field, values[k], error))
				return FALSE;
		}
		if (json_object_get_size(json_node_get_object(elem)) != 2)
			return hr_request_invalid(error, "ranges[%u]: takes only start and end", i);
		g_array_append_val(ranges, range);
	}
	return TRUE;
}

/* the body of POST .../evacuate, .../capture or .../return */
gboolean
hr_api_parse_params(JsonObject *obj, HrRequestKind kind, HrRequestParams *p, GArray *gpas,
		    GArray *ranges, GError **error)
{
	static const gchar *const evacuate[] = {"blocks",    "gpas",	  "ranges", "budget_pages",
						"budget_ms", "timeout_s", NULL};
	static const gchar *const capture[] = {"blocks", "budget_ms", "timeout_s", NULL};
	static const gchar *const ret[] = {"blocks", "gpas", "all", "timeout_s", NULL};
	const gchar *const *allowed = kind == HR_REQUEST_EVACUATE  ? evacuate
				      : kind == HR_REQUEST_CAPTURE ? capture
								   : ret;
	guint64 count = 0, budget_pages = 0, budget_ms = 0, timeout_s = 0;

	memset(p, 0, sizeof(*p));
	p->kind = kind;
	if (!hr_api_check_members(obj, hr_request_kind_to_string(kind), allowed, error) ||
	    !hr_api_get_uint(obj, "blocks", 1, G_MAXUINT32 - 1, &count, error) ||
	    !hr_api_get_uint(obj, "budget_pages", 0, G_MAXINT64, &budget_pages, error) ||
	    !hr_api_get_uint(obj, "budget_ms", 0, G_MAXUINT32, &budget_ms, error) ||
	    !hr_api_get_uint(obj, "timeout_s", 1, 86400, &timeout_s, error) ||
	    !hr_api_get_gpas(obj, gpas, error) || !hr_api_get_ranges(obj, ranges, error) ||
	    !hr_api_get_bool(obj, "all", &p->all, error))
		return FALSE;
	if (kind == HR_REQUEST_RETURN && count > 0 && gpas->len > 0)
		return hr_request_invalid(error, "blocks: return takes blocks or gpas, not both");
	if (kind == HR_REQUEST_RETURN && count == 0 && gpas->len == 0 && !p->all)
		return hr_request_invalid(error,
					  "blocks: return needs blocks, gpas or \"all\":true");
	if (kind != HR_REQUEST_RETURN && count == 0 && gpas->len == 0)
		return hr_request_invalid(error, "blocks: missing; give the number of blocks%s",
					  kind == HR_REQUEST_EVACUATE ? " or a list of gpas" : "");
	p->count = count;
	p->gpas = (const guint64 *)gpas->data;
	p->nr_gpas = gpas->len;
	p->ranges = (const HrRange *)ranges->data;
	p->nr_ranges = ranges->len;
	p->budget_pages = budget_pages;
	p->budget_ms = budget_ms;
	p->timeout_s = timeout_s;
	return TRUE;
}

static const gchar *const reservation_fields[] = {"bytes",  "size",	 "node", "deadline_s",
						  "strict", "requester", NULL};

gboolean
hr_api_parse_reservation(JsonObject *obj, guint64 *bytes, gint *node, guint64 *deadline_s,
			 gboolean *strict, const gchar **requester, GError **error)
{
	JsonNode *n;
	guint64 v;

	if (!hr_api_check_members(obj, "a reservation", reservation_fields, error))
		return FALSE;
	*bytes = 0;
	if (!hr_api_get_uint(obj, "bytes", 1, G_MAXINT64, bytes, error))
		return FALSE;
	n = json_object_get_member(obj, "size");
	if (n != NULL) {
		if (*bytes != 0)
			return hr_request_invalid(error, "size: give bytes or size, not both");
		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING ||
		    !hr_parse_size(json_node_get_string(n), bytes)) {
			g_autofree gchar *text = hr_api_node_to_string(n);
			return hr_request_invalid(
			    error,
			    "size: %s is not a size such as \"1G\", \"512M\" (at most "
			    "9223372036854775807 bytes)",
			    text);
		}
	}
	if (*bytes == 0)
		return hr_request_invalid(
		    error, "bytes: missing; give {\"bytes\":N} or {\"size\":\"1G\"}");
	*node = -1;
	n = json_object_get_member(obj, "node");
	if (n != NULL && !JSON_NODE_HOLDS_NULL(n)) {
		v = 0;
		if (!hr_api_get_uint(obj, "node", 0, 1023, &v, error))
			return FALSE;
		*node = (gint)v;
	}
	*deadline_s = 0;
	if (!hr_api_get_uint(obj, "deadline_s", 0, 86400, deadline_s, error))
		return FALSE;
	*strict = FALSE;
	if (!hr_api_get_bool(obj, "strict", strict, error))
		return FALSE;
	*requester = NULL;
	n = json_object_get_member(obj, "requester");
	if (n != NULL) {
		if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING ||
		    !g_utf8_validate(json_node_get_string(n), -1, NULL) ||
		    strlen(json_node_get_string(n)) > 256)
			return hr_request_invalid(
			    error, "requester: must be a string of at most 256 bytes");
		*requester = json_node_get_string(n);
	}
	return TRUE;
}
