/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Reservations: the state machine, the promise accounting and the state
 * file (round trip, atomic replacement, recovery from corrupt and
 * truncated files).
 */

#define G_LOG_DOMAIN "TestReservations"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hr-api-json.h"
#include "hr-ctl.h"
#include "hr-loopwatch.h"
#include "hr-compact.h"
#include "hr-prepare.h"
#include "hr-reservation-store.h"
/* these tests build and look into guests by hand */
#include "hr-guest-private.h"
#include "test-fake.h"

typedef struct {
	gchar *dir;
	gchar *path;
} Tmp;

static void
tmp_setup(Tmp *t, gconstpointer data)
{
	g_autoptr(GError) error = NULL;
	(void)data;
	t->dir = g_dir_make_tmp("hugeroom-res-XXXXXX", &error);
	g_assert_no_error(error);
	t->path = g_build_filename(t->dir, "state", "reservations.json", NULL);
}

static void
tmp_teardown(Tmp *t, gconstpointer data)
{
	g_autofree gchar *cmd = g_strdup_printf("rm -rf '%s'", t->dir);
	(void)data;
	g_assert_cmpint(system(cmd), ==, 0);
	g_free(t->dir);
	g_free(t->path);
}

static void
test_parse_size(void)
{
	guint64 v = 0;
	g_assert_true(hr_parse_size("1G", &v));
	g_assert_cmpuint(v, ==, G_GUINT64_CONSTANT(1) << 30);
	g_assert_true(hr_parse_size("512M", &v));
	g_assert_cmpuint(v, ==, MiB(512));
	g_assert_true(hr_parse_size("3MiB", &v));
	g_assert_cmpuint(v, ==, MiB(3));
	g_assert_true(hr_parse_size("4096", &v));
	g_assert_cmpuint(v, ==, 4096);
	g_assert_true(hr_parse_size("2k", &v));
	g_assert_cmpuint(v, ==, 2048);
	g_assert_false(hr_parse_size("0", &v));
	g_assert_false(hr_parse_size("", &v));
	g_assert_false(hr_parse_size("-1G", &v));
	g_assert_false(hr_parse_size("1X", &v));
	g_assert_false(hr_parse_size("1Gx", &v));
	g_assert_false(hr_parse_size("99999999999999999999", &v));
	g_assert_false(hr_parse_size("20000000000T", &v));
	/* bytes are stored signed: a size past 2^63-1 made "bytes": -1 in the
	 * state file, which the next start found corrupt and dropped whole */
	g_assert_false(hr_parse_size("18446744073709551615", &v));
	g_assert_false(hr_parse_size("9223372036854775808", &v));
	g_assert_false(hr_parse_size("8388608T", &v));
	g_assert_true(hr_parse_size("9223372036854775807", &v));
	g_assert_cmpuint(v, ==, G_MAXINT64);
}

static void
test_transitions(void)
{
	/* every pair, against the diagram in hr-reservation.h */
	static const gboolean allowed[HR_RESERVATION_N_STATES][HR_RESERVATION_N_STATES] = {
	    [HR_RESERVATION_CREATED] = {[HR_RESERVATION_IN_PROGRESS] = TRUE,
					[HR_RESERVATION_CANCELLED] = TRUE,
					[HR_RESERVATION_FAILED] = TRUE},
	    [HR_RESERVATION_IN_PROGRESS] = {[HR_RESERVATION_READY] = TRUE,
					    [HR_RESERVATION_CANCELLED] = TRUE,
					    [HR_RESERVATION_FAILED] = TRUE},
	    [HR_RESERVATION_READY] = {[HR_RESERVATION_CONSUMED] = TRUE,
				      [HR_RESERVATION_EXPIRED] = TRUE,
				      [HR_RESERVATION_CANCELLED] = TRUE},
	};
	for (guint a = 0; a < HR_RESERVATION_N_STATES; a++) {
		g_assert_cmpint(hr_reservation_state_from_string(hr_reservation_state_to_string(a)),
				==, a);
		for (guint b = 0; b < HR_RESERVATION_N_STATES; b++)
			g_assert_cmpint(hr_reservation_transition_allowed(a, b), ==, allowed[a][b]);
	}
	g_assert_cmpint(hr_reservation_state_from_string("bogus"), ==, -1);
	g_assert_true(hr_reservation_state_is_live(HR_RESERVATION_READY));
	g_assert_false(hr_reservation_state_is_live(HR_RESERVATION_CONSUMED));
	g_assert_false(hr_reservation_state_is_settled(HR_RESERVATION_IN_PROGRESS));
}

static void
test_lifecycle(void)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(NULL);
	g_autoptr(GError) error = NULL;
	HrReservation *r;

	r = hr_reservation_store_create(store, MiB(5), 0, 0, FALSE, "test", &error);
	g_assert_no_error(error);
	/* "r-" and a ULID: 26 of Crockford's base32 */
	g_assert_true(g_regex_match_simple("^r-[0-9a-hjkmnp-tv-z]{26}$", r->id, 0, 0));
	g_assert_cmpuint(r->need_blocks, ==, 3); /* rounded up */
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CREATED);
	g_assert_null(hr_reservation_store_create(store, 0, 0, 0, FALSE, NULL, &error));
	g_assert_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID);
	g_clear_error(&error);

	/* ready straight from created is not a thing: it must be worked on */
	g_assert_false(hr_reservation_set_state(store, r, HR_RESERVATION_READY, NULL, &error));
	g_assert_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID);
	g_assert_nonnull(strstr(error->message, "created and cannot become ready"));
	g_clear_error(&error);
	g_assert_true(hr_reservation_set_state(store, r, HR_RESERVATION_IN_PROGRESS, NULL, &error));
	hr_reservation_set_obtained(store, r, 99);
	g_assert_cmpuint(r->obtained, ==, 3); /* clamped to the need */
	g_assert_true(hr_reservation_set_state(store, r, HR_RESERVATION_READY, NULL, &error));
	g_assert_cmpint(r->finished_at, >, 0);
	g_assert_true(
	    hr_reservation_set_state(store, r, HR_RESERVATION_CONSUMED, "vm started", &error));
	g_assert_cmpstr(r->reason, ==, "vm started");
	/* final */
	g_assert_false(hr_reservation_set_state(store, r, HR_RESERVATION_CANCELLED, NULL, &error));
	g_clear_error(&error);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CONSUMED);
}

static void
test_promises(void)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(NULL);
	HrReservation *a, *b, *c;

	a = hr_reservation_store_create(store, MiB(20), 0, 0, FALSE, "a", NULL);
	b = hr_reservation_store_create(store, MiB(40), HR_RESERVATION_ANY_NODE, 0, FALSE, "b",
					NULL);
	c = hr_reservation_store_create(store, MiB(40), 1, 0, FALSE, "c", NULL);
	/* nothing promised before work starts */
	g_assert_cmpuint(hr_reservation_store_promised(store, 0, NULL), ==, 0);

	hr_reservation_set_state(store, a, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	a->planned_node = 0;
	hr_reservation_set_obtained(store, a, 4);
	hr_reservation_set_state(store, b, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	b->planned_node = 0;
	hr_reservation_set_obtained(store, b, 7);
	hr_reservation_set_state(store, c, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	c->planned_node = 1;
	hr_reservation_set_obtained(store, c, 20);

	g_assert_cmpuint(hr_reservation_store_promised(store, 0, NULL), ==, 11);
	/* what b may count excludes a's, never its own */
	g_assert_cmpuint(hr_reservation_store_promised(store, 0, b), ==, 4);
	g_assert_cmpuint(hr_reservation_store_promised(store, 1, NULL), ==, 20);
	g_assert_cmpuint(hr_reservation_store_promised(store, HR_RESERVATION_ANY_NODE, NULL), ==,
			 31);

	/* a ready reservation still promises; a consumed or cancelled one does not */
	hr_reservation_set_obtained(store, a, 10);
	hr_reservation_set_state(store, a, HR_RESERVATION_READY, NULL, NULL);
	g_assert_cmpuint(hr_reservation_store_promised(store, 0, b), ==, 10);
	hr_reservation_set_state(store, a, HR_RESERVATION_CONSUMED, NULL, NULL);
	g_assert_cmpuint(hr_reservation_store_promised(store, 0, b), ==, 0);
	hr_reservation_set_state(store, b, HR_RESERVATION_CANCELLED, NULL, NULL);
	g_assert_cmpuint(hr_reservation_store_promised(store, 0, NULL), ==, 0);
}

static void
test_holds(void)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(NULL);
	HrReservation *r = hr_reservation_store_create(store, MiB(8), 0, 0, FALSE, NULL, NULL);
	g_autoptr(GPtrArray) first = NULL;
	g_autoptr(GPtrArray) rest = NULL;

	for (guint i = 0; i < 5; i++)
		hr_reservation_add_hold(r, "uuid-a", "a", MiB(2) * (10 + i));
	first = hr_reservation_take_holds(r, 2);
	g_assert_cmpuint(first->len, ==, 2);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(first, 0))->gpa, ==, MiB(20));
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(first, 1))->gpa, ==, MiB(22));
	g_assert_cmpuint(r->holds->len, ==, 3);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(r->holds, 0))->gpa, ==, MiB(24));
	rest = hr_reservation_take_holds(r, 100);
	g_assert_cmpuint(rest->len, ==, 3);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(rest, 2))->gpa, ==, MiB(28));
	g_assert_cmpuint(r->holds->len, ==, 0);
	g_assert_cmpuint(r->blocks_returned, ==, 5);
}

/* moved holds keep their order, after the ones the target had */
static void
test_move_holds(void)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(NULL);
	HrReservation *a = hr_reservation_store_create(store, MiB(8), 0, 0, FALSE, NULL, NULL);
	HrReservation *b = hr_reservation_store_create(store, MiB(8), 0, 0, FALSE, NULL, NULL);

	for (guint i = 0; i < 4; i++)
		hr_reservation_add_hold(a, "uuid-a", "a", MiB(2) * (10 + i));
	hr_reservation_add_hold(b, "uuid-b", "b", MiB(2));
	g_assert_cmpuint(hr_reservation_move_holds(a, b, 3), ==, 3);
	g_assert_cmpuint(a->holds->len, ==, 1);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(a->holds, 0))->gpa, ==, MiB(26));
	g_assert_cmpuint(b->holds->len, ==, 4);
	for (guint i = 0; i < 3; i++)
		g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(b->holds, i + 1))->gpa, ==,
				 MiB(2) * (10 + i));
	g_assert_cmpuint(hr_reservation_move_holds(a, b, 10), ==, 1);
	g_assert_cmpuint(a->holds->len, ==, 0);
}

