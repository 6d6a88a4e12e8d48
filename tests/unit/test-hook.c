/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The libvirt hook's decisions: the real hugeroom-hook binary, run the way
 * libvirt runs it (arguments, domain XML on stdin), against a fake
 * hugeroomd that answers the reservation routes the way the test says.
 */

#define G_LOG_DOMAIN "TestHook"

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* how the fake daemon answers GET /v1/reservations/ID */
typedef enum {
	FAKE_READY,   /* in-progress at the first poll, then ready */
	FAKE_PARTIAL, /* ready with part of it */
	FAKE_FAILED,  /* failed, with a reason */
	FAKE_SLOW,    /* in-progress for ever */
	FAKE_MIXED,   /* r1 ready, the others failed */
	FAKE_BROKEN,  /* answers 500 */
} FakeOutcome;

typedef struct {
	SoupServer *server;
	gchar *dir;
	gchar *api_socket;
	gchar *config;
	gchar *state_dir;
	FakeOutcome outcome;
	guint create_status;  /* answer to POST /v1/reservations */
	guint consume_status; /* answer to .../consume */
	guint pcp_status;     /* answer to PUT /v1/guests/NAME/pcp */
	GPtrArray *created;   /* bodies of POST /v1/reservations */
	GPtrArray *calls;     /* "GET r1", "POST r1/consume", ... */
	GPtrArray *acts;      /* "POST r1/consume BODY": consumes and releases with their bodies */
	guint next_id;
	GHashTable *polls; /* id -> GETs so far */
} Fake;

static void
reply(SoupServerMessage *msg, guint status, const gchar *json)
{
	soup_server_message_set_status(msg, status, NULL);
	soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_COPY, json,
					 strlen(json));
}

static void
fake_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
	gpointer user_data)
{
	Fake *fake = user_data;
	const gchar *method = soup_server_message_get_method(msg);
	const gchar *rest = path + strlen("/v1/reservations");
	(void)server;
	(void)query;

	if (g_strcmp0(method, "POST") == 0 && (rest[0] == '\0' || g_strcmp0(rest, "/") == 0)) {
		SoupMessageBody *body = soup_server_message_get_request_body(msg);
		g_autoptr(GBytes) bytes = soup_message_body_flatten(body);
		g_autofree gchar *answer = NULL;
		g_ptr_array_add(fake->created,
				g_strndup(g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes)));
		if (fake->create_status != SOUP_STATUS_ACCEPTED) {
			reply(msg, fake->create_status,
			      "{\"error\": \"node: 7 is not a node of this host\"}");
			return;
		}
		answer =
		    g_strdup_printf("{\"id\": \"r%u\", \"state\": \"created\"}", ++fake->next_id);
		reply(msg, SOUP_STATUS_ACCEPTED, answer);
		return;
	}
	g_ptr_array_add(fake->calls, g_strdup_printf("%s %s", method, rest + 1));
	if (g_strcmp0(method, "GET") == 0) {
		guint n = GPOINTER_TO_UINT(g_hash_table_lookup(fake->polls, rest + 1));
		g_autofree gchar *answer = NULL;
		g_hash_table_insert(fake->polls, g_strdup(rest + 1), GUINT_TO_POINTER(n + 1));
		if (fake->outcome == FAKE_BROKEN) {
			reply(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR,
			      "{\"error\": \"the state file cannot be written\"}");
			return;
		}
		if (fake->outcome == FAKE_SLOW || n == 0)
			answer = g_strdup_printf("{\"id\": \"%s\", \"state\": \"in-progress\"}",
						 rest + 1);
		else if (fake->outcome == FAKE_READY ||
			 (fake->outcome == FAKE_MIXED && g_strcmp0(rest + 1, "r1") == 0))
			answer =
			    g_strdup_printf("{\"id\": \"%s\", \"state\": \"ready\", \"partial\": "
					    "false, \"reason\": \"held in the pool\"}",
					    rest + 1);
		else if (fake->outcome == FAKE_PARTIAL)
			answer =
			    g_strdup_printf("{\"id\": \"%s\", \"state\": \"ready\", \"partial\": "
					    "true, \"reason\": \"deadline passed with 10 of 256 "
					    "blocks\"}",
					    rest + 1);
		else
			answer =
			    g_strdup_printf("{\"id\": \"%s\", \"state\": \"failed\", \"reason\": "
					    "\"strict: no donor could give more\"}",
					    rest + 1);
		reply(msg, SOUP_STATUS_OK, answer);
		return;
	}
	{
		SoupMessageBody *body = soup_server_message_get_request_body(msg);
		g_ptr_array_add(fake->acts, g_strdup_printf("%s %s %.*s", method, rest + 1,
							    (int)body->length, body->data));
	}
	if (g_str_has_suffix(rest, "/consume") && fake->consume_status != SOUP_STATUS_OK) {
		reply(msg, fake->consume_status, "{\"error\": \"reservation expired\"}");
		return;
	}
	reply(msg, SOUP_STATUS_OK, "{\"state\": \"consumed\"}");
}

