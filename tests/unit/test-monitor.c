/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host memory monitor parsers, from /proc and /sys files captured on real
 * kernels (fixtures/proc/<kernel>/) and hand-made broken variants
 * (fixtures/proc/malformed/).
 */

#define G_LOG_DOMAIN "TestMonitor"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "hr-compact.h"
#include "hr-monitor.h"
#include "hr-snapshot.h"
#include "hr-thpmap.h"

static gchar *
fixture_path(const gchar *rel)
{
	return g_test_build_filename(G_TEST_DIST, "fixtures", "proc", rel, NULL);
}

static gchar *
load_text(const gchar *rel)
{
	g_autofree gchar *path = fixture_path(rel);
	g_autoptr(GError) error = NULL;
	gchar *text = NULL;
	g_assert_true(g_file_get_contents(path, &text, NULL, &error));
	g_assert_no_error(error);
	return text;
}

static HrHostState *
read_fixture_host(const gchar *kernel)
{
	g_autofree gchar *root = fixture_path(kernel);
	g_autoptr(GError) error = NULL;
	HrHostState *state = hr_monitor_read_host(root, &error);
	g_assert_no_error(error);
	g_assert_nonnull(state);
	return state;
}

static const HrZoneWatermarks *
find_zone(const HrHostState *state, guint node, const gchar *zone)
{
	for (guint i = 0; i < state->zones->len; i++) {
		const HrZoneWatermarks *z = g_ptr_array_index(state->zones, i);
		if (z->node == node && g_strcmp0(z->zone, zone) == 0)
			return z;
	}
	g_error("no zone %s on node %u", zone, node);
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* Real kernels */

static void
test_debian61(void)
{
	g_autoptr(HrHostState) state = read_fixture_host("debian-6.1");
	const HrNodeState *node;
	const HrZoneWatermarks *dma32;
	const HrBuddyZone *bz;

	g_assert_cmpuint(state->buddy->len, ==, 2);
	bz = g_ptr_array_index(state->buddy, 1);
	g_assert_cmpstr(bz->zone, ==, "DMA32");
	g_assert_cmpuint(bz->n_orders, ==, 11);
	g_assert_cmpuint(bz->nr_free[0], ==, 515);
	g_assert_cmpuint(bz->nr_free[10], ==, 198);

	/* DMA, DMA32, Normal, Movable, Device; unpopulated ones too */
	g_assert_cmpuint(state->zones->len, ==, 5);
	dma32 = find_zone(state, 0, "DMA32");
	g_assert_cmpuint(dma32->free, ==, 218547);
	g_assert_cmpuint(dma32->min, ==, 11086);
	g_assert_cmpuint(dma32->low, ==, 13857);
	g_assert_cmpuint(dma32->high, ==, 16628);
	g_assert_cmpuint(dma32->spanned, ==, 258016);
	g_assert_cmpuint(dma32->present, ==, 258016);
	g_assert_cmpuint(dma32->managed, ==, 242034);
	g_assert_cmpuint(dma32->start_pfn, ==, 4096);

	g_assert_cmpuint(state->nodes->len, ==, 1);
	node = hr_host_state_get_node(state, 0);
	g_assert_nonnull(node);
	g_assert_null(hr_host_state_get_node(state, 1));
	/* buddyinfo's DMA32 sums to exactly zoneinfo's "pages free" here */
	g_assert_cmpuint(node->free_pages, ==, 218547);
	g_assert_cmpuint(node->free_blocks, ==, 3 + 198 * 2);
	g_assert_cmpuint(node->unusable_index, ==, 65);
	g_assert_cmpuint(node->wmark_min, ==, 11086);
	g_assert_cmpuint(node->wmark_high, ==, 16628);
	g_assert_cmpuint(node->managed, ==, 242034);
	g_assert_true(node->has_meminfo);
	g_assert_nonnull(node->vmstat);

	g_assert_cmpuint(hr_meminfo_get(state->meminfo, "MemTotal"), ==, 983496);
	g_assert_cmpuint(hr_meminfo_get(state->meminfo, "MemFree"), ==, 889168);
	g_assert_cmpuint(hr_vmstat_size(state->vmstat), ==, 173);
	g_assert_cmpstr(state->thp.enabled, ==, "always");
	g_assert_cmpstr(state->thp.defrag, ==, "madvise");
	g_assert_cmpuint(state->thp.hpage_pmd_size, ==, 2 * 1024 * 1024);

	g_assert_nonnull(state->pagetypes);
	g_assert_cmpuint(state->pagetypes->pageblock_order, ==, 9);
	g_assert_cmpuint(state->pagetypes->pages_per_block, ==, 512);
	g_assert_cmpuint(state->pagetypes->n_orders, ==, 11);
	g_assert_cmpuint(state->pagetypes->n_types, ==, 5);
	g_assert_cmpint(hr_pagetypeinfo_type_index(state->pagetypes, "Movable"), ==, 1);
	g_assert_cmpint(hr_pagetypeinfo_type_index(state->pagetypes, "CMA"), ==, -1);
	{
		const HrPagetypeZone *pz = g_ptr_array_index(state->pagetypes->zones, 1);
		g_assert_cmpstr(pz->zone, ==, "DMA32");
		g_assert_cmpuint(pz->nr_blocks[0], ==, 48);
		g_assert_cmpuint(pz->nr_blocks[1], ==, 450);
		g_assert_cmpuint(pz->nr_blocks[2], ==, 6);
		g_assert_false(pz->capped);
	}
}

static void
test_debian612_two_nodes(void)
{
	g_autoptr(HrHostState) state = read_fixture_host("debian-6.12-2node");
	const HrNodeState *n0, *n1;

	g_assert_cmpuint(state->nodes->len, ==, 2);
	n0 = hr_host_state_get_node(state, 0);
	n1 = hr_host_state_get_node(state, 1);
	g_assert_nonnull(n0);
	g_assert_nonnull(n1);
	g_assert_cmpuint(n0->free_pages, ==, 104410);
	g_assert_cmpuint(n0->free_blocks, ==, 200);
	g_assert_cmpuint(n0->unusable_index, ==, 19);
	g_assert_cmpuint(n1->free_pages, ==, 98864);
	g_assert_cmpuint(n1->free_blocks, ==, 191);
	g_assert_cmpuint(n1->unusable_index, ==, 10);
	g_assert_cmpuint(n0->mem_total_kb, ==, 476404);
	g_assert_cmpuint(n1->mem_total_kb, ==, 515472);
	g_assert_cmpuint(hr_vmstat_get(n1->vmstat, "nr_free_pages"), ==, 98838);

	/* 5 zones per node, node 1 has no DMA, so buddyinfo lists 3 zones */
	g_assert_cmpuint(state->zones->len, ==, 10);
	g_assert_cmpuint(state->buddy->len, ==, 3);
	/* 6.12 has the "promo" watermark; it is parsed past, not mistaken */
	g_assert_cmpuint(find_zone(state, 0, "DMA")->high, ==, 284);
	g_assert_cmpuint(find_zone(state, 0, "Movable")->min, ==, 32);

	/* pagetypeinfo repeats its header per node */
	g_assert_cmpuint(state->pagetypes->zones->len, ==, 3);
	{
		const HrPagetypeZone *pz = g_ptr_array_index(state->pagetypes->zones, 2);
		g_assert_cmpuint(pz->node, ==, 1);
		g_assert_cmpuint(pz->nr_free[1][10], ==, 95);
		g_assert_cmpuint(pz->nr_blocks[1], ==, 241);
	}
}

static void
test_host_capture(void)
{
	g_autoptr(HrHostState) state = read_fixture_host("host-6.18.44");
	const HrNodeState *n0 = hr_host_state_get_node(state, 0);

	g_assert_nonnull(n0);
	g_assert_cmpuint(n0->free_pages, ==, 941910);
	g_assert_cmpuint(n0->free_blocks, ==, 1626);
	g_assert_cmpuint(n0->unusable_index, ==, 116);
	/* DMA32 + Normal; DMA is left out */
	g_assert_cmpuint(n0->wmark_min, ==, 3957 + 12918);
	g_assert_cmpuint(n0->wmark_low, ==, 4946 + 16147);
	g_assert_cmpuint(n0->wmark_high, ==, 5935 + 19376);
	/* the quirk of these machines: Normal managed far below present */
	g_assert_cmpuint(find_zone(state, 0, "Normal")->managed, ==, 2523136);
	g_assert_cmpuint(find_zone(state, 0, "Normal")->present, ==, 5505024);
	g_assert_cmpstr(state->thp.enabled, ==, "madvise");
	g_assert_cmpuint(state->compact.thp_fault_alloc, ==, 1930);
	g_assert_true(hr_vmstat_lookup(state->vmstat, "compact_isolated", &(guint64){0}));
}

static void
test_live_host(void)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrHostState) state = NULL;

	if (!g_file_test("/proc/buddyinfo", G_FILE_TEST_EXISTS)) {
		g_test_skip("no /proc/buddyinfo: not a Linux host");
		return;
	}
	state = hr_monitor_read_host("/", &error);
	g_assert_no_error(error);
	g_assert_cmpuint(state->nodes->len, >=, 1);
	for (guint i = 0; i < state->nodes->len; i++) {
		const HrNodeState *n = g_ptr_array_index(state->nodes, i);
		g_assert_cmpuint(n->free_blocks << HR_MONITOR_BLOCK_ORDER, <=, n->free_pages);
		g_assert_cmpuint(n->unusable_index, <=, 1000);
	}
}

