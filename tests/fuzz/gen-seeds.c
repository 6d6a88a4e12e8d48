/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Writes seed corpora for the fuzz targets from the codec's own encoders:
 * gen-seeds OUTDIR creates OUTDIR/{status,event,cmd,chan,guest-cmd}/.
 */
#define G_LOG_DOMAIN "GenSeeds"

#include <glib/gstdio.h>

#include "hr-codec.h"

#define MiB(x) ((guint64)(x) << 20)

static gboolean
write_seed(const gchar *dir, const gchar *name, GBytes *bytes, GError **error)
{
	g_autofree gchar *path = g_build_filename(dir, name, NULL);
	if (!g_file_set_contents(path, g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes),
				 error)) {
		g_prefix_error(error, "writing seed %s: ", path);
		return FALSE;
	}
	return TRUE;
}

static HrStatus *
make_status(guint16 nr_zones, guint16 nr_candidates)
{
	HrStatus *s = hr_status_new(nr_zones, nr_candidates);
	s->seq = 1;
	s->mem_total_pages = 262144;
	for (guint z = 0; z < nr_zones; z++) {
		g_strlcpy(s->zones[z].name, z == 0 ? "DMA32" : "Normal", sizeof(s->zones[z].name));
		s->zones[z].spanned_pages = 0x100000;
		s->zones[z].managed_pages = 100000;
		s->zones[z].nr_free[9] = 20;
	}
	for (guint c = 0; c < nr_candidates; c++) {
		s->candidates[c].gpa = MiB(2) * (c + 1);
		s->candidates[c].free_pages = 500;
		s->candidates[c].migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
		s->candidates[c].zone = c % nr_zones;
	}
	return s;
}

/* the chan target reads its first byte as the chunk size */
static GBytes *
chan_seed(guint8 chunk, GPtrArray *frames)
{
	GByteArray *a = g_byte_array_new();
	g_byte_array_append(a, &chunk, 1);
	for (guint i = 0; i < frames->len; i++) {
		GBytes *f = g_ptr_array_index(frames, i);
		g_byte_array_append(a, g_bytes_get_data(f, NULL), g_bytes_get_size(f));
	}
	return g_byte_array_free_to_bytes(a);
}

/*
 * The guest-cmd target reads a feature byte, a mode byte (bit 0: a le32
 * used length follows) and then the cmdq buffer.
 */
static gboolean
write_guest_seed(const gchar *dir, const gchar *name, guint8 features, gint64 used,
		 GBytes *cmd, GError **error)
{
	GByteArray *a = g_byte_array_new();
	guint8 mode = used >= 0;
	g_autoptr(GBytes) seed = NULL;

	g_byte_array_append(a, &features, 1);
	g_byte_array_append(a, &mode, 1);
	if (used >= 0) {
		guint32 le = GUINT32_TO_LE((guint32)used);
		g_byte_array_append(a, (const guint8 *)&le, sizeof(le));
	}
	g_byte_array_append(a, g_bytes_get_data(cmd, NULL), g_bytes_get_size(cmd));
	seed = g_byte_array_free_to_bytes(a);
	return write_seed(dir, name, seed, error);
}

/*
 * @cmd (an EVACUATE or RETURN with gpas) with one more gpa than the wire
 * allows, as only a broken or hostile sender would write it: hdr.len at
 * offset 4 and nr_gpas at offset 20 in both.
 */
static GBytes *
one_gpa_too_many(GBytes *cmd)
{
	GByteArray *a = g_byte_array_new();
	guint64 gpa = GUINT64_TO_LE(MiB(2) * 4096);
	guint32 len, nr;

	g_byte_array_append(a, g_bytes_get_data(cmd, NULL), g_bytes_get_size(cmd));
	g_byte_array_append(a, (const guint8 *)&gpa, sizeof(gpa));
	memcpy(&len, a->data + 4, sizeof(len));
	memcpy(&nr, a->data + 20, sizeof(nr));
	len = GUINT32_TO_LE(GUINT32_FROM_LE(len) + sizeof(gpa));
	nr = GUINT32_TO_LE(GUINT32_FROM_LE(nr) + 1);
	memcpy(a->data + 4, &len, sizeof(len));
	memcpy(a->data + 20, &nr, sizeof(nr));
	return g_byte_array_free_to_bytes(a);
}

