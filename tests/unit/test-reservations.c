/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Reservations: the state machine, the promise accounting and the state
 * file (round trip, atomic replacement, recovery from corrupt and
 * truncated files).
 */

#define G_LOG_DOMAIN "TestReservations"

#include <glib/gstdio.h>
#include <string.h>

#include "hr-reservation.h"

#define MiB(x) ((guint64)(x) << 20)

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
	g_assert_cmpstr(r->id, ==, "r1");
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
	g_assert_true(hr_reservation_set_state(store, r, HR_RESERVATION_CONSUMED, "vm started",
					       &error));
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
	rest = hr_reservation_take_holds(r, 100);
	g_assert_cmpuint(rest->len, ==, 3);
	g_assert_cmpuint(r->holds->len, ==, 0);
	g_assert_cmpuint(r->blocks_returned, ==, 5);
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
	s = hr_reservation_add_step(a, "donate", 0);
	s->guest = g_strdup("vm1");
	s->request_id = 77;
	s->blocks_asked = 20;
	s->blocks_held = 18;
	s->gained = -1;
	s->pages_migrated = 4000;
	g_free(s->state);
	s->state = g_strdup("short");
	s->detail = g_strdup("2 blocks unmovable");
	s = hr_reservation_add_step(a, "compact", 0);
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

	/* every change was saved: nothing to do before reading it back */
	g_assert_true(g_file_test(t->path, G_FILE_TEST_IS_REGULAR));
	g_assert_true(hr_reservation_store_load(again, &error));
	g_assert_no_error(error);
	after = store_json(again);
	g_assert_cmpstr(after, ==, before);
	r = hr_reservation_store_find(again, "r1");
	g_assert_nonnull(r);
	g_assert_cmpint(r->state, ==, HR_RESERVATION_IN_PROGRESS);
	g_assert_true(r->strict);
	g_assert_cmpstr(r->requester, ==, "launcher \"x\"");
	g_assert_cmpuint(r->holds->len, ==, 1);
	g_assert_cmpuint(((HrReservationHold *)g_ptr_array_index(r->holds, 0))->gpa, ==,
			 MiB(4096));
	g_assert_cmpint(((HrReservationStep *)g_ptr_array_index(r->steps, 0))->gained, ==, -1);
	/* ids continue after a restart, never reused */
	n = hr_reservation_store_create(again, MiB(2), 0, 0, FALSE, NULL, NULL);
	g_assert_cmpstr(n->id, ==, "r3");
	/* promises survive the restart */
	g_assert_cmpuint(hr_reservation_store_promised(again, 0, NULL), ==, 17);
	/* no temporary file left behind */
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
		g_assert_cmpmem(kept_text, kept_len, content, len < 0 ? strlen(content) : (gsize)len);
		g_assert_cmpint(g_unlink(full), ==, 0);
		kept = TRUE;
	}
	g_assert_true(kept);
	r = hr_reservation_store_create(store, MiB(2), 0, 0, FALSE, NULL, NULL);
	g_assert_cmpstr(r->id, ==, "r1");
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
	expect_corrupt(t, "{\"version\":2,\"next_id\":1,\"reservations\":[]}", -1, "future version");
	expect_corrupt(t,
		       "{\"version\":1,\"next_id\":1,\"reservations\":[{\"id\":\"r1\",\"bytes\":"
		       "\"many\"}]}",
		       -1, "wrong type");
	{
		/* a valid file with one bad state name */
		g_autofree gchar *bad = g_strdup(good);
		gchar *p = strstr(bad, "\"in-progress\"");
		g_assert_nonnull(p);
		memcpy(p + 1, "in-pogress", 10);
		expect_corrupt(t, bad, -1, "unknown state");
	}
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

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/reservations/parse-size", test_parse_size);
	g_test_add_func("/reservations/transitions", test_transitions);
	g_test_add_func("/reservations/lifecycle", test_lifecycle);
	g_test_add_func("/reservations/no-double-promise", test_promises);
	g_test_add_func("/reservations/holds-oldest-first", test_holds);
	g_test_add("/reservations/persist/round-trip", Tmp, NULL, tmp_setup, test_round_trip,
		   tmp_teardown);
	g_test_add("/reservations/persist/corrupt", Tmp, NULL, tmp_setup, test_corrupt,
		   tmp_teardown);
	g_test_add("/reservations/persist/missing", Tmp, NULL, tmp_setup, test_missing_file,
		   tmp_teardown);
	return g_test_run();
}