static void
fake_write_config(Fake *fake, const gchar *extra)
{
	g_autofree gchar *text =
	    g_strdup_printf("[hook]\napi_socket=%s\nstate_dir=%s\nrequest_timeout_s=5\n%s",
			    fake->api_socket, fake->state_dir, extra != NULL ? extra : "");
	g_assert_true(g_file_set_contents(fake->config, text, -1, NULL));
}

/* PUT /v1/guests/NAME/pcp, noted as "PUT NAME/pcp BODY" */
static void
fake_guests_cb(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
	       gpointer user_data)
{
	Fake *fake = user_data;
	SoupMessageBody *body = soup_server_message_get_request_body(msg);
	(void)server;
	(void)query;

	g_ptr_array_add(fake->calls,
			g_strdup_printf("%s %s %.*s", soup_server_message_get_method(msg),
					path + strlen("/v1/guests/"), (int)body->length,
					body->data));
	if (fake->pcp_status == SOUP_STATUS_ACCEPTED)
		reply(msg, fake->pcp_status,
		      "{\"guest\":\"vm1\",\"policy\":\"explicit:1500\",\"applied\":false}");
	else
		reply(msg, fake->pcp_status, "{\"error\":\"guest vm1 refused PCP policy\"}");
}

static Fake *
fake_new(gboolean listen)
{
	Fake *fake = g_new0(Fake, 1);
	g_autoptr(GError) error = NULL;

	fake->dir = g_dir_make_tmp("test-hook-XXXXXX", &error);
	g_assert_no_error(error);
	fake->api_socket = g_build_filename(fake->dir, "api.sock", NULL);
	fake->config = g_build_filename(fake->dir, "hook.conf", NULL);
	fake->state_dir = g_build_filename(fake->dir, "state", NULL);
	fake->create_status = SOUP_STATUS_ACCEPTED;
	fake->consume_status = SOUP_STATUS_OK;
	fake->pcp_status = SOUP_STATUS_ACCEPTED;
	fake->created = g_ptr_array_new_with_free_func(g_free);
	fake->calls = g_ptr_array_new_with_free_func(g_free);
	fake->acts = g_ptr_array_new_with_free_func(g_free);
	fake->polls = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	fake_write_config(fake, NULL);
	if (listen) {
		g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(fake->api_socket);
		fake->server = soup_server_new(NULL, NULL);
		soup_server_add_handler(fake->server, "/v1/reservations", fake_cb, fake, NULL);
		soup_server_add_handler(fake->server, "/v1/guests", fake_guests_cb, fake, NULL);
		g_assert_true(soup_server_listen(fake->server, addr, 0, &error));
		g_assert_no_error(error);
	}
	return fake;
}

static void
rm_rf(const gchar *path)
{
	g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
	const gchar *name;
	while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
		g_autofree gchar *child = g_build_filename(path, name, NULL);
		if (g_file_test(child, G_FILE_TEST_IS_DIR))
			rm_rf(child);
		else
			g_unlink(child);
	}
	g_rmdir(path);
}

static void
fake_free(Fake *fake)
{
	if (fake->server != NULL) {
		soup_server_disconnect(fake->server);
		g_object_unref(fake->server);
	}
	rm_rf(fake->dir);
	g_free(fake->dir);
	g_free(fake->api_socket);
	g_free(fake->config);
	g_free(fake->state_dir);
	g_ptr_array_unref(fake->created);
	g_ptr_array_unref(fake->calls);
	g_ptr_array_unref(fake->acts);
	g_hash_table_unref(fake->polls);
	g_free(fake);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Fake, fake_free)

