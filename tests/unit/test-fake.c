/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared by the daemon tests: the daemon's library in-process on real Unix
 * sockets in a temporary directory, a fake QEMU device that speaks the
 * channel protocol to it, and a libsoup client for its API.
 */

#define G_LOG_DOMAIN "TestFake"

#include "test-fake.h"

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct _HttpCall {
	SoupSession *session;
	SoupMessage *msg;
	GBytes *body;
	GError *error;
	gboolean done;
};

/*
 * Everything the daemon writes (sockets, reservations.json) goes below a
 * fresh temporary directory, never to the defaults below /run or /var/lib.
 */
void
fixture_config(Fixture *f, const gchar *tmpl)
{
	g_autoptr(GError) error = NULL;
	f->tmpdir = g_dir_make_tmp(tmpl, &error);
	g_assert_no_error(error);
	f->config = hr_config_new();
	g_free(f->config->vm_socket);
	g_free(f->config->api_socket);
	g_free(f->config->state_dir);
	f->config->vm_socket = g_build_filename(f->tmpdir, "vm.sock", NULL);
	f->config->api_socket = g_build_filename(f->tmpdir, "api.sock", NULL);
	f->config->state_dir = g_build_filename(f->tmpdir, "state", NULL);
	f->config->status_interval_ms = 250;
	/* the fake devices are this test program (or its children), not QEMU */
	g_strfreev(f->config->qemu_executables);
	f->config->qemu_executables = g_new0(gchar *, 2);
	f->config->qemu_executables[0] = g_file_read_link("/proc/self/exe", &error);
	g_assert_no_error(error);
	/* fake guests are nobody's domains: leave the host's libvirtd alone */
	g_free(f->config->libvirt_uri);
	f->config->libvirt_uri = g_strdup("");
}

void
fixture_start(Fixture *f)
{
	g_autoptr(GError) error = NULL;
	f->daemon = hr_daemon_new(f->config);
	g_assert_true(hr_daemon_start(f->daemon, &error));
	g_assert_no_error(error);
}

void
fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	fixture_config(f, "hugeroom-test-XXXXXX");
	fixture_start(f);
}

void
fixture_remove_tmpdir(Fixture *f)
{
	g_autofree gchar *cmd = g_strdup_printf("rm -rf '%s'", f->tmpdir);
	g_assert_cmpint(system(cmd), ==, 0);
	g_free(f->tmpdir);
}

void
fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hr_daemon_free(f->daemon);
	/* the daemon removes its sockets */
	g_assert_false(g_file_test(f->config->vm_socket, G_FILE_TEST_EXISTS));
	g_assert_false(g_file_test(f->config->api_socket, G_FILE_TEST_EXISTS));
	hr_config_free(f->config);
	fixture_remove_tmpdir(f);
}

/* run the main loop until @cond holds; fail the test after 10 s */
void
wait_for(CondFunc cond, gpointer data, const gchar *what)
{
	gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;
	while (!cond(data)) {
		if (g_get_monotonic_time() > deadline)
			g_error("timed out waiting for %s", what);
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

/* the child: only async-signal-safe calls after fork() */
static void G_GNUC_NORETURN
fake_qemu_main(gint control)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	gchar path[sizeof(sa.sun_path)];
	gssize n;

	/* the parent sends the socket path, NUL-terminated, with each request */
	while ((n = read(control, path, sizeof(path))) > 0) {
		gchar cbuf[CMSG_SPACE(sizeof(gint))];
		struct iovec iov = {.iov_base = path, .iov_len = 1};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
		gint fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		path[MIN((gsize)n, sizeof(path)) - 1] = '\0';
		memcpy(sa.sun_path, path, sizeof(sa.sun_path));
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			_exit(2);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(gint));
		memcpy(CMSG_DATA(cmsg), &fd, sizeof(gint));
		if (sendmsg(control, &msg, 0) != 1)
			_exit(3);
		close(fd);
	}
	_exit(0);
}

FakeQemu *
fake_qemu_new(void)
{
	FakeQemu *qemu = g_new0(FakeQemu, 1);
	gint sv[2];

	g_assert_cmpint(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==, 0);
	qemu->pid = fork();
	g_assert_cmpint(qemu->pid, >=, 0);
	if (qemu->pid == 0) {
		close(sv[0]);
		fake_qemu_main(sv[1]);
	}
	close(sv[1]);
	qemu->control = sv[0];
	return qemu;
}