/* ---------------------------------------------------------------------- */
/* Derivations */

static void
test_unusable_index(void)
{
	HrBuddyZone z = {.n_orders = 11};

	g_assert_cmpuint(hr_unusable_index(0, 0, 9), ==, 1000);
	g_assert_cmpuint(hr_unusable_index(512, 1, 9), ==, 0);
	g_assert_cmpuint(hr_unusable_index(1024, 1, 9), ==, 500);
	/* one order-10 chunk is two 2 MiB blocks */
	z.nr_free[10] = 1;
	z.nr_free[0] = 1024;
	g_assert_cmpuint(hr_buddy_free_pages(&z), ==, 2048);
	g_assert_cmpuint(hr_buddy_free_blocks(&z, 9), ==, 2);
	g_assert_cmpuint(hr_unusable_index(2048, 2, 9), ==, 500);
}

/* ---------------------------------------------------------------------- */
/* Broken input */

typedef gpointer (*ParseFunc)(const gchar *text, const gchar *name, GError **error);

static void
free_result(ParseFunc parse, gpointer result)
{
	if (result == NULL)
		return;
	if (parse == (ParseFunc)hr_buddyinfo_parse || parse == (ParseFunc)hr_zoneinfo_parse)
		g_ptr_array_unref(result);
	else if (parse == (ParseFunc)hr_pagetypeinfo_parse)
		hr_pagetypeinfo_free(result);
	else if (parse == (ParseFunc)hr_vmstat_parse)
		hr_vmstat_free(result);
	else if (parse == (ParseFunc)hr_meminfo_parse)
		hr_meminfo_free(result);
	else
		g_free(result);
}

static const struct {
	const gchar *file;
	ParseFunc parse;
	const gchar *message; /* expected "name:line: ..." */
} malformed[] = {
	{"malformed/empty", (ParseFunc)hr_buddyinfo_parse, "buddyinfo: empty file"},
	{"malformed/buddyinfo-truncated-midline", (ParseFunc)hr_buddyinfo_parse,
	 "buddyinfo:2: truncated: last line has no newline"},
	{"malformed/buddyinfo-short-line", (ParseFunc)hr_buddyinfo_parse,
	 "buddyinfo:3: 10 orders where the previous lines have 11 (truncated?)"},
	{"malformed/buddyinfo-bad-count", (ParseFunc)hr_buddyinfo_parse,
	 "buddyinfo:2: order 10 count '9x9' is not a number"},
	{"malformed/zoneinfo-truncated-pagesets", (ParseFunc)hr_zoneinfo_parse,
	 "zoneinfo:1: truncated: node 0 zone DMA has no start_pfn"},
	{"malformed/zoneinfo-no-managed", (ParseFunc)hr_zoneinfo_parse,
	 "zoneinfo:1: truncated: node 0 zone DMA has no 'managed'"},
	{"malformed/zoneinfo-bad-value", (ParseFunc)hr_zoneinfo_parse,
	 "zoneinfo:5: nr_active_anon value 'lots' is not a number"},
	{"malformed/pagetypeinfo-no-blocks", (ParseFunc)hr_pagetypeinfo_parse,
	 "pagetypeinfo:15: truncated: missing the block count section"},
	{"malformed/pagetypeinfo-bad-ppb", (ParseFunc)hr_pagetypeinfo_parse,
	 "pagetypeinfo: 500 pages per block is not 2^9"},
	{"malformed/vmstat-truncated-midline", (ParseFunc)hr_vmstat_parse,
	 "vmstat:51: truncated: last line has no newline"},
	{"malformed/vmstat-negative", (ParseFunc)hr_vmstat_parse,
	 "vmstat:3: nr_zone_active_anon value '-5' is not a number"},
	{"malformed/meminfo-no-colon", (ParseFunc)hr_meminfo_parse,
	 "meminfo:2: key 'MemFree' does not end with ':'"},
	{"malformed/thp-enabled-no-choice", (ParseFunc)hr_thp_parse_choice,
	 "enabled:1: no '[choice]' in 'always madvise never'"},
	{"debian-6.1/proc/zoneinfo", (ParseFunc)hr_buddyinfo_parse,
	 "buddyinfo:1: expected 'Node N, zone NAME COUNT...', got 'Node 0, zone      DMA'"},
	{"debian-6.1/proc/meminfo", (ParseFunc)hr_vmstat_parse,
	 "vmstat:1: expected 'name value', got 'MemTotal:         983496 kB'"},
};

static void
test_malformed(void)
{
	for (guint i = 0; i < G_N_ELEMENTS(malformed); i++) {
		g_autofree gchar *text = load_text(malformed[i].file);
		g_autoptr(GError) error = NULL;
		/* the name given is what messages carry: file name only here */
		g_autofree gchar *name = g_strndup(malformed[i].message,
						   strcspn(malformed[i].message, ":"));
		gpointer result = malformed[i].parse(text, name, &error);

		g_test_message("%s: %s", malformed[i].file, error ? error->message : "(parsed)");
		g_assert_null(result);
		g_assert_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE);
		g_assert_cmpstr(error->message, ==, malformed[i].message);
	}
}

static void
test_nul_byte(void)
{
	g_autofree gchar *root = g_dir_make_tmp("hr-monitor-XXXXXX", NULL);
	g_autofree gchar *src = fixture_path("debian-6.1");
	g_autofree gchar *bad = fixture_path("malformed/buddyinfo-nul");
	g_autofree gchar *cmd = g_strdup_printf("sh -c 'cp -r %s/. %s/ && cp %s %s/proc/buddyinfo'", src,
						root, bad, root);
	g_autofree gchar *rm = g_strdup_printf("rm -rf %s", root);
	g_autoptr(GError) error = NULL;
	g_autoptr(HrHostState) state = NULL;
	gint status = 0;

	g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, &error));
	g_assert_true(g_spawn_check_wait_status(status, NULL));
	state = hr_monitor_read_host(root, &error);
	g_assert_null(state);
	g_assert_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE);
	g_assert_nonnull(strstr(error->message, "proc/buddyinfo: contains a NUL byte"));
	g_spawn_command_line_sync(rm, NULL, NULL, NULL, NULL);
}

