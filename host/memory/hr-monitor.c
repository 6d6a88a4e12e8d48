/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrMonitor"

#include "hr-monitor.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>

G_DEFINE_QUARK(hr - monitor - error - quark, hr_monitor_error)

static gboolean G_GNUC_PRINTF(4, 5)
    parse_error(GError **error, const gchar *name, guint line, const gchar *fmt, ...)
{
	va_list args;
	g_autofree gchar *msg = NULL;

	va_start(args, fmt);
	msg = g_strdup_vprintf(fmt, args);
	va_end(args);
	if (line > 0)
		g_set_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE, "%s:%u: %s", name,
			    line, msg);
	else
		g_set_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE, "%s: %s", name, msg);
	return FALSE;
}

/*
 * Split @text into lines. The kernel always ends its files with a newline,
 * so a missing one means the read was cut short.
 */
static gchar **
split_lines(const gchar *text, const gchar *name, guint *n_lines, GError **error)
{
	GPtrArray *lines;
	gsize len;

	if (text == NULL || text[0] == '\0') {
		parse_error(error, name, 0, "empty file");
		return NULL;
	}
	len = strlen(text);
	if (text[len - 1] != '\n') {
		guint line = 1;
		for (const gchar *p = text; *p != '\0'; p++)
			line += *p == '\n';
		parse_error(error, name, line, "truncated: last line has no newline");
		return NULL;
	}
	/*
	 * memchr, not g_strsplit(): under AddressSanitizer each strstr() of
	 * g_strsplit() checks the whole rest of the text, which makes it
	 * quadratic in the file's size (tests/sim/test-api-loop.py's zoneinfo)
	 */
	lines = g_ptr_array_new();
	for (const gchar *p = text, *end = text + len; p < end;) {
		const gchar *nl = memchr(p, '\n', end - p); /* the text ends with one */
		g_ptr_array_add(lines, g_strndup(p, nl - p));
		p = nl + 1;
	}
	*n_lines = lines->len;
	/* as g_strsplit() would: the empty string after the last \n, then NULL */
	g_ptr_array_add(lines, g_strdup(""));
	g_ptr_array_add(lines, NULL);
	return (gchar **)g_ptr_array_free(lines, FALSE);
}

/* Whitespace-separated words of @line; never NULL. */
static gchar **
split_words(const gchar *line)
{
	g_autoptr(GPtrArray) words = g_ptr_array_new_with_free_func(g_free);
	const gchar *p = line;

	for (;;) {
		const gchar *start;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		g_ptr_array_add(words, g_strndup(start, p - start));
	}
	g_ptr_array_add(words, NULL);
	return (gchar **)g_ptr_array_free(g_steal_pointer(&words), FALSE);
}

static gboolean
parse_u64(const gchar *str, guint64 *value)
{
	return g_ascii_string_to_unsigned(str, 10, 0, G_MAXUINT64, value, NULL);
}

/* "0," -> 0 */
static gboolean
parse_node_token(const gchar *str, guint *node)
{
	g_autofree gchar *copy = g_strdup(str);
	gsize len = strlen(copy);
	guint64 v;

	if (len < 2 || copy[len - 1] != ',')
		return FALSE;
	copy[len - 1] = '\0';
	if (!g_ascii_string_to_unsigned(copy, 10, 0, 1023, &v, NULL))
		return FALSE;
	*node = (guint)v;
	return TRUE;
}

static gboolean
copy_zone_name(gchar dst[16], const gchar *src, gboolean strip_comma)
{
	gsize len = strlen(src);

	if (strip_comma) {
		if (len < 2 || src[len - 1] != ',')
			return FALSE;
		len--;
	}
	if (len == 0 || len >= 16)
		return FALSE;
	for (gsize i = 0; i < len; i++) {
		if (!g_ascii_isalnum(src[i]))
			return FALSE;
	}
	memcpy(dst, src, len);
	dst[len] = '\0';
	return TRUE;
}

/* ---------------------------------------------------------------------- */
/* buddyinfo */

GPtrArray *
hr_buddyinfo_parse(const gchar *text, const gchar *name, GError **error)
{
	g_auto(GStrv) lines = NULL;
	g_autoptr(GPtrArray) zones = g_ptr_array_new_with_free_func(g_free);
	guint n_lines = 0;
	guint n_orders = 0;

	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;
	for (guint i = 0; i < n_lines; i++) {
		g_auto(GStrv) w = split_words(lines[i]);
		guint n = g_strv_length(w);
		g_autofree HrBuddyZone *zone = g_new0(HrBuddyZone, 1);

		if (n == 0) {
			parse_error(error, name, i + 1, "empty line");
			return NULL;
		}
		if (n < 5 || g_strcmp0(w[0], "Node") != 0 || g_strcmp0(w[2], "zone") != 0 ||
		    !parse_node_token(w[1], &zone->node) ||
		    !copy_zone_name(zone->zone, w[3], FALSE)) {
			parse_error(error, name, i + 1,
				    "expected 'Node N, zone NAME COUNT...', got '%s'", lines[i]);
			return NULL;
		}
		zone->n_orders = n - 4;
		if (zone->n_orders > HR_MONITOR_MAX_ORDERS) {
			parse_error(error, name, i + 1, "%u orders, at most %u are supported",
				    zone->n_orders, HR_MONITOR_MAX_ORDERS);
			return NULL;
		}
		if (n_orders != 0 && zone->n_orders != n_orders) {
			parse_error(error, name, i + 1,
				    "%u orders where the previous lines have %u (truncated?)",
				    zone->n_orders, n_orders);
			return NULL;
		}
		n_orders = zone->n_orders;
		for (guint o = 0; o < zone->n_orders; o++) {
			if (!parse_u64(w[4 + o], &zone->nr_free[o]) ||
			    zone->nr_free[o] > (G_MAXUINT64 >> 32)) {
				parse_error(error, name, i + 1,
					    "order %u count '%s' is not a number", o, w[4 + o]);
				return NULL;
			}
		}
		for (guint z = 0; z < zones->len; z++) {
			HrBuddyZone *other = g_ptr_array_index(zones, z);
			if (other->node == zone->node && g_strcmp0(other->zone, zone->zone) == 0) {
				parse_error(error, name, i + 1, "node %u zone %s listed twice",
					    zone->node, zone->zone);
				return NULL;
			}
		}
		g_ptr_array_add(zones, g_steal_pointer(&zone));
	}
	return g_steal_pointer(&zones);
}

/* ---------------------------------------------------------------------- */
/* pagetypeinfo */

