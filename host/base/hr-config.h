/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

#include "hr-paths.h"
#include "hr-codec.h"

G_BEGIN_DECLS

#define HR_CONFIG_DEFAULT_PATH HR_SYSCONFDIR "/hugeroom/hugeroomd.conf"
#define HR_CONFIG_DEFAULT_VM_SOCKET "/run/hugeroom/vm.sock"
#define HR_CONFIG_DEFAULT_VM_SOCKET_GROUP "libvirt-qemu"
#define HR_CONFIG_DEFAULT_API_SOCKET "/run/hugeroom/api.sock"
#define HR_CONFIG_DEFAULT_STATUS_INTERVAL_MS 1000
#define HR_CONFIG_DEFAULT_STATE_DIR "/var/lib/hugeroom"
#define HR_CONFIG_DEFAULT_LIBVIRT_URI "qemu:///system"

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
	guint64 floor_mb;    /* free memory the guest must keep */
	guint budget_blocks; /* most blocks held from it at once; 0: half its RAM */
	gboolean pcp_set;    /* pcp=POLICY: sent whenever its driver comes up */
	HrPcpPolicy pcp;
} HrGuestPolicy;

/*
 * A libvirt domain's own policy (<hugeroom:policy> in its <metadata>, read
 * by hr-virt), over its [guest:PATTERN] group's.
 */
typedef struct {
	gint donor;	 /* -1: unset, else FALSE or TRUE */
	gint64 floor_mb; /* -1: unset */
} HrDomainPolicy;

typedef struct {
	gchar *vm_socket;
	gchar *vm_socket_group; /* the VM socket's group (QEMU's); "" = the daemon's */
	gchar *api_socket;
	guint32 status_interval_ms; /* 0, or 100-86400000 (SPEC 1.4.2) */
	guint command_timeout_ms;   /* a command unanswered by then is lost */
	guint request_timeout_s;    /* default deadline of an evacuate, capture, return */
	guint request_history;	    /* finished requests kept per guest */

	/* reservations */
	gchar *state_dir;	   /* reservations.json lives here */
	gchar *host_root;	   /* "/", or a tree with proc/ and sys/ (tests) */
	guint reservation_tick_ms; /* how often live reservations are driven */
	guint reservation_ttl_s;   /* a ready reservation not consumed by then expires */
	guint migration_grace_s;   /* a gone QEMU's holds wait this long for its VM's other QEMU */
	guint64 return_high_mark_mb; /* give holds back when a node has this much free; 0: never */
	guint64 guest_floor_mb;	     /* default floor of a guest */
	gboolean hold_in_pool;	     /* hold a reservation's blocks in the node's hugetlb pool */
	gboolean donor_pcp_density;  /* donors run PCP density while they give */
	guint64 pool_margin_mb; /* free memory the pool leaves the node above its high watermark */
	/*
	 * The standing reserve (hr-reserve): "SIZE[@NODE]" kept assembled in
	 * the pool ahead of demand, NULL: none; refilled at most
	 * reserve_rate_mb MiB a second, paused while the host's memory PSI
	 * (some, avg10) is at reserve_pause_psi percent or more.
	 */
	gchar *reserve;
	guint64 reserve_rate_mb;
	guint reserve_pause_psi;
	HrBackingMode backing;
	GPtrArray *guest_policies; /* HrGuestPolicy, in file order; the first match wins */
	guint generation;	   /* bumped by every reload that applies something */

	/* API access beyond root and our own uid (host/API.md "Access") */
	gchar *api_group;      /* Unix socket: this group's members are admins */
	gchar *api_read_group; /* Unix socket: this group's members may read */
	gchar *api_listen;     /* "ADDRESS:PORT" for HTTPS, or NULL */
	gchar *api_tls_cert;   /* PEM; needed with api_listen */
	gchar *api_tls_key;
	gchar *api_tokens; /* bearer tokens for api_listen: "admin|read TOKEN" lines */
	/* peers, bounds and restart (hr_config_load_limits()) */
	gchar *qemu_user;	   /* "USER;USER...": who QEMU runs as */
	GArray *qemu_uids;	   /* guint: qemu_user's uids, SO_PEERCRED must be one */
	gchar **qemu_executables;  /* absolute paths; a peer's /proc/PID/exe must be one */
	guint hello_timeout_ms;	   /* a connection without HELLO by then is closed */
	guint max_connections;	   /* VM socket connections at once */
	guint max_guests_per_uid;  /* guest entries of one uid's QEMUs; 0: no bound */
	guint max_frames_per_s;	   /* per connection, averaged over a second */
	guint guest_prune_s;	   /* a disconnected guest is forgotten after this; 0: never */
	guint64 max_guest_ram_mb;  /* a HELLO announcing more RAM is refused */
	guint max_queued_requests; /* per guest, waiting or running */
	guint max_reservations;	   /* kept in the store; the oldest settled go first */
	gboolean return_orphans;   /* RETURN held blocks no reservation or request owns */
	/* libvirt */
	gchar *libvirt_uri;	     /* where hr-virt looks guests' domains up; "" = nowhere */
	GHashTable *domain_policies; /* guest name -> HrDomainPolicy; not from the file */
} HrConfig;

