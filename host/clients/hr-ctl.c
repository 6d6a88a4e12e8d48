/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrCtl"

#include "hr-ctl.h"
#include "hr-client.h"

#include <libsmartcols.h>
#include <stdlib.h>
#include <string.h>

gboolean
hr_ctl_parse_size(const gchar *str, guint64 *bytes, GError **error)
{
	static const gchar units[] = "KMGTPE";
	const gchar *p = str != NULL ? str : "";
	const gchar *unit;
	guint64 v = 0;
	guint shift = 0;

	if (!g_ascii_isdigit(*p))
		goto bad;
	for (; g_ascii_isdigit(*p); p++) {
		guint d = *p - '0';
		if (v > (G_MAXUINT64 - d) / 10)
			goto too_large;
		v = v * 10 + d;
	}
	if (*p != '\0') {
		unit = strchr(units, g_ascii_toupper(*p));
		if (unit == NULL)
			goto bad;
		shift = 10 * (guint)(unit - units + 1);
		p++;
		if (*p != '\0' && g_ascii_strcasecmp(p, "iB") != 0 && g_ascii_strcasecmp(p, "B") != 0)
			goto bad;
	}
	if (v == 0) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "SIZE %s: give more than 0, for example 4G", str);
		return FALSE;
	}
	if (v > (guint64)HR_CTL_SIZE_MAX >> shift)
		goto too_large;
	*bytes = v << shift;
	return TRUE;
bad:
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "SIZE '%s' is not a size: a whole number with K, M, G, T, P or E, for "
		    "example 4G or 512M",
		    str);
	return FALSE;
too_large:
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "SIZE %s is more than %" G_GUINT64_FORMAT " bytes (8 EiB - 1), the most a "
		    "reservation can be",
		    str, (guint64)HR_CTL_SIZE_MAX);
	return FALSE;
}

gchar *
hr_ctl_format_pages(gint64 pages)
{
	g_autofree gchar *str = g_format_size_full((guint64)pages * 4096, G_FORMAT_SIZE_IEC_UNITS);
	g_autoptr(GString) out = g_string_new(str);
	/* GLib separates with U+00A0, which breaks column alignment */
	g_string_replace(out, "\u00a0", " ", 0);
	return g_string_free(g_steal_pointer(&out), FALSE);
}

static JsonObject *
hr_ctl_object_member(JsonObject *obj, const gchar *key);

/* ---------------------------------------------------------------------- */
/* Tables: libsmartcols sizes the columns and encodes what it cannot print */

typedef struct {
	const gchar *name;
	gboolean right;
	const gchar *help;
} HrCtlColumn;

typedef struct {
	const gchar *name; /* a list table hugeroomctl's --output names, or "" */
	const HrCtlColumn *columns;
	guint n_columns;
} HrCtlTableDef;

#define HR_CTL_TABLE(name, cols) {name, cols, G_N_ELEMENTS(cols)}

static const HrCtlColumn hr_ctl_guests_cols[] = {
    {"NAME", FALSE, "the VM's name, as its QEMU told it"},
    {"UUID", FALSE, "the VM's UUID"},
    {"PID", TRUE, "the QEMU process"},
    {"CONNECTED", FALSE, "whether its device is connected now"},
    {"SEQ", TRUE, "the sequence number of its latest status"},
    {"AGE", TRUE, "how old that status is"},
    {"MEM-FREE", TRUE, "the guest's free memory"},
    {"HELD", TRUE, "2 MiB blocks held from it"},
    {"REJECTED", TRUE, "messages from it the daemon refused"},
};
static const HrCtlColumn hr_ctl_reservations_cols[] = {
    {"ID", FALSE, "the reservation's id"},
    {"STATE", FALSE, "created, in-progress, ready, consumed, ...; * when partial"},
    {"SIZE", TRUE, "what was asked"},
    {"OBTAINED", TRUE, "what is free for it now"},
    {"NODE", TRUE, "the host node asked for, or any"},
    {"HELD", TRUE, "guest blocks held for it"},
    {"STRICT", FALSE, "all or nothing"},
    {"REQUESTER", FALSE, "who asked"},
    {"REASON", FALSE, "why it is in its state"},
};
static const HrCtlColumn hr_ctl_requests_cols[] = {
    {"ID", FALSE, "the request's id"},
    {"KIND", FALSE, "evacuate, capture, return, report"},
    {"STATE", FALSE, "queued, sent, running, done, partial, ..."},
    {"TARGET", TRUE, "blocks asked for, or all"},
    {"TRIED", TRUE, "blocks tried"},
    {"FREED", TRUE, "blocks freed (or returned)"},
    {"FAILED", TRUE, "blocks that failed, all reasons"},
    {"PAGES", TRUE, "4 KiB pages migrated"},
    {"ELAPSED", TRUE, "time spent in the guest"},
    {"CREATED", FALSE, "when it was asked"},
};
static const HrCtlColumn hr_ctl_host_cols[] = {
    {"NODE", FALSE, "the host NUMA node"},
    {"MANAGED", TRUE, "memory the kernel manages"},
    {"FREE", TRUE, "free memory"},
    {"FREE-2M", TRUE, "free memory in chunks of 2 MiB or more"},
    {"AVAILABLE", TRUE, "of it, above the high watermark"},
    {"PROMISED", TRUE, "of it, promised to reservations"},
    {"WMARK-HIGH", TRUE, "the high watermark"},
    {"FRAG", TRUE, "unusable free space index for 2 MiB: 0 all in 2 MiB chunks, 1 none"},
};
static const HrCtlColumn hr_ctl_node_blocks_cols[] = {
    {"NODE", FALSE, NULL},	{"FREE", TRUE, NULL},	  {"FREE-2M", TRUE, NULL},
    {"AVAILABLE", TRUE, NULL}, {"PROMISED", TRUE, NULL}, {"FRAG", TRUE, NULL},
};
static const HrCtlColumn hr_ctl_plan_steps_cols[] = {
    {"STEP", TRUE, NULL},     {"KIND", FALSE, NULL},   {"NODE", TRUE, NULL},
    {"DONOR", FALSE, NULL},   {"BLOCKS", TRUE, NULL},  {"THP", TRUE, NULL},
    {"SMALL", TRUE, NULL},    {"EXPECTED", TRUE, NULL}, {"MIGRATE", TRUE, NULL},
    {"TIME", TRUE, NULL},
};
static const HrCtlColumn hr_ctl_reservation_steps_cols[] = {
    {"STEP", TRUE, NULL},	{"KIND", FALSE, NULL},	   {"SOURCE", FALSE, NULL},
    {"STATE", FALSE, NULL},	{"EXPECTED", TRUE, NULL},  {"GAINED", TRUE, NULL},
    {"MIGRATED", TRUE, NULL}, {"SCANNED", TRUE, NULL},   {"TIME", TRUE, NULL},
    {"DETAIL", FALSE, NULL},
};