void
hr_pagetypeinfo_free(HrPagetypeInfo *info)
{
	if (info == NULL)
		return;
	for (guint t = 0; t < info->n_types; t++)
		g_free(info->types[t]);
	g_ptr_array_unref(info->zones);
	g_free(info);
}

gint
hr_pagetypeinfo_type_index(const HrPagetypeInfo *info, const gchar *type)
{
	for (guint t = 0; t < info->n_types; t++) {
		if (g_strcmp0(info->types[t], type) == 0)
			return (gint)t;
	}
	return -1;
}

typedef struct {
	HrPagetypeZone zone;
	guint type_lines; /* bitmap of types seen in the free section */
	gboolean blocks_seen;
	guint line; /* first line, for messages */
} PagetypeZoneParse;

static PagetypeZoneParse *
pagetype_zone_lookup(GPtrArray *zones, guint node, const gchar *zone_name)
{
	for (guint z = 0; z < zones->len; z++) {
		PagetypeZoneParse *p = g_ptr_array_index(zones, z);
		if (p->zone.node == node && g_strcmp0(p->zone.zone, zone_name) == 0)
			return p;
	}
	return NULL;
}

static gboolean
pagetype_header_value(const gchar *line, const gchar *prefix, guint max, guint *value)
{
	guint64 v;
	g_autofree gchar *rest = NULL;

	if (!g_str_has_prefix(line, prefix))
		return FALSE;
	rest = g_strstrip(g_strdup(line + strlen(prefix)));
	if (!g_ascii_string_to_unsigned(rest, 10, 0, max, &v, NULL))
		return FALSE;
	*value = (guint)v;
	return TRUE;
}

HrPagetypeInfo *
hr_pagetypeinfo_parse(const gchar *text, const gchar *name, GError **error)
{
	enum { NONE, FREE, BLOCKS, MIXED } section = NONE;
	g_auto(GStrv) lines = NULL;
	g_autoptr(HrPagetypeInfo) info = g_new0(HrPagetypeInfo, 1);
	g_autoptr(GPtrArray) parse = g_ptr_array_new_with_free_func(g_free);
	gboolean have_order = FALSE, have_ppb = FALSE, have_blocks_header = FALSE;
	guint n_lines = 0;

	info->zones = g_ptr_array_new_with_free_func(g_free);
	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;

	for (guint i = 0; i < n_lines; i++) {
		const gchar *line = lines[i];
		g_auto(GStrv) w = split_words(line);
		guint n = g_strv_length(w);
		guint v;

		if (n == 0) {
			section = section == MIXED ? NONE : section;
			continue;
		}
		if (g_str_has_prefix(line, "Page block order:")) {
			if (!pagetype_header_value(line, "Page block order:", 20, &v) ||
			    (have_order && v != info->pageblock_order)) {
				parse_error(error, name, i + 1, "bad page block order line '%s'",
					    line);
				return NULL;
			}
			info->pageblock_order = v;
			have_order = TRUE;
			section = NONE;
			continue;
		}
		if (g_str_has_prefix(line, "Pages per block:")) {
			if (!pagetype_header_value(line, "Pages per block:", 1u << 20, &v) ||
			    (have_ppb && v != info->pages_per_block)) {
				parse_error(error, name, i + 1, "bad pages per block line '%s'",
					    line);
				return NULL;
			}
			info->pages_per_block = v;
			have_ppb = TRUE;
			section = NONE;
			continue;
		}
		if (g_str_has_prefix(line, "Free pages count per migrate type at order")) {
			guint orders = n - 8;
			if (n <= 8 || orders > HR_MONITOR_MAX_ORDERS ||
			    (info->n_orders != 0 && orders != info->n_orders)) {
				parse_error(error, name, i + 1, "bad order header '%s'", line);
				return NULL;
			}
			for (guint o = 0; o < orders; o++) {
				guint64 ov;
				if (!parse_u64(w[8 + o], &ov) || ov != o) {
					parse_error(error, name, i + 1,
						    "order header lists '%s' as order %u", w[8 + o],
						    o);
					return NULL;
				}
			}
			info->n_orders = orders;
			section = FREE;
			continue;
		}
		if (g_str_has_prefix(line, "Number of blocks type")) {
			guint types = n - 4;
			if (n <= 4 || types > HR_MONITOR_MAX_MIGRATETYPES) {
				parse_error(error, name, i + 1, "bad block type header '%s'", line);
				return NULL;
			}
			if (info->n_types == 0) {
				for (guint t = 0; t < types; t++)
					info->types[t] = g_strdup(w[4 + t]);
				info->n_types = types;
			} else {
				gboolean same = types == info->n_types;
				for (guint t = 0; same && t < types; t++)
					same = g_strcmp0(info->types[t], w[4 + t]) == 0;
				if (!same) {
					parse_error(
					    error, name, i + 1,
					    "block type header does not list the migratetypes of "
					    "the free counts");
					return NULL;
				}
			}
			have_blocks_header = TRUE;
			section = BLOCKS;
			continue;
		}
		if (g_str_has_prefix(line, "Number of mixed blocks")) {
			/* CONFIG_PAGE_OWNER only; nothing we use */
			section = MIXED;
			continue;
		}
		if (g_strcmp0(w[0], "Node") == 0 && section == MIXED)
			continue;
		if (g_strcmp0(w[0], "Node") == 0 && section == FREE) {
			guint node, t;
			gint ti;
			gchar zone_name[16];
			PagetypeZoneParse *p;

			if (n != 6 + info->n_orders || g_strcmp0(w[2], "zone") != 0 ||
			    g_strcmp0(w[4], "type") != 0 || !parse_node_token(w[1], &node) ||
			    !copy_zone_name(zone_name, w[3], TRUE)) {
				parse_error(error, name, i + 1,
					    "expected 'Node N, zone NAME, type TYPE' and %u "
					    "counts, got '%s'",
					    info->n_orders, line);
				return NULL;
			}
			ti = -1;
			for (t = 0; t < info->n_types; t++) {
				if (g_strcmp0(info->types[t], w[5]) == 0)
					ti = (gint)t;
			}
			if (ti < 0) {
				if (have_blocks_header ||
				    info->n_types == HR_MONITOR_MAX_MIGRATETYPES) {
					parse_error(error, name, i + 1, "unknown migratetype '%s'",
						    w[5]);
					return NULL;
				}
				ti = (gint)info->n_types;
				info->types[info->n_types++] = g_strdup(w[5]);
			}
			p = pagetype_zone_lookup(parse, node, zone_name);
			if (p == NULL) {
				p = g_new0(PagetypeZoneParse, 1);
				p->zone.node = node;
				memcpy(p->zone.zone, zone_name, sizeof(zone_name));
				p->line = i + 1;
				g_ptr_array_add(parse, p);
			}
			if (p->type_lines & (1u << ti)) {
				parse_error(error, name, i + 1,
					    "node %u zone %s type %s listed twice", node, zone_name,
					    w[5]);
				return NULL;
			}
			p->type_lines |= 1u << ti;
			for (guint o = 0; o < info->n_orders; o++) {
				const gchar *c = w[6 + o];
				guint64 cv;
				if (c[0] == '>') {
					/* "a count this high tells nothing more" (5.6+) */
					if (!parse_u64(c + 1, &cv) || cv != HR_PAGETYPE_COUNT_CAP) {
						parse_error(error, name, i + 1,
							    "bad capped count '%s'", c);
						return NULL;
					}
					p->zone.capped = TRUE;
				} else if (!parse_u64(c, &cv) || cv > (G_MAXUINT64 >> 32)) {
					parse_error(error, name, i + 1,
						    "order %u count '%s' is not a number", o, c);
					return NULL;
				}
				p->zone.nr_free[ti][o] = cv;
			}
			continue;
		}
		if (g_strcmp0(w[0], "Node") == 0 && section == BLOCKS) {
			guint node;
			gchar zone_name[16];
			PagetypeZoneParse *p;

			if (n != 4 + info->n_types || g_strcmp0(w[2], "zone") != 0 ||
			    !parse_node_token(w[1], &node) ||
			    !copy_zone_name(zone_name, w[3], FALSE)) {
				parse_error(
				    error, name, i + 1,
				    "expected 'Node N, zone NAME' and %u block counts, got '%s'",
				    info->n_types, line);
				return NULL;
			}
			p = pagetype_zone_lookup(parse, node, zone_name);
			if (p == NULL || p->blocks_seen) {
				parse_error(error, name, i + 1,
					    "block counts for node %u zone %s %s", node, zone_name,
					    p == NULL ? "without free counts" : "listed twice");
				return NULL;
			}
			for (guint t = 0; t < info->n_types; t++) {
				if (!parse_u64(w[4 + t], &p->zone.nr_blocks[t])) {
					parse_error(error, name, i + 1,
						    "block count '%s' is not a number", w[4 + t]);
					return NULL;
				}
			}
			p->blocks_seen = TRUE;
			continue;
		}
		parse_error(error, name, i + 1, "unexpected line '%s'", line);
		return NULL;
	}

	if (!have_order || !have_ppb || info->n_orders == 0 || !have_blocks_header) {
		parse_error(error, name, n_lines, "truncated: missing the %s",
			    !have_order || !have_ppb ? "page block header"
			    : info->n_orders == 0    ? "free count section"
						     : "block count section");
		return NULL;
	}
	if (info->pages_per_block != 1u << info->pageblock_order) {
		parse_error(error, name, 0, "%u pages per block is not 2^%u", info->pages_per_block,
			    info->pageblock_order);
		return NULL;
	}
	for (guint z = 0; z < parse->len; z++) {
		PagetypeZoneParse *p = g_ptr_array_index(parse, z);
		if (p->type_lines != (1u << info->n_types) - 1 || !p->blocks_seen) {
			parse_error(error, name, p->line, "truncated: node %u zone %s lacks %s",
				    p->zone.node, p->zone.zone,
				    p->blocks_seen ? "some migratetypes' free counts"
						   : "its block counts");
			return NULL;
		}
		g_ptr_array_add(info->zones, g_memdup2(&p->zone, sizeof(p->zone)));
	}
	return g_steal_pointer(&info);
}