typedef struct {
	gboolean done;
	gint status;
	gchar *err;
} HookRun;

static void
hook_done(GObject *source, GAsyncResult *res, gpointer user_data)
{
	HookRun *run = user_data;
	g_autoptr(GError) error = NULL;
	g_autofree gchar *out = NULL;
	g_assert_true(g_subprocess_communicate_utf8_finish(G_SUBPROCESS(source), res, &out,
							   &run->err, &error));
	g_assert_no_error(error);
	run->status = g_subprocess_get_exit_status(G_SUBPROCESS(source));
	run->done = TRUE;
}

/* run the hook as libvirt does, serving the fake meanwhile; its exit status */
static gint
run_hook(Fake *fake, const gchar *domain, const gchar *op, const gchar *subop, const gchar *xml,
	 gchar **err)
{
	g_autoptr(GSubprocessLauncher) launcher =
	    g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDERR_PIPE);
	g_autoptr(GSubprocess) proc = NULL;
	g_autoptr(GError) error = NULL;
	g_autofree gchar *input = g_build_filename(fake->dir, "stdin.xml", NULL);
	HookRun run = {0};

	/* from a file: a hook that exits without reading (as most do) is no EPIPE here */
	g_assert_true(g_file_set_contents(input, xml != NULL ? xml : "", -1, NULL));
	g_subprocess_launcher_set_stdin_file_path(launcher, input);
	g_subprocess_launcher_setenv(launcher, "HUGEROOM_HOOK_CONFIG", fake->config, TRUE);
	proc = g_subprocess_launcher_spawn(launcher, &error, g_getenv("HUGEROOM_HOOK"), domain, op,
					   subop, "-", NULL);
	g_assert_no_error(error);
	g_subprocess_communicate_utf8_async(proc, NULL, NULL, hook_done, &run);
	while (!run.done)
		g_main_context_iteration(NULL, TRUE);
	g_test_message("hook %s %s %s -> %d:\n%s", domain, op, subop, run.status, run.err);
	if (err != NULL)
		*err = g_steal_pointer(&run.err);
	g_free(run.err);
	return run.status;
}

static void
assert_contains(const gchar *haystack, const gchar *needle)
{
	if (haystack == NULL || strstr(haystack, needle) == NULL)
		g_error("'%s' not found in:\n%s", needle, haystack);
}

static gboolean
has_call(Fake *fake, const gchar *call)
{
	for (guint i = 0; i < fake->calls->len; i++)
		if (g_strcmp0(g_ptr_array_index(fake->calls, i), call) == 0)
			return TRUE;
	return FALSE;
}

static gchar *
state_file(Fake *fake, const gchar *domain)
{
	g_autofree gchar *file = g_strconcat(domain, ".json", NULL);
	return g_build_filename(fake->state_dir, file, NULL);
}

static JsonObject *
parse_object(JsonParser *parser, const gchar *json)
{
	g_autoptr(GError) error = NULL;
	g_assert_true(json_parser_load_from_data(parser, json, -1, &error));
	g_assert_no_error(error);
	return json_node_get_object(json_parser_get_root(parser));
}

#define XML_PLAIN "<domain type='qemu'><name>vm1</name><memory unit='MiB'>512</memory></domain>"

#define XML_POLICY(children)                                                            \
	"<domain type='qemu'><name>vm1</name><memory unit='MiB'>512</memory><metadata>" \
	"<hugeroom:policy xmlns:hugeroom='https://hugeroom.org/xmlns/1'>" children      \
	"</hugeroom:policy></metadata></domain>"

#define VM1_UUID "0f6f5a4e-61cb-4d5e-8a6b-3c2d9e1f7a10"
#define XML_UUID                                                                \
	"<domain type='qemu'><name>vm1</name><uuid>" VM1_UUID "</uuid><memory " \
	"unit='MiB'>512</memory></domain>"

/*
 * The hook is the domain's UUID to the daemon: its reservations' requester,
 * kept in its state file, named in every consume and release (the daemon
 * refuses one of another requester's reservations)
 */