/* A broken file in a tree is reported with its path. */
static void
test_tree_errors(void)
{
	static const struct {
		const gchar *replace;
		const gchar *with;	/* NULL: delete */
		gint code;
		const gchar *needle;
	} cases[] = {
		{"proc/zoneinfo", "malformed/zoneinfo-no-managed", HR_MONITOR_ERROR_PARSE,
		 "proc/zoneinfo:1: truncated"},
		{"proc/vmstat", NULL, HR_MONITOR_ERROR_MISSING, "proc/vmstat"},
		{"sys/kernel/mm/transparent_hugepage/enabled", "malformed/thp-enabled-no-choice",
		 HR_MONITOR_ERROR_PARSE, "transparent huge pages: "},
		{"proc/pagetypeinfo", "malformed/pagetypeinfo-bad-ppb", HR_MONITOR_ERROR_PARSE,
		 "pages per block"},
		{"sys/devices/system/node/node0/meminfo", "malformed/meminfo-no-colon",
		 HR_MONITOR_ERROR_PARSE, "node0/meminfo:2:"},
	};
	g_autofree gchar *src = fixture_path("debian-6.1");

	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autofree gchar *root = g_dir_make_tmp("hr-monitor-XXXXXX", NULL);
		g_autofree gchar *target = g_build_filename(root, cases[i].replace, NULL);
		g_autofree gchar *cmd = NULL;
		g_autofree gchar *rm = g_strdup_printf("rm -rf %s", root);
		g_autoptr(GError) error = NULL;
		g_autoptr(HrHostState) state = NULL;
		gint status = 0;

		if (cases[i].with != NULL) {
			g_autofree gchar *with = fixture_path(cases[i].with);
			cmd = g_strdup_printf("sh -c 'cp -r %s/. %s/ && cp %s %s'", src, root, with,
					      target);
		} else {
			cmd = g_strdup_printf("sh -c 'cp -r %s/. %s/ && rm %s'", src, root, target);
		}
		g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
		g_assert_true(g_spawn_check_wait_status(status, NULL));
		state = hr_monitor_read_host(root, &error);
		g_test_message("%s: %s", cases[i].replace, error ? error->message : "(read)");
		g_assert_null(state);
		g_assert_error(error, HR_MONITOR_ERROR, cases[i].code);
		g_assert_nonnull(strstr(error->message, cases[i].needle));
		g_spawn_command_line_sync(rm, NULL, NULL, NULL, NULL);
	}
}

/*
 * Every prefix of every real file: a parser either succeeds or fails with
 * a parse error; a prefix cut inside a line always fails.
 */
static void
test_every_prefix(void)
{
	static const struct {
		const gchar *file;
		ParseFunc parse;
	} files[] = {
		{"debian-6.12-2node/proc/buddyinfo", (ParseFunc)hr_buddyinfo_parse},
		{"debian-6.12-2node/proc/pagetypeinfo", (ParseFunc)hr_pagetypeinfo_parse},
		{"debian-6.12-2node/proc/zoneinfo", (ParseFunc)hr_zoneinfo_parse},
		{"debian-6.1/proc/zoneinfo", (ParseFunc)hr_zoneinfo_parse},
		{"host-6.18.44/proc/pagetypeinfo", (ParseFunc)hr_pagetypeinfo_parse},
		{"host-6.18.44/proc/vmstat", (ParseFunc)hr_vmstat_parse},
		{"host-6.18.44/proc/meminfo", (ParseFunc)hr_meminfo_parse},
		{"debian-6.12-2node/sys/devices/system/node/node1/meminfo",
		 (ParseFunc)hr_meminfo_parse},
		{"host-6.18.44/sys/kernel/mm/transparent_hugepage/defrag",
		 (ParseFunc)hr_thp_parse_choice},
	};
	guint accepted = 0, rejected = 0;

	for (guint f = 0; f < G_N_ELEMENTS(files); f++) {
		g_autofree gchar *text = load_text(files[f].file);
		gsize len = strlen(text);

		for (gsize cut = 0; cut <= len; cut++) {
			g_autofree gchar *prefix = g_strndup(text, cut);
			g_autoptr(GError) error = NULL;
			gpointer result = files[f].parse(prefix, files[f].file, &error);

			if (result == NULL) {
				g_assert_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE);
				g_assert_true(g_str_has_prefix(error->message, files[f].file));
				rejected++;
			} else {
				g_assert_no_error(error);
				g_assert_true(cut > 0 && prefix[cut - 1] == '\n');
				accepted++;
			}
			free_result(files[f].parse, result);
		}
		/* the whole file parses */
		{
			g_autoptr(GError) error = NULL;
			gpointer result = files[f].parse(text, files[f].file, &error);
			g_assert_no_error(error);
			free_result(files[f].parse, result);
		}
	}
	g_test_message("%u prefixes accepted, %u rejected", accepted, rejected);
	g_assert_cmpuint(rejected, >, accepted);
}

static void
test_pagetypeinfo_capped(void)
{
	const gchar *text = "Page block order: 9\n"
			    "Pages per block:  512\n"
			    "\n"
			    "Free pages count per migrate type at order       0      1 \n"
			    "Node    0, zone   Normal, type    Unmovable      3 >100000 \n"
			    "Node    0, zone   Normal, type      Movable      4      5 \n"
			    "\n"
			    "Number of blocks type     Unmovable      Movable \n"
			    "Node 0, zone   Normal            7            8 \n";
	g_autoptr(GError) error = NULL;
	g_autoptr(HrPagetypeInfo) info = hr_pagetypeinfo_parse(text, "pagetypeinfo", &error);
	const HrPagetypeZone *pz;

	g_assert_no_error(error);
	pz = g_ptr_array_index(info->zones, 0);
	g_assert_true(pz->capped);
	g_assert_cmpuint(pz->nr_free[0][1], ==, HR_PAGETYPE_COUNT_CAP);
	g_assert_cmpuint(pz->nr_free[1][0], ==, 4);
	g_assert_cmpuint(pz->nr_blocks[1], ==, 8);
}

/* Zone lines of the "name: value" form a newer kernel may add are passed over. */
static void
test_zoneinfo_newer_lines(void)
{
	const gchar *text = "Node 0, zone   Normal\n"
			    "  pages free     100\n"
			    "        boost    0\n"
			    "        min      10\n"
			    "        low      12\n"
			    "        high     14\n"
			    "        spanned  1000\n"
			    "        present  1000\n"
			    "        managed  900\n"
			    "        protection: (0, 0, 0, 0)\n"
			    "  pagesets\n"
			    "    cpu: 0\n"
			    "              count: 3\n"
			    "              high:  99\n"
			    "  node_unreclaimable:  0\n"
			    "  start_pfn:           4096\n"
			    "  reserved_highatomic: 0\n"
			    "  free_highatomic:     0\n";
	g_autoptr(GError) error = NULL;
	g_autoptr(GPtrArray) zones = hr_zoneinfo_parse(text, "zoneinfo", &error);
	const HrZoneWatermarks *z;

	g_assert_no_error(error);
	z = g_ptr_array_index(zones, 0);
	/* the per-cpu "high:" is not the watermark */
	g_assert_cmpuint(z->high, ==, 14);
	g_assert_cmpuint(z->start_pfn, ==, 4096);
	g_assert_cmpuint(z->managed, ==, 900);
	g_clear_pointer(&zones, g_ptr_array_unref);

	zones = hr_zoneinfo_parse("Node 0, zone   Normal\n  pages free 1\n  odd: thing\n", "zoneinfo",
				  &error);
	g_assert_null(zones);
	g_assert_cmpstr(error->message, ==, "zoneinfo:3: unexpected line '  odd: thing'");
}

