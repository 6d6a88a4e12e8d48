/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrCtl"

#include "hr-ctl.h"

gchar *
hr_ctl_format_pages(gint64 pages)
{
	g_autofree gchar *str = g_format_size_full((guint64)pages * 4096, G_FORMAT_SIZE_IEC_UNITS);
	g_autoptr(GString) out = g_string_new(str);
	/* GLib separates with U+00A0, which breaks column alignment */
	g_string_replace(out, "\u00a0", " ", 0);
	return g_string_free(g_steal_pointer(&out), FALSE);
}

static gboolean
hr_ctl_bad_json(GError **error, const gchar *what)
{
	g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
		    "the daemon's answer has no %s (is hugeroomctl older than hugeroomd?)", what);
	return FALSE;
}

/* "-" for null or missing members */
static gchar *
hr_ctl_member_str(JsonObject *obj, const gchar *key)
{
	JsonNode *node = json_object_get_member(obj, key);
	if (node == NULL || JSON_NODE_HOLDS_NULL(node))
		return g_strdup("-");
	if (json_node_get_value_type(node) == G_TYPE_STRING)
		return g_strdup(json_node_get_string(node));
	if (json_node_get_value_type(node) == G_TYPE_BOOLEAN)
		return g_strdup(json_node_get_boolean(node) ? "yes" : "no");
	if (JSON_NODE_HOLDS_VALUE(node))
		return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(node));
	return g_strdup("?");
}

static gint64
hr_ctl_member_int(JsonObject *obj, const gchar *key)
{
	JsonNode *node = json_object_get_member(obj, key);
	if (node == NULL || !JSON_NODE_HOLDS_VALUE(node))
		return -1;
	return json_node_get_int(node);
}

static gchar *
hr_ctl_age(JsonObject *obj)
{
	gint64 ms = hr_ctl_member_int(obj, "age_ms");
	if (ms < 0)
		return g_strdup("-");
	if (ms < 10000)
		return g_strdup_printf("%" G_GINT64_FORMAT "ms", ms);
	return g_strdup_printf("%" G_GINT64_FORMAT "s", ms / 1000);
}

static gchar *
hr_ctl_pages_member(JsonObject *obj, const gchar *key)
{
	gint64 pages = hr_ctl_member_int(obj, key);
	if (pages < 0)
		return g_strdup("-");
	return hr_ctl_format_pages(pages);
}

gboolean
hr_ctl_render_guests(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj;
	JsonArray *guests;

	if (!JSON_NODE_HOLDS_OBJECT(root))
		return hr_ctl_bad_json(error, "object");
	obj = json_node_get_object(root);
	if (!json_object_has_member(obj, "guests"))
		return hr_ctl_bad_json(error, "guests");
	guests = json_object_get_array_member(obj, "guests");
	if (json_array_get_length(guests) == 0) {
		g_string_append(out, "no guests have connected to hugeroomd yet\n");
		return TRUE;
	}
	g_string_append_printf(out, "%-20s %-36s %8s %-9s %8s %7s %10s %6s %8s\n", "NAME", "UUID",
			       "PID", "CONNECTED", "SEQ", "AGE", "MEM-FREE", "HELD", "REJECTED");
	for (guint i = 0; i < json_array_get_length(guests); i++) {
		JsonObject *g = json_array_get_object_element(guests, i);
		g_autofree gchar *name = hr_ctl_member_str(g, "name");
		g_autofree gchar *uuid = hr_ctl_member_str(g, "uuid");
		g_autofree gchar *pid = hr_ctl_member_str(g, "pid");
		g_autofree gchar *connected = hr_ctl_member_str(g, "connected");
		g_autofree gchar *seq = hr_ctl_member_str(g, "seq");
		g_autofree gchar *age = hr_ctl_age(g);
		g_autofree gchar *free = hr_ctl_pages_member(g, "mem_free_pages");
		g_autofree gchar *held = hr_ctl_member_str(g, "held_blocks");
		g_autofree gchar *rejected = hr_ctl_member_str(g, "rejected");
		g_string_append_printf(out, "%-20s %-36s %8s %-9s %8s %7s %10s %6s %8s\n",
				       name[0] != '\0' ? name : "(unnamed)", uuid, pid, connected,
				       seq, age, free, held, rejected);
	}
	return TRUE;
}