static HrReservationStore *
filled_store(const gchar *path)
{
	HrReservationStore *store = hr_reservation_store_new(path);
	HrReservation *a, *b;
	HrReservationStep *s;

	a = hr_reservation_store_create(store, MiB(64), 0, 1234567, TRUE, "launcher \"x\"", NULL);
	hr_reservation_set_state(store, a, HR_RESERVATION_IN_PROGRESS, NULL, NULL);
	a->planned_node = 0;
	s = hr_reservation_add_step(a, HR_STEP_DONATE, 0);
	s->guest = g_strdup("vm1");
	s->request_id = 77;
	s->blocks_asked = 20;
	s->blocks_held = 18;
	s->gained = -1;
	s->pages_migrated = 4000;
	s->state = HR_STEP_SHORT;
	s->detail = g_strdup("2 blocks unmovable");
	s = hr_reservation_add_step(a, HR_STEP_COMPACT, 0);
	s->pages_scanned = 123456;
	s->elapsed_ms = 450;
	hr_reservation_add_hold(a, "11111111-2222-3333-4444-555555555555", "vm1", MiB(4096));
	hr_reservation_set_obtained(store, a, 17);
	b = hr_reservation_store_create(store, MiB(2), HR_RESERVATION_ANY_NODE, 0, FALSE, NULL,
					NULL);
	hr_reservation_set_state(store, b, HR_RESERVATION_CANCELLED, "released", NULL);
	return store;
}

static gchar *
store_json(HrReservationStore *store)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;
	GPtrArray *list = hr_reservation_store_list(store);
	json_builder_begin_array(b);
	for (guint i = 0; i < list->len; i++)
		hr_reservation_add_json(g_ptr_array_index(list, i), b, TRUE);
	json_builder_end_array(b);
	root = json_builder_get_root(b);
	return json_to_string(root, FALSE);
}

static void
test_round_trip(Tmp *t, gconstpointer data)
{
	g_autoptr(HrReservationStore) store = filled_store(t->path);
	g_autoptr(HrReservationStore) again = hr_reservation_store_new(t->path);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *before = store_json(store);
	g_autofree gchar *after = NULL;
	HrReservation *r, *n;
	(void)data;

	/* every change was saved, in a thread: wait for it, then read it back */
	hr_reservation_store_flush(store);
	g_assert_true(g_file_test(t->path, G_FILE_TEST_IS_REGULAR));
	g_assert_true(hr_reservation_store_load(again, &error));
	g_assert_no_error(error);
	after = store_json(again);
	g_assert_cmpstr(after, ==, before);
	r = hr_reservation_store_find(
	    again, ((HrReservation *)g_ptr_array_index(hr_reservation_store_list(store), 0))->id);
	g_assert_nonnull(r);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	g_assert_true(r->strict);
	g_assert_cmpstr(r->requester, ==, "launcher \"x\"");
	g_assert_cmpuint(r->holds->len, ==, 1);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(r->holds, 0))->gpa, ==, MiB(4096));
	g_assert_cmpint(((HrReservationStep *)g_ptr_array_index(r->steps, 0))->gained, ==, -1);
	/* ids are never reused after a restart, and sort in the order they were made */
	n = hr_reservation_store_create(again, MiB(2), 0, 0, FALSE, NULL, NULL);
	for (guint i = 0; i < hr_reservation_store_list(store)->len; i++) {
		HrReservation *old = g_ptr_array_index(hr_reservation_store_list(store), i);
		g_assert_cmpstr(old->id, <, n->id);
	}
	/* promises survive the restart */
	g_assert_cmpuint(hr_reservation_store_promised(again, 0, NULL), ==, 17);
	/* no temporary file left behind */
	hr_reservation_store_flush(again);
	{
		g_autofree gchar *dir = g_path_get_dirname(t->path);
		g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
		guint files = 0;
		while (g_dir_read_name(d) != NULL)
			files++;
		g_assert_cmpuint(files, ==, 1);
	}
}

static void
expect_corrupt(Tmp *t, const gchar *content, gssize len, const gchar *what)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *dir = g_path_get_dirname(t->path);
	g_autoptr(GDir) d = NULL;
	const gchar *name;
	gboolean kept = FALSE;
	HrReservation *r;

	g_assert_true(g_file_set_contents(t->path, content, len, NULL));
	g_assert_false(hr_reservation_store_load(store, &error));
	g_assert_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT);
	g_test_message("%s: %s", what, error->message);
	g_assert_nonnull(strstr(error->message, "is corrupt"));
	g_assert_nonnull(strstr(error->message, "kept as"));
	g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 0);
	/* the bad file is aside with its bytes intact; the store works again */
	g_assert_false(g_file_test(t->path, G_FILE_TEST_EXISTS));
	d = g_dir_open(dir, 0, NULL);
	while ((name = g_dir_read_name(d)) != NULL) {
		g_autofree gchar *full = g_build_filename(dir, name, NULL);
		g_autofree gchar *kept_text = NULL;
		gsize kept_len = 0;
		if (!g_str_has_prefix(name, "reservations.json.corrupt-"))
			continue;
		g_assert_true(g_file_get_contents(full, &kept_text, &kept_len, NULL));
		g_assert_cmpmem(kept_text, kept_len, content,
				len < 0 ? strlen(content) : (gsize)len);
		g_assert_cmpint(g_unlink(full), ==, 0);
		kept = TRUE;
	}
	g_assert_true(kept);
	r = hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, NULL, NULL);
	g_assert_nonnull(r);
	g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 1);
	hr_reservation_store_flush(store);
	g_assert_true(g_file_test(t->path, G_FILE_TEST_IS_REGULAR));
	g_assert_cmpint(g_unlink(t->path), ==, 0);
}

static void
test_corrupt(Tmp *t, gconstpointer data)
{
	g_autofree gchar *good = NULL;
	gsize len = 0;
	(void)data;

	{
		g_autoptr(HrReservationStore) store = filled_store(t->path);
	}
	g_assert_true(g_file_get_contents(t->path, &good, &len, NULL));
	/* truncated at several points, as a torn write without rename would leave it */
	for (gsize cut = 1; cut < len; cut += len / 7) {
		g_autofree gchar *what = g_strdup_printf("truncated at %" G_GSIZE_FORMAT, cut);
		expect_corrupt(t, good, cut, what);
	}
	expect_corrupt(t, "", 0, "empty");
	expect_corrupt(t, "\x00\x01garbage", 9, "binary");
	expect_corrupt(t, "[]", -1, "not an object");
	expect_corrupt(t, "{\"version\":3,\"next_id\":1,\"reservations\":[]}", -1,
		       "future version");
	expect_corrupt(t, "{\"version\":1,\"next_id\":1,\"reservations\":{}}", -1,
		       "no list of reservations");
}

/*
 * One reservation of the file that cannot be read costs that one only: the
 * others load, the skipped one is logged and counted, and the file as it
 * was is kept aside (the next write drops it).
 */
static void
test_bad_entry_skipped(Tmp *t, gconstpointer data)
{
	g_autofree gchar *good = NULL;
	g_autofree gchar *dir = g_path_get_dirname(t->path);
	g_autoptr(GDir) d = NULL;
	const gchar *name;
	gboolean kept = FALSE;
	gchar *p;
	GPtrArray *errors = NULL;
	(void)data;

	{
		g_autoptr(HrReservationStore) store = filled_store(t->path);
	}
	g_assert_true(g_file_get_contents(t->path, &good, NULL, NULL));
	/* the first entry, in progress, gets a state no daemon knows */
	p = strstr(good, "\"in-progress\"");
	g_assert_nonnull(p);
	memcpy(p + 1, "in-pogress", 10);
	g_assert_true(g_file_set_contents(t->path, good, -1, NULL));
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
		g_autoptr(GError) error = NULL;
		HrReservation *r;

		g_test_expect_message("HrReservation", G_LOG_LEVEL_WARNING,
				      "*entry 0 skipped*unknown*");
		g_test_expect_message("HrReservation", G_LOG_LEVEL_WARNING,
				      "*1 reservation(s) could not be read*");
		g_assert_true(hr_reservation_store_load(store, &error));
		g_test_assert_expected_messages();
		g_assert_no_error(error);
		g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 1);
		r = g_ptr_array_index(hr_reservation_store_list(store), 0);
		g_assert_cmpint(r->state, ==, HR_RESERVATION_CANCELLED);
		g_assert_cmpuint(hr_reservation_store_get_skipped(store, &errors), ==, 1);
		g_assert_cmpuint(errors->len, ==, 1);
		g_assert_nonnull(strstr(g_ptr_array_index(errors, 0), "in-pogress"));
		hr_reservation_store_flush(store);
	}
	d = g_dir_open(dir, 0, NULL);
	while ((name = g_dir_read_name(d)) != NULL) {
		g_autofree gchar *full = g_build_filename(dir, name, NULL);
		g_autofree gchar *text = NULL;
		if (!g_str_has_prefix(name, "reservations.json.skipped-"))
			continue;
		g_assert_true(g_file_get_contents(full, &text, NULL, NULL));
		g_assert_cmpstr(text, ==, good);
		g_assert_cmpint(g_unlink(full), ==, 0);
		kept = TRUE;
	}
	g_assert_true(kept);
}

/* a state directory others may write to is neither read nor written */
static void
test_unsafe_dir(Tmp *t, gconstpointer data)
{
	g_autofree gchar *dir = g_path_get_dirname(t->path);
	g_autoptr(GError) error = NULL;
	(void)data;

	{
		g_autoptr(HrReservationStore) store = filled_store(t->path);
	}
	g_assert_cmpint(g_chmod(dir, 0777), ==, 0);
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
		g_assert_false(hr_reservation_store_load(store, &error));
		g_assert_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO);
		g_test_message("%s", error->message);
		g_assert_nonnull(strstr(error->message, "state_dir"));
		g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 0);
		g_clear_error(&error);
		g_assert_false(hr_reservation_store_save(store, &error));
		g_assert_nonnull(error);
		g_assert_nonnull(strstr(error->message, "state_dir"));
	}
	g_assert_cmpint(g_chmod(dir, 0750), ==, 0);
}

static void
test_missing_file(Tmp *t, gconstpointer data)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
	g_autoptr(GError) error = NULL;
	(void)data;
	g_assert_true(hr_reservation_store_load(store, &error));
	g_assert_no_error(error);
	g_assert_cmpuint(hr_reservation_store_list(store)->len, ==, 0);
}

/* ---------------------------------------------------------------------- */
/* The executor: the daemon in-process, a fake device, a fake host tree */

#define HOST_FIXTURE "proc/host-6.18.44"

static gchar *
host_dir(Fixture *f)
{
	return g_build_filename(f->tmpdir, "host", NULL);
}

/*
 * The node's free memory: @blocks free 2 MiB chunks in Normal and 26000
 * single pages in DMA32, just above the zones' high watermarks (25311
 * pages), so that every block counts and compaction has nothing to gain.
 */
