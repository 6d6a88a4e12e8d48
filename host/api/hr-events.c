/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrEvents"

#include "hr-events.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "hr-api-json.h"
#include "hr-json.h"
#include "hr-safefile.h"

/* one event as it was sent, kept for the clients that reconnect */
typedef struct {
	guint64 seq;
	guint type;
	gchar *guest_name; /* NULL: not a guest's event */
	gchar *guest_uuid;
	GBytes *text;
} HrEventRecord;

typedef struct {
	HrEventStream *stream; /* NULL once closed */
	GIOStream *io;
	GCancellable *cancellable;
	GQueue outq; /* GBytes */
	gsize queued;
	guint writing;		/* the head of outq in the write under way */
	GOutputVector *vectors; /* their bytes, for the write */
	guint32 types_mask;
	gchar *guest;
	guint8 buf[512]; /* what the client sends, read and ignored */
	gint refcount;
} HrEventClient;

/* the stream's types: the guests' (HrEventKind), then the executor's (HrPrepareEventKind) */
#define HR_EVENTS_N_TYPES (HR_EVENT_N_KINDS + HR_PREPARE_N_KINDS)

static const gchar *
hr_event_type_to_string(guint type)
{
	if (type < HR_EVENT_N_KINDS)
		return hr_event_kind_to_string(type);
	return hr_prepare_event_kind_to_string(type - HR_EVENT_N_KINDS);
}

struct _HrEventStream {
	HrCore *core;
	HrPrepare *prepare;
	GPtrArray *clients; /* HrEventClient */
	guint64 epoch;
	guint64 seq;
	GQueue ring; /* HrEventRecord, oldest first */
	gsize ring_bytes;
	guint ping_id;
	guint64 delivered;
	guint64 dropped;
	guint64 replayed;
	guint64 resets;
};

static void
hr_event_client_unref(HrEventClient *client)
{
	if (--client->refcount > 0)
		return;
	g_object_unref(client->io);
	g_object_unref(client->cancellable);
	g_queue_clear_full(&client->outq, (GDestroyNotify)g_bytes_unref);
	g_free(client->vectors);
	g_free(client->guest);
	g_free(client);
}

static void
hr_event_client_close(HrEventClient *client, const gchar *why)
{
	HrEventStream *stream = client->stream;

	if (stream == NULL)
		return;
	client->stream = NULL;
	g_debug("event client closed: %s", why);
	g_cancellable_cancel(client->cancellable);
	g_io_stream_close_async(client->io, G_PRIORITY_DEFAULT, NULL, NULL, NULL);
	/* the stream's reference */
	g_ptr_array_remove_fast(stream->clients, client);
}

static void
hr_event_client_write_next(HrEventClient *client);

/* events a write takes at most: one per main loop iteration would fall behind */
#define HR_EVENTS_WRITE_BATCH 64

static void
hr_event_client_write_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	HrEventClient *client = user_data;
	g_autoptr(GError) error = NULL;
	guint n = client->writing;

	client->writing = 0;
	g_clear_pointer(&client->vectors, g_free);
	if (!g_output_stream_writev_all_finish(G_OUTPUT_STREAM(source), res, NULL, &error)) {
		hr_event_client_close(client, error->message);
	} else if (client->stream != NULL) {
		for (guint i = 0; i < n; i++) {
			GBytes *done = g_queue_pop_head(&client->outq);
			client->queued -= g_bytes_get_size(done);
			g_bytes_unref(done);
		}
		hr_event_client_write_next(client);
	}
	hr_event_client_unref(client);
}

/* everything queued (up to a batch) in one write */
static void
hr_event_client_write_next(HrEventClient *client)
{
	GOutputStream *out = g_io_stream_get_output_stream(client->io);
	guint n = MIN(client->outq.length, HR_EVENTS_WRITE_BATCH);
	GList *l = client->outq.head;

	if (client->writing > 0 || n == 0 || client->stream == NULL)
		return;
	client->vectors = g_new(GOutputVector, n);
	for (guint i = 0; i < n; i++, l = l->next) {
		gsize len;
		client->vectors[i].buffer = g_bytes_get_data(l->data, &len);
		client->vectors[i].size = len;
	}
	client->writing = n;
	client->refcount++;
	g_output_stream_writev_all_async(out, client->vectors, n, G_PRIORITY_DEFAULT,
					 client->cancellable, hr_event_client_write_cb, client);
}

static void
hr_event_client_send(HrEventClient *client, GBytes *text)
{
	HrEventStream *stream = client->stream;

	if (client->queued + g_bytes_get_size(text) > HR_EVENTS_MAX_QUEUED) {
		stream->dropped++;
		g_warning("an event client fell %" G_GSIZE_FORMAT " bytes behind: dropped",
			  client->queued);
		hr_event_client_close(client, "too slow");
		return;
	}
	client->queued += g_bytes_get_size(text);
	g_queue_push_tail(&client->outq, g_bytes_ref(text));
	hr_event_client_write_next(client);
}