static void
test_requester_uuid(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");
	g_autofree gchar *text = NULL;
	JsonObject *body;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_UUID, &err), ==, 0);
	body = parse_object(parser, g_ptr_array_index(fake->created, 0));
	g_assert_cmpstr(json_object_get_string_member(body, "requester"), ==, "libvirt:" VM1_UUID);
	g_assert_true(g_file_get_contents(state, &text, NULL, NULL));
	assert_contains(text, "\"libvirt:" VM1_UUID "\"");
	g_clear_pointer(&err, g_free);
	/* start and release read the state file, not the XML */
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, &err), ==, 0);
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "vm1", "release", "end", XML_PLAIN, &err), ==, 0);
	g_assert_cmpuint(fake->acts->len, ==, 2);
	g_assert_cmpstr(g_ptr_array_index(fake->acts, 0), ==,
			"POST r1/consume {\"requester\":\"libvirt:" VM1_UUID "\"}");
	g_assert_cmpstr(g_ptr_array_index(fake->acts, 1), ==,
			"POST r1/release {\"requester\":\"libvirt:" VM1_UUID "\"}");
}

/* prepare creates, waits for ready and remembers; start consumes; release releases */
static void
test_lifecycle(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");
	g_autofree gchar *text = NULL;
	JsonObject *body;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	g_assert_cmpuint(fake->created->len, ==, 1);
	body = parse_object(parser, g_ptr_array_index(fake->created, 0));
	g_assert_cmpint(json_object_get_int_member(body, "bytes"), ==, 512 << 20);
	g_assert_false(json_object_has_member(body, "node"));
	g_assert_cmpint(json_object_get_int_member(body, "deadline_s"), ==, 30);
	g_assert_false(json_object_get_boolean_member(body, "strict"));
	g_assert_cmpstr(json_object_get_string_member(body, "requester"), ==, "libvirt:vm1");
	g_assert_true(has_call(fake, "GET r1"));
	assert_contains(err, "reservation r1 ready after");
	g_assert_true(g_file_get_contents(state, &text, NULL, NULL));
	assert_contains(text, "\"r1\"");
	g_assert_false(has_call(fake, "POST r1/consume"));

	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, &err), ==, 0);
	g_assert_true(has_call(fake, "POST r1/consume"));
	assert_contains(err, "reservation r1 consumed");
	g_assert_true(g_file_test(state, G_FILE_TEST_EXISTS));

	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "vm1", "release", "end", XML_PLAIN, &err), ==, 0);
	g_assert_true(has_call(fake, "POST r1/release"));
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
}

/* operations the hook does nothing for: exit 0, no call, no stdin read needed */
static void
test_other_operations(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	const gchar *ops[][2] = {{"started", "begin"}, {"stopped", "end"},   {"reconnect", "begin"},
				 {"migrate", "begin"}, {"restore", "begin"}, {"attach", "begin"},
				 {"prepare", "end"}};
	for (guint i = 0; i < G_N_ELEMENTS(ops); i++)
		g_assert_cmpint(run_hook(fake, "vm1", ops[i][0], ops[i][1], XML_PLAIN, NULL), ==,
				0);
	g_assert_cmpuint(fake->created->len, ==, 0);
	g_assert_cmpuint(fake->calls->len, ==, 0);
	/* start and release of a domain nothing was prepared for */
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, NULL), ==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "release", "end", XML_PLAIN, NULL), ==, 0);
	g_assert_cmpuint(fake->calls->len, ==, 0);
}

static void
test_daemon_down(void)
{
	g_autoptr(Fake) fake = fake_new(FALSE);
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "warning: cannot reserve 512 MiB on any node: cannot connect to "
			     "hugeroomd at ");
	assert_contains(err, "the domain starts without prepared memory (on_failure=open");
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));

	g_clear_pointer(&err, g_free);
	fake_write_config(fake, "on_failure=closed\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 1);
	assert_contains(err, "error: cannot reserve 512 MiB on any node: cannot connect");
	assert_contains(err, "refusing to start the domain (on_failure=closed in ");
}

/* <hugeroom:pcp> goes to the daemon at prepare, also when nothing is prepared */
static void
test_pcp(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:prepare>no</hugeroom:prepare>"
					    "<hugeroom:pcp>explicit:1500</hugeroom:pcp>"),
				 &err),
			==, 0);
	g_assert_true(has_call(fake, "PUT vm1/pcp {\"policy\":\"explicit:1500\"}"));
	assert_contains(err, "PCP policy explicit:1500 set");
	g_assert_cmpuint(fake->created->len, ==, 0);
	/* refused: a warning, and the domain starts */
	g_clear_pointer(&err, g_free);
	fake->pcp_status = SOUP_STATUS_CONFLICT;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:prepare>no</hugeroom:prepare>"
					    "<hugeroom:pcp>latency</hugeroom:pcp>"),
				 &err),
			==, 0);
	assert_contains(err, "PCP policy latency not set: hugeroomd: guest vm1 refused");
	/* no <hugeroom:pcp>, no call */
	g_ptr_array_set_size(fake->calls, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:prepare>no</hugeroom:prepare>"), NULL),
			==, 0);
	g_assert_cmpuint(fake->calls->len, ==, 0);
}

