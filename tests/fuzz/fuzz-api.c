/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libFuzzer target: the JSON bodies of the daemon's API. The whole daemon
 * runs in this process on sockets in a temporary directory, over a copy
 * of a fixture host (nothing touches the real /proc or /sys), with one
 * fake guest connected; each input is one HTTP request over the API
 * socket: its first byte picks the endpoint, the rest is the body. Every
 * answer must be a well-formed HTTP response with a JSON body, and no
 * body may make the daemon answer 5xx, crash or leak.
 */
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "hr-daemon.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const gchar *endpoints[] = {
    "/v1/reservations",
    "/v1/plan",
    "/v1/guests/fuzzvm/evacuate",
    "/v1/guests/fuzzvm/capture",
    "/v1/guests/fuzzvm/return",
    "/v1/guests/fuzzvm/report",
};

static HrConfig *config;
static HrDaemon *the_daemon;
static GSocket *device; /* the fake guest: its commands are read and dropped */

static gchar *
setup_dir(void)
{
	const gchar *fixture = g_getenv("HR_FUZZ_HOST_FIXTURE");
	gchar *dir = g_dir_make_tmp("hugeroom-fuzz-api-XXXXXX", NULL);
	g_autofree gchar *cmd = NULL;

	g_assert(dir != NULL && fixture != NULL);
	cmd = g_strdup_printf("cp -r '%s' '%s/host'", fixture, dir);
	g_assert(system(cmd) == 0);
	return dir;
}

static void
send_frame(guint16 type, GBytes *payload)
{
	g_autoptr(GBytes) frame = hr_chan_frame_encode(type, payload);
	gsize len;
	const gchar *p = g_bytes_get_data(frame, &len);
	g_assert(g_socket_send(device, p, len, NULL, NULL) == (gssize)len);
}

/* a guest with 1 GiB of RAM, ready, with a status */
static void
connect_guest(void)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(config->vm_socket);
	g_autoptr(HrChanHello) hello = hr_chan_hello_new(1);
	g_autoptr(GBytes) hp = NULL;
	g_autoptr(HrStatus) status = hr_status_new(1, 2);
	g_autoptr(GBytes) sp = NULL;
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf};
	g_autoptr(GBytes) dp = hr_chan_device_state_encode(&state);

	device = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
			      NULL);
	g_assert(g_socket_connect(device, addr, NULL, NULL));
	g_strlcpy(hello->name, "fuzzvm", sizeof(hello->name));
	hello->uuid[0] = 1;
	hello->ram_size = 1 << 30;
	hello->ram[0].size = 1 << 30;
	hp = hr_chan_hello_encode(hello);
	send_frame(HR_CHAN_HELLO, hp);
	send_frame(HR_CHAN_DEVICE_STATE, dp);
	status->seq = 1;
	status->mem_total_pages = 262144;
	status->mem_free_pages = 200000;
	g_strlcpy(status->zones[0].name, "Normal", sizeof(status->zones[0].name));
	status->zones[0].spanned_pages = 262144;
	status->candidates[0].gpa = 64 << 20;
	status->candidates[0].free_pages = 500;
	status->candidates[1].gpa = 66 << 20;
	status->candidates[1].free_pages = 400;
	sp = hr_status_encode(status);
	send_frame(HR_CHAN_GUEST_MSG, sp);
	g_socket_set_blocking(device, FALSE);
	for (guint i = 0; i < 200; i++)
		g_main_context_iteration(NULL, FALSE);
}

static void
drain_device(void)
{
	gchar buf[65536];
	while (g_socket_receive(device, buf, sizeof(buf), NULL, NULL) > 0)
		;
}

static void
teardown(void)
{
	g_autofree gchar *dir = g_path_get_dirname(config->vm_socket);
	g_autofree gchar *cmd = g_strdup_printf("rm -rf '%s'", dir);
	g_clear_object(&device);
	g_clear_pointer(&the_daemon, hr_daemon_free);
	if (system(cmd) != 0)
		g_printerr("cannot remove the fuzzer's directory\n");
	g_clear_pointer(&config, hr_config_free);
}

static void
setup(void)
{
	g_autofree gchar *dir = setup_dir();

	config = hr_config_new();
	g_free(config->vm_socket);
	g_free(config->api_socket);
	g_free(config->state_dir);
	g_free(config->host_root);
	config->vm_socket = g_build_filename(dir, "vm.sock", NULL);
	config->api_socket = g_build_filename(dir, "api.sock", NULL);
	config->state_dir = g_build_filename(dir, "state", NULL);
	config->host_root = g_build_filename(dir, "host", NULL);
	config->backing = HR_BACKING_THP;
	config->hold_in_pool = FALSE;
	config->max_reservations = 64;
	config->max_frames_per_s = 1000000;
	g_strfreev(config->qemu_executables);
	/* the fake guest is this program */
	config->qemu_executables = g_new0(gchar *, 2);
	config->qemu_executables[0] = g_file_read_link("/proc/self/exe", NULL);
	the_daemon = hr_daemon_new(config);
	g_assert(hr_daemon_start(the_daemon, NULL));
	connect_guest();
	atexit(teardown);
}

/* one request, "Connection: close": the whole answer, read to EOF */
static GString *
http(const gchar *path, const guint8 *body, gsize len)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(config->api_socket);
	g_autoptr(GSocket) s = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
					    G_SOCKET_PROTOCOL_DEFAULT, NULL);
	g_autofree gchar *head = g_strdup_printf(
	    "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
	    "Content-Length: %" G_GSIZE_FORMAT "\r\nConnection: close\r\n\r\n",
	    path, len);
	GString *reply = g_string_new(NULL);
	gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

	g_assert(g_socket_connect(s, addr, NULL, NULL));
	g_assert(g_socket_send(s, head, strlen(head), NULL, NULL) == (gssize)strlen(head));
	if (len > 0)
		g_assert(g_socket_send(s, (const gchar *)body, len, NULL, NULL) == (gssize)len);
	g_socket_set_blocking(s, FALSE);
	for (;;) {
		gchar buf[4096];
		g_autoptr(GError) error = NULL;
		gssize n = g_socket_receive(s, buf, sizeof(buf), NULL, &error);
		if (n == 0)
			break;
		if (n > 0) {
			g_string_append_len(reply, buf, n);
			continue;
		}
		g_assert(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK));
		g_assert(g_get_monotonic_time() < deadline);
		g_main_context_iteration(NULL, FALSE);
	}
	return reply;
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	g_autoptr(GString) reply = NULL;
	g_autoptr(JsonParser) parser = json_parser_new();
	const gchar *body;
	guint code;

	if (the_daemon == NULL)
		setup();
	if (size == 0)
		return 0;
	reply = http(endpoints[data[0] % G_N_ELEMENTS(endpoints)], data + 1, size - 1);
	drain_device();
	g_assert(g_str_has_prefix(reply->str, "HTTP/1.1 "));
	code = (guint)g_ascii_strtoull(reply->str + 9, NULL, 10);
	if (code >= 500) {
		g_printerr("%s\n", reply->str);
		g_assert_not_reached();
	}
	body = strstr(reply->str, "\r\n\r\n");
	g_assert(body != NULL);
	g_assert(json_parser_load_from_data(parser, body + 4, -1, NULL));
	return 0;
}
