/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One QEMU device connection (SPEC.md Part 2).
 *
 * States: AWAIT_HELLO until the first frame, which must be a HELLO; we
 * answer WELCOME and enter RESYNC, where HOLDs with request_id 0 collect the
 * device's held set until the first DEVICE_STATE ends it; then RUNNING,
 * where a LAYOUT (channel feature HR_CHAN_F_LAYOUT, offered in the WELCOME
 * of protocol version 2 and taken up in that DEVICE_STATE) replaces the
 * guest's RAM layout without a reconnect. Any
 * frame that breaks a rule closes the connection: QEMU reconnects, so a
 * broken peer is rate-limited by its reconnect interval and never stalls
 * the main loop.
 */

#define G_LOG_DOMAIN "HrDevice"

#include "hr-device.h"

#include "hr-guest-private.h"

#include "hr-peer.h"
#include "hr-pcp.h"
#include "hr-record.h"

#define HR_DEVICE_READ_SIZE 8192

typedef enum {
	HR_DEVICE_AWAIT_HELLO,
	HR_DEVICE_RESYNC,
	HR_DEVICE_RUNNING,
	HR_DEVICE_CLOSED,
} HrDeviceState;

struct _HrDevice {
	gint refcount;
	const HrConfig *config;
	const HrDeviceHooks *hooks;
	gpointer owner; /* told through @hooks; owns us while we are open */
	GSocketConnection *connection;
	GCancellable *cancellable;
	HrFrameReader *reader;
	HrDeviceState state;
	HrGuest *guest; /* set by HELLO; owned by the daemon */
	gint pid;
	HrPeer *peer;	   /* until HELLO hands it to the guest; NULL if unchecked */
	gchar *peer_error; /* why the peer may not talk to us, or NULL */
	guint hello_timeout_id;
	gint64 window_start; /* monotonic us: the second frames are counted in */
	guint window_frames;
	guint32 status_interval_ms;
	guint32 chan_offered; /* HR_CHAN_F_* our WELCOME offered */
	GQueue outq;	      /* GBytes frames waiting to be written */
	gboolean writing;
	GBytes *inflight;   /* the frame being written */
	GHashTable *resync; /* gpas seen during RESYNC */
	gboolean have_state;
	HrChanDeviceState last_state; /* this connection's, for monotonicity */
};

static void
hr_device_read_next(HrDevice *device);
static void
hr_device_write_next(HrDevice *device);

HrDevice *
hr_device_new(const HrConfig *config, const HrDeviceHooks *hooks, gpointer owner,
	      GSocketConnection *connection, guint32 status_interval_ms)
{
	HrDevice *device = g_new0(HrDevice, 1);
	GSocket *socket = g_socket_connection_get_socket(connection);
	g_autoptr(GError) error = NULL;

	device->refcount = 1;
	device->config = config;
	device->hooks = hooks;
	device->owner = owner;
	device->connection = g_object_ref(connection);
	device->cancellable = g_cancellable_new();
	device->reader = hr_frame_reader_new();
	device->status_interval_ms = status_interval_ms;
	device->peer = hr_peer_new_from_socket(socket, &error);
	device->pid = device->peer != NULL ? device->peer->pid : -1;
	if (device->peer != NULL && !hr_peer_check(device->peer, config, &error))
		g_clear_pointer(&device->peer, hr_peer_free);
	if (device->peer == NULL)
		device->peer_error = g_strdup(error->message);
	device->resync = hr_guest_held_new();
	g_queue_init(&device->outq);
	return device;
}

HrDevice *
hr_device_ref(HrDevice *device)
{
	device->refcount++;
	return device;
}

void
hr_device_unref(HrDevice *device)
{
	if (device == NULL || --device->refcount > 0)
		return;
	g_object_unref(device->connection);
	g_object_unref(device->cancellable);
	hr_frame_reader_free(device->reader);
	g_queue_clear_full(&device->outq, (GDestroyNotify)g_bytes_unref);
	g_clear_pointer(&device->inflight, g_bytes_unref);
	g_hash_table_unref(device->resync);
	hr_peer_free(device->peer);
	g_free(device->peer_error);
	g_free(device);
}

gint
hr_device_get_pid(HrDevice *device)
{
	return device->pid;
}

static const gchar *
hr_device_peer(HrDevice *device)
{
	return device->guest != NULL ? device->guest->name : "unidentified peer";
}

