/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrRecord"

#include "hr-record.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "hr-codec.h"

/* a long run records thousands of STATUS: enough to pick a corpus from */
#define HR_RECORD_MAX_FILES 20000

static void
hr_record_write(const gchar *dir, const gchar *target, const guint8 *head, gsize head_len,
		GBytes *body)
{
	static guint files;
	gsize len = 0;
	const guint8 *data = body != NULL ? g_bytes_get_data(body, &len) : NULL;
	g_autoptr(GByteArray) input = g_byte_array_sized_new(head_len + len);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *sum = NULL;
	g_autofree gchar *sub = g_build_filename(dir, target, NULL);
	g_autofree gchar *path = NULL;

	if (files >= HR_RECORD_MAX_FILES)
		return;
	g_byte_array_append(input, head, head_len);
	if (len > 0)
		g_byte_array_append(input, data, len);
	sum = g_compute_checksum_for_data(G_CHECKSUM_SHA1, input->data, input->len);
	path = g_build_filename(sub, sum, NULL);
	if (g_file_test(path, G_FILE_TEST_EXISTS))
		return;
	if (g_mkdir_with_parents(sub, 0755) != 0 ||
	    !g_file_set_contents(path, (const gchar *)input->data, input->len, &error)) {
		g_warning("cannot record a frame in %s: %s (HUGEROOM_RECORD_DIR)", sub,
			  error != NULL ? error->message : g_strerror(errno));
		return;
	}
	if (++files == HR_RECORD_MAX_FILES)
		g_message("recorded %u inputs in %s: no more (HUGEROOM_RECORD_DIR)", files, dir);
}

void
hr_record_frame(gboolean from_device, guint16 type, GBytes *payload, guint64 guest_features)
{
	static gsize once;
	static const gchar *dir;
	g_autoptr(GBytes) frame = NULL;
	const guint8 whole = 0; /* fuzz-chan: byte 0 is the chunk size, 0 the whole stream */

	if (g_once_init_enter(&once)) {
		dir = g_getenv("HUGEROOM_RECORD_DIR");
		if (dir != NULL && *dir == '\0')
			dir = NULL;
		g_once_init_leave(&once, 1);
	}
	if (dir == NULL)
		return;
	frame = hr_chan_frame_encode(type, payload);
	hr_record_write(dir, "chan", &whole, 1, frame);
	if (from_device && type == HR_CHAN_GUEST_MSG && payload != NULL &&
	    g_bytes_get_size(payload) >= 2) {
		const guint8 *b = g_bytes_get_data(payload, NULL);
		guint16 msg = b[0] | (b[1] << 8);
		hr_record_write(dir, msg == VIRTIO_HUGEROOM_MSG_STATUS ? "status" : "event", NULL,
				0, payload);
		hr_record_write(dir, "device", NULL, 0, payload);
	} else if (!from_device && type == HR_CHAN_HOST_CMD) {
		/* fuzz-guest-cmd: the features byte, then "the used length is the size" */
		const guint8 head[2] = {(guint8)(guest_features & 0xff), 0};
		hr_record_write(dir, "cmd", NULL, 0, payload);
		hr_record_write(dir, "device", NULL, 0, payload);
		hr_record_write(dir, "guest-cmd", head, sizeof(head), payload);
	}
}