/* the connection @qemu makes to the VM socket, its fd here */
static gint
fake_qemu_connect(FakeQemu *qemu, const gchar *path)
{
	gchar cbuf[CMSG_SPACE(sizeof(gint))];
	gchar byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cmsg;
	gint fd;

	g_assert_cmpint(qemu->pid, >, 0);
	g_assert_cmpint(write(qemu->control, path, strlen(path) + 1), ==, strlen(path) + 1);
	g_assert_cmpint(recvmsg(qemu->control, &msg, MSG_CMSG_CLOEXEC), ==, 1);
	cmsg = CMSG_FIRSTHDR(&msg);
	g_assert_nonnull(cmsg);
	g_assert_cmpint(cmsg->cmsg_type, ==, SCM_RIGHTS);
	memcpy(&fd, CMSG_DATA(cmsg), sizeof(gint));
	return fd;
}

void
fake_qemu_exit(FakeQemu *qemu)
{
	gint status;

	if (qemu->pid <= 0)
		return;
	kill(qemu->pid, SIGKILL);
	g_assert_cmpint(waitpid(qemu->pid, &status, 0), ==, qemu->pid);
	qemu->pid = 0;
}

void
fake_qemu_free(FakeQemu *qemu)
{
	fake_qemu_exit(qemu);
	close(qemu->control);
	g_free(qemu);
}

FakeDevice *
fake_connect(Fixture *f)
{
	return fake_connect_from(f, NULL);
}

FakeDevice *
fake_connect_from(Fixture *f, FakeQemu *qemu)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(f->config->vm_socket);
	FakeDevice *dev = g_new0(FakeDevice, 1);

	if (qemu != NULL) {
		dev->socket = g_socket_new_from_fd(fake_qemu_connect(qemu, f->config->vm_socket),
						   &error);
		g_assert_no_error(error);
		dev->qemu = qemu;
	} else {
		dev->socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
					   G_SOCKET_PROTOCOL_DEFAULT, &error);
		g_assert_no_error(error);
		g_assert_true(g_socket_connect(dev->socket, addr, NULL, &error));
		g_assert_no_error(error);
	}
	g_socket_set_blocking(dev->socket, FALSE);
	dev->reader = hr_frame_reader_new();
	dev->pcp = g_array_new(FALSE, FALSE, sizeof(guint32));
	return dev;
}

void
fake_free(FakeDevice *dev)
{
	g_socket_close(dev->socket, NULL);
	g_object_unref(dev->socket);
	hr_frame_reader_free(dev->reader);
	g_array_unref(dev->pcp);
	g_free(dev);
}

void
fake_send_raw(FakeDevice *dev, const guint8 *data, gsize len)
{
	gsize off = 0;
	gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;
	while (off < len) {
		g_autoptr(GError) error = NULL;
		gssize n = g_socket_send(dev->socket, (const gchar *)data + off, len - off, NULL,
					 &error);
		if (n < 0) {
			g_assert_error(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK);
			g_main_context_iteration(NULL, FALSE);
			g_assert_cmpint(g_get_monotonic_time(), <, deadline);
			continue;
		}
		off += n;
	}
}

void
fake_send(FakeDevice *dev, guint16 type, GBytes *payload)
{
	g_autoptr(GBytes) frame = hr_chan_frame_encode(type, payload);
	fake_send_raw(dev, g_bytes_get_data(frame, NULL), g_bytes_get_size(frame));
}

/* read what the daemon sent; TRUE once a frame or EOF arrived */
gboolean
fake_poll(FakeDevice *dev, HrChanFrame **frame)
{
	guint8 buf[4096];
	g_autoptr(GError) error = NULL;
	gssize n;

	*frame = hr_frame_reader_next(dev->reader, &error);
	g_assert_no_error(error);
	if (*frame != NULL)
		return TRUE;
	n = g_socket_receive(dev->socket, (gchar *)buf, sizeof(buf), NULL, &error);
	if (n == 0 || (n < 0 && !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))) {
		dev->eof = TRUE;
		return TRUE;
	}
	if (n > 0)
		hr_frame_reader_push(dev->reader, buf, n);
	return FALSE;
}