static void
host_set_free(Fixture *f, guint dma32_pages, guint blocks)
{
	g_autofree gchar *dir = host_dir(f);
	g_autofree gchar *path = g_build_filename(dir, "proc", "buddyinfo", NULL);
	g_autofree gchar *text =
	    g_strdup_printf("Node 0, zone      DMA      0      0      0      0      0      0      "
			    "0      0      1      1      3 \n"
			    "Node 0, zone    DMA32 %6u      0      0      0      0      0      0   "
			    "   0      0      0      0 \n"
			    "Node 0, zone   Normal    100     50     20      0      0      0      "
			    "0      0      0 %6u      0 \n",
			    dma32_pages, blocks);
	g_assert_true(g_file_set_contents(path, text, -1, NULL));
	/* what the executor decides from now on, it decides on these files */
	if (f->daemon != NULL)
		hr_prepare_host_changed(hr_daemon_get_prepare(f->daemon));
}

static void
host_set_free_blocks(Fixture *f, guint blocks)
{
	host_set_free(f, 26000, blocks);
}

static void
exec_setup(Fixture *f, gconstpointer data)
{
	g_autofree gchar *src = g_test_build_filename(G_TEST_DIST, "fixtures", HOST_FIXTURE, NULL);
	g_autofree gchar *dst = NULL;
	g_autofree gchar *cmd = NULL;
	(void)data;

	fixture_config(f, "hugeroom-exec-XXXXXX");
	dst = host_dir(f);
	cmd = g_strdup_printf("cp -r '%s' '%s'", src, dst);
	g_assert_cmpint(system(cmd), ==, 0);
	host_set_free_blocks(f, 100);
	g_free(f->config->host_root);
	f->config->host_root = g_strdup(dst);
	f->config->reservation_tick_ms = 50;
	f->config->backing = HR_BACKING_THP;
	/* counting free blocks (the pool tests hold them) */
	f->config->hold_in_pool = FALSE;
	/* the fake node has ~0.6 GiB free: never give holds back on our own */
	f->config->return_high_mark_mb = 0;
	fixture_start(f);
}

static void
exec_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hr_daemon_free(f->daemon);
	hr_config_free(f->config);
	fixture_remove_tmpdir(f);
}

static HrReservationStore *
exec_store(Fixture *f)
{
	return hr_prepare_get_store(hr_daemon_get_prepare(f->daemon));
}

typedef struct {
	Fixture *f;
	const gchar *id;
	HrReservationState state;
} WaitState;

static gboolean
cond_state(gpointer data)
{
	WaitState *w = data;
	HrReservation *r = hr_reservation_store_find(exec_store(w->f), w->id);
	return r != NULL && r->state == w->state;
}

static void
wait_state(Fixture *f, const gchar *id, HrReservationState state)
{
	WaitState w = {f, id, state};
	g_autofree gchar *what =
	    g_strdup_printf("reservation %s %s", id, hr_reservation_state_to_string(state));
	wait_for(cond_state, &w, what);
}

static gboolean
cond_have_status(gpointer data)
{
	Fixture *f = data;
	GPtrArray *guests = hr_core_get_guests(hr_daemon_get_core(f->daemon));
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *g = g_ptr_array_index(guests, i);
		if (g->status == NULL || !g->ready)
			return FALSE;
	}
	return guests->len > 0;
}

/*
 * A donor with 3 candidates at 512 MiB (500, 499, 498 free pages); returns
 * once the daemon has its status and it is ready.
 */
static FakeDevice *
donor_up(Fixture *f, const gchar *name, guint8 seed)
{
	FakeDevice *dev = fake_device_up(f, name, seed);
	g_autoptr(GBytes) status = make_status(1, 0, MiB(512));
	g_autofree gchar *what = g_strdup_printf("the status of %s", name);
	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	wait_for(cond_have_status, f, what);
	return dev;
}

/* answer an EVACUATE: hold the first @freed of its gpas */
static void
answer_evacuate(FakeDevice *dev, const HrCmd *cmd, guint freed)
{
	g_autoptr(HrBlocks) hold = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, freed);
	g_autoptr(GBytes) hold_msg = NULL;
	g_autoptr(GBytes) result = NULL;

	hold->hdr.request_id = cmd->hdr.request_id;
	for (guint i = 0; i < freed; i++)
		hold->gpas[i] = cmd->gpas[i];
	if (freed > 0) {
		hold_msg = hr_blocks_encode(hold);
		fake_send(dev, HR_CHAN_GUEST_MSG, hold_msg);
	}
	result =
	    make_result(VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
			freed == cmd->nr_gpas ? VIRTIO_HUGEROOM_S_OK : VIRTIO_HUGEROOM_S_PARTIAL,
			cmd->nr_gpas, freed, 14 * freed);
	fake_send(dev, HR_CHAN_GUEST_MSG, result);
}

static HrReservationStep *
find_step(HrReservation *r, HrStepKind kind)
{
	for (guint i = 0; i < r->steps->len; i++) {
		HrReservationStep *s = g_ptr_array_index(r->steps, i);
		if (s->kind == kind)
			return s;
	}
	return NULL;
}

/* free blocks are counted once: the second reservation must get its own */
static void
test_exec_free_then_donate(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	HrReservation *a, *b;
	HrReservationStep *s;
	(void)data;

	/* off by default (hugeroomd.conf): on, the donor runs density while it gives */
	f->config->donor_pcp_density = TRUE;
	dev = donor_up(f, "donor", 1);

	/* 98 of the 100 free blocks: ready from what is there */
	a = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(196), 0, 0, FALSE, "a", NULL);
	wait_state(f, a->id, HR_RESERVATION_READY);
	g_assert_cmpuint(a->obtained, ==, 98);
	g_assert_false(a->partial);
	s = find_step(a, HR_STEP_FREE);
	g_assert_nonnull(s);
	g_assert_cmpint(s->gained, ==, 98);
	g_assert_null(find_step(a, HR_STEP_DONATE));

	/* 5 more: 2 are unpromised, the donor must give 3 */
	b = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(10), 0, 0, FALSE, "b", NULL);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	/* the donor runs density while it gives, sent before the EVACUATE */
	g_assert_cmpuint(dev->pcp->len, ==, 1);
	g_assert_cmpuint(g_array_index(dev->pcp, guint32, 0), ==, VIRTIO_HUGEROOM_PCP_DENSITY);
	g_assert_cmpuint(cmd->nr_gpas, ==, 3);
	g_assert_cmpuint(cmd->count, ==, 3);
	for (guint i = 0; i < 3; i++) {
		g_assert_cmpuint(cmd->gpas[i], >=, MiB(512));
		g_assert_cmpuint(cmd->gpas[i], <, MiB(518));
	}
	g_assert_cmpint(b->state, ==, HR_RESERVATION_IN_PROGRESS);
	g_assert_cmpuint(b->obtained, ==, 2);
	/* the blocks reach the host's buddy allocator when QEMU discards them */
	host_set_free_blocks(f, 103);
	answer_evacuate(dev, cmd, 3);
	wait_state(f, b->id, HR_RESERVATION_READY);
	g_assert_cmpuint(b->obtained, ==, 5);
	s = find_step(b, HR_STEP_DONATE);
	g_assert_nonnull(s);
	g_assert_cmpstr(s->guest, ==, "donor");
	g_assert_cmpint(s->state, ==, HR_STEP_DONE);
	g_assert_cmpuint(s->blocks_asked, ==, 3);
	g_assert_cmpuint(s->blocks_held, ==, 3);
	g_assert_cmpuint(s->pages_migrated, ==, 42);
	g_assert_cmpuint(b->holds->len, ==, 3);
	/* and its own policy back (none wanted: the guest's default) once it ended */
	fake_expect_silence(dev, 100);
	g_assert_cmpuint(dev->pcp->len, ==, 2);
	g_assert_cmpuint(g_array_index(dev->pcp, guint32, 1), ==, VIRTIO_HUGEROOM_PCP_DEFAULT);
	/* a's promise did not move */
	g_assert_cmpuint(a->obtained, ==, 98);
	g_assert_cmpuint(hr_reservation_store_promised(exec_store(f), 0, NULL), ==, 103);

	/* releasing b gives its three blocks back to the donor */
	g_assert_true(hr_prepare_release(hr_daemon_get_prepare(f->daemon), b->id, NULL));
	g_assert_cmpint(b->state, ==, HR_RESERVATION_CANCELLED);
	{
		g_autoptr(HrCmd) ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
		g_assert_cmpuint(ret->nr_gpas, ==, 3);
		for (guint i = 0; i < 3; i++)
			g_assert_cmpuint(ret->gpas[i], ==, cmd->gpas[i]);
	}
	g_assert_cmpuint(b->holds->len, ==, 0);
	g_assert_cmpuint(b->blocks_returned, ==, 3);
}

/*
 * A donor that connects while another's donation runs is asked at once,
 * for what the running donation is not expected to bring (issue 21: the
 * steps of a plan used to run to their end before the next plan).
 */
static void
test_exec_late_donor(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) early = NULL;
	g_autoptr(FakeDevice) late = NULL;
	g_autoptr(HrCmd) first = NULL;
	g_autoptr(HrCmd) second = NULL;
	HrReservation *r;
	HrReservationStep *s;
	(void)data;

	early = donor_up(f, "early", 1);
	/* the 100 free blocks and 4 more: the early donor has 3 to give */
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(208), 0, 0, FALSE, "late",
			      NULL);
	first = fake_expect_cmd(early, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(first->count, ==, 3);
	/* while it runs (unanswered), the second donor connects */
	late = donor_up(f, "late", 2);
	second = fake_expect_cmd(late, VIRTIO_HUGEROOM_CMD_EVACUATE);
	/* the one block the early donor's 3 are not expected to cover */
	g_assert_cmpuint(second->count, ==, 1);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	/* and the early donor, busy, is not asked twice */
	fake_expect_silence(early, 200);

	host_set_free_blocks(f, 103);
	answer_evacuate(early, first, 3);
	host_set_free_blocks(f, 104);
	answer_evacuate(late, second, 1);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->obtained, ==, 104);
	g_assert_cmpuint(r->holds->len, ==, 4);
	for (guint i = 0, n = 0; i < r->steps->len; i++) {
		s = g_ptr_array_index(r->steps, i);
		if (s->kind != HR_STEP_DONATE)
			continue;
		g_assert_cmpstr(s->guest, ==, n == 0 ? "early" : "late");
		g_assert_cmpuint(s->blocks_held, ==, n == 0 ? 3 : 1);
		n++;
	}
}

