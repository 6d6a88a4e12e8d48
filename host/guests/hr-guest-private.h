/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * HrGuest's fields, for the guest plane's own files (hr-guest.c, and for
 * now hr-pcp.c, hr-device.c and hr-core.c) and the unit tests that build
 * guests by hand. Every other file reads a guest through hr-guest.h.
 */

#include "hr-guest.h"

G_BEGIN_DECLS

/*
 * What the daemon knows about one VM. It outlives the connection: when the
 * same QEMU process connects again with the same identity, or a new QEMU
 * process of a VM whose UUID is known once the old process is gone, the
 * new connection takes this entry over and its counters and last status
 * are kept. Everything inside the daemon refers to a guest by its id; the
 * UUID only names it, and only when it is known: an all-zero UUID, or one
 * another running guest has, is unknown (uuid_known FALSE).
 */
struct _HrGuest {
	guint64 id;  /* daemon-unique: what the daemon keys guests by */
	gchar *name; /* as sent in HELLO, made valid UTF-8; "pid-PID" when empty */
	guint8 uuid_bytes[16];
	gchar *uuid;
	gboolean uuid_known; /* non-zero and no other running guest's */
	/*
	 * "IDENTITY@pid:PID:STARTTIME": the guest bound to its QEMU process,
	 * the same across daemon restarts and never another process'. The
	 * reservation store records holds by it.
	 */
	gchar *key;
	/*
	 * The key of the QEMU process this entry had before a new process of
	 * the VM took it over, until the executor has moved what that process
	 * owned to @key (a migration's destination connecting only after its
	 * source is gone brings the source's held blocks).
	 */
	gchar *prev_key;
	HrPeer *peer; /* the QEMU process of the latest connection */
	gint pid;     /* peer->pid */
	guint32 proto_version;
	guint64 ram_size;
	guint64 hello_features;
	GArray *ram; /* HrRamRange */

	HrDevice *device;	  /* NULL while disconnected */
	HrGuestSendFunc send;	  /* sends a frame to @device */
	guint64 *next_request_id; /* the registry's numbering of commands (hr-core.c) */
	GDateTime *connected_at;
	GDateTime *disconnected_at;
	guint connections;

	HrStatus *status; /* latest valid STATUS, or NULL */
	gint64 status_at; /* monotonic, us */
	gboolean have_state;
	HrChanDeviceState state; /* latest DEVICE_STATE */
	GHashTable *held;	 /* gpa -> HrHeldBlock: relayed HOLDs minus RETURNEDs */
	guint64 held_gen;	 /* bumped by every change of @held */
	/* told of every change of @held (the executor reconciles it) */
	void (*held_changed)(gpointer guest, gpointer data);
	gpointer held_changed_data;
	HrResult *last_result;
	gboolean ready; /* connected and the resync is over */

	/*
	 * EVACUATE, CAPTURE and RETURN, one at a time (the driver runs one
	 * EVACUATE or CAPTURE at a time; keeping RETURN in line too makes the
	 * order of a guest's commands the order they were asked in).
	 */
	GQueue queue;	   /* HrRequest waiting, oldest first */
	HrRequest *active; /* sent or running */
	GQueue finished;   /* the last @history finished, oldest first */
	/*
	 * Every command of the guest by request id (REPORTs, SET_PCPs, and
	 * the requests above, which it owns): what answers match.
	 */
	HrInflight *commands;
	guint history;
	guint retry_id; /* sends the queue's head again after S_BUSY */
	guint64 requests_final[HR_REQUEST_N_STATES];
	guint64 blocks_freed_total;   /* by EVACUATE and CAPTURE results */
	guint64 pages_migrated_total; /* likewise */
	guint64 blocks_returned_total[HR_GUEST_N_RETURN_REASONS]; /* by reason */

	guint64 frames;
	guint64 guest_msgs;
	guint64 rejected;
	gchar *last_reject_reason;
	guint64 cmds_sent;
	guint64 cmds_lost;

	/* what the guest said that nothing on our side accounts for */
	guint64 holds_unknown;	  /* HOLDs for requests we do not know */
	guint64 orphans_returned; /* held blocks nobody owned, given back */
	guint64 returns_unknown;  /* RETURNEDs of blocks we did not know held */
	gint64 gone_at;		  /* monotonic us: disconnected since, 0 while connected */

	/* PCP policy, hr-pcp.c */
	gboolean pcp_want_set; /* by the API, wins over the [guest:] group's */
	HrPcpPolicy pcp_want;
	gboolean pcp_config_set; /* the [guest:] group's, as last looked up */
	HrPcpPolicy pcp_config;
	gboolean pcp_applied_set;
	HrPcpPolicy pcp_applied;   /* the last one the guest answered S_OK */
	gboolean pcp_density_sent; /* by the first SET_PCP in flight, to undo at the last */
	guint pcp_evacuations;	   /* the executor's, running: the guest runs density */
};

G_END_DECLS