static void
hr_event_client_read_cb(GObject *source, GAsyncResult *res, gpointer user_data);

static void
hr_event_client_read_next(HrEventClient *client)
{
	GInputStream *in = g_io_stream_get_input_stream(client->io);
	client->refcount++;
	g_input_stream_read_async(in, client->buf, sizeof(client->buf), G_PRIORITY_DEFAULT,
				  client->cancellable, hr_event_client_read_cb, client);
}

/* a client has nothing to say: EOF or an error is its end */
static void
hr_event_client_read_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	HrEventClient *client = user_data;
	g_autoptr(GError) error = NULL;
	gssize n = g_input_stream_read_finish(G_INPUT_STREAM(source), res, &error);

	if (n <= 0)
		hr_event_client_close(client, n == 0 ? "end of stream" : error->message);
	else if (client->stream != NULL)
		hr_event_client_read_next(client);
	hr_event_client_unref(client);
}

static gboolean
hr_event_client_wants(HrEventClient *client, guint type, const gchar *name, const gchar *uuid)
{
	if ((client->types_mask & (1u << type)) == 0)
		return FALSE;
	if (client->guest == NULL)
		return TRUE;
	return name != NULL && (g_strcmp0(name, client->guest) == 0 ||
				g_ascii_strcasecmp(uuid, client->guest) == 0);
}

static void
hr_event_record_free(HrEventRecord *rec)
{
	g_free(rec->guest_name);
	g_free(rec->guest_uuid);
	g_bytes_unref(rec->text);
	g_free(rec);
}

/* keep @rec for replays, forgetting the oldest past the ring's bounds */
static void
hr_event_stream_keep(HrEventStream *stream, HrEventRecord *rec)
{
	g_queue_push_tail(&stream->ring, rec);
	stream->ring_bytes += g_bytes_get_size(rec->text);
	while (stream->ring.length > HR_EVENTS_RING_MAX ||
	       stream->ring_bytes > HR_EVENTS_RING_BYTES) {
		HrEventRecord *old = g_queue_pop_head(&stream->ring);
		stream->ring_bytes -= g_bytes_get_size(old->text);
		hr_event_record_free(old);
	}
}

/* one of @event (a guest's) and @pevent (the executor's) */
static void
hr_event_stream_deliver(HrEventStream *stream, const HrEvent *event, const HrPrepareEvent *pevent)
{
	HrGuest *guest = event != NULL ? event->guest : NULL;
	HrEventRecord *rec = g_new0(HrEventRecord, 1);
	g_autoptr(JsonNode) node = NULL;
	g_autofree gchar *json = NULL;
	gchar *str;

	rec->seq = ++stream->seq;
	rec->type = event != NULL ? event->kind : HR_EVENT_N_KINDS + pevent->kind;
	if (guest != NULL) {
		rec->guest_name = g_strdup(hr_guest_get_name(guest));
		rec->guest_uuid = g_strdup(hr_guest_get_uuid(guest));
	}
	/* every event is written once, whether a client is there or not: the ring keeps it */
	node = event != NULL ? hr_api_event_to_json(event, rec->seq)
			     : hr_api_prepare_event_to_json(pevent, rec->seq);
	json_object_set_int_member(json_node_get_object(node), "epoch", stream->epoch);
	json = json_to_string(node, FALSE);
	str = g_strdup_printf("id: %" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT "\nevent: %s\n"
			      "data: %s\n\n",
			      stream->epoch, rec->seq, hr_event_type_to_string(rec->type), json);
	rec->text = g_bytes_new_take(str, strlen(str));
	/* backwards: a client may be closed (and removed) on the way */
	for (guint i = stream->clients->len; i > 0; i--) {
		HrEventClient *client = g_ptr_array_index(stream->clients, i - 1);
		if (!hr_event_client_wants(client, rec->type, rec->guest_name, rec->guest_uuid))
			continue;
		stream->delivered++;
		hr_event_client_send(client, rec->text);
	}
	hr_event_stream_keep(stream, rec);
}

static void
hr_event_stream_event_cb(HrCore *core, const HrEvent *event, gpointer user_data)
{
	(void)core;
	hr_event_stream_deliver(user_data, event, NULL);
}

static void
hr_event_stream_prepare_cb(HrPrepare *prepare, const HrPrepareEvent *event, gpointer user_data)
{
	(void)prepare;
	hr_event_stream_deliver(user_data, NULL, event);
}

