/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Host memory monitor: the host's free-list layout, watermarks and
 * compaction counters, read from procfs and sysfs.
 *
 * Every parser takes the text of one file plus the name to use in messages
 * and returns a new structure, or NULL with a HR_MONITOR_ERROR_PARSE error
 * of the form "FILE:LINE: problem". Text that is empty, contains a NUL byte,
 * does not end with a newline (truncated read) or has a line the kernel does
 * not write is rejected; nothing in the input can make a parser crash.
 *
 * hr_monitor_read_host() reads all of them below a root directory ("/" in
 * the daemon, a fixture tree in tests) and derives, per NUMA node, the
 * numbers the planner needs. Page counts are in base pages (4 KiB on
 * x86-64); a "block" is one free 2 MiB (PMD-sized, order 9) chunk.
 *
 * Reading is synchronous: the files are small procfs/sysfs files whose
 * read does not sleep on I/O but takes milliseconds on a large host, so
 * the daemon reads them in worker threads (HrHostReader below for the
 * API, hr-snapshot for the executor), never on its main loop.
 */

#include <glib.h>

G_BEGIN_DECLS

#define HR_MONITOR_ERROR (hr_monitor_error_quark())
GQuark
hr_monitor_error_quark(void);

typedef enum {
	HR_MONITOR_ERROR_PARSE,	  /* a file's content is not what the kernel writes */
	HR_MONITOR_ERROR_IO,	  /* a file could not be read */
	HR_MONITOR_ERROR_MISSING, /* a required file or value is absent */
} HrMonitorError;

/* Orders a free list can have; x86-64 has 11 (0-10), other configs fewer. */
#define HR_MONITOR_MAX_ORDERS 16
/* The order of a PMD-sized (2 MiB) block with 4 KiB pages. */
#define HR_MONITOR_BLOCK_ORDER 9

/* ---------------------------------------------------------------------- */
/* /proc/buddyinfo */

typedef struct {
	guint node;
	gchar zone[16];
	guint n_orders;
	guint64 nr_free[HR_MONITOR_MAX_ORDERS]; /* free chunks of each order */
} HrBuddyZone;

/* GPtrArray of HrBuddyZone, in file order (populated zones only). */
GPtrArray *
hr_buddyinfo_parse(const gchar *text, const gchar *name, GError **error);

/* ---------------------------------------------------------------------- */
/* /proc/pagetypeinfo (root only; repeats its header once per node) */

#define HR_MONITOR_MAX_MIGRATETYPES 8

/* Since Linux 5.6 a count of 100000 or more is printed as ">100000". */
#define HR_PAGETYPE_COUNT_CAP 100000

typedef struct {
	guint node;
	gchar zone[16];
	/* free chunks per migratetype and order; capped at HR_PAGETYPE_COUNT_CAP */
	guint64 nr_free[HR_MONITOR_MAX_MIGRATETYPES][HR_MONITOR_MAX_ORDERS];
	gboolean capped;				/* some count was printed as >100000 */
	guint64 nr_blocks[HR_MONITOR_MAX_MIGRATETYPES]; /* pageblocks per type */
} HrPagetypeZone;

typedef struct {
	guint pageblock_order;
	guint pages_per_block;
	guint n_orders;
	guint n_types;
	gchar *types[HR_MONITOR_MAX_MIGRATETYPES]; /* "Unmovable", "Movable", ... */
	GPtrArray *zones;			   /* HrPagetypeZone */
} HrPagetypeInfo;

HrPagetypeInfo *
hr_pagetypeinfo_parse(const gchar *text, const gchar *name, GError **error);
void
hr_pagetypeinfo_free(HrPagetypeInfo *info);
/* -1 when @type is not a migratetype of this kernel */
gint
hr_pagetypeinfo_type_index(const HrPagetypeInfo *info, const gchar *type);

/* ---------------------------------------------------------------------- */
/* /proc/zoneinfo (all zones, populated or not; per-cpu pagesets skipped) */