static void
test_daemon_refuses(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	fake->create_status = SOUP_STATUS_BAD_REQUEST;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>closed</hugeroom:on-failure>"),
				 &err),
			==, 1);
	/* the daemon's reason reaches the user, and where on_failure came from */
	assert_contains(err, "hugeroomd: node: 7 is not a node of this host");
	assert_contains(err, "on_failure=closed in the domain's <hugeroom:policy>");
}

static void
test_failed_reservation(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");

	fake->outcome = FAKE_FAILED;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:strict>yes</hugeroom:strict>"), &err),
			==, 0);
	g_assert_true(json_object_get_boolean_member(
	    parse_object(parser, g_ptr_array_index(fake->created, 0)), "strict"));
	assert_contains(err, "warning: reservation r1 failed: strict: no donor could give more");
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));

	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:strict>yes</hugeroom:strict>"
					    "<hugeroom:on-failure>closed</hugeroom:on-failure>"),
				 &err),
			==, 1);
	assert_contains(err, "error: reservation r2 failed: strict: no donor could give more; "
			     "refusing to start the domain");
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
}

/* ready with part of it is what a best-effort reservation promises: not a failure */
static void
test_partial(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	fake->outcome = FAKE_PARTIAL;
	fake_write_config(fake, "on_failure=closed\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "warning: reservation r1 ready in part after");
	assert_contains(err, "deadline passed with 10 of 256 blocks");
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, NULL), ==, 0);
	g_assert_true(has_call(fake, "POST r1/consume"));
}

static void
test_too_slow(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");
	gint64 start = g_get_monotonic_time();

	fake->outcome = FAKE_SLOW;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:deadline>1</hugeroom:deadline>"), &err),
			==, 0);
	g_assert_cmpint(
	    json_object_get_int_member(parse_object(parser, g_ptr_array_index(fake->created, 0)),
				       "deadline_s"),
	    ==, 1);
	/* deadline plus the daemon's time to settle, not more */
	g_assert_cmpint(g_get_monotonic_time() - start, <, 9 * G_USEC_PER_SEC);
	assert_contains(err, "reservation r1 still in-progress after 6 s (deadline 1 s): "
			     "hugeroomd is too slow");
	/* nobody will consume it: it must not keep working for a start that went on */
	g_assert_true(has_call(fake, "POST r1/release"));
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
}

/* the daemon fails while the hook waits: nothing is kept */
static void
test_broken_wait(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");

	fake->outcome = FAKE_BROKEN;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "warning: hugeroomd: the state file cannot be written; the domain "
			     "starts without");
	g_assert_true(has_call(fake, "POST r1/release"));
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
}

static void
test_deadline_capped(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autoptr(JsonParser) parser = json_parser_new();
	g_autofree gchar *err = NULL;

	fake_write_config(fake, "max_deadline_s=20\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:deadline>3600</hugeroom:deadline>"), &err),
			==, 0);
	assert_contains(err, "<hugeroom:deadline> 3600 s is more than max_deadline_s=20");
	g_assert_cmpint(
	    json_object_get_int_member(parse_object(parser, g_ptr_array_index(fake->created, 0)),
				       "deadline_s"),
	    ==, 20);
}