void
hr_device_close(HrDevice *device, const gchar *reason)
{
	HrGuest *guest = device->guest;

	if (device->state == HR_DEVICE_CLOSED)
		return;
	device->state = HR_DEVICE_CLOSED;
	g_clear_handle_id(&device->hello_timeout_id, g_source_remove);
	g_cancellable_cancel(device->cancellable);
	/* a Unix socket closes without waiting */
	g_io_stream_close(G_IO_STREAM(device->connection), NULL, NULL);
	if (reason != NULL)
		g_warning("closing %s (pid %d): %s", hr_device_peer(device), device->pid, reason);
	else
		g_info("%s (pid %d) disconnected", hr_device_peer(device), device->pid);
	device->guest = NULL;
	device->hooks->closed(device->owner, device, guest, reason);
}

void
hr_device_send(HrDevice *device, guint16 type, GBytes *payload)
{
	if (device->state == HR_DEVICE_CLOSED)
		return;
	hr_record_frame(FALSE, type, payload,
			device->guest != NULL ? device->guest->state.guest_features : 0);
	g_queue_push_tail(&device->outq, hr_chan_frame_encode(type, payload));
	if (!device->writing)
		hr_device_write_next(device);
}

static void
hr_device_write_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	g_autoptr(HrDevice) device = user_data;
	g_autoptr(GError) error = NULL;

	device->writing = FALSE;
	if (!g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), res, NULL, &error)) {
		if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
			g_autofree gchar *reason =
			    g_strdup_printf("write failed: %s", error->message);
			hr_device_close(device, reason);
		}
		return;
	}
	hr_device_write_next(device);
}

static void
hr_device_write_next(HrDevice *device)
{
	GOutputStream *out;
	gconstpointer data;
	gsize len;

	if (device->state == HR_DEVICE_CLOSED || g_queue_is_empty(&device->outq))
		return;
	g_clear_pointer(&device->inflight, g_bytes_unref);
	device->inflight = g_queue_pop_head(&device->outq);
	out = g_io_stream_get_output_stream(G_IO_STREAM(device->connection));
	data = g_bytes_get_data(device->inflight, &len);
	device->writing = TRUE;
	g_output_stream_write_all_async(out, data, len, G_PRIORITY_DEFAULT, device->cancellable,
					hr_device_write_cb, hr_device_ref(device));
}

/* every gpa of a guest message must be guest RAM the HELLO announced */
static gboolean
hr_device_check_ram(HrDevice *device, const gchar *what, const guint64 *gpas, guint32 nr,
		    GError **error)
{
	GArray *ram = device->guest->ram;
	for (guint32 i = 0; i < nr; i++) {
		if (!hr_ram_contains((const HrRamRange *)ram->data, ram->len, gpas[i],
				     VIRTIO_HUGEROOM_BLOCK_SIZE)) {
			g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    "%s: gpa 0x%" G_GINT64_MODIFIER "x is outside guest RAM", what,
				    gpas[i]);
			return FALSE;
		}
	}
	return TRUE;
}

static gboolean
hr_device_handle_status(HrDevice *device, HrStatus *status, GError **error)
{
	HrGuest *guest = device->guest;
	g_autofree guint64 *gpas = g_new0(guint64, MAX(status->nr_candidates, 1));

	for (guint i = 0; i < status->nr_candidates; i++)
		gpas[i] = status->candidates[i].gpa;
	if (!hr_device_check_ram(device, "status", gpas, status->nr_candidates, error))
		return FALSE;
	if (status->hdr.request_id != 0) {
		if (hr_inflight_lookup(guest->commands, status->hdr.request_id, HR_INFLIGHT_REPORT))
			hr_inflight_remove(guest->commands, status->hdr.request_id);
		else
			g_info("%s: status answers unknown request %" G_GUINT64_FORMAT, guest->name,
			       status->hdr.request_id);
	}
	g_debug("%s: status seq %" G_GUINT64_FORMAT ", %u zones, %u candidates", guest->name,
		status->seq, status->nr_zones, status->nr_candidates);
	hr_status_free(guest->status);
	guest->status = hr_status_copy(status);
	guest->status_at = g_get_monotonic_time();
	device->hooks->status(device->owner, guest);
	return TRUE;
}