/* a best-effort reservation that cannot be met ends ready and partial, with why */
static void
test_exec_partial(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	HrReservation *r;
	HrReservationStep *s;
	(void)data;

	host_set_free_blocks(f, 10);
	dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(40), 0, 30, FALSE, "p", NULL);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->nr_gpas, ==, 3);
	/* one block is unmovable */
	host_set_free_blocks(f, 12);
	answer_evacuate(dev, cmd, 2);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_true(r->partial);
	g_assert_cmpuint(r->obtained, ==, 12);
	g_assert_nonnull(strstr(r->reason, "no more sources: 12 of 20 blocks"));
	s = find_step(r, HR_STEP_DONATE);
	g_assert_cmpint(s->state, ==, HR_STEP_SHORT);
	g_assert_nonnull(strstr(s->detail, "2 of 3 blocks held"));
	g_assert_nonnull(strstr(s->detail, "1 unmovable"));
	/* the tried blocks were not offered again */
	fake_expect_silence(dev, 300);
}

/* strict: all or nothing, at once, and nothing is held for it */
static void
test_exec_strict(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	HrReservation *r;
	(void)data;

	host_set_free_blocks(f, 10);
	dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(40), 0, 30, TRUE, "s", NULL);
	wait_state(f, r->id, HR_RESERVATION_FAILED);
	g_assert_nonnull(strstr(r->reason, "no more sources: 10 of 20 blocks"));
	fake_expect_silence(dev, 300);
}

/* the deadline ends the work with what was achieved */
static void
test_exec_deadline(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) cancel = NULL;
	HrReservation *r;
	(void)data;

	host_set_free_blocks(f, 1);
	dev = donor_up(f, "slow", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 1, FALSE, "d", NULL);
	/* the guest never answers */
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_true(r->partial);
	g_assert_nonnull(strstr(r->reason, "deadline passed with 1 of 4 blocks"));
	/* and its evacuation is called off */
	cancel = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_CANCEL);
	g_assert_cmpuint(cancel->hdr.request_id, ==, cmd->hdr.request_id);
}

/* [guest:...] donor=false keeps a guest out; a restart keeps reservations */
static void
test_exec_policy_and_restart(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	HrGuestPolicy *pol = g_new0(HrGuestPolicy, 1);
	HrReservation *r;
	g_autofree gchar *id = NULL;
	(void)data;

	pol->pattern = g_strdup("prod-*");
	pol->donor = FALSE;
	g_ptr_array_add(f->config->guest_policies, pol);
	host_set_free_blocks(f, 2);
	dev = donor_up(f, "prod-db", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 0, FALSE, "x", NULL);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_true(r->partial);
	g_assert_cmpuint(r->obtained, ==, 2);
	fake_expect_silence(dev, 200);
	id = g_strdup(r->id);

	/* the daemon restarts: the reservation is still ready, still promised */
	g_clear_pointer(&dev, fake_free);
	hr_daemon_free(f->daemon);
	f->daemon = hr_daemon_new(f->config);
	g_assert_true(hr_daemon_start(f->daemon, NULL));
	r = hr_reservation_store_find(exec_store(f), id);
	g_assert_nonnull(r);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_READY);
	g_assert_cmpuint(hr_reservation_store_promised(exec_store(f), 0, NULL), ==, 2);
	g_assert_true(hr_prepare_consume(hr_daemon_get_prepare(f->daemon), id, NULL));
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CONSUMED);
	g_assert_cmpuint(hr_reservation_store_promised(exec_store(f), 0, NULL), ==, 0);
}

/* the HTTP API */
static void
test_exec_api(Fixture *f, gconstpointer data)
{
	g_autoptr(JsonNode) created = NULL;
	g_autoptr(JsonNode) list = NULL;
	g_autoptr(JsonNode) one = NULL;
	g_autoptr(JsonNode) host = NULL;
	g_autoptr(JsonNode) plan = NULL;
	g_autoptr(JsonNode) err = NULL;
	g_autoptr(JsonNode) released = NULL;
	g_autofree gchar *path = NULL;
	JsonObject *o;
	const gchar *id;
	(void)data;

	created = http_body(f, "POST", "/v1/reservations",
			    "{\"size\":\"20M\",\"node\":0,\"deadline_s\":5,\"requester\":\"ci\"}",
			    201, NULL);
	o = json_node_get_object(created);
	id = json_object_get_string_member(o, "id");
	g_assert_true(g_str_has_prefix(id, "r-"));
	g_assert_cmpint(json_object_get_int_member(o, "need_blocks"), ==, 10);
	wait_state(f, id, HR_RESERVATION_READY);
	path = g_strdup_printf("/v1/reservations/%s", id);
	one = http(f, "GET", path, 200, NULL);
	o = json_node_get_object(one);
	g_assert_cmpstr(json_object_get_string_member(o, "state"), ==, "ready");
	g_assert_cmpstr(json_object_get_string_member(o, "requester"), ==, "ci");
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(o, "steps")), ==, 1);
	{
		/* hugeroomctl's report of it: each step, what it gave and cost */
		g_autoptr(GString) out = g_string_new(NULL);
		g_autoptr(GError) error = NULL;
		g_autofree gchar *line = hr_ctl_reservation_progress_line(one, 80, TRUE);
		g_assert_true(hr_ctl_render_reservation(one, out, &error));
		g_assert_nonnull(strstr(out->str, "State:        ready\n"));
		g_assert_nonnull(strstr(out->str, "10 of 10 free 2 MiB blocks"));
		g_test_message("%s", out->str);
		g_assert_nonnull(
		    strstr(out->str, "\n   1 free host node 0 done      10.0     10 "));
		g_assert_nonnull(strstr(out->str, "Cost:         0 pages migrated"));
		g_autofree gchar *want =
		    g_strdup_printf("[####################] %s ready: 10/10", id);
		g_assert_true(g_str_has_prefix(line, want));
	}
	list = http(f, "GET", "/v1/reservations", 200, NULL);
	g_assert_cmpint(json_array_get_length(json_object_get_array_member(
			    json_node_get_object(list), "reservations")),
			==, 1);
	{
		g_autoptr(GString) out = g_string_new(NULL);
		g_assert_true(hr_ctl_render_reservations(list, out, NULL));
		g_test_message("%s", out->str);
		g_autofree gchar *row = g_strdup_printf("\n%s ready ", id);
		g_assert_nonnull(strstr(out->str, row));
		g_assert_nonnull(strstr(out->str, "ci"));
	}
	host = http(f, "GET", "/v1/host", 200, NULL);
	o = json_array_get_object_element(
	    json_object_get_array_member(json_node_get_object(host), "nodes"), 0);
	g_assert_cmpint(json_object_get_int_member(o, "free_blocks"), ==, 100);
	g_assert_cmpint(json_object_get_int_member(o, "available_blocks"), ==, 100);
	g_assert_cmpint(json_object_get_int_member(o, "promised_blocks"), ==, 10);
	{
		g_autoptr(GString) out = g_string_new(NULL);
		g_assert_true(hr_ctl_render_host(host, out, NULL));
		g_assert_nonnull(strstr(out->str, "THP: enabled"));
	}
	plan = http_body(f, "POST", "/v1/plan", "{\"bytes\":2097152}", 200, NULL);
	g_assert_true(json_object_get_boolean_member(
	    json_object_get_object_member(json_node_get_object(plan), "plan"), "complete"));

	err = http_body(f, "POST", "/v1/reservations", "{\"size\":\"lots\"}", 400, NULL);
	g_assert_nonnull(strstr(json_object_get_string_member(json_node_get_object(err), "error"),
				"size: \"lots\" is not a size"));
	g_clear_pointer(&err, json_node_unref);
	err = http_body(f, "POST", "/v1/reservations", "{\"bytes\":1,\"color\":1}", 400, NULL);
	g_clear_pointer(&err, json_node_unref);
	err = http(f, "DELETE", "/v1/reservations/r99", 404, NULL);
	g_clear_pointer(&err, json_node_unref);

	released = http(f, "DELETE", path, 200, NULL);
	g_assert_cmpstr(json_object_get_string_member(json_node_get_object(released), "state"), ==,
			"cancelled");
	/* twice is a conflict, with the state named */
	{
		g_autofree gchar *again = g_strdup_printf("%s/release", path);
		err = http_body(f, "POST", again, "{}", 409, NULL);
	}
	g_assert_nonnull(strstr(json_object_get_string_member(json_node_get_object(err), "error"),
				"cancelled already"));
}

/*
 * An 8 MiB reservation on a node with one free block, made ready by the
 * donor holding all 3 blocks of the EVACUATE (*@cmd) it was sent.
 */
static HrReservation *
ready_with_three_holds(Fixture *f, FakeDevice **dev, HrCmd **cmd)
{
	HrReservation *r;

	host_set_free_blocks(f, 1);
	*dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 0, FALSE, "h", NULL);
	*cmd = fake_expect_cmd(*dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint((*cmd)->nr_gpas, ==, 3);
	host_set_free_blocks(f, 4);
	answer_evacuate(*dev, *cmd, 3);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_cmpuint(r->holds->len, ==, 3);
	return r;
}

/* a block the guest took back under pressure is no longer the reservation's hold */
static void
test_exec_stale_hold(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(GBytes) back = NULL;
	HrReservation *r;
	(void)data;

	r = ready_with_three_holds(f, &dev, &cmd);
	back = make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, 0, VIRTIO_HUGEROOM_RET_PRESSURE,
			   cmd->gpas[1], 1);
	fake_send(dev, HR_CHAN_GUEST_MSG, back);
	while (r->holds->len > 2)
		g_main_context_iteration(NULL, TRUE);
	for (guint i = 0; i < r->holds->len; i++)
		g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(r->holds, i))->gpa, !=,
				 cmd->gpas[1]);
	/* and nothing was sent for it */
	fake_expect_silence(dev, 200);
}

/* consumed: holds go back once the node has room, oldest first, only as many as fit */
static void
test_exec_high_mark(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) ret = NULL;
	HrReservation *r;
	(void)data;

	r = ready_with_three_holds(f, &dev, &cmd);
	g_assert_true(hr_prepare_consume(hr_daemon_get_prepare(f->daemon), r->id, NULL));
	/* disabled (0): the holds stay, whatever the host has */
	fake_expect_silence(dev, 200);
	g_assert_cmpuint(r->holds->len, ==, 3);

	/*
	 * The node has 26280 + 4 * 512 = 28328 free pages. A high mark of
	 * 106 MiB (27136 pages) leaves room for 2 blocks: the two oldest go.
	 */
	f->config->return_high_mark_mb = 106;
	ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 2);
	g_assert_cmpuint(ret->gpas[0], ==, cmd->gpas[0]);
	g_assert_cmpuint(ret->gpas[1], ==, cmd->gpas[1]);
	g_assert_cmpuint(r->holds->len, ==, 1);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(r->holds, 0))->gpa, ==,
			 cmd->gpas[2]);
	g_assert_cmpuint(r->blocks_returned, ==, 2);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CONSUMED);
}