static const HrCtlTableDef hr_ctl_tables[] = {
    HR_CTL_TABLE("guests", hr_ctl_guests_cols),
    HR_CTL_TABLE("reservations", hr_ctl_reservations_cols),
    HR_CTL_TABLE("requests", hr_ctl_requests_cols),
    HR_CTL_TABLE("host", hr_ctl_host_cols),
};
static const HrCtlTableDef hr_ctl_node_blocks_table = HR_CTL_TABLE("", hr_ctl_node_blocks_cols);
static const HrCtlTableDef hr_ctl_plan_steps_table = HR_CTL_TABLE("", hr_ctl_plan_steps_cols);
static const HrCtlTableDef hr_ctl_reservation_steps_table =
    HR_CTL_TABLE("", hr_ctl_reservation_steps_cols);

/* --output, --noheadings, --raw: for the list tables only */
static HrCtlTableOptions hr_ctl_options;

void
hr_ctl_set_table_options(const HrCtlTableOptions *options)
{
	hr_ctl_options = *options;
}

static const HrCtlTableDef *
hr_ctl_table_def(const gchar *table)
{
	for (guint i = 0; i < G_N_ELEMENTS(hr_ctl_tables); i++) {
		if (g_strcmp0(hr_ctl_tables[i].name, table) == 0)
			return &hr_ctl_tables[i];
	}
	return NULL;
}

gboolean
hr_ctl_table_exists(const gchar *table)
{
	return hr_ctl_table_def(table) != NULL;
}

gchar *
hr_ctl_table_help(const gchar *table)
{
	const HrCtlTableDef *def = hr_ctl_table_def(table);
	g_autoptr(GString) str = g_string_new(NULL);

	for (guint i = 0; def != NULL && i < def->n_columns; i++)
		g_string_append_printf(str, "  %-12s %s\n", def->columns[i].name,
				       def->columns[i].help);
	return g_string_free(g_steal_pointer(&str), FALSE);
}

/* the column of @def called @name (any case), or -1 */
static gint
hr_ctl_column_index(const HrCtlTableDef *def, const gchar *name)
{
	for (guint i = 0; i < def->n_columns; i++) {
		if (g_ascii_strcasecmp(def->columns[i].name, name) == 0)
			return (gint)i;
	}
	return -1;
}

gboolean
hr_ctl_check_output(const gchar *table, gchar **columns, GError **error)
{
	const HrCtlTableDef *def = hr_ctl_table_def(table);

	if (def == NULL) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--output, --noheadings and --raw go with guests, reservations, "
			    "requests and host, not %s",
			    table);
		return FALSE;
	}
	for (guint i = 0; columns != NULL && columns[i] != NULL; i++) {
		if (hr_ctl_column_index(def, columns[i]) < 0) {
			g_autoptr(GString) names = g_string_new(NULL);
			for (guint c = 0; c < def->n_columns; c++)
				g_string_append_printf(names, "%s%s", c > 0 ? "," : "",
						       def->columns[c].name);
			g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
				    "--output %s: the %s table has no such column; it has %s",
				    columns[i], table, names->str);
			return FALSE;
		}
	}
	return TRUE;
}

typedef struct {
	const HrCtlTableDef *def;
	GPtrArray *rows; /* gchar *[n_columns] each */
} HrCtlTable;

static HrCtlTable *
hr_ctl_table_new(const HrCtlTableDef *def)
{
	HrCtlTable *t = g_new0(HrCtlTable, 1);
	t->def = def;
	t->rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
	return t;
}

static void
hr_ctl_table_free(HrCtlTable *t)
{
	g_ptr_array_unref(t->rows);
	g_free(t);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrCtlTable, hr_ctl_table_free)

/* a row of n_columns strings, each taken */
static void
hr_ctl_table_row(HrCtlTable *t, ...)
{
	gchar **row = g_new0(gchar *, t->def->n_columns + 1);
	va_list ap;

	va_start(ap, t);
	for (guint i = 0; i < t->def->n_columns; i++)
		row[i] = va_arg(ap, gchar *);
	va_end(ap);
	g_ptr_array_add(t->rows, row);
}

/* a list table takes hugeroomctl's --output, --noheadings, --raw */
static gboolean
hr_ctl_table_machine(const HrCtlTable *t)
{
	return t->def->name[0] != '\0' && (hr_ctl_options.noheadings || hr_ctl_options.raw);
}