static gboolean
hr_device_handle_blocks(HrDevice *device, HrBlocks *blocks, GError **error)
{
	HrGuest *guest = device->guest;
	const gchar *what = hr_msg_type_to_string(blocks->hdr.type);

	if (!hr_device_check_ram(device, what, blocks->gpas, blocks->nr_blocks, error))
		return FALSE;
	if (blocks->hdr.type == VIRTIO_HUGEROOM_MSG_HOLD) {
		if (blocks->hdr.request_id == 0) {
			/* request id 0 means resync, and only then (SPEC 1.6.4) */
			if (device->state != HR_DEVICE_RESYNC) {
				g_set_error_literal(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
						    "hold: hdr.request_id 0 outside the resync");
				return FALSE;
			}
			for (guint32 i = 0; i < blocks->nr_blocks; i++)
				hr_guest_resync_add(guest, device->resync, blocks->gpas[i]);
			return TRUE;
		}
	}
	hr_guest_handle_blocks(guest, blocks); /* emits HELD_CHANGED */
	return TRUE;
}

static void
hr_device_handle_result(HrDevice *device, HrResult *result)
{
	HrGuest *guest = device->guest;
	/* what it answers, of any kind: one table (hr-inflight.h) */
	HrInflightCmd *cmd =
	    hr_inflight_lookup(guest->commands, result->hdr.request_id, HR_INFLIGHT_N_KINDS);

	if (cmd != NULL && cmd->kind == HR_INFLIGHT_SET_PCP) {
		hr_pcp_handle_result(guest, result);
		return;
	}
	g_free(guest->last_result);
	guest->last_result = g_memdup2(result, sizeof(*result));
	/* a REPORT fails with a RESULT (S_UNSUPPORTED, S_INVALID) */
	if (cmd != NULL && cmd->kind == HR_INFLIGHT_REPORT) {
		hr_inflight_remove(guest->commands, result->hdr.request_id);
		g_info("%s: report request %" G_GUINT64_FORMAT " failed: %s", guest->name,
		       result->hdr.request_id, hr_result_status_to_string(result->status));
		return;
	}
	hr_guest_handle_result(guest, result);
}

static gboolean
hr_device_handle_state(HrDevice *device, GBytes *payload, GError **error)
{
	HrGuest *guest = device->guest;
	HrChanDeviceState state;
	guint64 prev_dropped = device->last_state.cmds_dropped;
	gboolean was_ok = device->have_state && device->last_state.driver_ok;

	if (!hr_chan_device_state_decode(payload, &state, error))
		return FALSE;
	if ((state.chan_features & ~device->chan_offered) != 0 ||
	    (device->have_state && state.chan_features != device->last_state.chan_features)) {
		g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
			    "device-state: chan_features 0x%x is not within 0x%x offered%s",
			    state.chan_features, device->chan_offered,
			    device->have_state ? " or changed" : "");
		return FALSE;
	}
	if (device->have_state && (state.msgs_relayed < device->last_state.msgs_relayed ||
				   state.msgs_rejected < device->last_state.msgs_rejected ||
				   state.cmds_dropped < device->last_state.cmds_dropped)) {
		g_set_error_literal(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    "device-state: a counter went backwards");
		return FALSE;
	}
	device->have_state = TRUE;
	device->last_state = state;
	guest->have_state = TRUE;
	guest->state = state;
	if (state.driver_ok && !was_ok)
		hr_pcp_driver_ready(device->config, guest);
	if (device->state == HR_DEVICE_RESYNC) {
		/* the resync is complete: its set replaces ours (SPEC 2.5) */
		if (g_hash_table_size(device->resync) != state.num_held)
			g_warning("%s: resync listed %u blocks, device-state says %u held",
				  guest->name, g_hash_table_size(device->resync), state.num_held);
		hr_guest_held_take_resync(guest, device->resync);
		g_hash_table_unref(device->resync);
		device->resync = hr_guest_held_new();
		device->state = HR_DEVICE_RUNNING;
		g_info("%s: resync done, %u blocks held", guest->name,
		       g_hash_table_size(guest->held));
		hr_guest_set_ready(guest, TRUE);
		return TRUE;
	}
	if (!state.driver_ok && state.num_held == 0 && g_hash_table_size(guest->held) > 0) {
		/* a device reset empties the held set (SPEC 2.9) */
		g_info("%s: device reset, dropping %u held blocks", guest->name,
		       g_hash_table_size(guest->held));
		hr_guest_held_clear(guest);
	}
	if (state.cmds_dropped > prev_dropped)
		hr_guest_handle_cmds_dropped(guest, state.cmds_dropped);
	return TRUE;
}

/*
 * What the guest may hold is bounded by its RAM, and that by the config
 * (HELLO rule 5, LAYOUT rule 3).
 */