/* a RETURN that gives back less than asked leaves the rest as holds, tried again */
static void
test_exec_return_short(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) ret = NULL;
	g_autoptr(HrCmd) again = NULL;
	g_autoptr(HrBlocks) back = hr_blocks_new(VIRTIO_HUGEROOM_MSG_RETURNED, 1);
	g_autoptr(GBytes) back_msg = NULL;
	g_autoptr(GBytes) result = NULL;
	HrReservation *r;
	(void)data;

	r = ready_with_three_holds(f, &dev, &cmd);
	g_assert_true(hr_prepare_release(hr_daemon_get_prepare(f->daemon), r->id, NULL));
	ret = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 3);
	g_assert_cmpuint(r->holds->len, ==, 0);

	/* the guest gives back only the first */
	back->hdr.request_id = ret->hdr.request_id;
	back->reason = VIRTIO_HUGEROOM_RET_HOST;
	back->gpas[0] = ret->gpas[0];
	back_msg = hr_blocks_encode(back);
	fake_send(dev, HR_CHAN_GUEST_MSG, back_msg);
	result = make_result(VIRTIO_HUGEROOM_MSG_RESULT, ret->hdr.request_id,
			     VIRTIO_HUGEROOM_S_PARTIAL, 3, 1, 0);
	fake_send(dev, HR_CHAN_GUEST_MSG, result);

	/* the two it kept are asked for again */
	again = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(again->nr_gpas, ==, 2);
	g_assert_cmpuint(again->gpas[0], ==, ret->gpas[1]);
	g_assert_cmpuint(again->gpas[1], ==, ret->gpas[2]);
}

/*
 * Two VMs without -uuid: the one that donated gets its blocks back, not
 * the one that connected last with the same (all-zero) UUID.
 */
static void
test_exec_zero_uuid(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) donor = NULL;
	g_autoptr(FakeDevice) other = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) ret = NULL;
	HrGuestPolicy *pol = g_new0(HrGuestPolicy, 1);
	HrReservation *r;
	(void)data;

	pol->pattern = g_strdup("bystander");
	pol->donor = FALSE;
	g_ptr_array_add(f->config->guest_policies, pol);
	host_set_free_blocks(f, 1);
	donor = donor_up(f, "giver", 0);
	other = donor_up(f, "bystander", 0);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 30, FALSE, "z", NULL);
	cmd = fake_expect_cmd(donor, VIRTIO_HUGEROOM_CMD_EVACUATE);
	host_set_free_blocks(f, 4);
	answer_evacuate(donor, cmd, 3);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_cmpuint(r->holds->len, ==, 3);
	g_assert_true(g_str_has_prefix(
	    ((HrReservationHold *)g_ptr_array_index(r->holds, 0))->guest_key, "name:giver@pid:"));
	g_assert_true(hr_prepare_release(hr_daemon_get_prepare(f->daemon), r->id, NULL));
	ret = fake_expect_cmd(donor, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 3);
	fake_expect_silence(other, 300);
}

/*
 * The daemon restarts in the middle of a donation: the blocks the donor
 * holds after it (the resync) and frees later (late HOLDs) are the
 * reservation's, as many as the donation asked for; the rest nobody owns
 * and they go back.
 */
static void
test_exec_restart_mid_donation(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(FakeDevice) dev2 = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) ret = NULL;
	g_autoptr(HrCmd) ret2 = NULL;
	g_autoptr(HrBlocks) first = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, 1);
	g_autoptr(HrBlocks) late = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, 1);
	g_autoptr(HrBlocks) resync = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, 4);
	g_autoptr(GBytes) msg = NULL;
	g_autoptr(HrChanHello) hello = make_hello("donor", 1);
	g_autoptr(GBytes) hp = hr_chan_hello_encode(hello);
	g_autoptr(HrChanFrame) welcome = NULL;
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .num_held = 4};
	g_autofree gchar *id = NULL;
	HrReservation *r;
	HrReservationStep *s;
	(void)data;

	host_set_free_blocks(f, 1);
	dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 60, FALSE, "m", NULL);
	id = g_strdup(r->id);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->nr_gpas, ==, 3);
	first->hdr.request_id = cmd->hdr.request_id;
	first->gpas[0] = cmd->gpas[0];
	msg = hr_blocks_encode(first);
	fake_send(dev, HR_CHAN_GUEST_MSG, msg);
	g_clear_pointer(&msg, g_bytes_unref);
	while (g_hash_table_size(first_guest(f)->held) < 1)
		g_main_context_iteration(NULL, TRUE);

	/* gone before the RESULT; a new daemon on the same state file */
	hr_daemon_free(f->daemon);
	fake_wait_eof(dev);
	fixture_start(f);
	dev2 = fake_connect(f);
	fake_send(dev2, HR_CHAN_HELLO, hp);
	welcome = fake_recv(dev2);
	g_assert_cmpuint(welcome->type, ==, HR_CHAN_WELCOME);
	/* it froze two more before the donation ended; one block is nobody's */
	resync->gpas[0] = cmd->gpas[0];
	resync->gpas[1] = cmd->gpas[1];
	resync->gpas[2] = cmd->gpas[2];
	resync->gpas[3] = MiB(900);
	msg = hr_blocks_encode(resync);
	fake_send(dev2, HR_CHAN_GUEST_MSG, msg);
	g_clear_pointer(&msg, g_bytes_unref);
	/* no status yet: it is not asked for more meanwhile */
	fake_send_state(dev2, &state);
	ret = fake_expect_cmd(dev2, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret->nr_gpas, ==, 1);
	r = hr_reservation_store_find(exec_store(f), id);
	g_assert_cmpuint(r->holds->len, ==, 3);
	s = find_step(r, HR_STEP_DONATE);
	g_assert_cmpint(s->state, ==, HR_STEP_SHORT);
	g_assert_nonnull(strstr(s->detail, "restarted while it ran; 3 blocks"));
	{
		/* the guest takes it back; RETURNs run one at a time */
		g_autoptr(GBytes) back =
		    make_blocks(VIRTIO_HUGEROOM_MSG_RETURNED, ret->hdr.request_id,
				VIRTIO_HUGEROOM_RET_HOST, ret->gpas[0], 1);
		g_autoptr(GBytes) done = make_result(
		    VIRTIO_HUGEROOM_MSG_RESULT, ret->hdr.request_id, VIRTIO_HUGEROOM_S_OK, 1, 1, 0);
		fake_send(dev2, HR_CHAN_GUEST_MSG, back);
		fake_send(dev2, HR_CHAN_GUEST_MSG, done);
	}
	/* a late HOLD past what it asked for is nobody's either */
	late->hdr.request_id = cmd->hdr.request_id;
	late->gpas[0] = MiB(902);
	msg = hr_blocks_encode(late);
	fake_send(dev2, HR_CHAN_GUEST_MSG, msg);
	ret2 = fake_expect_cmd(dev2, VIRTIO_HUGEROOM_CMD_RETURN);
	g_assert_cmpuint(ret2->nr_gpas, ==, 1);
	g_assert_cmpuint(ret2->gpas[0], ==, MiB(902));
	g_assert_cmpuint(r->holds->len, ==, 3);
	g_assert_cmpuint(first_guest(f)->orphans_returned, ==, 2);
}

/* the executor's ticks never read /proc/pagetypeinfo (it takes the zone locks) */
static void
test_exec_no_pagetypeinfo(Fixture *f, gconstpointer data)
{
	g_autofree gchar *dir = host_dir(f);
	g_autofree gchar *path = g_build_filename(dir, "proc", "pagetypeinfo", NULL);
	HrReservation *r;
	(void)data;

	/* reading it now would fail the tick */
	g_assert_true(g_file_set_contents(path, "garbage\n", -1, NULL));
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 0, FALSE, "t", NULL);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_cmpuint(r->obtained, ==, 4);
	g_assert_null(hr_monitor_read_host(dir, NULL));
}

/* a guest whose evacuation gave nothing is left alone for a while, then asked again */
static void
test_exec_deferral(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	g_autoptr(HrCmd) again = NULL;
	g_autoptr(GBytes) fresh = NULL;
	HrReservation *r;
	gint64 failed_at;
	(void)data;

	host_set_free_blocks(f, 1);
	dev = donor_up(f, "flaky", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 30, FALSE, "d", NULL);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	answer_evacuate(dev, cmd, 0);
	failed_at = g_get_monotonic_time();
	/* new candidates elsewhere: worth asking, but not yet (1 s backoff) */
	fresh = make_status(2, 0, MiB(700));
	fake_send(dev, HR_CHAN_GUEST_MSG, fresh);
	fake_expect_silence(dev, 600);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	again = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpint(g_get_monotonic_time() - failed_at, >=, 900 * 1000);
	g_assert_cmpuint(again->gpas[0], >=, MiB(700));
	g_assert_cmpint(((HrReservationStep *)g_ptr_array_index(r->steps, 1))->state, ==,
			HR_STEP_FAILED);
}

/*
 * A donor that gives nothing three times in a row (at its floor, say) is
 * not waited for: the best-effort reservation ends on what it has, long
 * before its deadline, and says why; before, it asked again on every
 * backoff until the deadline (the demo's prepare waited 200 s so).
 */
static void
test_exec_deferral_gives_up(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	gint64 started = g_get_monotonic_time();
	HrReservation *r;
	(void)data;

	host_set_free_blocks(f, 1);
	dev = donor_up(f, "dry", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 60, FALSE, "d", NULL);
	for (guint i = 0; i < 3; i++) {
		g_autoptr(HrCmd) cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
		/* new candidates each time: worth asking again, were it worth waiting */
		g_autoptr(GBytes) fresh = make_status(2 + i, 0, MiB(700 + 100 * i));

		answer_evacuate(dev, cmd, 0);
		fake_send(dev, HR_CHAN_GUEST_MSG, fresh);
	}
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_true(r->partial);
	g_assert_cmpuint(r->obtained, ==, 1);
	g_assert_nonnull(strstr(r->reason, "no more sources"));
	g_assert_nonnull(strstr(r->reason, "dry: deferred"));
	/* the backoffs are 1 s and 2 s: done after the third failure */
	g_assert_cmpint(g_get_monotonic_time() - started, <, 20 * G_USEC_PER_SEC);
}

/* ---------------------------------------------------------------------- */
/* Holding in the node's hugetlb pool */

static gchar *
pool_file(Fixture *f)
{
	g_autofree gchar *dir = host_dir(f);
	return g_build_filename(dir, "sys", "devices", "system", "node", "node0", "hugepages",
				"hugepages-2048kB", "nr_hugepages", NULL);
}

static guint64
pool_read(Fixture *f)
{
	g_autofree gchar *path = pool_file(f);
	g_autofree gchar *text = NULL;
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	return g_ascii_strtoull(text, NULL, 10);
}