static gboolean
gen(const gchar *outdir, GError **error)
{
	g_autofree gchar *d_status = g_build_filename(outdir, "status", NULL);
	g_autofree gchar *d_event = g_build_filename(outdir, "event", NULL);
	g_autofree gchar *d_cmd = g_build_filename(outdir, "cmd", NULL);
	g_autofree gchar *d_guest = g_build_filename(outdir, "guest-cmd", NULL);
	g_autofree gchar *d_chan = g_build_filename(outdir, "chan", NULL);
	/* fuzz-device's own: WELCOMEs (it reads the others' seeds too) */
	g_autofree gchar *d_device = g_build_filename(outdir, "device", NULL);
	const gchar *dirs[] = {d_status, d_event, d_cmd, d_chan, d_guest, d_device};
	g_autoptr(HrStatus) s0 = make_status(0, 0);
	g_autoptr(HrStatus) s1 = make_status(2, 4);
	g_autoptr(HrStatus) s2 = make_status(4, 64);
	g_autoptr(GBytes) b_s0 = hr_status_encode(s0);
	g_autoptr(GBytes) b_s1 = hr_status_encode(s1);
	g_autoptr(GBytes) b_s2 = hr_status_encode(s2);
	g_autoptr(HrBlocks) hold = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, 3);
	g_autoptr(HrBlocks) ret = hr_blocks_new(VIRTIO_HUGEROOM_MSG_RETURNED, 1);
	g_autoptr(GBytes) b_hold = NULL;
	g_autoptr(GBytes) b_ret = NULL;
	HrResult result = {.hdr.type = VIRTIO_HUGEROOM_MSG_RESULT, .hdr.request_id = 3,
			   .status = VIRTIO_HUGEROOM_S_PARTIAL, .blocks_tried = 4, .blocks_freed = 3,
			   .failed[VIRTIO_HUGEROOM_R_UNMOVABLE] = 1};
	HrResult progress = {.hdr.type = VIRTIO_HUGEROOM_MSG_PROGRESS, .hdr.request_id = 3};
	g_autoptr(GBytes) b_result = hr_result_encode(&result);
	g_autoptr(GBytes) b_progress = hr_result_encode(&progress);
	g_autoptr(HrCmd) c_report = hr_cmd_new(VIRTIO_HUGEROOM_CMD_REPORT, 1);
	g_autoptr(HrCmd) c_cancel = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CANCEL, 1);
	g_autoptr(HrCmd) c_evac = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 2);
	g_autoptr(HrCmd) c_evac_r = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 3);
	g_autoptr(HrCmd) c_capture = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CAPTURE, 4);
	g_autoptr(HrCmd) c_return = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 5);
	g_autoptr(HrCmd) c_pcp = hr_cmd_new(VIRTIO_HUGEROOM_CMD_SET_PCP, 6);
	g_autoptr(HrCmd) c_evac_max = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 7);
	g_autoptr(HrCmd) c_return_all = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 8);
	g_autoptr(HrCmd) c_cheapest = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 9);
	g_autoptr(HrCmd) c_ranges2 = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, 11);
	g_autoptr(HrCmd) c_return_max = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, 10);
	g_autoptr(GBytes) b_report = NULL;
	g_autoptr(GBytes) b_cancel = NULL;
	g_autoptr(GBytes) b_evac = NULL;
	g_autoptr(GBytes) b_evac_r = NULL;
	g_autoptr(GBytes) b_capture = NULL;
	g_autoptr(GBytes) b_return = NULL;
	g_autoptr(GBytes) b_pcp = NULL;
	g_autoptr(GBytes) b_evac_max = NULL;
	g_autoptr(GBytes) b_return_all = NULL;
	g_autoptr(GBytes) b_cheapest = NULL;
	g_autoptr(GBytes) b_ranges2 = NULL;
	g_autoptr(GBytes) b_return_max = NULL;
	g_autoptr(GBytes) b_evac_over = NULL;
	g_autoptr(GBytes) b_return_over = NULL;
	g_autoptr(HrChanHello) hello = hr_chan_hello_new(2);
	g_autoptr(GBytes) p_hello = NULL;
	HrChanWelcome welcome = {.proto_version = 1, .status_interval_ms = 1000};
	HrChanWelcome welcome2 = {.proto_version = 2, .status_interval_ms = 1000,
				  .chan_features = HR_CHAN_F_LAYOUT};
	HrChanDeviceState state = {.driver_ok = 1, .num_held = 2, .msgs_relayed = 9,
				   .chan_features = HR_CHAN_F_LAYOUT};
	g_autoptr(GBytes) p_welcome = hr_chan_welcome_encode(&welcome);
	g_autoptr(GBytes) p_welcome2 = hr_chan_welcome_encode(&welcome2);
	g_autoptr(GBytes) p_state = hr_chan_device_state_encode(&state);
	/* a pc-dimm plugged at 4 GiB + 2 GiB (SPEC 2.5.1) */
	HrRamRange layout_ram[3] = {
	    {.gpa = 0, .size = MiB(2048), .hva = 0x7f0000000000ULL},
	    {.gpa = MiB(4096), .size = MiB(2048), .hva = 0x7f0080000000ULL},
	    {.gpa = MiB(6144), .size = MiB(128), .hva = 0x7e0000000000ULL},
	};
	HrChanLayout layout = {.nr_ram = 3, .ram_size = MiB(4096 + 128), .ram = layout_ram};
	g_autoptr(GBytes) p_layout = hr_chan_layout_encode(&layout);
	g_autoptr(GBytes) p_interval = hr_chan_set_interval_encode(500);
	g_autoptr(GPtrArray) session = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
	g_autoptr(GPtrArray) cmds = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);

	for (guint i = 0; i < G_N_ELEMENTS(dirs); i++) {
		if (g_mkdir_with_parents(dirs[i], 0755) != 0) {
			g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
				    "cannot create %s: %s", dirs[i], g_strerror(errno));
			return FALSE;
		}
	}

	for (guint i = 0; i < 3; i++)
		hold->gpas[i] = MiB(2) * (i + 10);
	ret->gpas[0] = MiB(20);
	ret->reason = VIRTIO_HUGEROOM_RET_PRESSURE;
	b_hold = hr_blocks_encode(hold);
	b_ret = hr_blocks_encode(ret);

	c_evac->count = 2;
	c_evac->nr_gpas = 2;
	c_evac->gpas = g_new0(guint64, 2);
	c_evac->gpas[0] = MiB(2);
	c_evac->gpas[1] = MiB(8);
	c_evac_r->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES;
	c_evac_r->count = 8;
	c_evac_r->nr_ranges = 1;
	c_evac_r->ranges = g_new0(HrRange, 1);
	c_evac_r->ranges[0].end = MiB(1024);
	c_capture->count = 4;
	c_return->count = 2;
	c_pcp->policy = VIRTIO_HUGEROOM_PCP_DENSITY;
	c_evac_max->count = VIRTIO_HUGEROOM_MAX_CMD_BLOCKS;
	c_evac_max->nr_gpas = VIRTIO_HUGEROOM_MAX_CMD_BLOCKS;
	c_evac_max->gpas = g_new0(guint64, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
	for (guint i = 0; i < VIRTIO_HUGEROOM_MAX_CMD_BLOCKS; i++)
		c_evac_max->gpas[i] = MiB(2) * (i + 1);
	c_cheapest->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST;
	c_cheapest->count = 64;
	c_cheapest->budget_ms = 30000;
	c_ranges2->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST | VIRTIO_HUGEROOM_EVAC_F_RANGES;
	c_ranges2->count = 16;
	c_ranges2->nr_ranges = 2;
	c_ranges2->ranges = g_new0(HrRange, 2);
	c_ranges2->ranges[0].start = MiB(16);
	c_ranges2->ranges[0].end = MiB(1024);
	c_ranges2->ranges[1].start = MiB(4096);
	c_ranges2->ranges[1].end = MiB(4352);
	c_return_max->count = VIRTIO_HUGEROOM_MAX_CMD_BLOCKS;
	c_return_max->nr_gpas = VIRTIO_HUGEROOM_MAX_CMD_BLOCKS;
	c_return_max->gpas = g_memdup2(c_evac_max->gpas,
				       VIRTIO_HUGEROOM_MAX_CMD_BLOCKS * sizeof(guint64));
	c_return_all->count = 2;
	c_return_all->nr_gpas = 2;
	c_return_all->gpas = g_new0(guint64, 2);
	c_return_all->gpas[0] = MiB(4);
	c_return_all->gpas[1] = MiB(6);
	b_report = hr_cmd_encode(c_report);
	b_cancel = hr_cmd_encode(c_cancel);
	b_evac = hr_cmd_encode(c_evac);
	b_evac_r = hr_cmd_encode(c_evac_r);
	b_capture = hr_cmd_encode(c_capture);
	b_return = hr_cmd_encode(c_return);
	b_pcp = hr_cmd_encode(c_pcp);
	b_evac_max = hr_cmd_encode(c_evac_max);
	b_return_all = hr_cmd_encode(c_return_all);
	b_cheapest = hr_cmd_encode(c_cheapest);
	b_ranges2 = hr_cmd_encode(c_ranges2);
	b_return_max = hr_cmd_encode(c_return_max);
	b_evac_over = one_gpa_too_many(b_evac_max);
	b_return_over = one_gpa_too_many(b_return_max);

	g_strlcpy(hello->name, "seed-vm", sizeof(hello->name));
	hello->ram[0].size = MiB(2048);
	hello->ram[1].gpa = MiB(4096);
	hello->ram[1].size = MiB(2048);
	p_hello = hr_chan_hello_encode(hello);

	if (!write_seed(d_status, "empty", b_s0, error) ||
	    !write_seed(d_status, "small", b_s1, error) ||
	    !write_seed(d_status, "medium", b_s2, error) ||
	    !write_seed(d_event, "result", b_result, error) ||
	    !write_seed(d_event, "progress", b_progress, error) ||
	    !write_seed(d_event, "hold", b_hold, error) ||
	    !write_seed(d_event, "returned", b_ret, error) ||
	    !write_seed(d_event, "status", b_s1, error) ||
	    !write_seed(d_cmd, "report", b_report, error) ||
	    !write_seed(d_cmd, "cancel", b_cancel, error) ||
	    !write_seed(d_cmd, "evacuate-gpas", b_evac, error) ||
	    !write_seed(d_cmd, "evacuate-ranges", b_evac_r, error) ||
	    !write_seed(d_cmd, "capture", b_capture, error) ||
	    !write_seed(d_cmd, "return", b_return, error) ||
	    !write_seed(d_cmd, "set-pcp", b_pcp, error))
		return FALSE;

	/* The daemon's commands as the guest driver gets them off cmdq. */
	if (!write_guest_seed(d_guest, "report", 0x1f, -1, b_report, error) ||
	    !write_guest_seed(d_guest, "cancel", 0x1f, -1, b_cancel, error) ||
	    !write_guest_seed(d_guest, "evacuate-gpas", 0x1f, -1, b_evac, error) ||
	    !write_guest_seed(d_guest, "evacuate-cheapest", 0x1f, -1, b_cheapest, error) ||
	    !write_guest_seed(d_guest, "evacuate-ranges", 0x1f, -1, b_evac_r, error) ||
	    !write_guest_seed(d_guest, "evacuate-ranges-2", 0x1f, -1, b_ranges2, error) ||
	    !write_guest_seed(d_guest, "evacuate-max", 0x1f, -1, b_evac_max, error) ||
	    !write_guest_seed(d_guest, "capture", 0x1f, -1, b_capture, error) ||
	    !write_guest_seed(d_guest, "return-count", 0x1f, -1, b_return, error) ||
	    !write_guest_seed(d_guest, "return-gpas", 0x1f, -1, b_return_all, error) ||
	    !write_guest_seed(d_guest, "return-max", 0x1f, -1, b_return_max, error) ||
	    /* one gpa more than a command may carry */
	    !write_guest_seed(d_guest, "evacuate-over", 0x1f, -1, b_evac_over, error) ||
	    !write_guest_seed(d_guest, "return-over", 0x1f, -1, b_return_over, error) ||
	    !write_guest_seed(d_guest, "set-pcp", 0x1f, -1, b_pcp, error) ||
	    /* the driver's own feature set: no F_PCP */
	    !write_guest_seed(d_guest, "set-pcp-unsupported", 0x17, -1, b_pcp, error) ||
	    !write_guest_seed(d_guest, "evacuate-no-feature", 0x05, -1, b_evac, error) ||
	    /* a device claiming more than the buffer, or less than the message */
	    !write_guest_seed(d_guest, "used-oversized", 0x1f, 0x10000, b_evac_r, error) ||
	    !write_guest_seed(d_guest, "used-short", 0x1f, 20, b_evac, error))
		return FALSE;

	/* a device session: hello, state, statuses, events */
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_HELLO, p_hello));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_DEVICE_STATE, p_state));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_GUEST_MSG, b_s1));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_GUEST_MSG, b_hold));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_GUEST_MSG, b_result));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_GUEST_MSG, b_ret));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_LAYOUT, p_layout));
	g_ptr_array_add(session, hr_chan_frame_encode(HR_CHAN_GUEST_MSG, b_hold));
	/* the daemon's side: welcome, interval, commands */
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_WELCOME, p_welcome));
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_WELCOME, p_welcome2));
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_SET_INTERVAL, p_interval));
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_HOST_CMD, b_report));
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_HOST_CMD, b_evac_r));
	g_ptr_array_add(cmds, hr_chan_frame_encode(HR_CHAN_HOST_CMD, b_pcp));
	{
		g_autoptr(GBytes) s_whole = chan_seed(0, session);
		g_autoptr(GBytes) s_bytes = chan_seed(1, session);
		g_autoptr(GBytes) s_odd = chan_seed(13, session);
		g_autoptr(GBytes) s_cmds = chan_seed(0, cmds);
		if (!write_seed(d_device, "welcome-v1", p_welcome, error) ||
		    !write_seed(d_device, "welcome-v2", p_welcome2, error) ||
		    !write_seed(d_chan, "session-whole", s_whole, error) ||
		    !write_seed(d_chan, "session-bytewise", s_bytes, error) ||
		    !write_seed(d_chan, "session-13", s_odd, error) ||
		    !write_seed(d_chan, "daemon-side", s_cmds, error))
			return FALSE;
	}
	return TRUE;
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;

	if (argc != 2) {
		g_printerr("usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	if (!gen(argv[1], &error)) {
		g_printerr("gen-seeds: %s\n", error->message);
		return 1;
	}
	return 0;
}