/* one reservation per host node the guest's NUMA cells go to */
static void
test_numa(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *path =
	    g_test_build_filename(G_TEST_DIST, "fixtures", "libvirt", "numa-cells.xml", NULL);
	g_autofree gchar *xml = NULL;
	g_autofree gchar *state = state_file(fake, "numa4");
	g_autofree gchar *text = NULL;

	g_assert_true(g_file_get_contents(path, &xml, NULL, NULL));
	g_assert_cmpint(run_hook(fake, "numa4", "prepare", "begin", xml, NULL), ==, 0);
	g_assert_cmpuint(fake->created->len, ==, 3);
	for (guint i = 0; i < 3; i++) {
		g_autoptr(JsonParser) parser = json_parser_new();
		JsonObject *body = parse_object(parser, g_ptr_array_index(fake->created, i));
		g_assert_cmpint(json_object_get_int_member(body, "bytes"), ==,
				G_GINT64_CONSTANT(2) << 30);
		g_assert_cmpint(json_object_get_int_member_with_default(body, "node", -1), ==,
				(gint)i - 1);
	}
	g_assert_true(g_file_get_contents(state, &text, NULL, NULL));
	assert_contains(text, "\"r1\",\n    \"r2\",\n    \"r3\"");
	g_assert_cmpint(run_hook(fake, "numa4", "start", "begin", xml, NULL), ==, 0);
	g_assert_true(has_call(fake, "POST r1/consume"));
	g_assert_true(has_call(fake, "POST r2/consume"));
	g_assert_true(has_call(fake, "POST r3/consume"));
}

/* fail-open with one node ready and two failed: the ready one is kept for start */
static void
test_numa_mixed(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *path =
	    g_test_build_filename(G_TEST_DIST, "fixtures", "libvirt", "numa-cells.xml", NULL);
	g_autofree gchar *xml = NULL;
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "numa4");
	g_autofree gchar *text = NULL;

	fake->outcome = FAKE_MIXED;
	g_assert_true(g_file_get_contents(path, &xml, NULL, NULL));
	g_assert_cmpint(run_hook(fake, "numa4", "prepare", "begin", xml, &err), ==, 0);
	assert_contains(err, "reservation r1 ready after");
	assert_contains(err, "warning: reservation r2 failed: strict: no donor could give more; "
			     "reservation r3 failed: ");
	g_assert_false(has_call(fake, "POST r1/release"));
	g_assert_true(has_call(fake, "POST r2/release"));
	g_assert_true(has_call(fake, "POST r3/release"));
	g_assert_true(g_file_get_contents(state, &text, NULL, NULL));
	assert_contains(text, "\"r1\"");
	g_assert_null(strstr(text, "\"r2\""));
	g_assert_cmpint(run_hook(fake, "numa4", "start", "begin", xml, NULL), ==, 0);
	g_assert_true(has_call(fake, "POST r1/consume"));
	g_assert_false(has_call(fake, "POST r2/consume"));
}

static void
test_nothing_to_prepare(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:prepare>no</hugeroom:prepare>"), &err),
			==, 0);
	assert_contains(err, "nothing prepared: <hugeroom:prepare> is no");
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "hp", "prepare", "begin",
				 "<domain><name>hp</name><memory unit='GiB'>1</memory>"
				 "<memoryBacking><hugepages/></memoryBacking></domain>",
				 &err),
			==, 0);
	assert_contains(err, "nothing prepared: its memory is hugetlbfs-backed");
	g_assert_cmpuint(fake->created->len, ==, 0);
	/* prepare=yes overrides what the backing suggests */
	g_assert_cmpint(run_hook(fake, "hp", "prepare", "begin",
				 "<domain><name>hp</name><memory unit='GiB'>1</memory>"
				 "<memoryBacking><hugepages/></memoryBacking><metadata>"
				 "<h:policy xmlns:h='https://hugeroom.org/xmlns/1'>"
				 "<h:prepare>yes</h:prepare></h:policy></metadata></domain>",
				 NULL),
			==, 0);
	g_assert_cmpuint(fake->created->len, ==, 1);
}

static void
test_bad_input(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	/* fail-open: a broken domain XML does not stop the start */
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", "<domain><name>", &err), ==, 0);
	assert_contains(err, "warning: the domain XML does not parse");
	g_clear_pointer(&err, g_free);
	fake_write_config(fake, "on_failure=closed\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:donor>maybe</hugeroom:donor>"), &err),
			==, 1);
	assert_contains(err, "domain vm1: error: <hugeroom:policy><hugeroom:donor>: 'maybe' is "
			     "not yes or no; refusing");
	g_assert_cmpuint(fake->created->len, ==, 0);
}

/*
 * A domain whose policy says closed fails closed even when another element
 * of the policy is wrong: the typo must not turn it open.
 */