static void
test_choice(void)
{
	static const struct {
		const gchar *text;
		const gchar *expect; /* NULL: rejected */
	} cases[] = {
		{"always [madvise] never\n", "madvise"},
		{"[always] madvise never\n", "always"},
		{"always defer [defer+madvise] madvise never\n", "defer+madvise"},
		{"[always] [never]\n", NULL},
		{"always [] never\n", NULL},
		{"always [madvise\n", NULL},
		{"[always]\n[never]\n", NULL},
		{"[always]", NULL},
	};
	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GError) error = NULL;
		g_autofree gchar *got = hr_thp_parse_choice(cases[i].text, "enabled", &error);
		g_assert_cmpstr(got, ==, cases[i].expect);
		if (cases[i].expect == NULL)
			g_assert_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE);
	}
}

static void
test_meminfo_node_prefix(void)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrMeminfo) mi = NULL;

	mi = hr_meminfo_parse("Node 1 MemTotal: 10 kB\nNode 1 HugePages_Total:     0\n", "m", &error);
	g_assert_no_error(error);
	g_assert_cmpuint(hr_meminfo_get(mi, "MemTotal"), ==, 10);
	g_assert_true(hr_meminfo_lookup(mi, "HugePages_Total", &(guint64){0}));
	g_clear_pointer(&mi, hr_meminfo_free);

	mi = hr_meminfo_parse("Node 1 MemTotal: 10 kB\nNode 2 MemFree: 5 kB\n", "m", &error);
	g_assert_null(mi);
	g_assert_error(error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_PARSE);
	g_assert_cmpstr(error->message, ==, "m:2: bad node prefix in 'Node 2 MemFree: 5 kB'");
	g_clear_error(&error);

	mi = hr_meminfo_parse("MemTotal: 10 kB\nMemTotal: 10 kB\n", "m", &error);
	g_assert_null(mi);
	g_assert_cmpstr(error->message, ==, "m:2: MemTotal listed twice");
}

/* ---------------------------------------------------------------------- */
/* Host THP map */

#define MIB (G_GUINT64_CONSTANT(1024) * 1024)

typedef struct {
	GMainLoop *loop;
	HrThpMap *map;
	GError *error;
} ScanWait;

static void
scan_done(GObject *source, GAsyncResult *res, gpointer user_data)
{
	ScanWait *sw = user_data;

	(void)source;
	sw->map = hr_thpmap_scan_finish(res, &sw->error);
	g_main_loop_quit(sw->loop);
}
#define FIXTURE_HVA G_GUINT64_CONSTANT(0x40000000)
#define KPF(bit) (G_GUINT64_CONSTANT(1) << (bit))

static void
put_u64(int fd, guint64 index, guint64 value)
{
	g_assert_cmpint(pwrite(fd, &value, sizeof(value), (off_t)(index * 8)), ==, 8);
}

/* pagemap entry for @hva and kpageflags entry for @pfn */
static void
put_page(int pm, int kpf, guint64 hva, guint64 pfn, guint64 pm_bits, guint64 flags)
{
	put_u64(pm, hva / 4096, pm_bits | pfn);
	if (pfn != 0)
		put_u64(kpf, pfn, flags);
}

/* @n resident 4 KiB pages from @hva on, PFNs from @pfn on */
static void
put_pages(int pm, int kpf, guint64 hva, guint64 pfn, guint n)
{
	for (guint i = 0; i < n; i++)
		put_page(pm, kpf, hva + i * 4096, pfn + i, HR_PM_PRESENT, 0x20 /* KPF_LRU */);
}

typedef struct {
	gchar *dir;
	gchar *pagemap;
	gchar *kpageflags;
} ThpFixture;

static void
thp_fixture_setup(ThpFixture *fx, gconstpointer data)
{
	int pm, kpf;
	guint64 b = FIXTURE_HVA;

	(void)data;
	fx->dir = g_dir_make_tmp("hr-thpmap-XXXXXX", NULL);
	fx->pagemap = g_build_filename(fx->dir, "pagemap", NULL);
	fx->kpageflags = g_build_filename(fx->dir, "kpageflags", NULL);
	pm = g_open(fx->pagemap, O_RDWR | O_CREAT, 0600);
	kpf = g_open(fx->kpageflags, O_RDWR | O_CREAT, 0600);
	g_assert_cmpint(pm, >=, 0);
	g_assert_cmpint(kpf, >=, 0);

	/* 0: a PMD-sized THP: head and last page of one folio */
	put_pages(pm, kpf, b, 0x10000, 512);
	put_page(pm, kpf, b, 0x10000, HR_PM_PRESENT, KPF(HR_KPF_THP) | KPF(HR_KPF_COMPOUND_HEAD));
	put_page(pm, kpf, b + 4096, 0x10001, HR_PM_PRESENT,
		 KPF(HR_KPF_THP) | KPF(HR_KPF_COMPOUND_TAIL));
	put_page(pm, kpf, b + 2 * MIB - 4096, 0x101ff, HR_PM_PRESENT,
		 KPF(HR_KPF_THP) | KPF(HR_KPF_COMPOUND_TAIL));
	b += 2 * MIB;
	/* 1: a 64 KiB mTHP at the start, the rest 4 KiB pages; the last page is elsewhere */
	put_pages(pm, kpf, b, 0x30000, 512);
	put_page(pm, kpf, b, 0x20000, HR_PM_PRESENT, KPF(HR_KPF_THP) | KPF(HR_KPF_COMPOUND_HEAD));
	b += 2 * MIB;
	/* 2: 4 KiB pages, all but 64 resident: still worth a discard */
	put_pages(pm, kpf, b, 0x40000, HR_THPMAP_SMALL_MIN_PAGES);
	b += 2 * MIB;
	/* 3: never touched */
	put_page(pm, kpf, b, 0, 0, 0);
	b += 2 * MIB;
	/* 4: swapped out, and a few 4 KiB pages resident: a discard frees little */
	put_pages(pm, kpf, b, 0x48000, HR_THPMAP_SMALL_MIN_PAGES - 1);
	put_page(pm, kpf, b, 0, HR_PM_SWAPPED | 0x1234, 0);
	b += 2 * MIB;
	/* 5: hugetlbfs */
	put_page(pm, kpf, b, 0x50000, HR_PM_PRESENT, KPF(HR_KPF_HUGE) | KPF(HR_KPF_COMPOUND_HEAD));
	b += 2 * MIB;
	/* 6: THP head whose last PFN is contiguous but not a THP tail */
	put_pages(pm, kpf, b, 0x60000, 512);
	put_page(pm, kpf, b, 0x60000, HR_PM_PRESENT, KPF(HR_KPF_THP) | KPF(HR_KPF_COMPOUND_HEAD));
	b += 2 * MIB;
	/* 7: a present page whose PFN is hidden (reader without CAP_SYS_ADMIN) */
	put_page(pm, kpf, b, 0, HR_PM_PRESENT, 0);
	close(pm);
	close(kpf);
}

static void
thp_fixture_teardown(ThpFixture *fx, gconstpointer data)
{
	(void)data;
	g_unlink(fx->pagemap);
	g_unlink(fx->kpageflags);
	g_rmdir(fx->dir);
	g_free(fx->pagemap);
	g_free(fx->kpageflags);
	g_free(fx->dir);
}