static void
hr_ctl_table_print(HrCtlTable *t, GString *out)
{
	struct libscols_table *tb = scols_new_table();
	gboolean list = t->def->name[0] != '\0';
	g_autoptr(GArray) cols = g_array_new(FALSE, FALSE, sizeof(guint));
	char *data = NULL;

	if (list && hr_ctl_options.columns != NULL) {
		for (guint i = 0; hr_ctl_options.columns[i] != NULL; i++) {
			gint c = hr_ctl_column_index(t->def, hr_ctl_options.columns[i]);
			if (c >= 0)
				g_array_append_val(cols, c);
		}
	} else {
		for (guint i = 0; i < t->def->n_columns; i++)
			g_array_append_val(cols, i);
	}
	if (list) {
		scols_table_enable_raw(tb, hr_ctl_options.raw);
		scols_table_enable_noheadings(tb, hr_ctl_options.noheadings);
	}
	/* never cut to a terminal's width: no cell is lost */
	scols_table_set_termforce(tb, SCOLS_TERMFORCE_NEVER);
	for (guint i = 0; i < cols->len; i++) {
		const HrCtlColumn *c = &t->def->columns[g_array_index(cols, guint, i)];
		scols_table_new_column(tb, c->name, 0, c->right ? SCOLS_FL_RIGHT : 0);
	}
	for (guint r = 0; r < t->rows->len; r++) {
		gchar **row = g_ptr_array_index(t->rows, r);
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		for (guint i = 0; i < cols->len; i++)
			scols_line_set_data(ln, i, row[g_array_index(cols, guint, i)]);
	}
	if (scols_print_table_to_string(tb, &data) == 0 && data != NULL && data[0] != '\0') {
		g_string_append(out, data);
		g_string_append_c(out, '\n');
	}
	free(data);
	scols_unref_table(tb);
}

static gboolean
hr_ctl_bad_json(GError **error, const gchar *what)
{
	g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
		    "the daemon's answer has no %s (is hugeroomctl older than hugeroomd?)", what);
	return FALSE;
}

/* hr_ctl_member_str() escaped for a line of text: not for tables, which encode themselves */
static gchar *
hr_ctl_member_text(JsonObject *obj, const gchar *key);

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

