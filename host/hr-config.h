/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

#include "hr-codec.h"

G_BEGIN_DECLS

#define HR_CONFIG_DEFAULT_PATH "/etc/hugeroom/hugeroomd.conf"
#define HR_CONFIG_DEFAULT_VM_SOCKET "/run/hugeroom/vm.sock"
#define HR_CONFIG_DEFAULT_API_SOCKET "/run/hugeroom/api.sock"
#define HR_CONFIG_DEFAULT_STATUS_INTERVAL_MS 1000
#define HR_CONFIG_DEFAULT_STATE_DIR "/var/lib/hugeroom"

/* How the planner learns what backs a guest block on the host. */
typedef enum {
	HR_BACKING_SCAN,  /* hr-thpmap over the QEMU process' pagemap */
	HR_BACKING_THP,	  /* assume one host THP each (simulated guests) */
	HR_BACKING_SMALL, /* assume 4 KiB pages each */
} HrBackingMode;

/* A [guest:PATTERN] group: the policy of the guests whose name matches. */
typedef struct {
	gchar *pattern; /* a glob, g_pattern_match_simple() */
	gboolean donor;
	guint64 floor_mb;      /* free memory the guest must keep */
	guint budget_blocks;   /* most blocks held from it at once; 0: half its RAM */
	gboolean pcp_set;      /* pcp=POLICY: sent whenever its driver comes up */
	HrPcpPolicy pcp;
} HrGuestPolicy;

typedef struct {
	gchar *vm_socket;
	gchar *api_socket;
	guint32 status_interval_ms; /* 0, or 100-86400000 (SPEC 1.4.2) */
	guint command_timeout_ms;   /* a command unanswered by then is lost */
	guint request_timeout_s;    /* default deadline of an evacuate, capture, return */
	guint request_history;	    /* finished requests kept per guest */

	/* reservations */
	gchar *state_dir;	     /* reservations.json lives here */
	gchar *host_root;	     /* "/", or a tree with proc/ and sys/ (tests) */
	guint reservation_tick_ms;   /* how often live reservations are driven */
	guint reservation_ttl_s;     /* a ready reservation not consumed by then expires */
	guint64 return_high_mark_mb; /* give holds back when a node has this much free; 0: never */
	guint64 guest_floor_mb;	     /* default floor of a guest */
	gboolean hold_in_pool;	     /* hold a reservation's blocks in the node's hugetlb pool */
	guint64 pool_margin_mb;	     /* free memory the pool leaves the node above its high watermark */
	HrBackingMode backing;
	GPtrArray *guest_policies; /* HrGuestPolicy, in file order; the first match wins */
} HrConfig;

HrConfig *
hr_config_new(void);
void
hr_config_free(HrConfig *config);
/* a missing file is not an error when @must_exist is FALSE */
gboolean
hr_config_load(HrConfig *config, const gchar *path, gboolean must_exist, GError **error);
/* the policy of guest @name: its [guest:PATTERN] group, or the defaults */
void
hr_config_guest_policy(const HrConfig *config, const gchar *name, HrGuestPolicy *policy);
const gchar *
hr_backing_mode_to_string(HrBackingMode mode);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrConfig, hr_config_free)

G_END_DECLS
