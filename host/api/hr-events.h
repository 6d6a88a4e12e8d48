/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * GET /v1/events: the core's events as Server-Sent Events. Each client
 * gets, from the moment it connects, every event that passes its filter:
 *
 *   id: EPOCH:SEQ
 *   event: TYPE
 *   data: {"seq": SEQ, "epoch": EPOCH, "type": TYPE, "time_us": ..., ...}
 *
 * and a ": ping" comment every HR_EVENTS_PING_S seconds. A client that
 * falls more than HR_EVENTS_MAX_QUEUED bytes behind is dropped: the daemon
 * never buffers without bound nor waits for a reader.
 *
 * SEQ counts the events of one daemon process; EPOCH counts the daemon's
 * starts (kept in the state directory), so an id names one event across
 * restarts. The last HR_EVENTS_RING_MAX events (at most
 * HR_EVENTS_RING_BYTES) are kept: a client that reconnects with
 * Last-Event-ID gets those it missed, or, when they are not all kept (the
 * daemon restarted, or too many came since), an event "reset" first,
 * whatever its filter, which says to read the state again.
 */

#include <gio/gio.h>

#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

#define HR_EVENTS_PING_S 15
#define HR_EVENTS_MAX_QUEUED (4 << 20)
#define HR_EVENTS_RING_MAX 4096
#define HR_EVENTS_RING_BYTES (2 << 20)

typedef struct _HrEventStream HrEventStream;

HrEventStream *
hr_event_stream_new(HrCore *core, HrPrepare *prepare);
void
hr_event_stream_free(HrEventStream *stream);

/*
 * The filter of ?types=a,b&guest=NAME: FALSE with @error naming what is
 * wrong. @types_mask has bit (1 << HrEventKind) set for each type wanted.
 */
gboolean
hr_event_stream_parse_filter(GHashTable *query, guint32 *types_mask, const gchar **guest,
			     GError **error);
/*
 * take over @io, an HTTP connection whose request was read, as a client;
 * @last_event_id: its Last-Event-ID header, or NULL
 */
void
hr_event_stream_add_client(HrEventStream *stream, GIOStream *io, guint32 types_mask,
			   const gchar *guest, const gchar *last_event_id);
guint
hr_event_stream_get_n_clients(HrEventStream *stream);
/* events written into client queues, and clients dropped for falling behind */
guint64
hr_event_stream_get_delivered(HrEventStream *stream);
guint64
hr_event_stream_get_dropped(HrEventStream *stream);
/* events sent again to clients that came back, and resets sent instead */
guint64
hr_event_stream_get_replayed(HrEventStream *stream);
guint64
hr_event_stream_get_resets(HrEventStream *stream);
guint64
hr_event_stream_get_epoch(HrEventStream *stream);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrEventStream, hr_event_stream_free)

G_END_DECLS