static void
test_thpmap_fixture(ThpFixture *fx, gconstpointer data)
{
	/* gpa starts 1 MiB below a block boundary, like the PC's low RAM */
	HrRamRange range = {.gpa = 1 * MIB, .size = 16 * MIB, .hva = FIXTURE_HVA - 1 * MIB};
	static const HrThpBlock expect[] = {
		HR_THP_BLOCK_THP,    HR_THP_BLOCK_SMALL,   HR_THP_BLOCK_SMALL, HR_THP_BLOCK_ABSENT,
		HR_THP_BLOCK_ABSENT, HR_THP_BLOCK_HUGETLB, HR_THP_BLOCK_SMALL,
	};
	g_autoptr(GError) error = NULL;
	g_autoptr(HrThpMap) map = NULL;
	HrThpBlock block;

	(void)data;
	map = hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &range, 1, &error);
	g_assert_no_error(error);
	/* whole blocks only: 2 MiB .. 16 MiB */
	g_assert_cmpuint(map->n_blocks, ==, G_N_ELEMENTS(expect));
	for (guint i = 0; i < G_N_ELEMENTS(expect); i++) {
		g_test_message("block %u: %s", i, hr_thp_block_to_string(hr_thpmap_get(map, i)));
		g_assert_cmpint(hr_thpmap_get(map, i), ==, expect[i]);
		g_assert_cmpuint(hr_thpmap_block_gpa(map, i), ==, (2 + 2 * i) * MIB);
	}
	g_assert_cmpuint(map->n_thp, ==, 1);
	/* no sysfs nodes in the fixture: the node is unknown */
	g_assert_cmpint(map->thp_node, ==, -1);
	g_assert_cmpuint(map->n_small, ==, 3);
	g_assert_cmpuint(map->n_absent, ==, 2);
	g_assert_cmpuint(map->n_hugetlb, ==, 1);
	g_assert_cmpuint(map->n_misaligned, ==, 0);
	g_assert_true(hr_thpmap_lookup(map, 2 * MIB, &block));
	g_assert_cmpint(block, ==, HR_THP_BLOCK_THP);
	g_assert_false(hr_thpmap_lookup(map, 3 * MIB, &block));
	g_assert_false(hr_thpmap_lookup(map, 0, &block));
	g_assert_false(hr_thpmap_lookup(map, 16 * MIB, &block));
}

/* the THP's PFN 0x10000 is in 128 MiB memory block 2, which sysfs puts on node 1 */
static void
test_thpmap_fixture_node(ThpFixture *fx, gconstpointer data)
{
	HrRamRange range = {.gpa = 0, .size = 2 * MIB, .hva = FIXTURE_HVA};
	g_autofree gchar *mem = g_build_filename(fx->dir, "devices", "system", "memory", NULL);
	g_autofree gchar *bs = g_build_filename(mem, "block_size_bytes", NULL);
	g_autofree gchar *n0 = g_build_filename(fx->dir, "devices", "system", "node", "node0",
						"memory0", NULL);
	g_autofree gchar *n1 = g_build_filename(fx->dir, "devices", "system", "node", "node1",
						"memory2", NULL);
	g_autofree gchar *cmd = NULL;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrThpMap) map = NULL;

	(void)data;
	g_assert_cmpint(g_mkdir_with_parents(mem, 0755), ==, 0);
	g_assert_cmpint(g_mkdir_with_parents(n0, 0755), ==, 0);
	g_assert_cmpint(g_mkdir_with_parents(n1, 0755), ==, 0);
	g_assert_true(g_file_set_contents(bs, "8000000\n", -1, NULL));
	map = hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &range, 1, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(map->n_thp, ==, 1);
	g_assert_cmpint(map->thp_node, ==, 1);
	g_assert_cmpuint(map->thp_on_node, ==, 1);
	cmd = g_strdup_printf("rm -r '%s/devices'", fx->dir);
	g_assert_cmpint(system(cmd), ==, 0);
}

static void
test_thpmap_fixture_misaligned(ThpFixture *fx, gconstpointer data)
{
	/* the same THP seen through an hva 4 KiB off the gpa's alignment */
	HrRamRange range = {.gpa = 0, .size = 2 * MIB, .hva = FIXTURE_HVA};
	HrRamRange shifted = {.gpa = 0, .size = 4 * MIB, .hva = FIXTURE_HVA - 2 * MIB + 4096};
	g_autoptr(GError) error = NULL;
	g_autoptr(HrThpMap) map = NULL;

	(void)data;
	map = hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &range, 1, &error);
	g_assert_no_error(error);
	g_assert_cmpint(hr_thpmap_get(map, 0), ==, HR_THP_BLOCK_THP);
	g_clear_pointer(&map, hr_thpmap_free);

	/* block gpa 2 MiB -> hva FIXTURE_HVA + 4096: a THP tail, half of each of two */
	map = hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &shifted, 1, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(map->n_blocks, ==, 2);
	g_assert_cmpint(hr_thpmap_get(map, 1), ==, HR_THP_BLOCK_SMALL);
	g_assert_cmpuint(map->n_misaligned, ==, 1);
}

static void
test_thpmap_fixture_errors(ThpFixture *fx, gconstpointer data)
{
	HrRamRange hidden = {.gpa = 0, .size = 2 * MIB, .hva = FIXTURE_HVA + 14 * MIB};
	HrRamRange beyond = {.gpa = 0, .size = 2 * MIB, .hva = FIXTURE_HVA + 1024 * MIB};
	HrRamRange overlap[] = {{.gpa = 0, .size = 4 * MIB, .hva = FIXTURE_HVA},
				{.gpa = 2 * MIB, .size = 4 * MIB, .hva = FIXTURE_HVA}};
	HrRamRange wrap = {.gpa = G_MAXUINT64 - MIB, .size = 4 * MIB, .hva = FIXTURE_HVA};
	g_autofree gchar *missing = g_build_filename(fx->dir, "nope", NULL);
	g_autoptr(GError) error = NULL;

	(void)data;
	g_assert_null(hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &hidden, 1, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_PERMISSION);
	g_assert_nonnull(strstr(error->message, "CAP_SYS_ADMIN"));
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &beyond, 1, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO);
	g_assert_nonnull(strstr(error->message, "short read"));
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, overlap, 2, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID);
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, &wrap, 1, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID);
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan_files(fx->pagemap, fx->kpageflags, fx->dir, NULL, 0, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID);
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan_files(missing, fx->kpageflags, fx->dir, overlap, 1, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO);
	g_clear_error(&error);

	g_assert_null(hr_thpmap_scan(-1, overlap, 1, &error));
	g_assert_error(error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID);
	g_clear_error(&error);

	/* errors come back through the async path too */
	{
		ScanWait sw = {.loop = g_main_loop_new(NULL, FALSE)};
		hr_thpmap_scan_async(-1, overlap, 1, NULL, scan_done, &sw);
		g_main_loop_run(sw.loop);
		g_main_loop_unref(sw.loop);
		g_assert_null(sw.map);
		g_assert_error(sw.error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_INVALID);
		g_clear_error(&sw.error);
	}
}