typedef struct {
	guint node;
	gchar zone[16];
	guint64 free;  /* "pages free" */
	guint64 boost; /* watermark_boost; 0 on kernels without it */
	guint64 min;   /* watermarks, pages */
	guint64 low;
	guint64 high;
	guint64 spanned;
	guint64 present;
	guint64 managed;
	guint64 start_pfn; /* 0 for unpopulated zones */
} HrZoneWatermarks;

/* GPtrArray of HrZoneWatermarks, in file order. */
GPtrArray *
hr_zoneinfo_parse(const gchar *text, const gchar *name, GError **error);

/* ---------------------------------------------------------------------- */
/* "name value" tables: /proc/vmstat, /sys/devices/system/node/nodeN/vmstat */

typedef struct _HrVmstat HrVmstat;

HrVmstat *
hr_vmstat_parse(const gchar *text, const gchar *name, GError **error);
void
hr_vmstat_free(HrVmstat *vmstat);
/* FALSE (and *value 0) when the kernel has no such counter */
gboolean
hr_vmstat_lookup(const HrVmstat *vmstat, const gchar *key, guint64 *value);
/* 0 when absent */
guint64
hr_vmstat_get(const HrVmstat *vmstat, const gchar *key);
guint
hr_vmstat_size(const HrVmstat *vmstat);

/* ---------------------------------------------------------------------- */
/* /proc/meminfo and nodeN/meminfo ("Node N " prefix); values in kB except
 * the HugePages_* counts, which are pages */

typedef struct _HrMeminfo HrMeminfo;

HrMeminfo *
hr_meminfo_parse(const gchar *text, const gchar *name, GError **error);
void
hr_meminfo_free(HrMeminfo *meminfo);
gboolean
hr_meminfo_lookup(const HrMeminfo *meminfo, const gchar *key, guint64 *value);
guint64
hr_meminfo_get(const HrMeminfo *meminfo, const gchar *key);

/* ---------------------------------------------------------------------- */
/* /sys/kernel/mm/transparent_hugepage */

typedef struct {
	gchar *enabled;		  /* "always", "madvise" or "never" */
	gchar *defrag;		  /* "always", "defer", "defer+madvise", "madvise", "never" */
	gchar *khugepaged_defrag; /* "1"/"0"; NULL when absent */
	guint64 hpage_pmd_size;	  /* bytes; 0 when absent */
} HrThpSettings;

/* The bracketed word of a sysfs choice file: "always [madvise] never". */
gchar *
hr_thp_parse_choice(const gchar *text, const gchar *name, GError **error);
void
hr_thp_settings_clear(HrThpSettings *thp);

/* ---------------------------------------------------------------------- */
/* Everything together */

/* Host-wide event counters from /proc/vmstat (they have no per-node copy). */
typedef struct {
	guint64 compact_migrate_scanned;
	guint64 compact_free_scanned;
	guint64 compact_isolated;
	guint64 compact_stall;
	guint64 compact_fail;
	guint64 compact_success;
	guint64 compact_daemon_wake;
	guint64 pgmigrate_success;
	guint64 pgmigrate_fail;
	guint64 thp_fault_alloc;
	guint64 thp_fault_fallback;
	guint64 thp_collapse_alloc;
	guint64 thp_split_page;
} HrCompactCounters;

void
hr_compact_counters_from_vmstat(const HrVmstat *vmstat, HrCompactCounters *counters);

/*
 * One NUMA node, summed over its zones that can back a THP: all populated
 * zones except ZONE_DMA, which the lowmem reserve keeps from user memory.
 */
typedef struct {
	guint node;
	guint64 free_pages;  /* from buddyinfo: sum of nr_free[o] << o */
	guint64 free_blocks; /* 2 MiB-capable: sum over o >= 9 of nr_free[o] << (o - 9) */
	guint64 wmark_min;   /* sums of the zones' watermarks (incl. boost for high) */
	guint64 wmark_low;
	guint64 wmark_high;
	guint64 managed;
	guint64 present;
	guint64 spanned;
	/*
	 * Unusable free space index for order 9, 0-1000 (the kernel's
	 * debugfs extfrag/unusable_index): the share of free memory in
	 * chunks too small for a 2 MiB block; 1000 when nothing is free.
	 */
	guint unusable_index;
	/* from nodeN/meminfo when present, else 0 and has_meminfo FALSE */
	gboolean has_meminfo;
	guint64 mem_total_kb;
	guint64 mem_free_kb;
	HrVmstat *vmstat; /* nodeN/vmstat, or NULL */
} HrNodeState;

