/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/*
 * The commands a guest was sent, of every kind, by request id: the one
 * place a RESULT, a PROGRESS or a STATUS is matched to what it answers
 * (hr-device.c). Request ids are the registry's, unique across kinds.
 * A REPORT or a SET_PCP is here until it is answered or lost; a request
 * (EVACUATE, CAPTURE, RETURN) from when it is queued until the guest's
 * history of finished requests lets it go, so that a late RESULT is
 * still recorded.
 */
typedef enum {
	HR_INFLIGHT_REPORT,  /* a STATUS answers it, a RESULT fails it */
	HR_INFLIGHT_SET_PCP, /* its RESULT; @data is hr-pcp.c's */
	HR_INFLIGHT_REQUEST, /* an HrRequest (@data): its PROGRESS and RESULT */
	HR_INFLIGHT_N_KINDS,
} HrInflightKind;

typedef struct {
	guint64 request_id;
	HrInflightKind kind;
	guint16 type;	/* the command's, VIRTIO_HUGEROOM_CMD_* */
	gint64 sent_at; /* monotonic us: when it was added */
	gpointer data;
	GDestroyNotify data_free;
} HrInflightCmd;

typedef struct _HrInflight HrInflight;

/* TRUE: remove @cmd (hr_inflight_foreach_remove) */
typedef gboolean (*HrInflightFunc)(HrInflightCmd *cmd, gpointer user_data);

HrInflight *
hr_inflight_new(void);
void
hr_inflight_free(HrInflight *table);
/* @request_id must not be in @table; @data_free frees @data on removal */
HrInflightCmd *
hr_inflight_add(HrInflight *table, guint64 request_id, HrInflightKind kind, guint16 type,
		gpointer data, GDestroyNotify data_free);
/* the command of @request_id, or NULL; of @kind unless @kind is HR_INFLIGHT_N_KINDS */
HrInflightCmd *
hr_inflight_lookup(HrInflight *table, guint64 request_id, HrInflightKind kind);
gboolean
hr_inflight_remove(HrInflight *table, guint64 request_id);
/* how many of @kind (HR_INFLIGHT_N_KINDS: all) */
guint
hr_inflight_count(HrInflight *table, HrInflightKind kind);
/* @func on each of @kind (HR_INFLIGHT_N_KINDS: all); those it says TRUE of are removed */
void
hr_inflight_foreach_remove(HrInflight *table, HrInflightKind kind, HrInflightFunc func,
			   gpointer user_data);

G_END_DECLS