static void
test_policy_closed(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>closed</hugeroom:on-failure>"
					    "<hugeroom:donr>yes</hugeroom:donr>"),
				 &err),
			==, 1);
	assert_contains(err, "unknown element <hugeroom:donr>");
	assert_contains(err, "refusing to start the domain (on_failure=closed in the domain's "
			     "<hugeroom:policy>");
	g_clear_pointer(&err, g_free);
	/* the bad element first */
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:deadline>soon</hugeroom:deadline>"
					    "<hugeroom:on-failure>closed</hugeroom:on-failure>"),
				 &err),
			==, 1);
	assert_contains(err, "'soon' is not a number of seconds");
	g_clear_pointer(&err, g_free);
	/* a misspelt closed is not open */
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>closd</hugeroom:on-failure>"),
				 &err),
			==, 1);
	assert_contains(err, "'closd' is not open or closed; refusing");
	g_clear_pointer(&err, g_free);
	/* a broken policy that says open does not override a closed configuration */
	fake_write_config(fake, "on_failure=closed\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>open</hugeroom:on-failure>"
					    "<hugeroom:donor>maybe</hugeroom:donor>"),
				 &err),
			==, 1);
	g_clear_pointer(&err, g_free);
	/* and a policy that is all right and says open still starts the domain */
	fake_write_config(fake, NULL);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>open</hugeroom:on-failure>"
					    "<hugeroom:donor>maybe</hugeroom:donor>"),
				 &err),
			==, 0);
	assert_contains(err, "warning: <hugeroom:policy><hugeroom:donor>: 'maybe'");
	g_assert_cmpuint(fake->created->len, ==, 0);
}

/* a name with a newline or ESC reaches the log as one line, the escapes shown */
static void
test_escaped_names(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;
	g_auto(GStrv) lines = NULL;

	g_assert_cmpint(run_hook(fake, "vm\n1\033[2J", "prepare", "begin", "<domain><name>", &err),
			==, 0);
	assert_contains(err, "hugeroom hook: domain vm\\x0a1\\x1b[2J: warning: the domain XML");
	g_assert_null(strchr(err, '\033'));
	lines = g_strsplit(err, "\n", -1);
	g_assert_cmpuint(g_strv_length(lines), ==, 2);
}

/* bounds where input enters: memory no reservation can be, names too long */
static void
test_bounds(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;
	g_autofree gchar *long_name = g_strnfill(201, 'v');

	g_assert_cmpint(
	    run_hook(fake, "vm1", "prepare", "begin",
		     "<domain type='qemu'><name>vm1</name><memory unit='b'>18446744073709551615"
		     "</memory></domain>",
		     &err),
	    ==, 0);
	assert_contains(err, "<memory>: 18446744073709551615 bytes is more than the "
			     "9223372036854775807 bytes (2^63 - 1) a reservation can be");
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(
	    run_hook(fake, "vm1", "prepare", "begin",
		     "<domain type='qemu'><name>vm1</name><memory unit='GiB'>8</memory>"
		     "<cpu><numa><cell id='0' memory='8589934591' unit='GiB'/>"
		     "<cell id='1' memory='8589934591' unit='GiB'/></numa></cpu></domain>",
		     &err),
	    ==, 0);
	assert_contains(err, "<cell id='1' memory>: the cells' memory adds up to more than");
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, long_name, "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "the domain name is 201 bytes, more than the 200 the hook handles");
	g_assert_cmpuint(fake->created->len, ==, 0);
}

static void
test_bad_config(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	fake_write_config(fake, "deadline=30\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "unknown key [hook] deadline; known: api_socket");
	g_clear_pointer(&err, g_free);
	/* a broken file that asks for fail-closed fails closed */
	fake_write_config(fake, "on_failure=closed\ndeadline_s=forever\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 1);
	assert_contains(err, "[hook] deadline_s=forever: must be a number from 1 to 86400");
	g_clear_pointer(&err, g_free);
	fake_write_config(fake, "on_failure=shut\n");
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 1);
	assert_contains(err, "on_failure=shut: must be open or closed");
	g_assert_cmpuint(fake->created->len, ==, 0);
}

static void
test_consume_fails(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");

	fake->consume_status = SOUP_STATUS_CONFLICT;
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, NULL), ==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "warning: consume of reservation r1: hugeroomd: reservation expired");

	/* fail-closed, remembered from prepare: refused, and the reservation released */
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin",
				 XML_POLICY("<hugeroom:on-failure>closed</hugeroom:on-failure>"),
				 NULL),
			==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", XML_PLAIN, &err), ==, 1);
	assert_contains(err, "consume of reservation r2: hugeroomd: reservation expired; refusing");
	g_assert_true(has_call(fake, "POST r2/release"));
	g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
}