HrChanFrame *
fake_recv(FakeDevice *dev)
{
	gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;
	HrChanFrame *frame = NULL;
	while (!fake_poll(dev, &frame)) {
		g_assert_cmpint(g_get_monotonic_time(), <, deadline);
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
	g_assert_nonnull(frame);
	return frame;
}

/* the daemon closed the connection */
void
fake_wait_eof(FakeDevice *dev)
{
	gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;
	while (!dev->eof) {
		g_autoptr(HrChanFrame) frame = NULL;
		g_assert_cmpint(g_get_monotonic_time(), <, deadline);
		if (!fake_poll(dev, &frame)) {
			g_main_context_iteration(NULL, FALSE);
			g_usleep(1000);
		}
	}
}

HrChanHello *
make_hello(const gchar *name, guint8 uuid_seed)
{
	HrChanHello *h = hr_chan_hello_new(1);
	/* seed 0: the all-zero UUID of a VM started without -uuid */
	for (guint i = 0; i < 16 && uuid_seed != 0; i++)
		h->uuid[i] = uuid_seed + i;
	g_strlcpy(h->name, name, sizeof(h->name));
	h->ram_size = MiB(1024);
	h->ram[0].gpa = 0;
	h->ram[0].size = MiB(1024);
	h->ram[0].hva = 0x7f0000000000ULL;
	return h;
}

GBytes *
make_status(guint64 seq, guint64 request_id, guint64 first_gpa)
{
	g_autoptr(HrStatus) s = hr_status_new(2, 3);
	s->hdr.request_id = request_id;
	s->seq = seq;
	s->uptime_ns = 5000000000ULL;
	s->mem_total_pages = 262144;
	s->mem_free_pages = 200000;
	s->mem_available_pages = 210000;
	for (guint i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		s->vmstat[i] = 100 + i;
	for (guint z = 0; z < 2; z++) {
		g_strlcpy(s->zones[z].name, z == 0 ? "DMA32" : "Normal", 12);
		s->zones[z].nid = 0;
		/* spans more than the 1 GiB of RAM the HELLO gives */
		s->zones[z].spanned_pages = 524288;
		s->zones[z].managed_pages = 250000;
		s->zones[z].free_pages = 100000;
		for (guint o = 0; o < VIRTIO_HUGEROOM_NR_ORDERS; o++)
			s->zones[z].nr_free[o] = 10 * o + 1;
		s->zones[z].hist[0] = 40;
		s->zones[z].pcp_count = 31;
		s->zones[z].pcp_high = 186;
		s->zones[z].pcp_batch = 63;
	}
	for (guint c = 0; c < 3; c++) {
		s->candidates[c].gpa = first_gpa + MiB(2) * c;
		s->candidates[c].free_pages = 500 - c;
		s->candidates[c].migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
		s->candidates[c].zone = 1;
	}
	return hr_status_encode(s);
}

/* the first guest, NULL before one connected: for wait_for() conditions */
HrGuest *
first_guest(Fixture *f)
{
	GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
	return guests->len > 0 ? g_ptr_array_index(guests, 0) : NULL;
}

HrGuest *
only_guest(Fixture *f)
{
	GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
	g_assert_cmpuint(guests->len, ==, 1);
	return g_ptr_array_index(guests, 0);
}

/* HELLO, expect WELCOME, end the (empty) resync with a DEVICE_STATE */
FakeDevice *
fake_device_up(Fixture *f, const gchar *name, guint8 uuid_seed)
{
	g_autoptr(HrChanHello) hello = make_hello(name, uuid_seed);
	return fake_device_up_hello(f, hello);
}

FakeDevice *
fake_device_up_hello(Fixture *f, const HrChanHello *hello)
{
	FakeDevice *dev = fake_connect(f);
	g_autoptr(GBytes) payload = hr_chan_hello_encode(hello);
	g_autoptr(HrChanFrame) frame = NULL;
	g_autoptr(GError) error = NULL;
	HrChanWelcome welcome = {0};
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .msgs_relayed = 1};
	g_autoptr(GBytes) state_payload = hr_chan_device_state_encode(&state);

	fake_send(dev, HR_CHAN_HELLO, payload);
	frame = fake_recv(dev);
	g_assert_false(dev->eof);
	g_assert_cmpuint(frame->type, ==, HR_CHAN_WELCOME);
	g_assert_true(hr_chan_welcome_decode(frame->payload, &welcome, &error));
	g_assert_cmpuint(welcome.proto_version, ==, MIN(hello->proto_version, VIRTIO_HUGEROOM_VERSION));
	g_assert_cmpuint(welcome.status_interval_ms, ==, 250);
	fake_send(dev, HR_CHAN_DEVICE_STATE, state_payload);
	return dev;
}

static void
http_done_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
	HttpCall *r = user_data;
	r->body = soup_session_send_and_read_finish(SOUP_SESSION(source), res, &r->error);
	r->done = TRUE;
}