static gchar *
hr_ctl_member_text(JsonObject *obj, const gchar *key)
{
	g_autofree gchar *raw = hr_ctl_member_str(obj, key);
	return hr_client_escape(raw);
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
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_tables[0]);
	JsonObject *obj;
	JsonArray *guests;

	if (!JSON_NODE_HOLDS_OBJECT(root))
		return hr_ctl_bad_json(error, "object");
	obj = json_node_get_object(root);
	if (!json_object_has_member(obj, "guests"))
		return hr_ctl_bad_json(error, "guests");
	guests = json_object_get_array_member(obj, "guests");
	if (json_array_get_length(guests) == 0) {
		if (!hr_ctl_table_machine(t))
			g_string_append(out, "no guests have connected to hugeroomd yet\n");
		return TRUE;
	}
	for (guint i = 0; i < json_array_get_length(guests); i++) {
		JsonObject *g = json_array_get_object_element(guests, i);
		gchar *name = hr_ctl_member_str(g, "name");
		if (name[0] == '\0') {
			g_free(name);
			name = g_strdup("(unnamed)");
		}
		hr_ctl_table_row(t, name, hr_ctl_member_str(g, "uuid"), hr_ctl_member_str(g, "pid"),
				 hr_ctl_member_str(g, "connected"), hr_ctl_member_str(g, "seq"),
				 hr_ctl_age(g), hr_ctl_pages_member(g, "mem_free_pages"),
				 hr_ctl_member_str(g, "held_blocks"),
				 hr_ctl_member_str(g, "rejected"));
	}
	hr_ctl_table_print(t, out);
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
	/* what the guest's QEMU said, shown escaped (hr_client_escape) */
	name = hr_ctl_member_text(g, "name");
	uuid = hr_ctl_member_text(g, "uuid");
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
	if (hr_ctl_object_member(g, "held") != NULL) {
		JsonObject *h = hr_ctl_object_member(g, "held");
		JsonObject *ret = hr_ctl_object_member(h, "returned");
		g_autofree gchar *freed = hr_ctl_member_str(h, "blocks_freed_total");
		g_autofree gchar *pages = hr_ctl_member_str(h, "pages_migrated_total");
		g_string_append_printf(out, "Freed:        %s blocks in all, %s pages migrated\n",
				       freed, pages);
		if (ret != NULL) {
			g_autofree gchar *host = hr_ctl_member_str(ret, "host");
			g_autofree gchar *pressure = hr_ctl_member_str(ret, "pressure");
			g_autofree gchar *unload = hr_ctl_member_str(ret, "unload");
			g_string_append_printf(out, "Returned:     %s to the host's request, %s under "
					       "guest pressure, %s on driver unload\n",
					       host, pressure, unload);
		}
	}
	if (json_object_has_member(g, "requests") &&
	    JSON_NODE_HOLDS_ARRAY(json_object_get_member(g, "requests"))) {
		JsonArray *reqs = json_object_get_array_member(g, "requests");
		guint n = json_array_get_length(reqs);
		/* the newest few; "hugeroomctl requests" lists them all */
		for (guint i = n > 5 ? n - 5 : 0; i < n; i++) {
			JsonObject *r = json_array_get_object_element(reqs, i);
			g_autofree gchar *id = hr_ctl_member_str(r, "request_id");
			g_autofree gchar *kind = hr_ctl_member_str(r, "kind");
			g_autofree gchar *state = hr_ctl_member_str(r, "state");
			g_autofree gchar *freed = hr_ctl_member_str(r, "blocks_freed");
			g_autofree gchar *tried = hr_ctl_member_str(r, "blocks_tried");
			g_string_append_printf(out, "%s%s %s %s, %s/%s blocks\n",
					       i == (n > 5 ? n - 5 : 0) ? "Requests:     "
									: "              ",
					       id, kind, state, freed, tried);
		}
	}
	if (counters != NULL) {
		g_autofree gchar *frames = hr_ctl_member_str(counters, "frames");
		g_autofree gchar *rejected = hr_ctl_member_str(counters, "rejected");
		g_autofree gchar *reason = hr_ctl_member_text(counters, "last_reject_reason");
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

/* ---------------------------------------------------------------------- */
/* Requests */

gchar *
hr_ctl_format_us(gint64 us)
{
	if (us < 0)
		return g_strdup("-");
	if (us < 1000)
		return g_strdup_printf("%" G_GINT64_FORMAT " us", us);
	if (us < 1000000)
		return g_strdup_printf("%.1f ms", us / 1000.0);
	return g_strdup_printf("%.1f s", us / 1000000.0);
}

static JsonObject *
hr_ctl_object_member(JsonObject *obj, const gchar *key)
{
	JsonNode *node = json_object_get_member(obj, key);
	if (node == NULL || !JSON_NODE_HOLDS_OBJECT(node))
		return NULL;
	return json_node_get_object(node);
}

/* "unmovable 2, busy 1", or "none" */
static gchar *
hr_ctl_failures(JsonObject *counts)
{
	JsonObject *failed = counts != NULL ? hr_ctl_object_member(counts, "failed") : NULL;
	g_autoptr(GString) str = g_string_new(NULL);
	g_autoptr(GList) keys = NULL;

	if (failed != NULL)
		keys = json_object_get_members(failed);
	for (GList *l = keys; l != NULL; l = l->next) {
		gint64 n = hr_ctl_member_int(failed, l->data);
		if (n <= 0)
			continue;
		g_string_append_printf(str, "%s%s %" G_GINT64_FORMAT, str->len > 0 ? ", " : "",
				       (const gchar *)l->data, n);
	}
	if (str->len == 0)
		g_string_append(str, "none");
	return g_string_free(g_steal_pointer(&str), FALSE);
}

static gint64
hr_ctl_failed_total(JsonObject *counts)
{
	JsonObject *failed = counts != NULL ? hr_ctl_object_member(counts, "failed") : NULL;
	g_autoptr(GList) keys = NULL;
	gint64 total = 0;

	if (failed != NULL)
		keys = json_object_get_members(failed);
	for (GList *l = keys; l != NULL; l = l->next)
		total += MAX(hr_ctl_member_int(failed, l->data), 0);
	return total;
}

/* the result when there is one, else the latest progress */
static JsonObject *
hr_ctl_request_counts(JsonObject *req)
{
	JsonObject *result = hr_ctl_object_member(req, "result");
	return result != NULL ? result : hr_ctl_object_member(req, "progress");
}

gboolean
hr_ctl_render_requests(JsonNode *root, GString *out, GError **error)
{
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_tables[2]);
	JsonObject *obj;
	JsonArray *reqs;

	if (!JSON_NODE_HOLDS_OBJECT(root))
		return hr_ctl_bad_json(error, "object");
	obj = json_node_get_object(root);
	if (!json_object_has_member(obj, "requests"))
		return hr_ctl_bad_json(error, "requests");
	reqs = json_object_get_array_member(obj, "requests");
	if (json_array_get_length(reqs) == 0) {
		if (!hr_ctl_table_machine(t))
			g_string_append(out, "no requests\n");
		return TRUE;
	}
	for (guint i = 0; i < json_array_get_length(reqs); i++) {
		JsonObject *r = json_array_get_object_element(reqs, i);
		JsonObject *c = hr_ctl_request_counts(r);
		gint64 target = hr_ctl_member_int(r, "target_blocks");
		hr_ctl_table_row(
		    t, hr_ctl_member_str(r, "request_id"), hr_ctl_member_str(r, "kind"),
		    hr_ctl_member_str(r, "state"),
		    target > 0 ? g_strdup_printf("%" G_GINT64_FORMAT, target) : g_strdup("all"),
		    g_strdup_printf("%" G_GINT64_FORMAT,
				    c != NULL ? hr_ctl_member_int(c, "blocks_tried") : 0),
		    g_strdup_printf("%" G_GINT64_FORMAT,
				    c != NULL ? hr_ctl_member_int(c, "blocks_freed") : 0),
		    g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_failed_total(c)),
		    g_strdup_printf("%" G_GINT64_FORMAT,
				    c != NULL ? hr_ctl_member_int(c, "pages_migrated") : 0),
		    hr_ctl_format_us(c != NULL ? hr_ctl_member_int(c, "elapsed_us") : -1),
		    hr_ctl_member_str(r, "created_at"));
	}
	hr_ctl_table_print(t, out);
	return TRUE;
}
static gchar *
hr_ctl_params(JsonObject *req)
{
	JsonObject *p = hr_ctl_object_member(req, "params");
	g_autoptr(GString) str = g_string_new(NULL);
	JsonNode *node;

	if (p == NULL)
		return g_strdup("-");
	if (json_object_has_member(p, "all"))
		g_string_append(str, "every held block");
	else
		g_string_append_printf(str, "%" G_GINT64_FORMAT " blocks",
				       hr_ctl_member_int(p, "blocks"));
	node = json_object_get_member(p, "gpas");
	if (node != NULL && JSON_NODE_HOLDS_ARRAY(node))
		g_string_append_printf(str, " from %u named",
				       json_array_get_length(json_node_get_array(node)));
	node = json_object_get_member(p, "ranges");
	if (node != NULL && JSON_NODE_HOLDS_ARRAY(node))
		g_string_append_printf(str, " within %u ranges",
				       json_array_get_length(json_node_get_array(node)));
	if (hr_ctl_member_int(p, "budget_pages") > 0)
		g_string_append_printf(str, ", budget %" G_GINT64_FORMAT " pages",
				       hr_ctl_member_int(p, "budget_pages"));
	if (hr_ctl_member_int(p, "budget_ms") > 0)
		g_string_append_printf(str, ", budget %" G_GINT64_FORMAT " ms",
				       hr_ctl_member_int(p, "budget_ms"));
	if (hr_ctl_member_int(p, "timeout_s") > 0)
		g_string_append_printf(str, ", timeout %" G_GINT64_FORMAT " s",
				       hr_ctl_member_int(p, "timeout_s"));
	return g_string_free(g_steal_pointer(&str), FALSE);
}