/* 8 MiB, 2 MiB aligned, anonymous */
static guint8 *
map_aligned(gsize len, gpointer *raw)
{
	guint8 *p = mmap(NULL, len + 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	g_assert_true(p != MAP_FAILED);
	*raw = p;
	return (guint8 *)(((guintptr)p + 2 * MIB - 1) & ~(guintptr)(2 * MIB - 1));
}

static gboolean
thp_usable(void)
{
	g_autofree gchar *enabled = NULL;
	g_autofree gchar *choice = NULL;

	if (getuid() != 0) {
		g_test_skip("reading PFNs from pagemap needs root");
		return FALSE;
	}
	if (!g_file_get_contents("/sys/kernel/mm/transparent_hugepage/enabled", &enabled, NULL,
				 NULL)) {
		g_test_skip("no transparent huge pages on this kernel");
		return FALSE;
	}
	choice = hr_thp_parse_choice(enabled, "enabled", NULL);
	if (g_strcmp0(choice, "never") == 0) {
		g_test_skip("transparent huge pages are set to never");
		return FALSE;
	}
	return TRUE;
}

/* This process's own memory, as if it were a guest's RAM. */
static void
test_thpmap_live(void)
{
	const gsize len = 8 * MIB;
	gpointer raw_thp, raw_small, raw_untouched;
	guint8 *thp, *small, *untouched;
	g_autoptr(GError) error = NULL;
	g_autoptr(HrThpMap) map = NULL;
	HrThpBlock block;

	if (!thp_usable())
		return;
	thp = map_aligned(len, &raw_thp);
	small = map_aligned(len, &raw_small);
	untouched = map_aligned(len, &raw_untouched);
	g_assert_cmpint(madvise(thp, len, MADV_HUGEPAGE), ==, 0);
	g_assert_cmpint(madvise(small, len, MADV_NOHUGEPAGE), ==, 0);
	g_assert_cmpint(madvise(untouched, len, MADV_HUGEPAGE), ==, 0);
	memset(thp, 0x5a, len);
	memset(small, 0xa5, len);

	{
		HrRamRange ranges[] = {
			{.gpa = 0, .size = len, .hva = (guintptr)thp},
			{.gpa = 8 * MIB, .size = len, .hva = (guintptr)small},
			{.gpa = 16 * MIB, .size = len, .hva = (guintptr)untouched},
			/* the THPs again, 4 KiB off: no block maps a whole one */
			{.gpa = 32 * MIB, .size = 4 * MIB, .hva = (guintptr)thp + 4096},
		};
		map = hr_thpmap_scan(getpid(), ranges, G_N_ELEMENTS(ranges), &error);
	}
	g_assert_no_error(error);
	g_test_message("%" G_GUINT64_FORMAT " blocks: %" G_GUINT64_FORMAT " thp, %" G_GUINT64_FORMAT
		       " 4k (%" G_GUINT64_FORMAT " misaligned), %" G_GUINT64_FORMAT
		       " absent, in %" G_GINT64_FORMAT " us",
		       map->n_blocks, map->n_thp, map->n_small, map->n_misaligned, map->n_absent,
		       map->scan_us);
	g_assert_cmpuint(map->n_blocks, ==, 4 + 4 + 4 + 2);
	for (guint i = 0; i < 4; i++) {
		g_assert_cmpint(hr_thpmap_get(map, i), ==, HR_THP_BLOCK_THP);
		g_assert_cmpint(hr_thpmap_get(map, 4 + i), ==, HR_THP_BLOCK_SMALL);
		g_assert_cmpint(hr_thpmap_get(map, 8 + i), ==, HR_THP_BLOCK_ABSENT);
	}
	g_assert_cmpint(hr_thpmap_get(map, 12), ==, HR_THP_BLOCK_SMALL);
	g_assert_cmpint(hr_thpmap_get(map, 13), ==, HR_THP_BLOCK_SMALL);
	g_assert_cmpuint(map->n_thp, ==, 4);
	/* this host's THPs are on a node sysfs knows */
	g_assert_cmpint(map->thp_node, >=, 0);
	g_assert_cmpuint(map->thp_on_node, ==, 4);
	g_assert_cmpuint(map->n_small, ==, 6);
	g_assert_cmpuint(map->n_misaligned, ==, 2);
	g_assert_cmpuint(map->n_absent, ==, 4);
	g_assert_true(hr_thpmap_lookup(map, 8 * MIB, &block));
	g_assert_cmpint(block, ==, HR_THP_BLOCK_SMALL);

	/* the same scan in a worker thread, as the daemon runs it */
	{
		HrRamRange ranges[] = {
			{.gpa = 0, .size = len, .hva = (guintptr)thp},
			{.gpa = 8 * MIB, .size = len, .hva = (guintptr)small},
			{.gpa = 16 * MIB, .size = len, .hva = (guintptr)untouched},
		};
		ScanWait sw = {.loop = g_main_loop_new(NULL, FALSE)};
		hr_thpmap_scan_async(getpid(), ranges, G_N_ELEMENTS(ranges), NULL, scan_done, &sw);
		g_main_loop_run(sw.loop);
		g_main_loop_unref(sw.loop);
		g_assert_no_error(sw.error);
		g_assert_cmpuint(sw.map->n_blocks, ==, 12);
		g_assert_cmpuint(sw.map->n_thp, ==, 4);
		g_assert_cmpuint(sw.map->n_small, ==, 4);
		g_assert_cmpuint(sw.map->n_absent, ==, 4);
		hr_thpmap_free(sw.map);
	}

	/* dropping the first page of the second THP splits its mapping: the
	 * 511 pages left are still worth a discard */
	g_assert_cmpint(madvise(thp + 2 * MIB, 4096, MADV_DONTNEED), ==, 0);
	{
		HrRamRange range = {.gpa = 0, .size = len, .hva = (guintptr)thp};
		g_clear_pointer(&map, hr_thpmap_free);
		map = hr_thpmap_scan(getpid(), &range, 1, &error);
	}
	g_assert_no_error(error);
	g_assert_cmpint(hr_thpmap_get(map, 0), ==, HR_THP_BLOCK_THP);
	g_assert_cmpint(hr_thpmap_get(map, 1), ==, HR_THP_BLOCK_SMALL);
	g_assert_cmpint(hr_thpmap_get(map, 2), ==, HR_THP_BLOCK_THP);
	g_assert_cmpuint(map->n_thp, ==, 3);

	/* with most of it dropped, a discard of it frees little: absent */
	g_assert_cmpint(madvise(thp + 2 * MIB, MIB, MADV_DONTNEED), ==, 0);
	{
		HrRamRange range = {.gpa = 0, .size = len, .hva = (guintptr)thp};
		g_clear_pointer(&map, hr_thpmap_free);
		map = hr_thpmap_scan(getpid(), &range, 1, &error);
	}
	g_assert_no_error(error);
	g_assert_cmpint(hr_thpmap_get(map, 1), ==, HR_THP_BLOCK_ABSENT);

	munmap(raw_thp, len + 2 * MIB);
	munmap(raw_small, len + 2 * MIB);
	munmap(raw_untouched, len + 2 * MIB);
}

/* ---------------------------------------------------------------------- */
/* The executor's snapshot: the host and guests' backing, off the main loop */

typedef struct {
	GMainLoop *loop;
	HrSnapshot *snap;
	GError *error;
} SnapWait;

static void
snap_done(GObject *source, GAsyncResult *res, gpointer user_data)
{
	SnapWait *sw = user_data;

	(void)source;
	sw->snap = hr_snapshot_read_finish(res, &sw->error);
	g_main_loop_quit(sw->loop);
}

/* read in a worker thread, the callback on this thread's loop */
static HrSnapshot *
snap_read_async(HrSnapshotRequest *request, GCancellable *cancellable, GError **error)
{
	SnapWait sw = {.loop = g_main_loop_new(NULL, FALSE)};

	hr_snapshot_read_async(request, cancellable, snap_done, &sw);
	g_main_loop_run(sw.loop);
	g_main_loop_unref(sw.loop);
	if (sw.error != NULL)
		g_propagate_error(error, sw.error);
	return sw.snap;
}

/* a fixture host: its nodes; a process that is gone has no RSS and no map */
static void
test_snapshot_fixture(void)
{
	g_autofree gchar *root = fixture_path("debian-6.12-2node");
	g_autoptr(HrSnapshotRequest) request = hr_snapshot_request_new(root, 7);
	g_autoptr(HrSnapshot) snap = NULL;
	g_autoptr(HrHostState) direct = hr_monitor_read_host_lite(root, NULL);
	HrRamRange range = {.gpa = 0, .size = 2 * MIB, .hva = FIXTURE_HVA};
	HrSnapshotGuest *g;

	hr_snapshot_request_add_guest(request, 1, getpid(), NULL, 0, FALSE);
	hr_snapshot_request_add_guest(request, 2, G_MAXINT32, &range, 1, TRUE);
	g_assert_cmpuint(hr_snapshot_request_n_guests(request), ==, 2);
	snap = hr_snapshot_read(request);
	g_assert_cmpuint(snap->epoch, ==, 7);
	g_assert_no_error(snap->host_error);
	g_assert_nonnull(snap->host);
	g_assert_null(snap->host->pagetypes);
	g_assert_cmpuint(snap->host->nodes->len, ==, 2);
	for (guint n = 0; n < 2; n++) {
		const HrNodeState *a = g_ptr_array_index(snap->host->nodes, n);
		const HrNodeState *b = g_ptr_array_index(direct->nodes, n);
		g_assert_cmpuint(a->free_blocks, ==, b->free_blocks);
		g_assert_cmpuint(a->wmark_high, ==, b->wmark_high);
	}
	g = hr_snapshot_find_guest(snap, 1);
	g_assert_nonnull(g);
	g_assert_false(g->scanned);
	g_assert_null(g->map);
	g_assert_cmpint(g->rss_kb, >, 0);
	g = hr_snapshot_find_guest(snap, 2);
	g_assert_true(g->scanned);
	g_assert_cmpint(g->rss_kb, ==, -1);
	g_assert_null(g->map);
	g_assert_error(g->error, HR_THPMAP_ERROR, HR_THPMAP_ERROR_IO);
	g_assert_null(hr_snapshot_find_guest(snap, 3));

	/* a host that cannot be read: the error, and the guests all the same */
	{
		g_autoptr(HrSnapshotRequest) bad = hr_snapshot_request_new("/nonexistent", 0);
		g_autoptr(HrSnapshot) none = NULL;
		hr_snapshot_request_add_guest(bad, 1, getpid(), NULL, 0, FALSE);
		none = hr_snapshot_read(bad);
		g_assert_null(none->host);
		g_assert_error(none->host_error, HR_MONITOR_ERROR, HR_MONITOR_ERROR_MISSING);
		g_assert_cmpint(hr_snapshot_find_guest(none, 1)->rss_kb, >, 0);
	}
	/* cancelled before it is in: nothing is handed back */
	{
		g_autoptr(GCancellable) cancel = g_cancellable_new();
		g_autoptr(GError) error = NULL;
		g_cancellable_cancel(cancel);
		g_assert_null(snap_read_async(hr_snapshot_request_new(root, 1), cancel, &error));
		g_assert_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
	}
}

/* the real host and this process's own memory as a guest's, in a worker thread */
static void
test_snapshot_live(void)
{
	const gsize len = 8 * MIB;
	gpointer raw_thp, raw_small;
	guint8 *thp, *small;
	g_autoptr(HrSnapshotRequest) request = hr_snapshot_request_new(NULL, 3);
	g_autoptr(HrSnapshot) snap = NULL;
	g_autoptr(GError) error = NULL;
	HrSnapshotGuest *g;

	if (!thp_usable())
		return;
	thp = map_aligned(len, &raw_thp);
	small = map_aligned(len, &raw_small);
	g_assert_cmpint(madvise(thp, len, MADV_HUGEPAGE), ==, 0);
	g_assert_cmpint(madvise(small, len, MADV_NOHUGEPAGE), ==, 0);
	memset(thp, 0x5a, len);
	memset(small, 0xa5, len);
	{
		HrRamRange ranges[] = {
			{.gpa = 0, .size = len, .hva = (guintptr)thp},
			{.gpa = 8 * MIB, .size = len, .hva = (guintptr)small},
		};
		hr_snapshot_request_add_guest(request, 42, getpid(), ranges, G_N_ELEMENTS(ranges),
					      TRUE);
	}
	snap = snap_read_async(g_steal_pointer(&request), NULL, &error);
	g_assert_no_error(error);
	g_assert_nonnull(snap);
	g_assert_no_error(snap->host_error);
	g_assert_cmpuint(snap->epoch, ==, 3);
	g_assert_cmpuint(snap->host->nodes->len, >=, 1);
	g_assert_cmpint(snap->read_us, >, 0);
	g = hr_snapshot_find_guest(snap, 42);
	g_assert_nonnull(g);
	g_assert_no_error(g->error);
	g_assert_nonnull(g->map);
	g_assert_cmpuint(g->map->n_thp, ==, 4);
	g_assert_cmpuint(g->map->n_small, ==, 4);
	/* both touched: at least their 16 MiB are resident */
	g_assert_cmpint(g->rss_kb, >=, 16 * 1024);
	g_test_message("snapshot of the host and a 16 MiB guest in %" G_GINT64_FORMAT " us",
		       snap->read_us);
	munmap(raw_thp, len + 2 * MIB);
	munmap(raw_small, len + 2 * MIB);
}

/* ---------------------------------------------------------------------- */
/* Host compaction */

typedef struct {
	GMainLoop *loop;
	HrCompactResult *result;
	GError *error;
	gboolean returned; /* hr_compact_node_async() came back before completion */
	gboolean returned_at_completion;
	guint ticks;	   /* main loop iterations while compaction ran */
} CompactWait;

static void
compact_done(GObject *source, GAsyncResult *res, gpointer user_data)
{
	CompactWait *w = user_data;

	(void)source;
	w->result = hr_compact_node_finish(res, &w->error);
	w->returned_at_completion = w->returned;
	g_main_loop_quit(w->loop);
}

static gboolean
compact_tick(gpointer user_data)
{
	CompactWait *w = user_data;
	w->ticks++;
	return G_SOURCE_CONTINUE;
}

static void
run_compact(const gchar *root, guint node, CompactWait *w)
{
	guint tick;

	w->loop = g_main_loop_new(NULL, FALSE);
	tick = g_timeout_add(5, compact_tick, w);
	hr_compact_node_async(root, node, NULL, compact_done, w);
	w->returned = TRUE;
	g_main_loop_run(w->loop);
	g_source_remove(tick);
	g_main_loop_unref(w->loop);
}

static gchar *
copy_fixture_tree(const gchar *kernel)
{
	g_autofree gchar *src = fixture_path(kernel);
	gchar *root = g_dir_make_tmp("hr-compact-XXXXXX", NULL);
	g_autofree gchar *cmd = g_strdup_printf("cp -r %s/. %s/", src, root);
	gint status = 0;

	g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
	g_assert_true(g_spawn_check_wait_status(status, NULL));
	return root;
}

static void
remove_tree(const gchar *root)
{
	g_autofree gchar *cmd = g_strdup_printf("rm -rf %s", root);
	g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL);
}