static void
hr_ctl_render_zones(JsonArray *zones, GString *out)
{
	g_string_append(out, "\nZones (free blocks per order):\n");
	g_string_append_printf(out, "%-4s %-8s %10s %10s", "NODE", "ZONE", "MANAGED", "FREE");
	for (guint o = 0; o <= 10; o++)
		g_string_append_printf(out, " %7u", o);
	g_string_append(out, "\n");
	for (guint z = 0; z < json_array_get_length(zones); z++) {
		JsonObject *zone = json_array_get_object_element(zones, z);
		JsonArray *nr_free = json_object_get_array_member(zone, "nr_free");
		g_autofree gchar *name = hr_ctl_member_str(zone, "zone");
		g_autofree gchar *managed = hr_ctl_pages_member(zone, "managed_pages");
		g_autofree gchar *free = hr_ctl_pages_member(zone, "free_pages");
		g_string_append_printf(out, "%-4" G_GINT64_FORMAT " %-8s %10s %10s",
				       hr_ctl_member_int(zone, "nid"), name, managed, free);
		for (guint o = 0; nr_free != NULL && o < json_array_get_length(nr_free); o++)
			g_string_append_printf(out, " %7" G_GINT64_FORMAT,
					       json_array_get_int_element(nr_free, o));
		g_string_append(out, "\n");
	}
	g_string_append_printf(out, "\n%-4s %-8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "NODE",
			       "ZONE", "PB=512", ">=448", ">=256", ">=64", ">=1", "0", "PCP", "HIGH",
			       "BATCH");
	for (guint z = 0; z < json_array_get_length(zones); z++) {
		JsonObject *zone = json_array_get_object_element(zones, z);
		JsonObject *hist = json_object_get_object_member(zone, "pageblock_histogram");
		JsonObject *pcp = json_object_get_object_member(zone, "pcp");
		const gchar *buckets[] = {"512", "448", "256", "64", "1", "0"};
		g_autofree gchar *name = hr_ctl_member_str(zone, "zone");
		g_string_append_printf(out, "%-4" G_GINT64_FORMAT " %-8s",
				       hr_ctl_member_int(zone, "nid"), name);
		for (guint h = 0; h < G_N_ELEMENTS(buckets); h++)
			g_string_append_printf(out, " %8" G_GINT64_FORMAT,
					       hist != NULL ? hr_ctl_member_int(hist, buckets[h]) : -1);
		g_string_append_printf(out, " %7" G_GINT64_FORMAT " %7" G_GINT64_FORMAT
				       " %7" G_GINT64_FORMAT "\n",
				       pcp != NULL ? hr_ctl_member_int(pcp, "count") : -1,
				       pcp != NULL ? hr_ctl_member_int(pcp, "high") : -1,
				       pcp != NULL ? hr_ctl_member_int(pcp, "batch") : -1);
	}
}