static gboolean
hr_event_stream_ping_cb(gpointer user_data)
{
	HrEventStream *stream = user_data;
	g_autoptr(GBytes) ping = g_bytes_new_static(": ping\n\n", 8);

	for (guint i = stream->clients->len; i > 0; i--)
		hr_event_client_send(g_ptr_array_index(stream->clients, i - 1), ping);
	return G_SOURCE_CONTINUE;
}

/*
 * This start's epoch: the one before it, kept in STATE_DIR/events-epoch,
 * plus one. Without a file that can be written the wall clock's seconds
 * stand in, which grow across restarts as well.
 */
static guint64
hr_event_stream_next_epoch(const gchar *state_dir)
{
	g_autofree gchar *path =
	    state_dir != NULL ? g_build_filename(state_dir, "events-epoch", NULL) : NULL;
	g_autofree gchar *text = NULL;
	g_autofree gchar *next_text = NULL;
	g_autoptr(GError) error = NULL;
	guint64 epoch = 0;

	if (path == NULL)
		return (guint64)g_get_real_time() / G_USEC_PER_SEC;
	if (!hr_safefile_get_contents(path, getuid(), HR_SAFEFILE_SHARED, 64, &text, NULL,
				      &error)) {
		if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
			g_warning("%s", error->message);
		g_clear_error(&error);
	} else if (!g_ascii_string_to_unsigned(g_strstrip(text), 10, 0, G_MAXUINT32, &epoch,
					       &error)) {
		g_warning("%s: %s; the event stream's epoch starts again", path, error->message);
		g_clear_error(&error);
	}
	epoch++;
	next_text = g_strdup_printf("%" G_GUINT64_FORMAT "\n", epoch);
	/* as the reservations' store makes it, before its first write */
	if (g_mkdir_with_parents(state_dir, 0750) != 0)
		g_set_error(&error, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s", state_dir,
			    g_strerror(errno));
	if (error != NULL ||
	    !g_file_set_contents_full(path, next_text, -1,
				      G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
				      0644, &error)) {
		g_warning("cannot keep the event stream's epoch: %s; using the clock's seconds",
			  error->message);
		return (guint64)g_get_real_time() / G_USEC_PER_SEC;
	}
	return epoch;
}

HrEventStream *
hr_event_stream_new(HrCore *core, HrPrepare *prepare)
{
	HrEventStream *stream = g_new0(HrEventStream, 1);
	stream->epoch = hr_event_stream_next_epoch(hr_core_get_config(core)->state_dir);
	g_queue_init(&stream->ring);
	stream->core = core;
	stream->prepare = prepare;
	stream->clients = g_ptr_array_new_with_free_func((GDestroyNotify)hr_event_client_unref);
	stream->ping_id = g_timeout_add_seconds(HR_EVENTS_PING_S, hr_event_stream_ping_cb, stream);
	hr_core_listen(core, hr_event_stream_event_cb, stream);
	hr_prepare_listen(prepare, hr_event_stream_prepare_cb, stream);
	return stream;
}

void
hr_event_stream_free(HrEventStream *stream)
{
	if (stream == NULL)
		return;
	hr_core_unlisten(stream->core, hr_event_stream_event_cb, stream);
	hr_prepare_unlisten(stream->prepare, hr_event_stream_prepare_cb, stream);
	g_clear_handle_id(&stream->ping_id, g_source_remove);
	while (stream->clients->len > 0)
		hr_event_client_close(g_ptr_array_index(stream->clients, 0), "daemon stopping");
	g_ptr_array_unref(stream->clients);
	g_queue_clear_full(&stream->ring, (GDestroyNotify)hr_event_record_free);
	g_free(stream);
}

gboolean
hr_event_stream_parse_filter(GHashTable *query, guint32 *types_mask, const gchar **guest,
			     GError **error)
{
	GHashTableIter iter;
	const gchar *key, *value;

	*types_mask = (1u << HR_EVENTS_N_TYPES) - 1;
	*guest = NULL;
	if (query == NULL)
		return TRUE;
	g_hash_table_iter_init(&iter, query);
	while (g_hash_table_iter_next(&iter, (gpointer *)&key, (gpointer *)&value)) {
		if (g_strcmp0(key, "guest") == 0) {
			*guest = value;
		} else if (g_strcmp0(key, "types") == 0) {
			g_auto(GStrv) types = g_strsplit(value, ",", -1);
			*types_mask = 0;
			for (guint i = 0; types[i] != NULL; i++) {
				guint k;
				for (k = 0; k < HR_EVENTS_N_TYPES; k++) {
					if (g_strcmp0(types[i], hr_event_type_to_string(k)) == 0)
						break;
				}
				if (k == HR_EVENTS_N_TYPES) {
					g_set_error(
					    error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
					    "types: unknown event type '%s'; the types are "
					    "guest-added, guest-connected, guest-disconnected, "
					    "status, held, request, reservation, plan",
					    types[i]);
					return FALSE;
				}
				*types_mask |= 1u << k;
			}
		} else {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
				    "%s: unknown parameter; /v1/events takes types and guest", key);
			return FALSE;
		}
	}
	return TRUE;
}