/* A fake tree: the write lands in a plain file, nothing moves. */
static void
test_compact_fake(void)
{
	g_autofree gchar *root = copy_fixture_tree("debian-6.1");
	g_autofree gchar *compact = g_build_filename(root, "sys/devices/system/node/node0/compact",
						     NULL);
	g_autofree gchar *written = NULL;
	CompactWait w = {0};

	g_assert_true(g_file_set_contents(compact, "", 0, NULL));
	run_compact(root, 0, &w);
	g_assert_no_error(w.error);
	g_assert_true(w.returned_at_completion);
	g_assert_true(g_file_get_contents(compact, &written, NULL, NULL));
	g_assert_cmpstr(written, ==, "1");
	g_assert_cmpuint(w.result->node, ==, 0);
	g_assert_cmpuint(w.result->free_blocks_before, ==, 399);
	g_assert_cmpuint(w.result->free_blocks_after, ==, 399);
	g_assert_cmpuint(w.result->unusable_index_before, ==, 65);
	g_assert_cmpuint(w.result->migrate_scanned, ==, 0);
	g_assert_cmpint(hr_compact_result_blocks_gained(w.result), ==, 0);
	g_free(w.result);

	/* node 1 does not exist in that tree */
	memset(&w, 0, sizeof(w));
	run_compact(root, 1, &w);
	g_assert_null(w.result);
	g_assert_error(w.error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
	g_assert_cmpstr(w.error->message, ==, "compacting node 1: the host has no memory on node 1");
	g_clear_error(&w.error);

	/* a node the monitor sees but without a compact file */
	g_assert_cmpint(g_unlink(compact), ==, 0);
	memset(&w, 0, sizeof(w));
	run_compact(root, 0, &w);
	g_assert_null(w.result);
	g_assert_error(w.error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
	g_assert_nonnull(strstr(w.error->message, "CONFIG_COMPACTION"));
	g_clear_error(&w.error);
	remove_tree(root);
}

/*
 * The real thing on this host: scatter some free memory, compact node 0 and
 * see the kernel's scanners count work while the main loop kept running.
 */
static void
test_compact_live(void)
{
	const gsize len = 64 * MIB;
	CompactWait w = {0};
	guint8 *p;

	if (getuid() != 0 || !g_file_test("/sys/devices/system/node/node0/compact",
					  G_FILE_TEST_EXISTS)) {
		g_test_skip("needs root and /sys/devices/system/node/node0/compact");
		return;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	g_assert_true(p != MAP_FAILED);
	g_assert_cmpint(madvise(p, len, MADV_NOHUGEPAGE), ==, 0);
	memset(p, 1, len);
	for (gsize off = 0; off < len; off += 2 * 4096)
		g_assert_cmpint(madvise(p + off, 4096, MADV_DONTNEED), ==, 0);

	run_compact("/", 0, &w);
	g_assert_no_error(w.error);
	g_test_message("node 0: %" G_GINT64_FORMAT " us, free blocks %" G_GUINT64_FORMAT
		       " -> %" G_GUINT64_FORMAT ", unusable index %u -> %u, migrate scanned %"
		       G_GUINT64_FORMAT ", free scanned %" G_GUINT64_FORMAT ", isolated %"
		       G_GUINT64_FORMAT ", migrated %" G_GUINT64_FORMAT ", %u main loop ticks",
		       w.result->wall_us, w.result->free_blocks_before, w.result->free_blocks_after,
		       w.result->unusable_index_before, w.result->unusable_index_after,
		       w.result->migrate_scanned, w.result->free_scanned, w.result->isolated,
		       w.result->migrated, w.ticks);
	g_assert_true(w.returned_at_completion);
	g_assert_cmpint(w.result->wall_us, >, 0);
	/* a full compaction of a node with movable pages scans them */
	g_assert_cmpuint(w.result->migrate_scanned, >, 0);
	/* the main loop kept turning while the worker thread compacted */
	if (w.result->wall_us > 50000)
		g_assert_cmpuint(w.ticks, >, 0);
	g_free(w.result);
	munmap(p, len);
}

/*
 * The real node 0 pool: grow it by 4 blocks from free memory (this host
 * has plenty), see nr_hugepages follow, give them back, and the admin's
 * pool is what it was.
 */
static void
test_pool_live(void)
{
	const gchar *path = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/"
			    "nr_hugepages";
	g_autoptr(GError) error = NULL;
	g_autofree HrCompactResult *result = NULL;
	guint64 before = 0, during = 0, after = 0, freed = 0;

	if (getuid() != 0 || !g_file_test(path, G_FILE_TEST_EXISTS)) {
		g_test_skip("needs root and a kernel with CONFIG_HUGETLBFS");
		return;
	}
	g_assert_true(hr_pool_available("/", 0, &error));
	g_assert_no_error(error);
	g_assert_true(hr_pool_get("/", 0, &before, &error));
	result = hr_pool_grow("/", 0, 4, NULL, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(result->pool_asked, ==, 4);
	g_assert_true(hr_pool_get("/", 0, &during, &error));
	g_test_message("pool %" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT ", got %" G_GUINT64_FORMAT
		       ", %" G_GUINT64_FORMAT " pages scanned",
		       before, during, result->pool_got,
		       result->migrate_scanned + result->free_scanned);
	g_assert_cmpuint(result->pool_got, ==, 4);
	g_assert_cmpuint(during, ==, before + 4);
	g_assert_true(hr_pool_shrink("/", 0, result->pool_got, &freed, &error));
	g_assert_no_error(error);
	g_assert_cmpuint(freed, ==, 4);
	g_assert_true(hr_pool_get("/", 0, &after, &error));
	g_assert_cmpuint(after, ==, before);
}

/* /proc/pressure/memory as Linux prints it, and what is not it */
static void
test_psi(void)
{
	guint some = 1, full = 1;

	g_assert_true(hr_psi_parse("some avg10=12.34 avg60=1.00 avg300=0.10 total=123\n"
				   "full avg10=5.06 avg60=0.00 avg300=0.00 total=45\n",
				   &some, &full));
	g_assert_cmpuint(some, ==, 1234);
	g_assert_cmpuint(full, ==, 506);
	g_assert_true(hr_psi_parse("some avg10=100.00 avg60=0 avg300=0 total=0\n", &some, &full));
	g_assert_cmpuint(some, ==, 10000);
	g_assert_cmpuint(full, ==, 0);
	g_assert_false(hr_psi_parse("", &some, &full));
	g_assert_false(hr_psi_parse("some avg10=x\n", &some, &full));
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/monitor/pool/live", test_pool_live);
	g_test_add_func("/monitor/psi", test_psi);
	g_test_add_func("/monitor/kernel/debian-6.1", test_debian61);
	g_test_add_func("/monitor/kernel/debian-6.12-two-nodes", test_debian612_two_nodes);
	g_test_add_func("/monitor/kernel/host-capture", test_host_capture);
	g_test_add_func("/monitor/kernel/live", test_live_host);
	g_test_add_func("/monitor/derive/unusable-index", test_unusable_index);
	g_test_add_func("/monitor/reject/malformed", test_malformed);
	g_test_add_func("/monitor/reject/nul-byte", test_nul_byte);
	g_test_add_func("/monitor/reject/tree", test_tree_errors);
	g_test_add_func("/monitor/reject/every-prefix", test_every_prefix);
	g_test_add_func("/monitor/pagetypeinfo/capped", test_pagetypeinfo_capped);
	g_test_add_func("/monitor/zoneinfo/newer-lines", test_zoneinfo_newer_lines);
	g_test_add_func("/monitor/thp/choice", test_choice);
	g_test_add_func("/monitor/meminfo/node-prefix", test_meminfo_node_prefix);
	g_test_add("/monitor/thpmap/fixture", ThpFixture, NULL, thp_fixture_setup,
		   test_thpmap_fixture, thp_fixture_teardown);
	g_test_add("/monitor/thpmap/fixture-node", ThpFixture, NULL, thp_fixture_setup,
		   test_thpmap_fixture_node, thp_fixture_teardown);
	g_test_add("/monitor/thpmap/fixture-misaligned", ThpFixture, NULL, thp_fixture_setup,
		   test_thpmap_fixture_misaligned, thp_fixture_teardown);
	g_test_add("/monitor/thpmap/fixture-errors", ThpFixture, NULL, thp_fixture_setup,
		   test_thpmap_fixture_errors, thp_fixture_teardown);
	g_test_add_func("/monitor/thpmap/live", test_thpmap_live);
	g_test_add_func("/monitor/snapshot/fixture", test_snapshot_fixture);
	g_test_add_func("/monitor/snapshot/live", test_snapshot_live);
	g_test_add_func("/monitor/compact/fake-tree", test_compact_fake);
	g_test_add_func("/monitor/compact/live", test_compact_live);
	return g_test_run();
}