/* ---------------------------------------------------------------------- */
/* zoneinfo */

enum {
	ZF_FREE = 1 << 0,
	ZF_MIN = 1 << 1,
	ZF_LOW = 1 << 2,
	ZF_HIGH = 1 << 3,
	ZF_SPANNED = 1 << 4,
	ZF_PRESENT = 1 << 5,
	ZF_MANAGED = 1 << 6,
	ZF_BOOST = 1 << 7,
	ZF_START_PFN = 1 << 8,
	ZF_REQUIRED = ZF_FREE | ZF_MIN | ZF_LOW | ZF_HIGH | ZF_SPANNED | ZF_PRESENT | ZF_MANAGED,
};

static gboolean
zoneinfo_is_identifier(const gchar *s)
{
	if (*s == '\0')
		return FALSE;
	for (; *s != '\0'; s++) {
		if (!g_ascii_isalnum(*s) && *s != '_')
			return FALSE;
	}
	return TRUE;
}

static gboolean
zoneinfo_finish_zone(HrZoneWatermarks *zone, guint fields, guint line, const gchar *name,
		     GError **error)
{
	static const struct {
		guint flag;
		const gchar *label;
	} required[] = {
	    {ZF_FREE, "pages free"}, {ZF_MIN, "min"},	      {ZF_LOW, "low"},
	    {ZF_HIGH, "high"},	     {ZF_SPANNED, "spanned"}, {ZF_PRESENT, "present"},
	    {ZF_MANAGED, "managed"},
	};

	for (guint r = 0; r < G_N_ELEMENTS(required); r++) {
		if (!(fields & required[r].flag)) {
			return parse_error(error, name, line,
					   "truncated: node %u zone %s has no '%s'", zone->node,
					   zone->zone, required[r].label);
		}
	}
	/* a populated zone always ends with its start_pfn */
	if (zone->present > 0 && !(fields & ZF_START_PFN)) {
		return parse_error(error, name, line, "truncated: node %u zone %s has no start_pfn",
				   zone->node, zone->zone);
	}
	if (zone->managed > zone->present || zone->present > zone->spanned) {
		return parse_error(
		    error, name, line,
		    "node %u zone %s: managed %" G_GUINT64_FORMAT " > present %" G_GUINT64_FORMAT
		    " or present > spanned %" G_GUINT64_FORMAT,
		    zone->node, zone->zone, zone->managed, zone->present, zone->spanned);
	}
	return TRUE;
}