static void
pool_setup(Fixture *f, gconstpointer data)
{
	g_autofree gchar *path = NULL;
	g_autofree gchar *dir = NULL;

	exec_setup(f, data);
	path = pool_file(f);
	dir = g_path_get_dirname(path);
	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	/* the admin's own 5 pages: never ours to take or give */
	g_assert_true(g_file_set_contents(path, "5\n", -1, NULL));
	f->config->hold_in_pool = TRUE;
	f->config->pool_margin_mb = 0;
}

/* free blocks are held in the pool, not just counted; consume gives them back */
static void
test_pool_free(Fixture *f, gconstpointer data)
{
	HrReservation *r;
	HrReservationStep *s;
	g_autoptr(GError) error = NULL;
	(void)data;

	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(20), 0, 0, FALSE, "a", NULL);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 10);
	g_assert_cmpuint(r->obtained, ==, 10);
	g_assert_cmpuint(pool_read(f), ==, 15);
	g_assert_nonnull(strstr(r->reason, "held in node 0's hugetlb pool"));
	s = find_step(r, HR_STEP_FREE);
	g_assert_nonnull(s);
	g_assert_cmpint(s->gained, ==, 10);
	g_assert_cmpint(s->state, ==, HR_STEP_DONE);
	g_assert_nonnull(strstr(s->detail, "held 10 of 10 blocks in node 0's hugetlb pool"));
	/* held blocks are not free memory: nobody else is promised them */
	g_assert_cmpuint(hr_reservation_store_promised(exec_store(f), 0, NULL), ==, 0);

	g_assert_true(hr_prepare_consume(hr_daemon_get_prepare(f->daemon), r->id, &error));
	g_assert_no_error(error);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CONSUMED);
	g_assert_cmpuint(r->pool_blocks, ==, 0);
	g_assert_cmpuint(pool_read(f), ==, 5);
}

/* a reservation that ends gives its pool blocks back too */
static void
test_pool_release(Fixture *f, gconstpointer data)
{
	HrReservation *r;
	(void)data;

	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 0, FALSE, "a", NULL);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_cmpuint(pool_read(f), ==, 9);
	g_assert_true(hr_prepare_release(hr_daemon_get_prepare(f->daemon), r->id, NULL));
	g_assert_cmpint(r->state, ==, HR_RESERVATION_CANCELLED);
	g_assert_cmpuint(pool_read(f), ==, 5);
}

/*
 * The node has nothing free: the donor gives, the freed blocks go into
 * the pool, and the reservation is ready only once they are held.
 */
static void
test_pool_donate(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	HrReservation *r;
	HrReservationStep *s;
	(void)data;

	/* below the high watermark: no headroom at all */
	host_set_free(f, 25000, 0);
	dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(6), 0, 0, FALSE, "d", NULL);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->count, ==, 3);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	g_assert_cmpuint(r->pool_blocks, ==, 0);
	g_assert_null(find_step(r, HR_STEP_FREE));
	/* QEMU discarded them: 4 free blocks, 3 of them above the watermark */
	host_set_free(f, 25000, 4);
	answer_evacuate(dev, cmd, 3);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 3);
	g_assert_cmpuint(pool_read(f), ==, 8);
	g_assert_cmpuint(r->holds->len, ==, 3);
	s = find_step(r, HR_STEP_DONATE);
	g_assert_nonnull(s);
	g_assert_cmpuint(s->blocks_held, ==, 3);
	s = find_step(r, HR_STEP_FREE);
	g_assert_nonnull(s);
	g_assert_cmpint(s->gained, ==, 3);
}

static gboolean
cond_pool_3(gpointer data)
{
	return ((HrReservation *)data)->pool_blocks == 3;
}

/*
 * A donor that gave all it was asked and still has free memory above its
 * floor is asked again, with the candidates of its next report, until the
 * need is held.
 */
static void
test_pool_asked_again(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) first = NULL;
	g_autoptr(HrCmd) second = NULL;
	g_autoptr(GBytes) status = NULL;
	HrReservation *r;
	guint donations = 0;
	(void)data;

	host_set_free(f, 25000, 0);
	dev = donor_up(f, "donor", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(12), 0, 60, FALSE, "d", NULL);
	first = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(first->count, ==, 3);
	/* its next report names three other blocks */
	status = make_status(2, 0, MiB(600));
	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	host_set_free(f, 25000, 4);
	answer_evacuate(dev, first, 3);
	/* the pool took the 3 freed blocks: the node has none free again */
	wait_for(cond_pool_3, r, "3 blocks in the pool");
	host_set_free(f, 25000, 0);
	second = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(second->count, ==, 3);
	for (guint i = 0; i < second->nr_gpas; i++)
		g_assert_cmpuint(second->gpas[i], >=, MiB(600));
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	host_set_free(f, 25000, 4);
	answer_evacuate(dev, second, 3);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 6);
	for (guint i = 0; i < r->steps->len; i++)
		donations +=
		    ((HrReservationStep *)g_ptr_array_index(r->steps, i))->kind == HR_STEP_DONATE;
	g_assert_cmpuint(donations, ==, 2);
	g_assert_cmpuint(r->holds->len, ==, 6);
}

/*
 * The kernel after failed grows: its own compaction is deferred, so a grow
 * gets nothing from free memory in fragments; a write to the node's
 * compact file is not deferred (the fake counts one and then assembles).
 */
static guint64
pool_deferred(guint node, guint64 added, gpointer data)
{
	Fixture *f = data;
	g_autofree gchar *dir = host_dir(f);
	g_autofree gchar *path = g_strdup_printf("%s/sys/devices/system/node/node%u/compact", dir,
						 node);
	g_autofree gchar *text = NULL;

	return g_file_get_contents(path, &text, NULL, NULL) && text[0] == '1' ? added : 0;
}

/* grows that get nothing while the node's free memory is in fragments: compact once */
static void
test_pool_compacts_deferred(Fixture *f, gconstpointer data)
{
	g_autofree gchar *dir = host_dir(f);
	g_autofree gchar *compact =
	    g_build_filename(dir, "sys", "devices", "system", "node", "node0", "compact", NULL);
	HrReservation *r;
	HrReservationStep *s = NULL;
	(void)data;

	g_assert_true(g_file_set_contents(compact, "", -1, NULL));
	hr_pool_set_limit_for_testing(pool_deferred, f);
	/* 60000 free pages, none of them in a free 2 MiB block */
	host_set_free(f, 60000, 0);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(20), 0, 0, FALSE, "a", NULL);
	wait_state(f, r->id, HR_RESERVATION_READY);
	hr_pool_set_limit_for_testing(NULL, NULL);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 10);
	g_assert_cmpuint(pool_read(f), ==, 15);
	/* one compaction of the node (a grow's step names the pool instead) */
	for (guint i = 0; i < r->steps->len; i++) {
		HrReservationStep *step = g_ptr_array_index(r->steps, i);
		if (step->detail != NULL && strstr(step->detail, "unusable index") != NULL) {
			g_assert_null(s);
			s = step;
		}
	}
	g_assert_nonnull(s);
	g_assert_cmpint(s->kind, ==, HR_STEP_COMPACT);
	g_assert_cmpint(s->state, ==, HR_STEP_DONE);
}

/* the late donor in the pool: asked while the first donation runs, for the rest */
static void
test_pool_late_donor(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) early = NULL;
	g_autoptr(FakeDevice) late = NULL;
	g_autoptr(HrCmd) first = NULL;
	g_autoptr(HrCmd) second = NULL;
	HrReservation *r;
	(void)data;

	host_set_free(f, 25000, 0);
	early = donor_up(f, "early", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 60, FALSE, "d", NULL);
	first = fake_expect_cmd(early, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(first->count, ==, 3);
	late = donor_up(f, "late", 2);
	second = fake_expect_cmd(late, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(second->count, ==, 1);
	fake_expect_silence(early, 200);

	host_set_free(f, 25000, 4);
	answer_evacuate(early, first, 3);
	wait_for(cond_pool_3, r, "3 blocks in the pool");
	host_set_free(f, 25000, 2);
	answer_evacuate(late, second, 1);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 4);
	g_assert_cmpuint(r->holds->len, ==, 4);
}

typedef struct {
	Fixture *f;
	guint64 request_id;
	guint blocks;
} WaitHeld;

static gboolean
cond_held(gpointer data)
{
	WaitHeld *w = data;
	HrRequest *request = hr_guest_find_request(first_guest(w->f), w->request_id);
	return request != NULL && request->blocks != NULL && request->blocks->len >= w->blocks;
}

/*
 * The late donor in the pool, when the running donation's guest has
 * handed its blocks over but the pool has not taken them yet (the grow
 * that runs was asked before they were freed, or the host's free memory
 * has not shown them yet): those blocks are coming, the late donor is
 * asked only for what is beyond them. It was asked for all 4 (its 3), 6
 * blocks asked for 4 needed: the demo's 475 asked for 341.
 */
static void
test_pool_late_donor_held(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) early = NULL;
	g_autoptr(FakeDevice) late = NULL;
	g_autoptr(HrCmd) first = NULL;
	g_autoptr(HrCmd) second = NULL;
	g_autoptr(HrBlocks) hold = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, 3);
	g_autoptr(GBytes) hold_msg = NULL;
	g_autoptr(GBytes) result = NULL;
	HrReservation *r;
	WaitHeld w = {f, 0, 3};
	guint asked = 0;
	(void)data;

	host_set_free(f, 25000, 0);
	early = donor_up(f, "early", 1);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(8), 0, 60, FALSE, "d", NULL);
	first = fake_expect_cmd(early, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(first->count, ==, 3);
	/* it hands all three over and is still running */
	hold->hdr.request_id = first->hdr.request_id;
	for (guint i = 0; i < 3; i++)
		hold->gpas[i] = first->gpas[i];
	hold_msg = hr_blocks_encode(hold);
	fake_send(early, HR_CHAN_GUEST_MSG, hold_msg);
	w.request_id = first->hdr.request_id;
	wait_for(cond_held, &w, "the early donor's 3 blocks handed over");
	late = donor_up(f, "late", 2);
	second = fake_expect_cmd(late, VIRTIO_HUGEROOM_CMD_EVACUATE);
	/* the fourth block only: the three handed over are on their way */
	g_assert_cmpuint(second->count, ==, 1);
	fake_expect_silence(early, 200);

	result = make_result(VIRTIO_HUGEROOM_MSG_RESULT, first->hdr.request_id,
			     VIRTIO_HUGEROOM_S_OK, 3, 3, 42);
	host_set_free(f, 25000, 4);
	fake_send(early, HR_CHAN_GUEST_MSG, result);
	wait_for(cond_pool_3, r, "3 blocks in the pool");
	host_set_free(f, 25000, 2);
	answer_evacuate(late, second, 1);
	wait_state(f, r->id, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 4);
	for (guint i = 0; i < r->steps->len; i++) {
		HrReservationStep *s = g_ptr_array_index(r->steps, i);
		if (s->kind == HR_STEP_DONATE)
			asked += s->blocks_asked;
	}
	g_assert_cmpuint(asked, ==, 4);
}