static gboolean
cond_http_done(gpointer data)
{
	return ((HttpCall *)data)->done;
}

/* the client runs on the daemon's own main loop, so it must be async */
JsonNode *
http(Fixture *f, const gchar *method, const gchar *path, guint expect_status, gchar **text)
{
	return http_body(f, method, path, NULL, expect_status, text);
}

HttpCall *
http_start(Fixture *f, const gchar *method, const gchar *path, const gchar *body)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(f->config->api_socket);
	g_autofree gchar *uri = g_strdup_printf("http://localhost%s", path);
	HttpCall *r = g_new0(HttpCall, 1);

	r->session = soup_session_new_with_options("remote-connectable", addr, NULL);
	r->msg = soup_message_new(method, uri);
	if (body != NULL) {
		g_autoptr(GBytes) bytes = g_bytes_new(body, strlen(body));
		soup_message_set_request_body_from_bytes(r->msg, "application/json", bytes);
	}
	soup_session_send_and_read_async(r->session, r->msg, G_PRIORITY_DEFAULT, NULL,
					 http_done_cb, r);
	return r;
}

gboolean
http_done(HttpCall *r)
{
	return r->done;
}

JsonNode *
http_finish(HttpCall *r, guint expect_status, gchar **text)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autoptr(GError) error = NULL;
	JsonNode *root = NULL;

	wait_for(cond_http_done, r, g_uri_get_path(soup_message_get_uri(r->msg)));
	g_assert_no_error(r->error);
	g_assert_cmpuint(soup_message_get_status(r->msg), ==, expect_status);
	if (text != NULL) {
		*text = g_strndup(g_bytes_get_data(r->body, NULL), g_bytes_get_size(r->body));
	} else {
		g_assert_cmpstr(soup_message_headers_get_content_type(
				    soup_message_get_response_headers(r->msg), NULL),
				==, "application/json");
		g_assert_true(json_parser_load_from_data(parser, g_bytes_get_data(r->body, NULL),
							 g_bytes_get_size(r->body), &error));
		g_assert_no_error(error);
		root = json_node_copy(json_parser_get_root(parser));
	}
	g_bytes_unref(r->body);
	g_object_unref(r->msg);
	g_object_unref(r->session);
	g_free(r);
	return root;
}

JsonNode *
http_body(Fixture *f, const gchar *method, const gchar *path, const gchar *body,
	  guint expect_status, gchar **text)
{
	return http_finish(http_start(f, method, path, body), expect_status, text);
}


/* the next frame must be a HOST_CMD: decoded, with the device's own rules */
/*
 * A CANCEL of a request the fake already answered: the daemon may count
 * a donation's blocks (from the host's free memory) before the RESULT
 * reaches it, settle the reservation and cancel what it thinks still
 * runs. Harmless on a real device (SPEC: CANCEL of an ended request is a
 * no-op), so tests waiting for another command skip it.
 */
static gboolean
late_cancel(const HrChanFrame *frame, guint16 want)
{
	const guint8 *b = g_bytes_get_data(frame->payload, NULL);
	return want != VIRTIO_HUGEROOM_CMD_CANCEL && frame->type == HR_CHAN_HOST_CMD &&
	       g_bytes_get_size(frame->payload) >= 2 &&
	       (b[0] | (b[1] << 8)) == VIRTIO_HUGEROOM_CMD_CANCEL;
}

/*
 * The SET_PCPs the executor sends around a donation (density, then the
 * guest's policy back): answered S_OK like a driver would, noted in
 * dev->pcp, and skipped by tests waiting for another command.
 */
static gboolean
side_pcp(FakeDevice *dev, const HrChanFrame *frame, guint16 want)
{
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) answer = NULL;

	if (want == VIRTIO_HUGEROOM_CMD_SET_PCP || frame->type != HR_CHAN_HOST_CMD)
		return FALSE;
	cmd = hr_chan_host_cmd_decode(frame->payload, NULL);
	if (cmd == NULL || cmd->hdr.type != VIRTIO_HUGEROOM_CMD_SET_PCP)
		return FALSE;
	g_array_append_val(dev->pcp, cmd->policy);
	answer = make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id, VIRTIO_HUGEROOM_S_OK,
			     0, 0, 0);
	fake_send(dev, HR_CHAN_GUEST_MSG, answer);
	return TRUE;
}