GPtrArray *
hr_zoneinfo_parse(const gchar *text, const gchar *name, GError **error)
{
	g_auto(GStrv) lines = NULL;
	g_autoptr(GPtrArray) zones = g_ptr_array_new_with_free_func(g_free);
	HrZoneWatermarks *zone = NULL;
	guint fields = 0, zone_line = 0;
	gboolean in_pagesets = FALSE;
	guint n_lines = 0;

	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;

	for (guint i = 0; i < n_lines; i++) {
		const gchar *line = lines[i];
		g_auto(GStrv) w = split_words(line);
		guint n = g_strv_length(w);
		guint64 v;
		guint flag = 0;
		guint64 *field = NULL;

		if (n > 0 && g_strcmp0(w[0], "Node") == 0) {
			g_autofree HrZoneWatermarks *nz = g_new0(HrZoneWatermarks, 1);
			if (n != 4 || g_strcmp0(w[2], "zone") != 0 ||
			    !parse_node_token(w[1], &nz->node) ||
			    !copy_zone_name(nz->zone, w[3], FALSE)) {
				parse_error(error, name, i + 1,
					    "expected 'Node N, zone NAME', got '%s'", line);
				return NULL;
			}
			if (zone != NULL &&
			    !zoneinfo_finish_zone(zone, fields, zone_line, name, error))
				return NULL;
			for (guint z = 0; z < zones->len; z++) {
				HrZoneWatermarks *other = g_ptr_array_index(zones, z);
				if (other->node == nz->node &&
				    g_strcmp0(other->zone, nz->zone) == 0) {
					parse_error(error, name, i + 1,
						    "node %u zone %s listed twice", nz->node,
						    nz->zone);
					return NULL;
				}
			}
			zone = g_steal_pointer(&nz);
			g_ptr_array_add(zones, zone);
			fields = 0;
			zone_line = i + 1;
			in_pagesets = FALSE;
			continue;
		}
		if (zone == NULL) {
			parse_error(error, name, i + 1,
				    "expected a 'Node N, zone NAME' line first");
			return NULL;
		}
		if (n == 0) {
			parse_error(error, name, i + 1, "empty line");
			return NULL;
		}
		if (g_strcmp0(w[0], "pagesets") == 0 && n == 1) {
			in_pagesets = TRUE;
			continue;
		}
		if (g_strcmp0(w[0], "node_unreclaimable:") == 0 && n == 2) {
			in_pagesets = FALSE;
			continue;
		}
		if (g_strcmp0(w[0], "start_pfn:") == 0 && n == 2) {
			in_pagesets = FALSE;
			if (!parse_u64(w[1], &zone->start_pfn)) {
				parse_error(error, name, i + 1, "start_pfn '%s' is not a number",
					    w[1]);
				return NULL;
			}
			fields |= ZF_START_PFN;
			continue;
		}
		if (in_pagesets)
			continue; /* per-cpu count/high/batch, vm stats threshold */
		if (g_strcmp0(w[0], "per-node") == 0 || g_strcmp0(w[0], "protection:") == 0)
			continue;
		if (n == 2 && g_str_has_suffix(w[0], ":")) {
			/* "name: value" zone lines newer kernels add after start_pfn */
			g_autofree gchar *key = g_strndup(w[0], strlen(w[0]) - 1);
			if (!zoneinfo_is_identifier(key) || !parse_u64(w[1], &v)) {
				parse_error(error, name, i + 1, "unexpected line '%s'", line);
				return NULL;
			}
			continue;
		}
		if (g_strcmp0(w[0], "pages") == 0) {
			if (n != 3 || g_strcmp0(w[1], "free") != 0) {
				parse_error(error, name, i + 1, "expected 'pages free N', got '%s'",
					    line);
				return NULL;
			}
			if (!parse_u64(w[2], &v)) {
				parse_error(error, name, i + 1, "pages free '%s' is not a number",
					    w[2]);
				return NULL;
			}
			flag = ZF_FREE;
			field = &zone->free;
		} else {
			if (n != 2 || !zoneinfo_is_identifier(w[0])) {
				parse_error(error, name, i + 1, "unexpected line '%s'", line);
				return NULL;
			}
			if (!parse_u64(w[1], &v)) {
				parse_error(error, name, i + 1, "%s value '%s' is not a number",
					    w[0], w[1]);
				return NULL;
			}
			if (g_strcmp0(w[0], "min") == 0) {
				flag = ZF_MIN;
				field = &zone->min;
			} else if (g_strcmp0(w[0], "low") == 0) {
				flag = ZF_LOW;
				field = &zone->low;
			} else if (g_strcmp0(w[0], "high") == 0) {
				flag = ZF_HIGH;
				field = &zone->high;
			} else if (g_strcmp0(w[0], "boost") == 0) {
				flag = ZF_BOOST;
				field = &zone->boost;
			} else if (g_strcmp0(w[0], "spanned") == 0) {
				flag = ZF_SPANNED;
				field = &zone->spanned;
			} else if (g_strcmp0(w[0], "present") == 0) {
				flag = ZF_PRESENT;
				field = &zone->present;
			} else if (g_strcmp0(w[0], "managed") == 0) {
				flag = ZF_MANAGED;
				field = &zone->managed;
			}
		}
		if (field == NULL)
			continue; /* per-node and per-zone counters */
		if (fields & flag) {
			parse_error(error, name, i + 1, "node %u zone %s: '%s' twice", zone->node,
				    zone->zone, w[0]);
			return NULL;
		}
		fields |= flag;
		*field = v;
	}
	if (zone == NULL) {
		parse_error(error, name, 0, "no zones");
		return NULL;
	}
	if (!zoneinfo_finish_zone(zone, fields, zone_line, name, error))
		return NULL;
	return g_steal_pointer(&zones);
}

/* ---------------------------------------------------------------------- */
/* Counter tables: vmstat and meminfo map a name to a guint64 */