/* root and libvirt's QEMU user (Debian's libvirt-qemu), where it exists */
#define HR_CONFIG_DEFAULT_QEMU_USER "root;libvirt-qemu"
/*
 * Debian's QEMU system emulators for the hosts hugeroom runs on (the
 * qemu-system-x86 and qemu-system-arm packages; /usr/bin/kvm is a script
 * that execs the first, so its QEMU's /proc/PID/exe is the first too).
 */
#define HR_CONFIG_DEFAULT_QEMU_EXECUTABLES \
	"/usr/bin/qemu-system-x86_64;/usr/bin/qemu-system-aarch64"

HrConfig *
hr_config_new(void);
/* may a VM socket peer running as @uid be QEMU (qemu_user)? */
gboolean
hr_config_qemu_uid_ok(const HrConfig *config, guint uid);
void
hr_config_free(HrConfig *config);
/*
 * A qemu_executables value: absolute paths separated by ';', each resolved
 * to what /proc/PID/exe says where it exists; a pattern, a relative path or
 * an empty list is an error naming the key. NULL-terminated.
 */
gchar **
hr_config_parse_executables(const gchar *value, GError **error);
/* a missing file is not an error when @must_exist is FALSE */
gboolean
hr_config_load(HrConfig *config, const gchar *path, gboolean must_exist, GError **error);
/*
 * The policy of guest @name: its [guest:PATTERN] group, or the defaults,
 * with its libvirt domain's donor and floor over them.
 */
void
hr_config_guest_policy(const HrConfig *config, const gchar *name, HrGuestPolicy *policy);
const gchar *
hr_backing_mode_to_string(HrBackingMode mode);
/* guest @name's libvirt domain policy (NULL: it has none) */
void
hr_config_set_domain_policy(HrConfig *config, const gchar *name, const HrDomainPolicy *policy);
/* the keys of [hugeroomd], in the order hugeroomd.conf lists them */
gchar **
hr_config_key_names(void);
/* whether a reload applies @key (*@live) or it takes a restart; FALSE: no such key */
gboolean
hr_config_key_is_live(const gchar *key, gboolean *live);
/*
 * SIGHUP: take from @fresh (just loaded) what can change while the daemon
 * runs into @live, adding each changed key's name (static strings) to
 * @applied; the keys that changed but take a restart (sockets, state_dir,
 * host_root, reservation_tick_ms) go to @restart, and @live keeps them.
 */
void
hr_config_reload(HrConfig *live, HrConfig *fresh, GPtrArray *applied, GPtrArray *restart);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrConfig, hr_config_free)

G_END_DECLS