gboolean
hr_ctl_render_guest(JsonNode *root, GString *out, GError **error)
{
	JsonObject *g;
	JsonObject *status = NULL;
	JsonObject *device = NULL;
	JsonObject *counters = NULL;
	g_autofree gchar *name = NULL;
	g_autofree gchar *uuid = NULL;
	g_autofree gchar *pid = NULL;
	g_autofree gchar *connected = NULL;
	g_autofree gchar *since = NULL;
	g_autofree gchar *held = NULL;

	if (!JSON_NODE_HOLDS_OBJECT(root))
		return hr_ctl_bad_json(error, "object");
	g = json_node_get_object(root);
	if (!json_object_has_member(g, "uuid"))
		return hr_ctl_bad_json(error, "uuid");
	name = hr_ctl_member_str(g, "name");
	uuid = hr_ctl_member_str(g, "uuid");
	pid = hr_ctl_member_str(g, "pid");
	connected = hr_ctl_member_str(g, "connected");
	since = hr_ctl_member_str(g, "connected_at");
	held = hr_ctl_member_str(g, "held_blocks");
	if (json_object_has_member(g, "status") && !json_object_get_null_member(g, "status"))
		status = json_object_get_object_member(g, "status");
	if (json_object_has_member(g, "device") && !json_object_get_null_member(g, "device"))
		device = json_object_get_object_member(g, "device");
	if (json_object_has_member(g, "daemon_counters"))
		counters = json_object_get_object_member(g, "daemon_counters");

	g_string_append_printf(out, "Guest:        %s\nUUID:         %s\nQEMU pid:     %s\n", name,
			       uuid, pid);
	g_string_append_printf(out, "Connected:    %s (since %s)\nHeld blocks:  %s (2 MiB each)\n",
			       connected, since, held);
	if (device != NULL) {
		g_autofree gchar *driver_ok = hr_ctl_member_str(device, "driver_ok");
		g_autofree gchar *discard = hr_ctl_member_str(device, "discard_disabled");
		g_autofree gchar *relayed = hr_ctl_member_str(device, "msgs_relayed");
		g_autofree gchar *rejected = hr_ctl_member_str(device, "msgs_rejected");
		g_autofree gchar *dropped = hr_ctl_member_str(device, "cmds_dropped");
		g_string_append_printf(out, "Device:       driver_ok %s, discard disabled %s, "
				       "relayed %s, rejected %s, commands dropped %s\n",
				       driver_ok, discard, relayed, rejected, dropped);
	}
	if (counters != NULL) {
		g_autofree gchar *frames = hr_ctl_member_str(counters, "frames");
		g_autofree gchar *rejected = hr_ctl_member_str(counters, "rejected");
		g_autofree gchar *reason = hr_ctl_member_str(counters, "last_reject_reason");
		g_string_append_printf(out, "Daemon:       %s frames, %s rejected (last: %s)\n",
				       frames, rejected, reason);
	}
	if (status == NULL) {
		g_string_append(out, "Status:       none received yet\n");
		return TRUE;
	}
	{
		g_autofree gchar *seq = hr_ctl_member_str(status, "seq");
		g_autofree gchar *age = hr_ctl_age(g);
		g_autofree gchar *total = hr_ctl_pages_member(status, "mem_total_pages");
		g_autofree gchar *free = hr_ctl_pages_member(status, "mem_free_pages");
		g_autofree gchar *avail = hr_ctl_pages_member(status, "mem_available_pages");
		JsonArray *cands = json_object_get_array_member(status, "candidates");
		g_string_append_printf(out, "Status:       seq %s, %s old\n", seq, age);
		g_string_append_printf(out, "Memory:       total %s, free %s, available %s\n", total,
				       free, avail);
		g_string_append_printf(out, "Candidates:   %u\n",
				       cands != NULL ? json_array_get_length(cands) : 0);
	}
	if (json_object_has_member(status, "zones"))
		hr_ctl_render_zones(json_object_get_array_member(status, "zones"), out);
	if (json_object_has_member(status, "vmstat")) {
		JsonObject *vmstat = json_object_get_object_member(status, "vmstat");
		g_autoptr(GList) keys = json_object_get_members(vmstat);
		g_string_append(out, "\nCompaction and THP counters:\n");
		for (GList *l = keys; l != NULL; l = l->next)
			g_string_append_printf(out, "  %-32s %" G_GINT64_FORMAT "\n",
					       (const gchar *)l->data,
					       json_object_get_int_member(vmstat, l->data));
	}
	return TRUE;
}