static GHashTable *
counters_new(void)
{
	return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

/* @text as the value of @key (taken) from line @line of @name; each key once */
static gboolean
counters_add(GHashTable *values, gchar *key, const gchar *text, const gchar *name, guint line,
	     GError **error)
{
	g_autofree gchar *k = key;
	guint64 v;

	if (!parse_u64(text, &v)) {
		parse_error(error, name, line, "%s value '%s' is not a number", k, text);
		return FALSE;
	}
	if (g_hash_table_contains(values, k)) {
		parse_error(error, name, line, "%s listed twice", k);
		return FALSE;
	}
	g_hash_table_insert(values, g_steal_pointer(&k), g_memdup2(&v, sizeof(v)));
	return TRUE;
}

static gboolean
counters_lookup(GHashTable *values, const gchar *key, guint64 *value)
{
	const guint64 *v = g_hash_table_lookup(values, key);
	*value = v != NULL ? *v : 0;
	return v != NULL;
}

/* ---------------------------------------------------------------------- */
/* vmstat */

struct _HrVmstat {
	GHashTable *values; /* gchar* -> guint64* */
};

void
hr_vmstat_free(HrVmstat *vmstat)
{
	if (vmstat == NULL)
		return;
	g_hash_table_unref(vmstat->values);
	g_free(vmstat);
}

HrVmstat *
hr_vmstat_parse(const gchar *text, const gchar *name, GError **error)
{
	g_auto(GStrv) lines = NULL;
	g_autoptr(HrVmstat) vmstat = g_new0(HrVmstat, 1);
	guint n_lines = 0;

	vmstat->values = counters_new();
	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;
	for (guint i = 0; i < n_lines; i++) {
		g_auto(GStrv) w = split_words(lines[i]);

		if (g_strv_length(w) != 2 || !zoneinfo_is_identifier(w[0])) {
			parse_error(error, name, i + 1, "expected 'name value', got '%s'",
				    lines[i]);
			return NULL;
		}
		if (!counters_add(vmstat->values, g_strdup(w[0]), w[1], name, i + 1, error))
			return NULL;
	}
	return g_steal_pointer(&vmstat);
}

gboolean
hr_vmstat_lookup(const HrVmstat *vmstat, const gchar *key, guint64 *value)
{
	return counters_lookup(vmstat->values, key, value);
}

guint64
hr_vmstat_get(const HrVmstat *vmstat, const gchar *key)
{
	guint64 v;
	hr_vmstat_lookup(vmstat, key, &v);
	return v;
}

guint
hr_vmstat_size(const HrVmstat *vmstat)
{
	return g_hash_table_size(vmstat->values);
}

/* ---------------------------------------------------------------------- */
/* meminfo */

struct _HrMeminfo {
	GHashTable *values; /* gchar* -> guint64* */
};

void
hr_meminfo_free(HrMeminfo *meminfo)
{
	if (meminfo == NULL)
		return;
	g_hash_table_unref(meminfo->values);
	g_free(meminfo);
}

HrMeminfo *
hr_meminfo_parse(const gchar *text, const gchar *name, GError **error)
{
	g_auto(GStrv) lines = NULL;
	g_autoptr(HrMeminfo) meminfo = g_new0(HrMeminfo, 1);
	gint node = -1;
	guint n_lines = 0;

	meminfo->values = counters_new();
	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;
	for (guint i = 0; i < n_lines; i++) {
		g_auto(GStrv) w = split_words(lines[i]);
		guint n = g_strv_length(w);
		guint k = 0;
		gsize klen;

		if (n >= 2 && g_strcmp0(w[0], "Node") == 0) {
			guint64 nv;
			if (!g_ascii_string_to_unsigned(w[1], 10, 0, 1023, &nv, NULL) ||
			    (node >= 0 && (guint64)node != nv)) {
				parse_error(error, name, i + 1, "bad node prefix in '%s'",
					    lines[i]);
				return NULL;
			}
			node = (gint)nv;
			k = 2;
		} else if (node >= 0) {
			parse_error(error, name, i + 1, "line without the 'Node %d' prefix", node);
			return NULL;
		}
		if (n - k != 2 && !(n - k == 3 && g_strcmp0(w[k + 2], "kB") == 0)) {
			parse_error(error, name, i + 1, "expected 'Key: value [kB]', got '%s'",
				    lines[i]);
			return NULL;
		}
		klen = strlen(w[k]);
		if (klen < 2 || w[k][klen - 1] != ':') {
			parse_error(error, name, i + 1, "key '%s' does not end with ':'", w[k]);
			return NULL;
		}
		if (!counters_add(meminfo->values, g_strndup(w[k], klen - 1), w[k + 1], name, i + 1,
				  error))
			return NULL;
	}
	return g_steal_pointer(&meminfo);
}

gboolean
hr_meminfo_lookup(const HrMeminfo *meminfo, const gchar *key, guint64 *value)
{
	return counters_lookup(meminfo->values, key, value);
}

guint64
hr_meminfo_get(const HrMeminfo *meminfo, const gchar *key)
{
	guint64 v;
	hr_meminfo_lookup(meminfo, key, &v);
	return v;
}

/* ---------------------------------------------------------------------- */
/* THP settings */

gchar *
hr_thp_parse_choice(const gchar *text, const gchar *name, GError **error)
{
	g_auto(GStrv) lines = NULL;
	g_auto(GStrv) w = NULL;
	gchar *selected = NULL;
	guint n_lines = 0;

	lines = split_lines(text, name, &n_lines, error);
	if (lines == NULL)
		return NULL;
	if (n_lines != 1) {
		parse_error(error, name, 2, "expected one line, got %u", n_lines);
		return NULL;
	}
	w = split_words(lines[0]);
	for (guint i = 0; w[i] != NULL; i++) {
		gsize len = strlen(w[i]);
		if (w[i][0] != '[')
			continue;
		if (selected != NULL || len < 3 || w[i][len - 1] != ']') {
			g_free(selected);
			parse_error(error, name, 1, "expected one '[choice]' in '%s'", lines[0]);
			return NULL;
		}
		selected = g_strndup(w[i] + 1, len - 2);
	}
	if (selected == NULL)
		parse_error(error, name, 1, "no '[choice]' in '%s'", lines[0]);
	return selected;
}

void
hr_thp_settings_clear(HrThpSettings *thp)
{
	g_clear_pointer(&thp->enabled, g_free);
	g_clear_pointer(&thp->defrag, g_free);
	g_clear_pointer(&thp->khugepaged_defrag, g_free);
	thp->hpage_pmd_size = 0;
}

/* ---------------------------------------------------------------------- */
/* Derivations */

guint64
hr_buddy_free_pages(const HrBuddyZone *zone)
{
	guint64 pages = 0;
	for (guint o = 0; o < zone->n_orders; o++)
		pages += zone->nr_free[o] << o;
	return pages;
}

guint64
hr_buddy_free_blocks(const HrBuddyZone *zone, guint order)
{
	guint64 blocks = 0;
	for (guint o = order; o < zone->n_orders; o++)
		blocks += zone->nr_free[o] << (o - order);
	return blocks;
}

guint
hr_unusable_index(guint64 free_pages, guint64 free_blocks, guint order)
{
	guint64 usable = free_blocks << order;

	if (free_pages == 0)
		return 1000;
	if (usable >= free_pages)
		return 0;
	return (guint)((free_pages - usable) * 1000 / free_pages);
}

void
hr_compact_counters_from_vmstat(const HrVmstat *vmstat, HrCompactCounters *c)
{
	c->compact_migrate_scanned = hr_vmstat_get(vmstat, "compact_migrate_scanned");
	c->compact_free_scanned = hr_vmstat_get(vmstat, "compact_free_scanned");
	c->compact_isolated = hr_vmstat_get(vmstat, "compact_isolated");
	c->compact_stall = hr_vmstat_get(vmstat, "compact_stall");
	c->compact_fail = hr_vmstat_get(vmstat, "compact_fail");
	c->compact_success = hr_vmstat_get(vmstat, "compact_success");
	c->compact_daemon_wake = hr_vmstat_get(vmstat, "compact_daemon_wake");
	c->pgmigrate_success = hr_vmstat_get(vmstat, "pgmigrate_success");
	c->pgmigrate_fail = hr_vmstat_get(vmstat, "pgmigrate_fail");
	c->thp_fault_alloc = hr_vmstat_get(vmstat, "thp_fault_alloc");
	c->thp_fault_fallback = hr_vmstat_get(vmstat, "thp_fault_fallback");
	c->thp_collapse_alloc = hr_vmstat_get(vmstat, "thp_collapse_alloc");
	c->thp_split_page = hr_vmstat_get(vmstat, "thp_split_page");
}

/* ---------------------------------------------------------------------- */
/* Reading a whole host */

/* NULL with *error unset when @optional and the file does not exist. */
static gchar *
read_text(const gchar *root, const gchar *rel, gboolean optional, GError **error)
{
	g_autofree gchar *path = g_build_filename(root, rel, NULL);
	g_autoptr(GError) error_local = NULL;
	gchar *text = NULL;
	gsize len = 0;

	if (!g_file_get_contents(path, &text, &len, &error_local)) {
		if (optional && g_error_matches(error_local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			return NULL;
		g_set_error(error, HR_MONITOR_ERROR,
			    g_error_matches(error_local, G_FILE_ERROR, G_FILE_ERROR_NOENT)
				? HR_MONITOR_ERROR_MISSING
				: HR_MONITOR_ERROR_IO,
			    "%s", error_local->message);
		return NULL;
	}
	if (strlen(text) != len) {
		g_set_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE,
			    "%s: contains a NUL byte at offset %zu", path, strlen(text));
		g_free(text);
		return NULL;
	}
	return text;
}

void
hr_host_state_free(HrHostState *state)
{
	if (state == NULL)
		return;
	g_free(state->root);
	g_clear_pointer(&state->buddy, g_ptr_array_unref);
	g_clear_pointer(&state->zones, g_ptr_array_unref);
	g_clear_pointer(&state->pagetypes, hr_pagetypeinfo_free);
	g_clear_pointer(&state->vmstat, hr_vmstat_free);
	g_clear_pointer(&state->meminfo, hr_meminfo_free);
	hr_thp_settings_clear(&state->thp);
	g_clear_pointer(&state->nodes, g_ptr_array_unref);
	g_free(state);
}

static void
hr_node_state_free(HrNodeState *node)
{
	hr_vmstat_free(node->vmstat);
	g_free(node);
}

const HrNodeState *
hr_host_state_get_node(const HrHostState *state, guint node)
{
	for (guint i = 0; i < state->nodes->len; i++) {
		const HrNodeState *n = g_ptr_array_index(state->nodes, i);
		if (n->node == node)
			return n;
	}
	return NULL;
}

static gint
node_cmp(gconstpointer a, gconstpointer b)
{
	const HrNodeState *na = *(const HrNodeState *const *)a;
	const HrNodeState *nb = *(const HrNodeState *const *)b;
	return na->node < nb->node ? -1 : na->node > nb->node;
}

static const HrZoneWatermarks *
find_zone(GPtrArray *zones, guint node, const gchar *zone)
{
	for (guint i = 0; i < zones->len; i++) {
		const HrZoneWatermarks *z = g_ptr_array_index(zones, i);
		if (z->node == node && g_strcmp0(z->zone, zone) == 0)
			return z;
	}
	return NULL;
}

static gboolean
read_node_files(HrHostState *state, HrNodeState *node, GError **error)
{
	g_autofree gchar *dir = g_strdup_printf("sys/devices/system/node/node%u", node->node);
	g_autofree gchar *meminfo_rel = g_build_filename(dir, "meminfo", NULL);
	g_autofree gchar *vmstat_rel = g_build_filename(dir, "vmstat", NULL);
	g_autofree gchar *text = NULL;
	g_autofree gchar *path = NULL;

	text = read_text(state->root, meminfo_rel, TRUE, error);
	if (text == NULL && error != NULL && *error != NULL)
		return FALSE;
	if (text != NULL) {
		g_autoptr(HrMeminfo) mi = NULL;
		path = g_build_filename(state->root, meminfo_rel, NULL);
		mi = hr_meminfo_parse(text, path, error);
		if (mi == NULL)
			return FALSE;
		node->has_meminfo = TRUE;
		node->mem_total_kb = hr_meminfo_get(mi, "MemTotal");
		node->mem_free_kb = hr_meminfo_get(mi, "MemFree");
		g_clear_pointer(&text, g_free);
		g_clear_pointer(&path, g_free);
	}
	text = read_text(state->root, vmstat_rel, TRUE, error);
	if (text == NULL && error != NULL && *error != NULL)
		return FALSE;
	if (text != NULL) {
		path = g_build_filename(state->root, vmstat_rel, NULL);
		node->vmstat = hr_vmstat_parse(text, path, error);
		if (node->vmstat == NULL)
			return FALSE;
	}
	return TRUE;
}

typedef gpointer (*HrParseFunc)(const gchar *text, const gchar *name, GError **error);

static gpointer
read_and_parse(const gchar *root, const gchar *rel, gboolean optional, HrParseFunc parse,
	       GError **error)
{
	g_autoptr(GError) error_local = NULL;
	g_autofree gchar *text = read_text(root, rel, optional, &error_local);
	g_autofree gchar *path = g_build_filename(root, rel, NULL);

	if (text == NULL) {
		if (error_local != NULL)
			g_propagate_error(error, g_steal_pointer(&error_local));
		return NULL;
	}
	return parse(text, path, error);
}

static HrHostState *
hr_monitor_read_host_full(const gchar *root, gboolean with_pagetypes, GError **error);

/* "12.34" -> 1234 */
static gboolean
parse_hundredths(const gchar *str, guint *value)
{
	gchar *end = NULL;
	guint64 whole = g_ascii_strtoull(str, &end, 10);
	guint frac = 0;

	if (end == str || whole > 100)
		return FALSE;
	if (*end == '.') {
		const gchar *d = end + 1;
		if (g_ascii_isdigit(d[0]))
			frac = (d[0] - '0') * 10 + (g_ascii_isdigit(d[1]) ? d[1] - '0' : 0);
	}
	*value = (guint)whole * 100 + frac;
	return TRUE;
}

gboolean
hr_psi_parse(const gchar *text, guint *some_avg10, guint *full_avg10)
{
	g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
	gboolean seen = FALSE;

	*some_avg10 = *full_avg10 = 0;
	for (guint i = 0; lines[i] != NULL; i++) {
		const gchar *avg = strstr(lines[i], "avg10=");
		guint *into = g_str_has_prefix(lines[i], "some ")   ? some_avg10
			      : g_str_has_prefix(lines[i], "full ") ? full_avg10
								    : NULL;
		if (into != NULL && avg != NULL && parse_hundredths(avg + 6, into))
			seen = TRUE;
	}
	return seen;
}

HrHostState *
hr_monitor_read_host(const gchar *root, GError **error)
{
	return hr_monitor_read_host_full(root, TRUE, error);
}

HrHostState *
hr_monitor_read_host_lite(const gchar *root, GError **error)
{
	return hr_monitor_read_host_full(root, FALSE, error);
}

static HrHostState *
hr_monitor_read_host_full(const gchar *root, gboolean with_pagetypes, GError **error)
{
	g_autoptr(HrHostState) state = g_new0(HrHostState, 1);
	g_autoptr(GError) error_local = NULL;
	g_autofree gchar *text = NULL;
	const gchar *thp_dir = "sys/kernel/mm/transparent_hugepage";

	state->root = g_strdup(root != NULL ? root : "/");
	state->nodes = g_ptr_array_new_with_free_func((GDestroyNotify)hr_node_state_free);

	state->buddy = read_and_parse(state->root, "proc/buddyinfo", FALSE,
				      (HrParseFunc)hr_buddyinfo_parse, error);
	if (state->buddy == NULL)
		return NULL;
	state->zones = read_and_parse(state->root, "proc/zoneinfo", FALSE,
				      (HrParseFunc)hr_zoneinfo_parse, error);
	if (state->zones == NULL)
		return NULL;
	state->vmstat =
	    read_and_parse(state->root, "proc/vmstat", FALSE, (HrParseFunc)hr_vmstat_parse, error);
	if (state->vmstat == NULL)
		return NULL;
	state->meminfo = read_and_parse(state->root, "proc/meminfo", FALSE,
					(HrParseFunc)hr_meminfo_parse, error);
	if (state->meminfo == NULL)
		return NULL;

	/* pagetypeinfo is 0400: an unprivileged monitor goes on without it */
	if (with_pagetypes)
		state->pagetypes = read_and_parse(state->root, "proc/pagetypeinfo", TRUE,
						  (HrParseFunc)hr_pagetypeinfo_parse, &error_local);
	if (state->pagetypes == NULL && error_local != NULL) {
		if (!g_error_matches(error_local, HR_MONITOR_ERROR, HR_MONITOR_ERROR_IO)) {
			g_propagate_error(error, g_steal_pointer(&error_local));
			return NULL;
		}
		g_debug("going on without pagetypeinfo: %s", error_local->message);
		g_clear_error(&error_local);
	}

	{
		g_autofree gchar *rel = g_build_filename(thp_dir, "enabled", NULL);
		state->thp.enabled = read_and_parse(state->root, rel, FALSE,
						    (HrParseFunc)hr_thp_parse_choice, error);
		if (state->thp.enabled == NULL) {
			g_prefix_error(error, "transparent huge pages: ");
			return NULL;
		}
	}
	{
		g_autofree gchar *rel = g_build_filename(thp_dir, "defrag", NULL);
		state->thp.defrag = read_and_parse(state->root, rel, FALSE,
						   (HrParseFunc)hr_thp_parse_choice, error);
		if (state->thp.defrag == NULL)
			return NULL;
	}
	{
		g_autofree gchar *rel = g_build_filename(thp_dir, "khugepaged", "defrag", NULL);
		text = read_text(state->root, rel, TRUE, error);
		if (text == NULL && error != NULL && *error != NULL)
			return NULL;
		if (text != NULL)
			state->thp.khugepaged_defrag = g_strstrip(g_steal_pointer(&text));
	}
	{
		g_autofree gchar *rel = g_build_filename(thp_dir, "hpage_pmd_size", NULL);
		text = read_text(state->root, rel, TRUE, error);
		if (text == NULL && error != NULL && *error != NULL)
			return NULL;
		if (text != NULL) {
			g_strstrip(text);
			if (!parse_u64(text, &state->thp.hpage_pmd_size) ||
			    state->thp.hpage_pmd_size != 4096u << HR_MONITOR_BLOCK_ORDER) {
				g_set_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE,
					    "%s/%s: '%s' is not the 2 MiB PMD size this daemon "
					    "supports",
					    state->root, rel, text);
				return NULL;
			}
			g_clear_pointer(&text, g_free);
		}
	}
	hr_compact_counters_from_vmstat(state->vmstat, &state->compact);
	text = read_text(state->root, "proc/pressure/memory", TRUE, NULL);
	if (text != NULL)
		state->has_psi = hr_psi_parse(text, &state->psi_some_avg10, &state->psi_full_avg10);
	g_clear_pointer(&text, g_free);

	for (guint i = 0; i < state->buddy->len; i++) {
		const HrBuddyZone *bz = g_ptr_array_index(state->buddy, i);
		const HrZoneWatermarks *zw = find_zone(state->zones, bz->node, bz->zone);
		HrNodeState *node = NULL;

		if (zw == NULL) {
			g_set_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_MISSING,
				    "%s/proc/zoneinfo has no zone %s on node %u, which buddyinfo "
				    "lists (files from different kernels?)",
				    state->root, bz->zone, bz->node);
			return NULL;
		}
		for (guint n = 0; n < state->nodes->len && node == NULL; n++) {
			HrNodeState *cand = g_ptr_array_index(state->nodes, n);
			if (cand->node == bz->node)
				node = cand;
		}
		if (node == NULL) {
			node = g_new0(HrNodeState, 1);
			node->node = bz->node;
			node->unusable_index = 1000;
			g_ptr_array_add(state->nodes, node);
		}
		if (g_strcmp0(bz->zone, "DMA") == 0)
			continue;
		node->free_pages += hr_buddy_free_pages(bz);
		node->free_blocks += hr_buddy_free_blocks(bz, HR_MONITOR_BLOCK_ORDER);
		node->wmark_min += zw->min;
		node->wmark_low += zw->low;
		node->wmark_high += zw->high + zw->boost;
		node->managed += zw->managed;
		node->present += zw->present;
		node->spanned += zw->spanned;
	}
	g_ptr_array_sort(state->nodes, node_cmp);
	for (guint n = 0; n < state->nodes->len; n++) {
		HrNodeState *node = g_ptr_array_index(state->nodes, n);
		node->unusable_index =
		    hr_unusable_index(node->free_pages, node->free_blocks, HR_MONITOR_BLOCK_ORDER);
		if (!read_node_files(state, node, error))
			return NULL;
	}
	return g_steal_pointer(&state);
}