gboolean
hr_ctl_render_request(JsonNode *root, GString *out, GError **error)
{
	JsonObject *req;
	JsonObject *c;
	JsonNode *error_node;
	g_autofree gchar *id = NULL;
	g_autofree gchar *kind = NULL;
	g_autofree gchar *state = NULL;
	g_autofree gchar *params = NULL;
	g_autofree gchar *failures = NULL;
	g_autofree gchar *elapsed = NULL;
	g_autofree gchar *created = NULL;
	g_autofree gchar *finished = NULL;
	gint64 freed, pages;

	if (!JSON_NODE_HOLDS_OBJECT(root))
		return hr_ctl_bad_json(error, "object");
	req = json_node_get_object(root);
	if (!json_object_has_member(req, "request_id") || !json_object_has_member(req, "state"))
		return hr_ctl_bad_json(error, "request_id");
	c = hr_ctl_request_counts(req);
	id = hr_ctl_member_str(req, "request_id");
	kind = hr_ctl_member_str(req, "kind");
	state = hr_ctl_member_str(req, "state");
	params = hr_ctl_params(req);
	failures = hr_ctl_failures(c);
	elapsed = hr_ctl_format_us(c != NULL ? hr_ctl_member_int(c, "elapsed_us") : -1);
	created = hr_ctl_member_str(req, "created_at");
	finished = hr_ctl_member_str(req, "finished_at");
	freed = c != NULL ? hr_ctl_member_int(c, "blocks_freed") : 0;
	pages = c != NULL ? hr_ctl_member_int(c, "pages_migrated") : 0;

	g_string_append_printf(out, "Request:      %s (%s)\n", id, kind);
	g_string_append_printf(out, "State:        %s", state);
	if (hr_ctl_object_member(req, "result") != NULL) {
		g_autofree gchar *status =
		    hr_ctl_member_str(hr_ctl_object_member(req, "result"), "status");
		g_string_append_printf(out, " (guest status %s)", status);
	}
	g_string_append(out, "\n");
	error_node = json_object_get_member(req, "error");
	if (error_node != NULL && !JSON_NODE_HOLDS_NULL(error_node))
	{
		g_autofree gchar *why = hr_client_escape(json_node_get_string(error_node));
		g_string_append_printf(out, "Why:          %s\n", why);
	}
	g_string_append_printf(out, "Asked:        %s\n", params);
	g_string_append_printf(out, "Blocks:       %" G_GINT64_FORMAT " %s of %" G_GINT64_FORMAT
			       " tried\n",
			       freed, g_strcmp0(kind, "return") == 0 ? "returned" : "freed",
			       c != NULL ? hr_ctl_member_int(c, "blocks_tried") : 0);
	g_string_append_printf(out, "Failures:     %s\n", failures);
	if (freed > 0)
		g_string_append_printf(out, "Pages:        %" G_GINT64_FORMAT
				       " migrated, %.1f per freed block\n",
				       pages, (gdouble)pages / freed);
	else
		g_string_append_printf(out, "Pages:        %" G_GINT64_FORMAT " migrated\n", pages);
	g_string_append_printf(out, "Elapsed:      %s in the guest\n", elapsed);
	g_string_append_printf(out, "Created:      %s\nFinished:     %s\n", created, finished);
	return TRUE;
}

gchar *
hr_ctl_progress_line(JsonNode *root, guint width, gboolean bar)
{
	JsonObject *req = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	JsonObject *c = req != NULL ? hr_ctl_request_counts(req) : NULL;
	g_autoptr(GString) line = g_string_new(NULL);
	g_autofree gchar *state = NULL;
	g_autofree gchar *elapsed = NULL;
	g_autofree gchar *tail = NULL;
	gint64 target, freed, tried, failed, pages;

	if (req == NULL)
		return g_strdup("?");
	state = hr_ctl_member_str(req, "state");
	target = hr_ctl_member_int(req, "target_blocks");
	freed = c != NULL ? hr_ctl_member_int(c, "blocks_freed") : 0;
	tried = c != NULL ? hr_ctl_member_int(c, "blocks_tried") : 0;
	pages = c != NULL ? hr_ctl_member_int(c, "pages_migrated") : 0;
	failed = hr_ctl_failed_total(c);
	elapsed = hr_ctl_format_us(c != NULL ? hr_ctl_member_int(c, "elapsed_us") : -1);
	if (target > 0)
		tail = g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
				       " blocks, %" G_GINT64_FORMAT " tried, %" G_GINT64_FORMAT
				       " failed, %" G_GINT64_FORMAT " pages, %s, %s",
				       freed, target, tried, failed, pages, elapsed, state);
	else
		tail = g_strdup_printf("%" G_GINT64_FORMAT " blocks, %" G_GINT64_FORMAT
				       " tried, %" G_GINT64_FORMAT " failed, %" G_GINT64_FORMAT
				       " pages, %s, %s",
				       freed, tried, failed, pages, elapsed, state);
	if (bar && target > 0) {
		/* "[####......] " takes what the text leaves, 10 columns at least */
		gint room = (gint)width - (gint)strlen(tail) - 3;
		if (room >= 10) {
			gint filled = (gint)(MIN(freed, target) * room / target);
			g_string_append_c(line, '[');
			for (gint i = 0; i < room; i++)
				g_string_append_c(line, i < filled ? '#' : '.');
			g_string_append(line, "] ");
		}
	}
	g_string_append(line, tail);
	if (width > 0 && line->len > width)
		g_string_truncate(line, width);
	return g_string_free(g_steal_pointer(&line), FALSE);
}

/* ---------------------------------------------------------------------- */
/* Reservations and the host */

static const gchar *
hr_ctl_str(JsonObject *obj, const gchar *key, const gchar *def)
{
	JsonNode *node = json_object_get_member(obj, key);
	if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
	    json_node_get_value_type(node) != G_TYPE_STRING)
		return def;
	return json_node_get_string(node);
}

static gint64
hr_ctl_int(JsonObject *obj, const gchar *key)
{
	return json_object_get_int_member_with_default(obj, key, 0);
}