static gboolean
hr_device_check_ram_size(HrDevice *device, const gchar *what, const gchar *name,
			 const HrRamRange *ram, guint32 nr_ram, guint64 ram_size, GError **error)
{
	guint64 max_ram = device->config->max_guest_ram_mb << 20;
	guint64 ram_sum = 0;

	for (guint32 i = 0; i < nr_ram; i++)
		ram_sum += MIN(ram[i].size, max_ram + 1);
	if (ram_sum > max_ram || ram_size > max_ram) {
		g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
			    "%s: %" G_GUINT64_FORMAT
			    " MiB of RAM is more than max_guest_ram_mb %" G_GUINT64_FORMAT,
			    what, MAX(ram_sum, ram_size) >> 20, max_ram >> 20);
		return FALSE;
	}
	if (ram_sum != ram_size)
		g_info("%s: RAM ranges sum to %" G_GUINT64_FORMAT
		       " bytes, ram_size is %" G_GUINT64_FORMAT,
		       name, ram_sum, ram_size);
	return TRUE;
}

/*
 * SPEC 2.5.1: the guest's RAM changed. Everything but the layout stays; held
 * blocks that are no longer guest RAM leave the held set, as they did on the
 * device (SPEC 2.9). A LAYOUT that fails a rule changes nothing.
 */
static gboolean
hr_device_handle_layout(HrDevice *device, GBytes *payload, GError **error)
{
	HrGuest *guest = device->guest;
	g_autoptr(HrChanLayout) layout = NULL;
	g_autoptr(GHashTable) kept = NULL;
	GHashTableIter iter;
	HrHeldBlock *block;
	guint gone;

	if (device->state != HR_DEVICE_RUNNING ||
	    !(device->last_state.chan_features & HR_CHAN_F_LAYOUT)) {
		g_set_error_literal(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    device->state != HR_DEVICE_RUNNING
					? "layout: before the resync ended"
					: "layout: HR_CHAN_F_LAYOUT is not in use");
		return FALSE;
	}
	layout = hr_chan_layout_decode(payload, error);
	if (layout == NULL || !hr_device_check_ram_size(device, "layout", guest->name, layout->ram,
							layout->nr_ram, layout->ram_size, error))
		return FALSE;
	kept = hr_guest_held_new();
	g_hash_table_iter_init(&iter, guest->held);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&block)) {
		if (hr_ram_contains(layout->ram, layout->nr_ram, block->gpa,
				    VIRTIO_HUGEROOM_BLOCK_SIZE))
			hr_guest_held_add(kept, block->gpa, block->request_id);
	}
	gone = g_hash_table_size(guest->held) - g_hash_table_size(kept);
	g_info("%s: guest RAM is now %u ranges, %" G_GUINT64_FORMAT " MiB", guest->name,
	       layout->nr_ram, layout->ram_size >> 20);
	if (gone > 0)
		g_warning("%s: %u held blocks are no longer guest RAM, dropped", guest->name, gone);
	g_array_set_size(guest->ram, 0);
	g_array_append_vals(guest->ram, layout->ram, layout->nr_ram);
	guest->ram_size = layout->ram_size;
	if (gone > 0)
		hr_guest_held_replace(guest, kept);
	return TRUE;
}

static gboolean
hr_device_handle_hello(HrDevice *device, GBytes *payload, GError **error)
{
	g_autoptr(HrChanHello) hello = hr_chan_hello_decode(payload, error);
	HrChanWelcome welcome = {
	    .status_interval_ms = device->status_interval_ms,
	};
	g_autoptr(GBytes) reply = NULL;

	if (hello == NULL || !hr_device_check_ram_size(device, "hello", hello->name, hello->ram,
						       hello->nr_ram, hello->ram_size, error))
		return FALSE;
	/* the highest version both speak; from 2 on, every channel feature we have */
	welcome.proto_version = MIN(hello->proto_version, VIRTIO_HUGEROOM_VERSION);
	welcome.chan_features = welcome.proto_version >= 2 ? HR_CHAN_FEATURES : 0;
	device->chan_offered = welcome.chan_features;
	g_clear_handle_id(&device->hello_timeout_id, g_source_remove);
	device->guest = device->hooks->attach(device->owner, device, hello,
					      g_steal_pointer(&device->peer), error);
	if (device->guest == NULL)
		return FALSE;
	reply = hr_chan_welcome_encode(&welcome);
	hr_device_send(device, HR_CHAN_WELCOME, reply);
	device->state = HR_DEVICE_RESYNC;
	return TRUE;
}