/* ---------------------------------------------------------------------- */
/* Reading a whole host off the main loop */

typedef struct {
	HrHostReaderFunc func;
	gpointer user_data;
	GDestroyNotify destroy;
	gchar *root;
	guint generation;
} HrHostWaiter;

struct _HrHostReader {
	gint64 max_age_us;
	HrHostState *host; /* the newest snapshot, or NULL */
	guint host_generation;
	gint64 host_read_at; /* monotonic us */
	gint64 read_us;
	guint64 serial; /* of host: one more for each snapshot */
	GQueue waiters; /* HrHostWaiter, oldest first */
	gboolean reading;
	guint reading_generation;
	gboolean orphaned; /* freed while reading: the read's end frees it */
};

typedef struct {
	HrHostState *host;
	gint64 read_us;
} HrHostRead;

static void
hr_host_waiter_free(HrHostWaiter *w)
{
	if (w->destroy != NULL)
		w->destroy(w->user_data);
	g_free(w->root);
	g_free(w);
}

static void
hr_host_read_free(HrHostRead *read)
{
	hr_host_state_free(read->host);
	g_free(read);
}

static void
hr_host_read_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
	g_autoptr(GError) error = NULL;
	HrHostRead *read = g_new0(HrHostRead, 1);
	gint64 t0 = g_get_monotonic_time();
	(void)source;
	(void)cancellable;

	read->host = hr_monitor_read_host_lite(task_data, &error);
	read->read_us = g_get_monotonic_time() - t0;
	if (read->host == NULL) {
		hr_host_read_free(read);
		g_task_return_error(task, g_steal_pointer(&error));
		return;
	}
	g_task_return_pointer(task, read, (GDestroyNotify)hr_host_read_free);
}

