/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The store's own state, shared by hr-reservation-store.c and
 * hr-reservation-file.c and by nothing else: the API is
 * hr-reservation-store.h.
 */

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr-guest.h"
#include "hr-json.h"
#include "hr-reservation-store.h"
#include "hr-safefile.h"

G_BEGIN_DECLS

#define BLOCK_BYTES (G_GUINT64_CONSTANT(2) * 1024 * 1024)
/*
 * 3: holds name their VM's UUID, and the file keeps when the QEMUs its
 * holds name were seen gone ("gone", by CLOCK_BOOTTIME of "boot_id").
 * 2: holds are named by HrGuest.key; the ledger.
 * 1 named a hold's guest by UUID, which guests without -uuid share.
 */
#define FILE_VERSION 3
#define FILE_VERSION_MIN 1
/* a state file larger than this is not read: a million holds take ~100 MiB */
#define HR_RESERVATION_STATE_MAX ((gsize)512 << 20)
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
/* a state file that could not be written is tried again after 1 s, 2 s, ... 30 s */
#define WRITE_RETRY_MIN_US G_USEC_PER_SEC
#define WRITE_RETRY_MAX_US (30 * G_USEC_PER_SEC)

struct _HrReservationStore {
	gchar *path;
	GPtrArray *list; /* HrReservation, oldest first */
	guint64 next_id;
	HrReservationFunc changed;
	gpointer changed_data;
	guint max;
	gint load_version; /* of the file loaded, 0: none */
	/* guest key -> (entry "b:GPA" or "r:REQUEST_ID" -> gint64 *since, wall us) */
	GHashTable *ledger;
	/*
	 * guest key of a QEMU process holds name -> gint64 *: when it was first
	 * seen gone, CLOCK_BOOTTIME us; 0: before this boot (over)
	 */
	GHashTable *gone;
	gchar *boot_id; /* this boot's, or NULL when unknown */

	/*
	 * The writer thread's; under lock. A failed write keeps its text as
	 * @retry and the thread writes it again after @backoff_us (doubling
	 * up to WRITE_RETRY_MAX_US, back to WRITE_RETRY_MIN_US once a write
	 * succeeds), or at once when a change brings a newer state: the file
	 * on disk never stays stale for want of a change.
	 */
	GMutex lock;
	GCond idle;	 /* a write ended, or the thread did */
	GCond wake;	 /* a newer state, or the store is freed */
	GThread *writer; /* runs while there is text to write or retry */
	gchar *pending;	 /* the latest state not written yet */
	gsize pending_len;
	gboolean writing; /* a write runs, without the lock */
	gchar *retry;	  /* the latest state, whose write failed */
	gsize retry_len;
	gint64 retry_at;   /* monotonic us */
	gint64 backoff_us; /* the wait after the next failure */
	gboolean stopping; /* freed: no more waiting to retry */
	guint64 save_failures;
	guint64 episode_failures; /* failures since the latest write that succeeded */
	gchar *save_error;	  /* the latest write's, NULL when it succeeded */
};

/* hr-reservation-file.c */
gint64
res_boottime_us(void);
void
hr_reservation_store_save_async(HrReservationStore *store);
void
hr_reservation_store_stop_writer(HrReservationStore *store);

G_END_DECLS