/* a start that never reached release: its reservations end at the next prepare */
static void
test_stale_state(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;

	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, NULL), ==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 0);
	assert_contains(err, "releasing 1 reservation(s) of an earlier start");
	g_assert_true(has_call(fake, "POST r1/release"));
	g_assert_false(has_call(fake, "POST r2/release"));
}

/*
 * The state file decides what start consumes and release releases: a
 * symlink, a FIFO (it would hang libvirt's start) or a directory others
 * may write in is refused.
 */
static void
test_unsafe_state(void)
{
	g_autoptr(Fake) fake = fake_new(TRUE);
	g_autofree gchar *err = NULL;
	g_autofree gchar *state = state_file(fake, "vm1");
	g_autofree gchar *other = g_build_filename(fake->dir, "other.json", NULL);

	g_assert_cmpint(g_mkdir(fake->state_dir, 0700), ==, 0);
	g_assert_cmpint(mkfifo(state, 0600), ==, 0);
	alarm(30); /* a hang fails the test instead of stalling the suite */
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", NULL, &err), ==, 0);
	assert_contains(err, "is not a regular file (a FIFO)");
	g_clear_pointer(&err, g_free);
	fake_write_config(fake, "on_failure=closed\n");
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", NULL, &err), ==, 1);
	alarm(0);
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(g_unlink(state), ==, 0);

	/* another file's ids through a symlink are not ours to consume */
	g_assert_true(g_file_set_contents(other, "{\"reservations\": [\"r7\"]}", -1, NULL));
	g_assert_cmpint(symlink(other, state), ==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "start", "begin", NULL, &err), ==, 1);
	assert_contains(err, "is a symbolic link");
	g_assert_false(has_call(fake, "POST r7/consume"));
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(g_unlink(state), ==, 0);
	g_assert_cmpint(g_unlink(other), ==, 0);

	/* a state directory anyone may write in is not saved to */
	g_assert_cmpint(g_chmod(fake->state_dir, 0777), ==, 0);
	g_assert_cmpint(run_hook(fake, "vm1", "prepare", "begin", XML_PLAIN, &err), ==, 1);
	assert_contains(err, "state_dir: ");
	assert_contains(err, "writable by everyone");
	g_assert_true(has_call(fake, "POST r1/release"));
	g_assert_cmpint(g_chmod(fake->state_dir, 0700), ==, 0);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_assert_nonnull(g_getenv("HUGEROOM_HOOK"));
	g_test_add_func("/hook/lifecycle", test_lifecycle);
	g_test_add_func("/hook/requester-uuid", test_requester_uuid);
	g_test_add_func("/hook/other-operations", test_other_operations);
	g_test_add_func("/hook/daemon-down", test_daemon_down);
	g_test_add_func("/hook/daemon-refuses", test_daemon_refuses);
	g_test_add_func("/hook/policy-closed", test_policy_closed);
	g_test_add_func("/hook/escaped-names", test_escaped_names);
	g_test_add_func("/hook/bounds", test_bounds);
	g_test_add_func("/hook/pcp", test_pcp);
	g_test_add_func("/hook/failed-reservation", test_failed_reservation);
	g_test_add_func("/hook/partial", test_partial);
	g_test_add_func("/hook/too-slow", test_too_slow);
	g_test_add_func("/hook/broken-wait", test_broken_wait);
	g_test_add_func("/hook/deadline-capped", test_deadline_capped);
	g_test_add_func("/hook/numa", test_numa);
	g_test_add_func("/hook/numa-mixed", test_numa_mixed);
	g_test_add_func("/hook/nothing-to-prepare", test_nothing_to_prepare);
	g_test_add_func("/hook/bad-input", test_bad_input);
	g_test_add_func("/hook/bad-config", test_bad_config);
	g_test_add_func("/hook/consume-fails", test_consume_fails);
	g_test_add_func("/hook/stale-state", test_stale_state);
	g_test_add_func("/hook/unsafe-state", test_unsafe_state);
	return g_test_run();
}