static void
hr_host_reader_destroy(HrHostReader *reader)
{
	g_queue_clear_full(&reader->waiters, (GDestroyNotify)hr_host_waiter_free);
	hr_host_state_free(reader->host);
	g_free(reader);
}

static void
hr_host_reader_start(HrHostReader *reader, const gchar *root, guint generation);

static void
hr_host_read_done_cb(GObject *source, GAsyncResult *result, gpointer user_data)
{
	HrHostReader *reader = user_data;
	g_autoptr(GError) error = NULL;
	HrHostRead *read = g_task_propagate_pointer(G_TASK(result), &error);
	GQueue ready = G_QUEUE_INIT;
	HrHostWaiter *w;
	(void)source;

	reader->reading = FALSE;
	if (reader->orphaned) {
		g_clear_pointer(&read, hr_host_read_free);
		hr_host_reader_destroy(reader);
		return;
	}
	if (read != NULL) {
		hr_host_state_free(reader->host);
		reader->host = g_steal_pointer(&read->host);
		reader->host_generation = reader->reading_generation;
		reader->host_read_at = g_get_monotonic_time();
		reader->read_us = read->read_us;
		reader->serial++;
		hr_host_read_free(read);
	}
	/* a waiter for a newer config waits for a read of it; the others are done */
	for (GList *l = reader->waiters.head; l != NULL;) {
		GList *next = l->next;
		w = l->data;
		if (w->generation == reader->reading_generation) {
			g_queue_unlink(&reader->waiters, l);
			g_queue_push_tail_link(&ready, l);
		}
		l = next;
	}
	if (!g_queue_is_empty(&reader->waiters)) {
		w = g_queue_peek_tail(&reader->waiters);
		hr_host_reader_start(reader, w->root, w->generation);
	}
	/* a waiter's func may queue more: they wait for the next read */
	while ((w = g_queue_pop_head(&ready)) != NULL) {
		w->func(error == NULL ? reader->host : NULL, error, w->user_data);
		hr_host_waiter_free(w);
	}
}