/* "2.0 GiB" from 2 MiB blocks */
static gchar *
hr_ctl_format_blocks(gint64 blocks)
{
	return hr_ctl_format_pages(blocks * 512);
}

gboolean
hr_ctl_render_reservations(JsonNode *root, GString *out, GError **error)
{
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_tables[1]);
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	JsonArray *list;
	gboolean partial = FALSE;

	if (obj == NULL || !json_object_has_member(obj, "reservations"))
		return hr_ctl_bad_json(error, "reservations");
	list = json_object_get_array_member(obj, "reservations");
	if (json_array_get_length(list) == 0) {
		if (!hr_ctl_table_machine(t))
			g_string_append(out, "no reservations\n");
		return TRUE;
	}
	for (guint i = 0; i < json_array_get_length(list); i++) {
		JsonObject *r = json_array_get_object_element(list, i);
		gboolean p = json_object_get_boolean_member_with_default(r, "partial", FALSE);
		partial |= p;
		hr_ctl_table_row(
		    t, g_strdup(hr_ctl_str(r, "id", "?")),
		    g_strdup_printf("%s%s", hr_ctl_str(r, "state", "?"), p ? "*" : ""),
		    hr_ctl_format_blocks(hr_ctl_int(r, "need_blocks")),
		    hr_ctl_format_blocks(hr_ctl_int(r, "obtained")),
		    hr_ctl_int(r, "node") < 0 ? g_strdup("any")
					     : g_strdup_printf("%" G_GINT64_FORMAT,
							       hr_ctl_int(r, "node")),
		    g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(r, "held_blocks")),
		    g_strdup(json_object_get_boolean_member_with_default(r, "strict", FALSE) ? "yes"
											    : "no"),
		    g_strdup(hr_ctl_str(r, "requester", "-")), g_strdup(hr_ctl_str(r, "reason", "")));
	}
	hr_ctl_table_print(t, out);
	if (partial && !hr_ctl_table_machine(t))
		g_string_append(out, "(* partial: less than asked)\n");
	return TRUE;
}
/* the final report: what each step gave and what it cost */
gboolean
hr_ctl_render_reservation(JsonNode *root, GString *out, GError **error)
{
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_reservation_steps_table);
	JsonObject *r = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	g_autofree gchar *id = NULL;
	g_autofree gchar *requester = NULL;
	g_autofree gchar *reason = NULL;
	g_autofree gchar *last_plan = NULL;
	JsonArray *steps;
	gint64 pages = 0, scanned = 0, ms = 0;
	g_autofree gchar *size = NULL;
	g_autofree gchar *got = NULL;

	if (r == NULL || !json_object_has_member(r, "steps"))
		return hr_ctl_bad_json(error, "reservation steps");
	size = hr_ctl_format_blocks(hr_ctl_int(r, "need_blocks"));
	got = hr_ctl_format_blocks(hr_ctl_int(r, "obtained"));
	id = hr_client_escape(hr_ctl_str(r, "id", "?"));
	requester = hr_client_escape(hr_ctl_str(r, "requester", "(anonymous)"));
	reason = hr_client_escape(hr_ctl_str(r, "reason", NULL));
	last_plan = hr_client_escape(hr_ctl_str(r, "last_plan", NULL));
	g_string_append_printf(out, "Reservation:  %s for %s, %s\n", id, requester,
			       json_object_get_boolean_member_with_default(r, "strict", FALSE)
				   ? "strict (all or nothing)"
				   : "best effort");
	g_string_append_printf(out, "State:        %s%s\n", hr_ctl_str(r, "state", "?"),
			       json_object_get_boolean_member_with_default(r, "partial", FALSE)
				   ? " (partial)"
				   : "");
	if (hr_ctl_str(r, "reason", NULL) != NULL)
		g_string_append_printf(out, "Reason:       %s\n", reason);
	g_string_append_printf(out, "Obtained:     %s of %s (%" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
			       " free 2 MiB blocks) on node %" G_GINT64_FORMAT "\n",
			       got, size, hr_ctl_int(r, "obtained"), hr_ctl_int(r, "need_blocks"),
			       hr_ctl_int(r, "planned_node"));
	if (hr_ctl_int(r, "pool_blocks") > 0)
		g_string_append_printf(out, "Pool:         %" G_GINT64_FORMAT " blocks held for it in node %"
				       G_GINT64_FORMAT "'s hugetlb pool (given back on consume)\n",
				       hr_ctl_int(r, "pool_blocks"), hr_ctl_int(r, "planned_node"));
	g_string_append_printf(out, "Holds:        %" G_GINT64_FORMAT " guest blocks held, %" G_GINT64_FORMAT
			       " given back\n",
			       hr_ctl_int(r, "held_blocks"), hr_ctl_int(r, "blocks_returned"));
	g_string_append_printf(out, "Created:      %s\n", hr_ctl_str(r, "created", "-"));
	if (hr_ctl_str(r, "deadline", NULL) != NULL)
		g_string_append_printf(out, "Deadline:     %s\n", hr_ctl_str(r, "deadline", ""));
	if (hr_ctl_str(r, "finished", NULL) != NULL)
		g_string_append_printf(out, "Finished:     %s\n", hr_ctl_str(r, "finished", ""));
	if (hr_ctl_str(r, "last_plan", NULL) != NULL)
		g_string_append_printf(out, "Last plan:    %s\n", last_plan);
	steps = json_object_get_array_member(r, "steps");
	for (guint i = 0; i < json_array_get_length(steps); i++) {
		JsonObject *s = json_array_get_object_element(steps, i);
		gchar *source;
		if (json_object_has_member(s, "guest"))
			source = g_strdup_printf("%s %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
						 hr_ctl_str(s, "guest", "?"),
						 hr_ctl_int(s, "blocks_held"),
						 hr_ctl_int(s, "blocks_asked"));
		else
			source = g_strdup_printf("host node %" G_GINT64_FORMAT, hr_ctl_int(s, "node"));
		hr_ctl_table_row(t, g_strdup_printf("%u", i + 1), g_strdup(hr_ctl_str(s, "kind", "?")),
				 source, g_strdup(hr_ctl_str(s, "state", "?")),
				 g_strdup_printf("%.1f", hr_ctl_int(s, "expect_milli") / 1000.0),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "gained")),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "pages_migrated")),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "pages_scanned")),
				 hr_ctl_format_us(hr_ctl_int(s, "elapsed_ms") * 1000),
				 g_strdup(hr_ctl_str(s, "detail", "")));
		pages += hr_ctl_int(s, "pages_migrated");
		scanned += hr_ctl_int(s, "pages_scanned");
		ms += hr_ctl_int(s, "elapsed_ms");
	}
	g_string_append(out, "\n");
	hr_ctl_table_print(t, out);
	g_string_append_printf(out, "Cost:         %" G_GINT64_FORMAT " pages migrated, %" G_GINT64_FORMAT
			       " pages scanned, %" G_GINT64_FORMAT " ms of step time "
			       "(blocks gained are measured on the node and overlap for steps "
			       "that ran together)\n",
			       pages, scanned, ms);
	return TRUE;
}

