/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include "hr-codec.h"
#include "hr-listeners.h"

G_BEGIN_DECLS

/*
 * One EVACUATE, CAPTURE or RETURN the daemon sends to one guest.
 *
 *   queued --send--> sent --PROGRESS/HOLD--> running --RESULT--> done
 *     |               |                        |                 partial
 *     |               |                        |                 budget
 *     |               +------------------------+---------------> cancelled
 *     |                                                          failed
 *     +--------------------------------------------------------> timed-out
 *                                                                lost
 *
 * A request waits in "queued" while another command of the same guest
 * runs, and goes back there when the driver answers S_BUSY (a command the
 * daemon no longer knows, for example from before a restart, still runs).
 * Its deadline counts from its creation and covers the wait in the queue;
 * when it passes, the daemon cancels it on the device and the request ends
 * "timed-out". "lost" means the device disconnected before the RESULT.
 * A RESULT that arrives after a request ended (timed-out, lost) is still
 * recorded in it, so its real outcome stays visible.
 */
typedef enum {
	HR_REQUEST_QUEUED,
	HR_REQUEST_SENT,
	HR_REQUEST_RUNNING,
	HR_REQUEST_DONE,
	HR_REQUEST_PARTIAL,
	HR_REQUEST_BUDGET,
	HR_REQUEST_CANCELLED,
	HR_REQUEST_FAILED,
	HR_REQUEST_TIMED_OUT,
	HR_REQUEST_LOST,
	HR_REQUEST_N_STATES,
} HrRequestState;

typedef enum {
	HR_REQUEST_EVACUATE,
	HR_REQUEST_CAPTURE,
	HR_REQUEST_RETURN,
} HrRequestKind;

/* RETURN count that asks for every held block (SPEC 1.6.6.1) */
#define HR_REQUEST_RETURN_ALL G_MAXUINT32

typedef struct _HrRequest HrRequest;

/* called after every change of state, progress or result */
typedef void (*HrRequestFunc)(HrRequest *request, gpointer user_data);

/*
 * What a caller (the API, a planner) asks for. Arrays are borrowed.
 * EVACUATE: @count blocks, CHEAPEST when @nr_gpas is 0 (optionally within
 * @ranges), else try @gpas in order until @count (0: all of them) are free.
 * CAPTURE: @count and @budget_ms. RETURN: @count blocks of the guest's
 * choice, or exactly @gpas, or everything with @all.
 */
typedef struct {
	HrRequestKind kind;
	guint32 count;
	const guint64 *gpas;
	guint nr_gpas;
	const HrRange *ranges;
	guint nr_ranges;
	guint64 budget_pages;
	guint32 budget_ms;
	guint32 timeout_s; /* 0: the daemon's default */
	gboolean all;
	/* EVACUATE with EVAC_F_BACKGROUND: nobody waits (the guest negotiated F_BACKGROUND) */
	gboolean background;
	HrRequestFunc notify; /* NULL, or told of every change from the start */
	gpointer notify_data;
} HrRequestParams;

struct _HrRequest {
	gint refcount;
	gpointer owner; /* the HrGuest that runs it */
	guint64 id;
	HrRequestKind kind;
	HrRequestState state;
	HrCmd *cmd; /* the command as sent, hdr.request_id == id */
	gboolean all;
	guint32 timeout_s;
	gint64 deadline; /* monotonic us */
	guint timeout_id;
	gboolean cancel_sent;
	guint busy_retries;
	gint64 retry_at; /* monotonic us; 0: send as soon as it is first */

	HrResult progress; /* latest PROGRESS, or the RESULT's counts */
	gboolean have_result;
	HrResult result;
	gchar *error;	/* why it failed, timed out or was lost */
	GArray *blocks; /* guint64 gpas it got held (or returned, RETURN) */

	GDateTime *created_at;
	GDateTime *sent_at;
	GDateTime *started_at;
	GDateTime *finished_at;

	HrListeners *listeners; /* HrRequestFunc: every change */
};

const gchar *
hr_request_state_to_string(HrRequestState state);
const gchar *
hr_request_kind_to_string(HrRequestKind kind);
gboolean
hr_request_state_is_final(HrRequestState state);
/*
 * Set a G_IO_ERROR_INVALID_ARGUMENT (the API answers 400) and return FALSE;
 * for a bad field of a request the API or the daemon was given.
 */
gboolean
hr_request_invalid(GError **error, const gchar *format, ...) G_GNUC_PRINTF(2, 3);

/*
 * Check @params against the SPEC rules and the guest's RAM (@ram, may be
 * NULL) and build the request; errors name the field, as the API takes it
 * ("gpas[2]: 0x1234 is not 2 MiB aligned").
 */
HrRequest *
hr_request_new(guint64 id, const HrRequestParams *params, const HrRamRange *ram, guint nr_ram,
	       GError **error);
HrRequest *
hr_request_ref(HrRequest *request);
void
hr_request_unref(HrRequest *request);
/* told of every change from now on; the first is params->notify */
void
hr_request_add_listener(HrRequest *request, HrRequestFunc func, gpointer user_data);
void
hr_request_remove_listener(HrRequest *request, HrRequestFunc func, gpointer user_data);

/* transitions; each tells the listeners */
void
hr_request_set_state(HrRequest *request, HrRequestState state, const gchar *error);
void
hr_request_sent(HrRequest *request);
/* a PROGRESS; FALSE when it went backwards and was ignored */
gboolean
hr_request_progress(HrRequest *request, const HrResult *progress);
/* a RESULT: the final state from its status (S_BUSY is the caller's) */
void
hr_request_result(HrRequest *request, const HrResult *result);
void
hr_request_add_blocks(HrRequest *request, const guint64 *gpas, guint32 nr);

/* the blocks a request aims at, 0 when unknown (RETURN of everything) */
guint32
hr_request_target(HrRequest *request);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrRequest, hr_request_unref)

/*
 * A hash of a guint64 gpa (for g_int64_equal): g_int64_hash() folds the
 * high word into the low one and leaves 21 low zero bits of a 2 MiB block,
 * which GLib's tables probe for a long time (1 M blocks took 40 s to
 * insert): the bits are mixed (MurmurHash3's finalizer).
 */
guint
hr_gpa_hash(gconstpointer gpa);

G_END_DECLS