/*
 * What a client that comes back with Last-Event-ID "EPOCH:SEQ" missed:
 * the kept events after SEQ that pass its filter, or, when they are not
 * all kept (an earlier epoch, a SEQ older than the ring), a reset.
 */
static void
hr_event_client_catch_up(HrEventClient *client, const gchar *last_event_id)
{
	HrEventStream *stream = client->stream;
	HrEventRecord *oldest = g_queue_peek_head(&stream->ring);
	g_auto(GStrv) parts = g_strsplit(last_event_id, ":", 3);
	const gchar *why = NULL;
	guint64 epoch = 0, seq = 0;

	if (g_strv_length(parts) != 2 ||
	    !g_ascii_string_to_unsigned(parts[0], 10, 0, G_MAXUINT64, &epoch, NULL) ||
	    !g_ascii_string_to_unsigned(parts[1], 10, 0, G_MAXUINT64, &seq, NULL))
		why = "Last-Event-ID is not an id of this stream (EPOCH:SEQ)";
	else if (epoch != stream->epoch)
		why = "the daemon restarted since: the events between are not kept";
	else if (seq > stream->seq)
		why = "Last-Event-ID is ahead of the stream";
	else if (seq < stream->seq && (oldest == NULL || seq + 1 < oldest->seq))
		why = "the events since are no longer kept";
	if (why != NULL) {
		g_autoptr(JsonBuilder) b = json_builder_new();
		g_autoptr(JsonNode) node = NULL;
		g_autofree gchar *json = NULL;
		gchar *str;

		json_builder_begin_object(b);
		hr_json_add_int(b, "seq", stream->seq);
		hr_json_add_int(b, "epoch", stream->epoch);
		json_builder_set_member_name(b, "type");
		json_builder_add_string_value(b, "reset");
		json_builder_set_member_name(b, "reason");
		json_builder_add_string_value(b, why);
		hr_json_add_int(b, "time_us", g_get_real_time());
		json_builder_end_object(b);
		node = json_builder_get_root(b);
		json = json_to_string(node, FALSE);
		str = g_strdup_printf("id: %" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT
				      "\nevent: reset\ndata: %s\n\n",
				      stream->epoch, stream->seq, json);
		{
			g_autoptr(GBytes) text = g_bytes_new_take(str, strlen(str));
			hr_event_client_send(client, text);
		}
		stream->resets++;
		return;
	}
	for (GList *l = stream->ring.head; l != NULL && client->stream != NULL; l = l->next) {
		HrEventRecord *rec = l->data;
		if (rec->seq <= seq ||
		    !hr_event_client_wants(client, rec->type, rec->guest_name, rec->guest_uuid))
			continue;
		stream->replayed++;
		hr_event_client_send(client, rec->text);
	}
}

void
hr_event_stream_add_client(HrEventStream *stream, GIOStream *io, guint32 types_mask,
			   const gchar *guest, const gchar *last_event_id)
{
	static const gchar head[] = "HTTP/1.1 200 OK\r\n"
				    "Content-Type: text/event-stream\r\n"
				    "Cache-Control: no-store\r\n"
				    "Connection: close\r\n"
				    "Server: hugeroomd/" PACKAGE_VERSION "\r\n\r\n"
				    "retry: 1000\n\n";
	HrEventClient *client = g_new0(HrEventClient, 1);
	g_autoptr(GBytes) text = g_bytes_new_static(head, sizeof(head) - 1);

	client->refcount = 1;
	client->stream = stream;
	client->io = g_object_ref(io);
	client->cancellable = g_cancellable_new();
	client->types_mask = types_mask;
	client->guest = g_strdup(guest);
	g_queue_init(&client->outq);
	g_ptr_array_add(stream->clients, client);
	hr_event_client_send(client, text);
	if (last_event_id != NULL && client->stream != NULL)
		hr_event_client_catch_up(client, last_event_id);
	if (client->stream != NULL)
		hr_event_client_read_next(client);
}

guint
hr_event_stream_get_n_clients(HrEventStream *stream)
{
	return stream->clients->len;
}

guint64
hr_event_stream_get_delivered(HrEventStream *stream)
{
	return stream->delivered;
}

guint64
hr_event_stream_get_dropped(HrEventStream *stream)
{
	return stream->dropped;
}

guint64
hr_event_stream_get_replayed(HrEventStream *stream)
{
	return stream->replayed;
}

guint64
hr_event_stream_get_resets(HrEventStream *stream)
{
	return stream->resets;
}

guint64
hr_event_stream_get_epoch(HrEventStream *stream)
{
	return stream->epoch;
}
