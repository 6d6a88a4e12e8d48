/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * HUGEROOM_RECORD_DIR (host/hr-record.h): hugeroomd writes the frames it
 * reads and sends as inputs for the fuzz targets, each input once.
 */

#define G_LOG_DOMAIN "TestRecord"

#include <stdlib.h>

/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

/* DIR/TARGET/SHA1(@head + @body) exists and holds exactly that */
static void
assert_recorded(const gchar *dir, const gchar *target, const guint8 *head, gsize head_len,
		GBytes *body)
{
	g_autoptr(GByteArray) want = g_byte_array_new();
	g_autofree gchar *sum = NULL;
	g_autofree gchar *path = NULL;
	g_autofree gchar *got = NULL;
	gsize len = 0;

	g_byte_array_append(want, head, head_len);
	g_byte_array_append(want, g_bytes_get_data(body, NULL), g_bytes_get_size(body));
	sum = g_compute_checksum_for_data(G_CHECKSUM_SHA1, want->data, want->len);
	path = g_build_filename(dir, target, sum, NULL);
	g_assert_true(g_file_get_contents(path, &got, &len, NULL));
	g_assert_cmpmem(got, len, want->data, want->len);
}

static guint
count(const gchar *dir, const gchar *target)
{
	g_autofree gchar *sub = g_build_filename(dir, target, NULL);
	g_autoptr(GDir) d = g_dir_open(sub, 0, NULL);
	guint n = 0;
	while (d != NULL && g_dir_read_name(d) != NULL)
		n++;
	return n;
}

static gboolean
cond_held(gpointer data)
{
	HrGuest *g = first_guest(data);
	return g != NULL && g->ready && g_hash_table_size(g->held) == 3;
}

static void
test_record(Fixture *f, gconstpointer data)
{
	const gchar *dir = data;
	g_autoptr(FakeDevice) dev = fake_device_up(f, "rec", 0x30);
	g_autoptr(GBytes) status = make_status(1, 0, MiB(512));
	g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 77, 0, MiB(64), 3);
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) cmd_bytes = NULL;
	g_autoptr(GBytes) frame = NULL;
	g_autoptr(GError) error = NULL;
	const guint8 whole = 0;
	const guint8 features[2] = {0xf, 0};

	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	/* twice: recorded once */
	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	wait_for(cond_held, f, "three held");
	/* the three orphans go back: a RETURN the daemon sends */
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	cmd_bytes = hr_cmd_encode(cmd);

	assert_recorded(dir, "status", NULL, 0, status);
	assert_recorded(dir, "device", NULL, 0, status);
	assert_recorded(dir, "event", NULL, 0, hold);
	assert_recorded(dir, "device", NULL, 0, hold);
	g_assert_cmpuint(count(dir, "status"), ==, 1);
	g_assert_cmpuint(count(dir, "event"), ==, 1);
	frame = hr_chan_frame_encode(HR_CHAN_GUEST_MSG, hold);
	assert_recorded(dir, "chan", &whole, 1, frame);
	assert_recorded(dir, "cmd", NULL, 0, cmd_bytes);
	assert_recorded(dir, "device", NULL, 0, cmd_bytes);
	/* the driver sees it with the features the device state said */
	assert_recorded(dir, "guest-cmd", features, sizeof(features), cmd_bytes);
	/* HELLO, DEVICE_STATE, STATUS, HOLD in; WELCOME, RETURN (and more) out */
	g_assert_cmpuint(count(dir, "chan"), >=, 6);
}

int
main(int argc, char **argv)
{
	g_autofree gchar *dir = g_dir_make_tmp("hugeroom-record-XXXXXX", NULL);
	g_autofree gchar *cmd = g_strdup_printf("rm -rf '%s'", dir);
	gint ret;

	g_test_init(&argc, &argv, NULL);
	/* read at the first frame */
	g_setenv("HUGEROOM_RECORD_DIR", dir, TRUE);
	g_test_add("/record/frames", Fixture, dir, fixture_setup, test_record, fixture_teardown);
	ret = g_test_run();
	g_assert_cmpint(system(cmd), ==, 0);
	return ret;
}