typedef struct {
	gchar *root;
	GPtrArray *buddy;	   /* HrBuddyZone */
	GPtrArray *zones;	   /* HrZoneWatermarks */
	HrPagetypeInfo *pagetypes; /* NULL when /proc/pagetypeinfo is not readable (not root) */
	HrVmstat *vmstat;
	HrMeminfo *meminfo;
	HrThpSettings thp;
	HrCompactCounters compact;
	/*
	 * Memory pressure (/proc/pressure/memory, PSI): the share of the last
	 * 10 s some / all tasks stalled on memory, in hundredths of a percent;
	 * has_psi FALSE on kernels without PSI.
	 */
	gboolean has_psi;
	guint psi_some_avg10;
	guint psi_full_avg10;
	GPtrArray *nodes; /* HrNodeState, ascending node id */
} HrHostState;

/* "some avg10=1.25 ..." / "full avg10=0.00 ...": FALSE when neither is there */
gboolean
hr_psi_parse(const gchar *text, guint *some_avg10, guint *full_avg10);

/* @root: "/" or NULL for the live system, or a directory with proc/ and sys/ */
HrHostState *
hr_monitor_read_host(const gchar *root, GError **error);
/*
 * The same without /proc/pagetypeinfo (pagetypes NULL): reading it takes
 * each zone's lock with interrupts off while it walks the free lists, too
 * dear for every tick of the daemon, which needs nothing from it.
 */
HrHostState *
hr_monitor_read_host_lite(const gchar *root, GError **error);
void
hr_host_state_free(HrHostState *state);
/* NULL when the host has no such node */
const HrNodeState *
hr_host_state_get_node(const HrHostState *state, guint node);

/*
 * Reading a whole host takes milliseconds (zoneinfo, vmstat, the nodes'
 * files; more with many CPUs' pagesets): an HrHostReader does it in a
 * worker thread, one read at a time, so the main loop never waits for
 * /proc. Its snapshot is never changed once read; hr_host_reader_peek()
 * hands it out while it is younger than @max_age_us and read for the
 * config @generation asked for, and hr_host_reader_get() queues a caller
 * until the read in flight or the next one is in.
 */
typedef struct _HrHostReader HrHostReader;

/* @host is NULL with @error; either is valid only during the call */
typedef void (*HrHostReaderFunc)(const HrHostState *host, const GError *error, gpointer user_data);

HrHostReader *
hr_host_reader_new(gint64 max_age_us);
/* waiters still queued are dropped: their @destroy runs, their @func does not */
void
hr_host_reader_free(HrHostReader *reader);
/* the newest snapshot if fresh and read for @generation, else NULL; no I/O */
const HrHostState *
hr_host_reader_peek(HrHostReader *reader, guint generation);
/* @func runs from the main loop once the read in flight, or else a new read of @root, is in */
void
hr_host_reader_get(HrHostReader *reader, const gchar *root, guint generation, HrHostReaderFunc func,
		   gpointer user_data, GDestroyNotify destroy);
/* the newest snapshot's number, counting from 1, for what callers derive from it */
guint64
hr_host_reader_get_serial(HrHostReader *reader);
/* how long the latest read took in its thread, in microseconds; 0 before the first */
gint64
hr_host_reader_last_read_us(HrHostReader *reader);

/* Derivations, exposed for tests and the planner's fixtures. */
guint64
hr_buddy_free_pages(const HrBuddyZone *zone);
guint64
hr_buddy_free_blocks(const HrBuddyZone *zone, guint order);
/* unusable free space index (0-1000) of @order over @free_pages/@free_blocks */
guint
hr_unusable_index(guint64 free_pages, guint64 free_blocks, guint order);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrPagetypeInfo, hr_pagetypeinfo_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrVmstat, hr_vmstat_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrMeminfo, hr_meminfo_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrHostState, hr_host_state_free)

G_END_DECLS
