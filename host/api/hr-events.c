/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrEvents"

#include "hr-events.h"

#include <string.h>

#include "hr-api-json.h"

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
	guint64 seq;
	guint ping_id;
	guint64 delivered;
	guint64 dropped;
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
hr_event_client_wants(HrEventClient *client, guint type, HrGuest *guest)
{
	if ((client->types_mask & (1u << type)) == 0)
		return FALSE;
	if (client->guest == NULL)
		return TRUE;
	return guest != NULL && (g_strcmp0(guest->name, client->guest) == 0 ||
				 g_ascii_strcasecmp(guest->uuid, client->guest) == 0);
}

/* one of @event (a guest's) and @pevent (the executor's) */
static void
hr_event_stream_deliver(HrEventStream *stream, const HrEvent *event, const HrPrepareEvent *pevent)
{
	guint type = event != NULL ? event->kind : HR_EVENT_N_KINDS + pevent->kind;
	HrGuest *guest = event != NULL ? event->guest : NULL;
	g_autoptr(GBytes) text = NULL;
	guint64 seq = ++stream->seq;

	/* backwards: a client may be closed (and removed) on the way */
	for (guint i = stream->clients->len; i > 0; i--) {
		HrEventClient *client = g_ptr_array_index(stream->clients, i - 1);
		if (!hr_event_client_wants(client, type, guest))
			continue;
		if (text == NULL) {
			g_autoptr(JsonNode) node = event != NULL
						       ? hr_api_event_to_json(event, seq)
						       : hr_api_prepare_event_to_json(pevent, seq);
			g_autofree gchar *json = json_to_string(node, FALSE);
			gchar *str = g_strdup_printf("id: %" G_GUINT64_FORMAT "\nevent: %s\n"
						     "data: %s\n\n",
						     seq, hr_event_type_to_string(type), json);
			text = g_bytes_new_take(str, strlen(str));
		}
		stream->delivered++;
		hr_event_client_send(client, text);
	}
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

HrEventStream *
hr_event_stream_new(HrCore *core, HrPrepare *prepare)
{
	HrEventStream *stream = g_new0(HrEventStream, 1);
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

void
hr_event_stream_add_client(HrEventStream *stream, GIOStream *io, guint32 types_mask,
			   const gchar *guest)
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