gchar *
hr_ctl_reservation_progress_line(JsonNode *root, guint width, gboolean bar)
{
	JsonObject *r = json_node_get_object(root);
	gint64 need = MAX(hr_ctl_int(r, "need_blocks"), 1);
	gint64 got = hr_ctl_int(r, "obtained");
	JsonArray *steps = json_object_get_array_member(r, "steps");
	guint running = 0;
	g_autoptr(GString) line = g_string_new(NULL);
	g_autofree gchar *id = hr_client_escape(hr_ctl_str(r, "id", "?"));

	for (guint i = 0; steps != NULL && i < json_array_get_length(steps); i++) {
		if (g_strcmp0(hr_ctl_str(json_array_get_object_element(steps, i), "state", ""),
			      "running") == 0)
			running++;
	}
	if (bar) {
		guint len = 20, fill = (guint)(len * MIN(got, need) / need);
		g_string_append_c(line, '[');
		for (guint i = 0; i < len; i++)
			g_string_append_c(line, i < fill ? '#' : '-');
		g_string_append(line, "] ");
	}
	g_string_append_printf(line, "%s %s: %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
			       " blocks, %u steps (%u running)",
			       id, hr_ctl_str(r, "state", "?"), got, need,
			       steps != NULL ? json_array_get_length(steps) : 0, running);
	if (line->len > width)
		g_string_truncate(line, width);
	return g_string_free(g_steal_pointer(&line), FALSE);
}

gboolean
hr_ctl_render_host(JsonNode *root, GString *out, GError **error)
{
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_tables[3]);
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	JsonArray *nodes;
	JsonObject *c, *thp;

	if (obj == NULL || !json_object_has_member(obj, "nodes"))
		return hr_ctl_bad_json(error, "nodes");
	nodes = json_object_get_array_member(obj, "nodes");
	for (guint i = 0; i < json_array_get_length(nodes); i++) {
		JsonObject *n = json_array_get_object_element(nodes, i);
		hr_ctl_table_row(t, g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(n, "node")),
				 hr_ctl_format_pages(hr_ctl_int(n, "managed")),
				 hr_ctl_format_pages(hr_ctl_int(n, "free_pages")),
				 hr_ctl_format_blocks(hr_ctl_int(n, "free_blocks")),
				 hr_ctl_format_blocks(hr_ctl_int(n, "available_blocks")),
				 hr_ctl_format_blocks(hr_ctl_int(n, "promised_blocks")),
				 hr_ctl_format_pages(hr_ctl_int(n, "wmark_high")),
				 g_strdup_printf("%.3f", hr_ctl_int(n, "unusable_index") / 1000.0));
	}
	hr_ctl_table_print(t, out);
	/* the table is all a script asked for */
	if (hr_ctl_table_machine(t) || hr_ctl_options.columns != NULL)
		return TRUE;
	g_string_append(out, "(FREE-2M: free memory in chunks of 2 MiB or more; AVAILABLE: of "
			     "it, above the high watermark;\n FRAG: unusable free space index "
			     "for 2 MiB, 0 = all free memory in 2 MiB chunks, 1 = none)\n");
	c = hr_ctl_object_member(obj, "compaction");
	if (c != NULL) {
		g_autoptr(GList) members = json_object_get_members(c);
		g_string_append(out, "\nCompaction and migration (since boot):\n");
		for (GList *l = members; l != NULL; l = l->next)
			g_string_append_printf(out, "  %-26s %" G_GINT64_FORMAT "\n",
					       (const gchar *)l->data, hr_ctl_int(c, l->data));
	}
	thp = hr_ctl_object_member(obj, "thp");
	if (thp != NULL)
		g_string_append_printf(out, "\nTHP: enabled %s, defrag %s, khugepaged defrag %s, "
				       "PMD size %" G_GINT64_FORMAT " KiB\n",
				       hr_ctl_str(thp, "enabled", "?"), hr_ctl_str(thp, "defrag", "?"),
				       hr_ctl_str(thp, "khugepaged_defrag", "-"),
				       hr_ctl_int(thp, "hpage_pmd_size") / 1024);
	return TRUE;
}
/* ---------------------------------------------------------------------- */
/* status and plan */