HrCmd *
fake_expect_cmd(FakeDevice *dev, guint16 type)
{
	g_autoptr(HrChanFrame) frame = fake_recv(dev);
	g_autoptr(GError) error = NULL;
	HrCmd *cmd;

	while (!dev->eof && (late_cancel(frame, type) || side_pcp(dev, frame, type))) {
		g_clear_pointer(&frame, hr_chan_frame_free);
		frame = fake_recv(dev);
	}
	g_assert_false(dev->eof);
	g_assert_cmpuint(frame->type, ==, HR_CHAN_HOST_CMD);
	cmd = hr_chan_host_cmd_decode(frame->payload, &error);
	g_assert_no_error(error);
	g_assert_cmpuint(cmd->hdr.type, ==, type);
	return cmd;
}

/* nothing more from the daemon for @ms */
void
fake_expect_silence(FakeDevice *dev, guint ms)
{
	gint64 until = g_get_monotonic_time() + ms * 1000;
	while (g_get_monotonic_time() < until) {
		g_autoptr(HrChanFrame) frame = NULL;
		if (fake_poll(dev, &frame) && frame != NULL && !late_cancel(frame, 0) &&
		    !side_pcp(dev, frame, 0)) {
			const guint8 *b = g_bytes_get_data(frame->payload, NULL);
			g_error("unexpected %s frame from the daemon (first bytes %02x %02x)",
				hr_chan_type_to_string(frame->type),
				g_bytes_get_size(frame->payload) > 0 ? b[0] : 0,
				g_bytes_get_size(frame->payload) > 1 ? b[1] : 0);
		}
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

GBytes *
make_result(guint16 type, guint64 request_id, guint32 status, guint32 tried, guint32 freed,
	    guint64 pages)
{
	HrResult r = {0};
	r.hdr.type = type;
	r.hdr.request_id = request_id;
	r.status = status;
	r.blocks_tried = tried;
	r.blocks_freed = freed;
	/* the rest failed as unmovable, so that the sum rule holds */
	r.failed[VIRTIO_HUGEROOM_R_UNMOVABLE] = type == VIRTIO_HUGEROOM_MSG_RESULT ? tried - freed : 0;
	r.pages_migrated = pages;
	r.elapsed_us = 1000 * (guint64)tried;
	return hr_result_encode(&r);
}

GBytes *
make_blocks(guint16 type, guint64 request_id, guint32 reason, guint64 first, guint n)
{
	g_autoptr(HrBlocks) b = hr_blocks_new(type, n);
	b->hdr.request_id = request_id;
	b->reason = reason;
	for (guint i = 0; i < n; i++)
		b->gpas[i] = first + MiB(2) * i;
	return hr_blocks_encode(b);
}

void
fake_send_state(FakeDevice *dev, const HrChanDeviceState *state)
{
	g_autoptr(GBytes) payload = hr_chan_device_state_encode(state);
	fake_send(dev, HR_CHAN_DEVICE_STATE, payload);
}

/* HELLO, expect WELCOME, resync @n held blocks from @first, DEVICE_STATE */
FakeDevice *
fake_device_resync(Fixture *f, const gchar *name, guint8 uuid_seed, guint64 first, guint n)
{
	return fake_device_resync_from(f, NULL, name, uuid_seed, first, n);
}

FakeDevice *
fake_device_resync_from(Fixture *f, FakeQemu *qemu, const gchar *name, guint8 uuid_seed,
			guint64 first, guint n)
{
	FakeDevice *dev = fake_connect_from(f, qemu);
	g_autoptr(HrChanHello) hello = make_hello(name, uuid_seed);
	g_autoptr(GBytes) hp = hr_chan_hello_encode(hello);
	g_autoptr(HrChanFrame) welcome = NULL;
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .num_held = n};

	fake_send(dev, HR_CHAN_HELLO, hp);
	welcome = fake_recv(dev);
	g_assert_cmpuint(welcome->type, ==, HR_CHAN_WELCOME);
	if (n > 0) {
		g_autoptr(GBytes) hold = make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 0, 0, first, n);
		fake_send(dev, HR_CHAN_GUEST_MSG, hold);
	}
	fake_send_state(dev, &state);
	return dev;
}