/* a peer that floods us is cut off: QEMU's reconnect interval paces it */
static gboolean
hr_device_check_rate(HrDevice *device, GError **error)
{
	guint max = device->config->max_frames_per_s;
	gint64 now = g_get_monotonic_time();

	if (now - device->window_start >= G_USEC_PER_SEC) {
		device->window_start = now;
		device->window_frames = 0;
	}
	if (++device->window_frames <= max)
		return TRUE;
	g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
		    "frame: more than %u frames in a second (max_frames_per_s)", max);
	return FALSE;
}

static gboolean
hr_device_handle_frame(HrDevice *device, HrChanFrame *frame, GError **error)
{
	if (!hr_device_check_rate(device, error))
		return FALSE;
	hr_record_frame(TRUE, frame->type, frame->payload,
			device->guest != NULL ? device->guest->state.guest_features : 0);
	if (device->state == HR_DEVICE_AWAIT_HELLO) {
		if (frame->type != HR_CHAN_HELLO) {
			g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    "frame: %s before HELLO", hr_chan_type_to_string(frame->type));
			return FALSE;
		}
		return hr_device_handle_hello(device, frame->payload, error);
	}
	device->guest->frames++;
	switch (frame->type) {
	case HR_CHAN_GUEST_MSG: {
		g_autoptr(HrGuestMsg) msg = hr_chan_guest_msg_decode(frame->payload, error);
		if (msg == NULL)
			return FALSE;
		device->guest->guest_msgs++;
		if (msg->status != NULL)
			return hr_device_handle_status(device, msg->status, error);
		if (msg->blocks != NULL)
			return hr_device_handle_blocks(device, msg->blocks, error);
		hr_device_handle_result(device, msg->result);
		return TRUE;
	}
	case HR_CHAN_DEVICE_STATE:
		return hr_device_handle_state(device, frame->payload, error);
	case HR_CHAN_LAYOUT:
		return hr_device_handle_layout(device, frame->payload, error);
	case HR_CHAN_HELLO:
		g_set_error_literal(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
				    "frame: a second HELLO");
		return FALSE;
	default:
		g_set_error(error, HR_CODEC_ERROR, HR_CODEC_ERROR_INVALID,
			    "frame: %s flows from the daemon to the device, not back",
			    hr_chan_type_to_string(frame->type));
		return FALSE;
	}
}

static void
hr_device_read_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	g_autoptr(HrDevice) device = user_data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GBytes) bytes =
	    g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);
	gsize len = 0;
	const guint8 *data;

	if (device->state == HR_DEVICE_CLOSED)
		return;
	if (bytes == NULL) {
		g_autofree gchar *reason = g_strdup_printf("read failed: %s", error->message);
		hr_device_close(device, reason);
		return;
	}
	data = g_bytes_get_data(bytes, &len);
	if (len == 0) {
		hr_device_close(device, NULL);
		return;
	}
	hr_frame_reader_push(device->reader, data, len);
	for (;;) {
		g_autoptr(HrChanFrame) frame = hr_frame_reader_next(device->reader, &error);
		if (frame == NULL && error == NULL)
			break;
		if (frame == NULL || !hr_device_handle_frame(device, frame, &error)) {
			hr_device_close(device, error->message);
			return;
		}
		if (device->state == HR_DEVICE_CLOSED)
			return;
	}
	hr_device_read_next(device);
}

static void
hr_device_read_next(HrDevice *device)
{
	GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(device->connection));
	g_input_stream_read_bytes_async(in, HR_DEVICE_READ_SIZE, G_PRIORITY_DEFAULT,
					device->cancellable, hr_device_read_cb,
					hr_device_ref(device));
}

static gboolean
hr_device_hello_timeout_cb(gpointer user_data)
{
	HrDevice *device = user_data;
	g_autofree gchar *reason = g_strdup_printf("no HELLO within %u ms (hello_timeout_ms)",
						   device->config->hello_timeout_ms);

	device->hello_timeout_id = 0;
	hr_device_close(device, reason);
	return G_SOURCE_REMOVE;
}

void
hr_device_start(HrDevice *device)
{
	if (device->peer_error != NULL) {
		g_autofree gchar *reason = g_strdup_printf("refused: %s", device->peer_error);
		hr_device_close(device, reason);
		return;
	}
	g_info("device connected (pid %d, %s)", device->pid, device->peer->exe);
	device->hello_timeout_id =
	    g_timeout_add(device->config->hello_timeout_ms, hr_device_hello_timeout_cb, device);
	hr_device_read_next(device);
}