/* the nodes of GET /v1/host, counted in 2 MiB blocks */
static gboolean
hr_ctl_render_node_blocks(JsonObject *host, GString *out, GError **error)
{
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_node_blocks_table);
	JsonArray *nodes;

	if (host == NULL || !json_object_has_member(host, "nodes"))
		return hr_ctl_bad_json(error, "host nodes");
	nodes = json_object_get_array_member(host, "nodes");
	for (guint i = 0; i < json_array_get_length(nodes); i++) {
		JsonObject *n = json_array_get_object_element(nodes, i);
		hr_ctl_table_row(t, g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(n, "node")),
				 hr_ctl_format_pages(hr_ctl_int(n, "free_pages")),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(n, "free_blocks")),
				 g_strdup_printf("%" G_GINT64_FORMAT,
						 hr_ctl_int(n, "available_blocks")),
				 g_strdup_printf("%" G_GINT64_FORMAT,
						 hr_ctl_int(n, "promised_blocks")),
				 g_strdup_printf("%.3f", hr_ctl_int(n, "unusable_index") / 1000.0));
	}
	hr_ctl_table_print(t, out);
	g_string_append(out, "(FREE-2M, AVAILABLE, PROMISED in 2 MiB blocks; AVAILABLE: above the "
			     "high watermark)\n");
	return TRUE;
}
static gboolean
hr_ctl_has_array(JsonObject *obj, const gchar *key)
{
	JsonNode *node = json_object_get_member(obj, key);
	return node != NULL && JSON_NODE_HOLDS_ARRAY(node);
}

/* {"@key": the member @key of @obj}, the shape the list renderers take */
static JsonNode *
hr_ctl_wrap_member(JsonObject *obj, const gchar *key)
{
	JsonObject *wrapper = json_object_new();
	JsonNode *node = json_node_new(JSON_NODE_OBJECT);

	json_object_set_member(wrapper, key, json_node_copy(json_object_get_member(obj, key)));
	json_node_take_object(node, wrapper);
	return node;
}

gboolean
hr_ctl_render_status(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	g_autoptr(JsonNode) reservations = NULL;
	g_autoptr(JsonNode) guests = NULL;

	if (obj == NULL || !hr_ctl_has_array(obj, "reservations") ||
	    !hr_ctl_has_array(obj, "guests"))
		return hr_ctl_bad_json(error, "status");
	g_string_append(out, "Host:\n");
	if (!hr_ctl_render_node_blocks(hr_ctl_object_member(obj, "host"), out, error))
		return FALSE;
	g_string_append(out, "\nReservations:\n");
	reservations = hr_ctl_wrap_member(obj, "reservations");
	if (!hr_ctl_render_reservations(reservations, out, error))
		return FALSE;
	g_string_append(out, "\nGuests:\n");
	guests = hr_ctl_wrap_member(obj, "guests");
	return hr_ctl_render_guests(guests, out, error);
}

gboolean
hr_ctl_render_plan(JsonNode *root, GString *out, GError **error)
{
	JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
	JsonObject *plan = obj != NULL ? hr_ctl_object_member(obj, "plan") : NULL;
	g_autoptr(HrCtlTable) t = hr_ctl_table_new(&hr_ctl_plan_steps_table);
	JsonArray *steps;
	g_autofree gchar *need = NULL;
	g_autofree gchar *input = NULL;
	g_autofree gchar *decision = NULL;
	g_autofree gchar *where = NULL;
	gint64 node;

	if (plan == NULL || !json_object_has_member(plan, "steps"))
		return hr_ctl_bad_json(error, "plan steps");
	node = hr_ctl_int(plan, "node");
	need = hr_ctl_format_blocks(hr_ctl_int(plan, "need_blocks"));
	input = hr_ctl_format_us(hr_ctl_int(obj, "input_us"));
	decision = hr_ctl_format_us(hr_ctl_int(obj, "decision_us"));
	where = node < 0 ? g_strdup("no node (none has room)")
			 : g_strdup_printf("node %" G_GINT64_FORMAT, node);
	g_string_append_printf(out, "Plan:         %s (%" G_GINT64_FORMAT " blocks of 2 MiB) on %s: %s\n",
			       need, hr_ctl_int(plan, "need_blocks"), where,
			       json_object_get_boolean_member_with_default(plan, "complete", FALSE)
				   ? "complete"
				   : "cannot make all of it free now");
	g_string_append_printf(out, "Expected:     %.1f blocks, %" G_GINT64_FORMAT
			       " pages to migrate, about %" G_GINT64_FORMAT " ms\n",
			       hr_ctl_int(plan, "gain_milli") / 1000.0, hr_ctl_int(plan, "cost_pages"),
			       hr_ctl_int(plan, "est_ms"));
	if (hr_ctl_str(plan, "summary", "")[0] != '\0') {
		g_autofree gchar *summary = hr_client_escape(hr_ctl_str(plan, "summary", ""));
		g_string_append_printf(out, "Summary:      %s\n", summary);
	}
	g_string_append_printf(out, "Guests:       %" G_GINT64_FORMAT " considered, %" G_GINT64_FORMAT
			       " deferred (input %s, decision %s)\n",
			       hr_ctl_int(plan, "guests_considered"),
			       hr_ctl_int(plan, "guests_deferred"), input, decision);
	steps = json_object_get_array_member(plan, "steps");
	for (guint i = 0; i < json_array_get_length(steps); i++) {
		JsonObject *s = json_array_get_object_element(steps, i);
		gboolean donate = g_strcmp0(hr_ctl_str(s, "kind", ""), "donate") == 0;
		hr_ctl_table_row(t, g_strdup_printf("%u", i + 1), g_strdup(hr_ctl_str(s, "kind", "?")),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "node")),
				 g_strdup(donate ? hr_ctl_str(s, "guest", "(gone)") : "-"),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "blocks")),
				 donate ? hr_ctl_member_str(s, "thp") : g_strdup("-"),
				 donate ? hr_ctl_member_str(s, "small") : g_strdup("-"),
				 g_strdup_printf("%.1f", hr_ctl_int(s, "gain_milli") / 1000.0),
				 g_strdup_printf("%" G_GINT64_FORMAT, hr_ctl_int(s, "cost_pages")),
				 hr_ctl_format_us(hr_ctl_int(s, "est_ms") * 1000));
	}
	g_string_append(out, "\n");
	hr_ctl_table_print(t, out);
	g_string_append(out, "Nothing was done: 'hugeroomctl prepare' asks for it.\n");
	return TRUE;
}