typedef struct {
	Fixture *f;
	guint64 pages;
} WaitPool;

static gboolean
cond_pool(gpointer data)
{
	WaitPool *w = data;
	return pool_read(w->f) == w->pages;
}

static void
wait_pool(Fixture *f, guint64 pages)
{
	WaitPool w = {f, pages};
	g_autofree gchar *what = g_strdup_printf("%" G_GUINT64_FORMAT " pages in the pool", pages);
	wait_for(cond_pool, &w, what);
}

static guint64
reserve_member(Fixture *f, const gchar *name)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonNode) root = NULL;

	hr_api_reserve_add_json(hr_prepare_get_reserve(hr_daemon_get_prepare(f->daemon)), b);
	root = json_builder_get_root(b);
	return (guint64)json_object_get_int_member(json_node_get_object(root), name);
}

typedef struct {
	Fixture *f;
	const gchar *name;
	guint64 value;
} WaitReserve;

static gboolean
cond_reserve(gpointer data)
{
	WaitReserve *w = data;
	return reserve_member(w->f, w->name) == w->value;
}

static void
wait_reserve(Fixture *f, const gchar *name, guint64 value)
{
	WaitReserve w = {f, name, value};
	g_autofree gchar *what =
	    g_strdup_printf("the reserve's %s at %" G_GUINT64_FORMAT, name, value);
	wait_for(cond_reserve, &w, what);
}

static void
host_set_psi(Fixture *f, const gchar *full_avg10)
{
	g_autofree gchar *dir = host_dir(f);
	g_autofree gchar *pdir = g_build_filename(dir, "proc", "pressure", NULL);
	g_autofree gchar *path = g_build_filename(pdir, "memory", NULL);
	g_autofree gchar *text = g_strdup_printf(
	    "some avg10=%s avg60=0.00 avg300=0.00 total=1\nfull avg10=%s avg60=0.00 avg300=0.00 "
	    "total=1\n",
	    full_avg10, full_avg10);
	g_assert_cmpint(g_mkdir_with_parents(pdir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(path, text, -1, NULL));
	hr_prepare_host_changed(hr_daemon_get_prepare(f->daemon));
}

/*
 * The standing reserve (issue 21 item 1): kept assembled in the pool from
 * the node's free memory, taken at once by a reservation (ready when
 * hr_prepare_create returns, no pool growth), refilled after, given back
 * under host memory pressure, and not expired like a reservation.
 */
static void
test_pool_reserve(Fixture *f, gconstpointer data)
{
	HrReservation *r;
	HrReservationStep *s;
	(void)data;

	f->config->reservation_ttl_s = 1;
	f->config->reserve = g_strdup("40M");
	/* 20 blocks held in the pool beside the admin's 5 */
	wait_reserve(f, "blocks_ready", 20);
	g_assert_cmpuint(pool_read(f), ==, 25);
	/* past the TTL a reservation would expire; the reserve's parts do not */
	g_usleep(1500 * 1000);
	g_assert_cmpuint(reserve_member(f, "blocks_ready"), ==, 20);

	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(30), 0, 60, FALSE, "vm", NULL);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_READY);
	g_assert_false(r->partial);
	g_assert_cmpuint(r->pool_blocks, ==, 15);
	g_assert_cmpuint(pool_read(f), ==, 25);
	s = find_step(r, HR_STEP_RESERVE);
	g_assert_nonnull(s);
	g_assert_cmpint(s->gained, ==, 15);
	g_assert_cmpuint(reserve_member(f, "taken_blocks"), ==, 15);
	/* the reserve refills: 15 more blocks in the pool */
	wait_reserve(f, "blocks_ready", 20);
	g_assert_cmpuint(pool_read(f), ==, 40);
	g_assert_true(hr_prepare_consume(hr_daemon_get_prepare(f->daemon), r->id, NULL));
	g_assert_cmpuint(pool_read(f), ==, 25);

	/* the host needs the memory: the reserve gives its parts back, newest first */
	host_set_psi(f, "50.00");
	wait_pool(f, 10);
	g_assert_cmpuint(reserve_member(f, "given_back_blocks"), ==, 15);
	host_set_psi(f, "0.00");
}

/* a donor whose driver negotiated @features (DEVICE_STATE before its status) */
static FakeDevice *
donor_up_features(Fixture *f, const gchar *name, guint8 seed, guint64 features)
{
	FakeDevice *dev = fake_device_up(f, name, seed);
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = features, .msgs_relayed = 1};
	g_autoptr(GBytes) status = make_status(1, 0, MiB(512));
	fake_send_state(dev, &state);
	fake_send(dev, HR_CHAN_GUEST_MSG, status);
	wait_for(cond_have_status, f, "the donor's status");
	return dev;
}

/*
 * Nobody waits for the standing reserve: its parts ask donors whose
 * drivers negotiated F_BACKGROUND with EVAC_F_BACKGROUND (they run it below
 * their own tasks), a reservation a VM waits for never does, and a driver
 * without the feature never gets the flag.
 */
static void
check_background(Fixture *f, guint64 features, gboolean part, guint16 want)
{
	g_autoptr(FakeDevice) dev = NULL;
	g_autoptr(HrCmd) cmd = NULL;
	HrPrepare *prepare = hr_daemon_get_prepare(f->daemon);
	HrReservation *r = NULL;

	host_set_free(f, 25000, 0);
	dev = donor_up_features(f, "donor", 1, features);
	if (part)
		g_assert_true(hr_reserve_set(hr_prepare_get_reserve(prepare), MiB(6), 0, NULL));
	else
		r = hr_prepare_create(prepare, MiB(6), 0, 0, FALSE, "vm", NULL);
	cmd = fake_expect_cmd(dev, VIRTIO_HUGEROOM_CMD_EVACUATE);
	g_assert_cmpuint(cmd->hdr.flags & VIRTIO_HUGEROOM_EVAC_F_BACKGROUND, ==, want);
	host_set_free(f, 25000, 4);
	answer_evacuate(dev, cmd, cmd->count);
	if (part)
		wait_reserve(f, "blocks_ready", 3);
	else
		wait_state(f, r->id, HR_RESERVATION_READY);
}

static void
test_pool_reserve_background(Fixture *f, gconstpointer data)
{
	(void)data;
	check_background(f, 0xf | (1u << VIRTIO_HUGEROOM_F_BACKGROUND), TRUE,
			 VIRTIO_HUGEROOM_EVAC_F_BACKGROUND);
}

static void
test_pool_reserve_background_old(Fixture *f, gconstpointer data)
{
	(void)data;
	check_background(f, 0xf, TRUE, 0);
}

static void
test_pool_foreground(Fixture *f, gconstpointer data)
{
	(void)data;
	check_background(f, 0xf | (1u << VIRTIO_HUGEROOM_F_BACKGROUND), FALSE, 0);
}

/* a reserve set through the API holds until the config's reserve= changes */
static void
test_pool_reserve_api(Fixture *f, gconstpointer data)
{
	HrReserve *reserve = hr_prepare_get_reserve(hr_daemon_get_prepare(f->daemon));
	(void)data;

	g_assert_true(hr_reserve_set(reserve, MiB(8), 0, NULL));
	wait_reserve(f, "blocks_ready", 4);
	/* ticks later it is still there */
	g_usleep(300 * 1000);
	g_assert_cmpuint(reserve_member(f, "bytes"), ==, MiB(8));
	g_assert_cmpuint(pool_read(f), ==, 9);
	/* a reload that sets reserve= wins over it */
	f->config->reserve = g_strdup("4M");
	wait_reserve(f, "bytes", MiB(4));
	wait_pool(f, 5);
}

/* nothing free and no donor: a strict reservation fails and says why */
static void
test_pool_strict_fails(Fixture *f, gconstpointer data)
{
	HrReservation *r;
	(void)data;

	host_set_free(f, 25000, 0);
	r = hr_prepare_create(hr_daemon_get_prepare(f->daemon), MiB(6), 0, 0, TRUE, "s", NULL);
	wait_state(f, r->id, HR_RESERVATION_FAILED);
	g_assert_nonnull(strstr(r->reason, "no more sources: 0 of 3 blocks held"));
	g_assert_cmpuint(pool_read(f), ==, 5);
}

/*
 * A FIFO, a symlink or a file others may write in place of the state file
 * is refused at once with what to do: before, a FIFO hung the start.
 */
static void
test_unsafe_file(Tmp *t, gconstpointer data)
{
	g_autoptr(GError) error = NULL;
	g_autofree gchar *target = g_build_filename(t->dir, "elsewhere.json", NULL);
	g_autofree gchar *state = g_path_get_dirname(t->path);
	(void)data;

	g_assert_cmpint(g_mkdir_with_parents(state, 0750), ==, 0);
	g_assert_cmpint(mkfifo(t->path, 0600), ==, 0);
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
		g_assert_false(hr_reservation_store_load(store, &error));
		g_test_message("FIFO: %s", error->message);
		g_assert_nonnull(strstr(error->message, t->path));
		g_clear_error(&error);
	}
	g_assert_cmpint(g_unlink(t->path), ==, 0);
	g_assert_true(
	    g_file_set_contents(target, "{\"version\": 3, \"reservations\": []}", -1, NULL));
	g_assert_cmpint(symlink(target, t->path), ==, 0);
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
		g_assert_false(hr_reservation_store_load(store, &error));
		g_test_message("symlink: %s", error->message);
		g_clear_error(&error);
	}
	g_assert_cmpint(g_unlink(t->path), ==, 0);
	g_assert_true(
	    g_file_set_contents(t->path, "{\"version\": 3, \"reservations\": []}", -1, NULL));
	g_assert_cmpint(g_chmod(t->path, 0666), ==, 0);
	{
		g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
		g_assert_false(hr_reservation_store_load(store, &error));
		g_test_message("0666: %s", error->message);
		g_clear_error(&error);
	}
	g_unlink(t->path);
	g_unlink(target);
}

/*
 * A state that would not read back never replaces one that does: the save
 * reads what it is to write as the next start will, and keeps the old
 * file when an entry would be skipped (issue 18 item 1: "bytes": -1 cost
 * every reservation at the next start).
 */