static void
hr_host_reader_start(HrHostReader *reader, const gchar *root, guint generation)
{
	g_autoptr(GTask) task = g_task_new(NULL, NULL, hr_host_read_done_cb, reader);

	g_task_set_source_tag(task, hr_host_reader_start);
	g_task_set_task_data(task, g_strdup(root != NULL ? root : "/"), g_free);
	reader->reading = TRUE;
	reader->reading_generation = generation;
	g_task_run_in_thread(task, hr_host_read_thread);
}

HrHostReader *
hr_host_reader_new(gint64 max_age_us)
{
	HrHostReader *reader = g_new0(HrHostReader, 1);
	reader->max_age_us = max_age_us;
	return reader;
}

void
hr_host_reader_free(HrHostReader *reader)
{
	if (reader == NULL)
		return;
	/* a thread's read cannot be stopped halfway; it ends in a few ms */
	g_queue_clear_full(&reader->waiters, (GDestroyNotify)hr_host_waiter_free);
	if (reader->reading)
		reader->orphaned = TRUE;
	else
		hr_host_reader_destroy(reader);
}

const HrHostState *
hr_host_reader_peek(HrHostReader *reader, guint generation)
{
	if (reader->host == NULL || reader->host_generation != generation ||
	    g_get_monotonic_time() - reader->host_read_at > reader->max_age_us)
		return NULL;
	return reader->host;
}

void
hr_host_reader_get(HrHostReader *reader, const gchar *root, guint generation, HrHostReaderFunc func,
		   gpointer user_data, GDestroyNotify destroy)
{
	HrHostWaiter *w = g_new0(HrHostWaiter, 1);

	w->func = func;
	w->user_data = user_data;
	w->destroy = destroy;
	w->root = g_strdup(root);
	w->generation = generation;
	g_queue_push_tail(&reader->waiters, w);
	if (!reader->reading)
		hr_host_reader_start(reader, root, generation);
}

gint64
hr_host_reader_last_read_us(HrHostReader *reader)
{
	return reader->read_us;
}

guint64
hr_host_reader_get_serial(HrHostReader *reader)
{
	return reader->serial;
}