static void
test_save_validated(Tmp *t, gconstpointer data)
{
	g_autoptr(HrReservationStore) store = hr_reservation_store_new(t->path);
	g_autoptr(GError) error = NULL;
	g_autofree gchar *good = NULL;
	g_autofree gchar *now = NULL;
	HrReservation *r;
	(void)data;

	r = hr_reservation_store_create(store, MiB(2), -1, 0, FALSE, "vm-a", &error);
	g_assert_no_error(error);
	g_assert_true(hr_reservation_store_save(store, &error));
	g_assert_true(g_file_get_contents(t->path, &good, NULL, NULL));
	/* a value the loader refuses (bytes is 1..G_MAXINT64 there) */
	r->bytes = G_MAXUINT64;
	g_assert_false(hr_reservation_store_save(store, &error));
	g_test_message("%s", error->message);
	g_assert_nonnull(strstr(error->message, "does not read back"));
	g_assert_nonnull(strstr(error->message, "previous"));
	g_clear_error(&error);
	g_assert_true(g_file_get_contents(t->path, &now, NULL, NULL));
	g_assert_cmpstr(now, ==, good);
	/* the writer thread's save checks the same, and says so */
	g_test_expect_message("HrReservation", G_LOG_LEVEL_WARNING, "*does not read back*");
	hr_reservation_touch(store, r);
	hr_reservation_store_flush(store);
	g_test_assert_expected_messages();
	g_assert_cmpuint(hr_reservation_store_save_failures(store), >=, 1);
	g_clear_pointer(&now, g_free);
	g_assert_true(g_file_get_contents(t->path, &now, NULL, NULL));
	g_assert_cmpstr(now, ==, good);
	/* fixed, it saves again */
	r->bytes = MiB(2);
	g_assert_true(hr_reservation_store_save(store, &error));
	g_assert_no_error(error);
}

/*
 * Issue 18 item 4: a guest that resyncs 1 M held blocks, all a
 * reservation's holds, after its device reconnected. Reconciling them is
 * work that grows with the input: it must run in slices, so that no turn
 * of the main loop spends more than a fraction of the 100 ms target on
 * it (the main thread's CPU time per turn: the loop watch's maximum,
 * which the host's load does not inflate), and no hold is lost or
 * doubled meanwhile. The bound is 4x the target: CPU time still grows on
 * a loaded machine (252 ms seen once under load before the last fixes,
 * 60-65 ms idle) and under the sanitizers; a reconcile in one turn takes
 * 2.8 s. benchmarks/daemon-attacks.py --only resync-1m measures the
 * target itself.
 */
#define BIG_N (1024 * 1024)
#define BIG_FIRST MiB(4096)
#define STALL_MAX_US 400000

static void
run_loop_ms(guint ms)
{
	gint64 until = g_get_monotonic_time() + ms * 1000;
	while (g_get_monotonic_time() < until) {
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
}

static FakeDevice *
big_guest_up(Fixture *f, guint n, HrGuest **guest)
{
	FakeDevice *dev = fake_connect(f);
	g_autoptr(HrChanHello) hello = make_hello("big", 0x42);
	g_autoptr(GBytes) hp = NULL;
	g_autoptr(HrChanFrame) welcome = NULL;
	HrChanDeviceState state = {.driver_ok = 1, .guest_features = 0xf, .num_held = n};

	hello->ram_size = BIG_FIRST + MiB(2) * (guint64)BIG_N;
	hello->ram[0].size = hello->ram_size;
	hp = hr_chan_hello_encode(hello);
	fake_send(dev, HR_CHAN_HELLO, hp);
	welcome = fake_recv(dev);
	g_assert_cmpuint(welcome->type, ==, HR_CHAN_WELCOME);
	for (guint off = 0; off < n; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
		guint k = MIN(n - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
		g_autoptr(GBytes) hold =
		    make_blocks(VIRTIO_HUGEROOM_MSG_HOLD, 0, 0, BIG_FIRST + MiB(2) * off, k);
		fake_send(dev, HR_CHAN_GUEST_MSG, hold);
		/* no more than max_frames_per_s */
		if (off % (VIRTIO_HUGEROOM_MAX_CMD_BLOCKS * 1000) == 0)
			g_usleep(250000);
		g_main_context_iteration(NULL, FALSE);
	}
	fake_send_state(dev, &state);
	for (gint64 until = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;;) {
		*guest = first_guest(f);
		if (*guest != NULL && hr_guest_is_ready(*guest) &&
		    g_hash_table_size(hr_guest_get_held(*guest)) == n)
			break;
		g_assert_cmpint(g_get_monotonic_time(), <, until);
		g_main_context_iteration(NULL, TRUE);
	}
	return dev;
}

static void
test_exec_big_resync(Fixture *f, gconstpointer data)
{
	g_autoptr(FakeDevice) dev = NULL;
	HrLoopWatch *watch;
	HrGuest *guest = NULL;
	HrReservation *r;
	g_autoptr(GError) error = NULL;
	g_autoptr(GHashTable) seen = g_hash_table_new(hr_gpa_hash, g_int64_equal);
	g_autofree gchar *key = NULL;
	gint64 stall;
	(void)data;

	/* the guest is up, holding nothing; a consumed reservation holds 1 M of its blocks */
	dev = big_guest_up(f, 0, &guest);
	key = g_strdup(hr_guest_get_key(guest));
	r = hr_reservation_store_create(exec_store(f), MiB(2) * (guint64)BIG_N, -1, 0, FALSE,
					"test", &error);
	g_assert_no_error(error);
	g_assert_true(
	    hr_reservation_set_state(exec_store(f), r, HR_RESERVATION_IN_PROGRESS, NULL, &error));
	hr_reservation_set_obtained(exec_store(f), r, BIG_N);
	g_assert_true(
	    hr_reservation_set_state(exec_store(f), r, HR_RESERVATION_READY, NULL, &error));
	g_assert_true(
	    hr_reservation_set_state(exec_store(f), r, HR_RESERVATION_CONSUMED, NULL, &error));
	hr_reservation_store_flush(exec_store(f));
	run_loop_ms(200);
	g_clear_pointer(&dev, fake_free);
	while (hr_guest_is_connected(guest))
		g_main_context_iteration(NULL, TRUE);
	/* as a state file loaded at the start would have them: no save meanwhile */
	for (guint i = 0; i < BIG_N; i++)
		hr_reservation_add_hold(r, key, "big", BIG_FIRST + MiB(2) * i);

	/* its device reconnects and resyncs the 1 M blocks */
	watch = hr_loop_watch_new();
	dev = big_guest_up(f, BIG_N, &guest);
	g_assert_cmpstr(hr_guest_get_key(guest), ==, key);
	/* the reconcile runs and ends; nothing is given back as an orphan */
	for (gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
	     g_get_monotonic_time() < until;) {
		g_autoptr(HrChanFrame) frame = NULL;
		if (fake_poll(dev, &frame) && frame != NULL)
			g_error("the daemon sent a %s frame: the reconcile found orphans",
				hr_chan_type_to_string(frame->type));
		g_main_context_iteration(NULL, FALSE);
		g_usleep(1000);
	}
	stall = hr_loop_watch_cpu_max_us(watch);
	hr_loop_watch_free(watch);
	g_test_message("longest turn of the main loop: %" G_GINT64_FORMAT " us of CPU", stall);
	/* every hold is there, once */
	r = hr_reservation_store_find(exec_store(f), r->id);
	g_assert_nonnull(r);
	g_assert_cmpuint(r->holds->len, ==, BIG_N);
	for (guint i = 0; i < r->holds->len; i++) {
		HrReservationHold *h = g_ptr_array_index(r->holds, i);
		g_assert_cmpstr(h->guest_key, ==, key);
		g_assert_true(g_hash_table_add(seen, &h->gpa));
	}
	g_assert_cmpint(stall, <, STALL_MAX_US);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/reservations/parse-size", test_parse_size);
	g_test_add_func("/reservations/transitions", test_transitions);
	g_test_add_func("/reservations/lifecycle", test_lifecycle);
	g_test_add_func("/reservations/no-double-promise", test_promises);
	g_test_add_func("/reservations/holds-oldest-first", test_holds);
	g_test_add_func("/reservations/holds-move-in-order", test_move_holds);
	g_test_add("/reservations/persist/round-trip", Tmp, NULL, tmp_setup, test_round_trip,
		   tmp_teardown);
	g_test_add("/reservations/persist/bad-entry-skipped", Tmp, NULL, tmp_setup,
		   test_bad_entry_skipped, tmp_teardown);
	g_test_add("/reservations/persist/unsafe-dir", Tmp, NULL, tmp_setup, test_unsafe_dir,
		   tmp_teardown);
	g_test_add("/reservations/persist/corrupt", Tmp, NULL, tmp_setup, test_corrupt,
		   tmp_teardown);
	g_test_add("/reservations/persist/unsafe-file", Tmp, NULL, tmp_setup, test_unsafe_file,
		   tmp_teardown);
	g_test_add("/reservations/persist/missing", Tmp, NULL, tmp_setup, test_missing_file,
		   tmp_teardown);
	g_test_add("/reservations/persist/save-validated", Tmp, NULL, tmp_setup,
		   test_save_validated, tmp_teardown);
#define ADD_EXEC(name, fn) \
	g_test_add("/reservations/exec/" name, Fixture, NULL, exec_setup, fn, exec_teardown)
	ADD_EXEC("free-then-donate", test_exec_free_then_donate);
	ADD_EXEC("partial", test_exec_partial);
	ADD_EXEC("late-donor", test_exec_late_donor);
	ADD_EXEC("strict", test_exec_strict);
	ADD_EXEC("deadline", test_exec_deadline);
	ADD_EXEC("policy-and-restart", test_exec_policy_and_restart);
	ADD_EXEC("api", test_exec_api);
	ADD_EXEC("high-mark", test_exec_high_mark);
	ADD_EXEC("return-short", test_exec_return_short);
	ADD_EXEC("deferral", test_exec_deferral);
	ADD_EXEC("deferral-gives-up", test_exec_deferral_gives_up);
	ADD_EXEC("zero-uuid", test_exec_zero_uuid);
	ADD_EXEC("no-pagetypeinfo", test_exec_no_pagetypeinfo);
	ADD_EXEC("restart-mid-donation", test_exec_restart_mid_donation);
	ADD_EXEC("stale-hold", test_exec_stale_hold);
	ADD_EXEC("big-resync", test_exec_big_resync);
#undef ADD_EXEC
#define ADD_POOL(name, fn) \
	g_test_add("/reservations/pool/" name, Fixture, NULL, pool_setup, fn, exec_teardown)
	ADD_POOL("free", test_pool_free);
	ADD_POOL("release", test_pool_release);
	ADD_POOL("donate", test_pool_donate);
	ADD_POOL("reserve-background", test_pool_reserve_background);
	ADD_POOL("reserve-background-old", test_pool_reserve_background_old);
	ADD_POOL("foreground", test_pool_foreground);
	ADD_POOL("strict-fails", test_pool_strict_fails);
	ADD_POOL("asked-again", test_pool_asked_again);
	ADD_POOL("compacts-deferred", test_pool_compacts_deferred);
	ADD_POOL("late-donor", test_pool_late_donor);
	ADD_POOL("late-donor-held", test_pool_late_donor_held);
	ADD_POOL("reserve", test_pool_reserve);
	ADD_POOL("reserve-api", test_pool_reserve_api);
#undef ADD_POOL
	return g_test_run();
}
