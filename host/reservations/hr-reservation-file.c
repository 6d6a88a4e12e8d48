/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The state file (reservations.json): the store's life, its format, the
 * writer thread that writes it off the main loop (with retries), and
 * loading it.
 */

#define G_LOG_DOMAIN "HrReservation"

#include "hr-reservation-store-private.h"

/*
 * CLOCK_BOOTTIME: every process of one boot reads the same clock, so a
 * restarted daemon goes on counting where the previous one was; unlike
 * the wall clock it is never stepped (NTP, an admin's date), which would
 * cut a grace short or stretch it, and unlike CLOCK_MONOTONIC it counts
 * a suspend, which is time the destination had. It means nothing in
 * another boot: the file names its boot.
 */
gint64
res_boottime_us(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		return g_get_monotonic_time();
	return (gint64)ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

/*
 * The store's life: made and freed here, beside the writer thread it
 * owns (free stops it) and the loader that fills it; the validator makes
 * a scratch one.
 */
HrReservationStore *
hr_reservation_store_new(const gchar *path)
{
	HrReservationStore *store = g_new0(HrReservationStore, 1);
	store->path = g_strdup(path);
	store->list = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_free);
	store->next_id = 1;
	store->max = G_MAXUINT;
	store->ledger = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					      (GDestroyNotify)g_hash_table_unref);
	store->gone = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	store->skipped_errors = g_ptr_array_new_with_free_func(g_free);
	if (g_file_get_contents(BOOT_ID_PATH, &store->boot_id, NULL, NULL))
		g_strstrip(store->boot_id);
	g_mutex_init(&store->lock);
	g_cond_init(&store->idle);
	g_cond_init(&store->wake);
	store->backoff_us = WRITE_RETRY_MIN_US;
	return store;
}

void
hr_reservation_store_free(HrReservationStore *store)
{
	if (store == NULL)
		return;
	hr_reservation_store_stop_writer(store);
	g_mutex_clear(&store->lock);
	g_cond_clear(&store->idle);
	g_cond_clear(&store->wake);
	g_free(store->retry);
	g_free(store->save_error);
	g_hash_table_unref(store->ledger);
	g_hash_table_unref(store->gone);
	g_free(store->boot_id);
	g_free(store->path);
	g_ptr_array_unref(store->skipped_errors);
	g_ptr_array_unref(store->list);
	g_free(store);
}

static gboolean
corrupt(GError **error, const gchar *format, ...) G_GNUC_PRINTF(2, 3);

/* ---------------------------------------------------------------------- */
/* JSON */

static void
add_str(JsonBuilder *b, const gchar *key, const gchar *value)
{
	json_builder_set_member_name(b, key);
	if (value != NULL)
		json_builder_add_string_value(b, value);
	else
		json_builder_add_null_value(b);
}

static void
add_time(JsonBuilder *b, const gchar *key, gint64 us)
{
	json_builder_set_member_name(b, key);
	if (us > 0) {
		g_autoptr(GDateTime) sec = g_date_time_new_from_unix_utc(us / G_USEC_PER_SEC);
		g_autoptr(GDateTime) dt = g_date_time_add(sec, us % G_USEC_PER_SEC);
		g_autofree gchar *s = g_date_time_format_iso8601(dt);
		json_builder_add_string_value(b, s);
	} else {
		json_builder_add_null_value(b);
	}
}

static void
hr_reservation_step_add_json(HrReservationStep *s, JsonBuilder *b)
{
	json_builder_begin_object(b);
	add_str(b, "kind", hr_step_kind_to_string(s->kind));
	hr_json_add_int(b, "node", s->node);
	if (s->guest != NULL) {
		add_str(b, "guest", s->guest);
		add_str(b, "guest_key", s->guest_key);
		hr_json_add_int(b, "request_id", s->request_id);
		hr_json_add_int(b, "blocks_asked", s->blocks_asked);
		hr_json_add_int(b, "blocks_held", s->blocks_held);
	}
	add_str(b, "state", hr_step_state_to_string(s->state));
	add_str(b, "detail", s->detail);
	hr_json_add_int(b, "expect_milli", s->expect_milli);
	hr_json_add_int(b, "gained", s->gained);
	hr_json_add_int(b, "pages_migrated", s->pages_migrated);
	hr_json_add_int(b, "pages_scanned", s->pages_scanned);
	hr_json_add_int(b, "elapsed_ms", s->elapsed_ms);
	hr_json_add_int(b, "started_us", s->started_at);
	json_builder_end_object(b);
}

void
hr_reservation_add_json(HrReservation *r, JsonBuilder *b, gboolean with_steps)
{
	json_builder_begin_object(b);
	add_str(b, "id", r->id);
	hr_json_add_int(b, "bytes", r->bytes);
	hr_json_add_int(b, "need_blocks", r->need_blocks);
	hr_json_add_int(b, "node", r->node);
	hr_json_add_int(b, "planned_node", r->planned_node);
	json_builder_set_member_name(b, "strict");
	json_builder_add_boolean_value(b, r->strict);
	add_str(b, "requester", r->requester);
	add_str(b, "idempotency_key", r->idempotency_key);
	add_str(b, "request_digest", r->request_digest);
	add_str(b, "owner", r->owner);
	add_str(b, "state", hr_reservation_state_to_string(r->state));
	add_str(b, "reason", r->reason);
	json_builder_set_member_name(b, "partial");
	json_builder_add_boolean_value(b, r->partial);
	hr_json_add_int(b, "obtained", r->obtained);
	hr_json_add_int(b, "created_us", r->created_at);
	hr_json_add_int(b, "deadline_us", r->deadline_at);
	hr_json_add_int(b, "updated_us", r->updated_at);
	hr_json_add_int(b, "finished_us", r->finished_at);
	add_time(b, "created", r->created_at);
	add_time(b, "deadline", r->deadline_at);
	add_time(b, "finished", r->finished_at);
	hr_json_add_int(b, "held_blocks", r->holds->len);
	hr_json_add_int(b, "blocks_returned", r->blocks_returned);
	hr_json_add_int(b, "pool_blocks", r->pool_blocks);
	if (with_steps) {
		json_builder_set_member_name(b, "steps");
		json_builder_begin_array(b);
		for (guint i = 0; i < r->steps->len; i++)
			hr_reservation_step_add_json(g_ptr_array_index(r->steps, i), b);
		json_builder_end_array(b);
		json_builder_set_member_name(b, "holds");
		json_builder_begin_array(b);
		for (guint i = 0; i < r->holds->len; i++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, i);
			g_autofree gchar *gpa =
			    g_strdup_printf("0x%" G_GINT64_MODIFIER "x", h->gpa);
			json_builder_begin_object(b);
			add_str(b, "guest_key", h->guest_key);
			add_str(b, "guest_uuid", h->guest_uuid);
			add_str(b, "guest", h->guest_name);
			add_str(b, "gpa", gpa);
			hr_json_add_int(b, "held_us", h->held_at);
			json_builder_end_object(b);
		}
		json_builder_end_array(b);
	}
	json_builder_end_object(b);
}

static void
hr_reservation_ledger_add_json(HrReservationStore *store, JsonBuilder *b)
{
	GHashTableIter iter, it2;
	const gchar *key, *entry;
	GHashTable *entries;
	gint64 *since;

	json_builder_set_member_name(b, "ledger");
	json_builder_begin_array(b);
	g_hash_table_iter_init(&iter, store->ledger);
	while (g_hash_table_iter_next(&iter, (gpointer *)&key, (gpointer *)&entries)) {
		g_hash_table_iter_init(&it2, entries);
		while (g_hash_table_iter_next(&it2, (gpointer *)&entry, (gpointer *)&since)) {
			json_builder_begin_object(b);
			add_str(b, "guest_key", key);
			add_str(b, "entry", entry);
			hr_json_add_int(b, "since_us", *since);
			json_builder_end_object(b);
		}
	}
	json_builder_end_array(b);
}

static void
hr_reservation_gone_add_json(HrReservationStore *store, JsonBuilder *b)
{
	GHashTableIter iter;
	const gchar *key;
	gint64 *since;

	add_str(b, "boot_id", store->boot_id);
	json_builder_set_member_name(b, "gone");
	json_builder_begin_array(b);
	g_hash_table_iter_init(&iter, store->gone);
	while (g_hash_table_iter_next(&iter, (gpointer *)&key, (gpointer *)&since)) {
		json_builder_begin_object(b);
		add_str(b, "guest_key", key);
		hr_json_add_int(b, "since_boottime_us", *since);
		json_builder_end_object(b);
	}
	json_builder_end_array(b);
}

/* ---------------------------------------------------------------------- */
/* Persistence */

static gchar *
hr_reservation_store_to_data(HrReservationStore *store, gsize *len)
{
	g_autoptr(JsonBuilder) b = json_builder_new();
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) root = NULL;

	json_builder_begin_object(b);
	hr_json_add_int(b, "version", FILE_VERSION);
	hr_json_add_int(b, "next_id", store->next_id);
	json_builder_set_member_name(b, "reservations");
	json_builder_begin_array(b);
	for (guint i = 0; i < store->list->len; i++)
		hr_reservation_add_json(g_ptr_array_index(store->list, i), b, TRUE);
	json_builder_end_array(b);
	hr_reservation_ledger_add_json(store, b);
	hr_reservation_gone_add_json(store, b);
	json_builder_end_object(b);
	root = json_builder_get_root(b);
	json_generator_set_root(gen, root);
	json_generator_set_pretty(gen, TRUE);
	return json_generator_to_data(gen, len);
}

/*
 * The state directory is the daemon's: a directory owned by root or our
 * uid that nobody else may write to, or a planted file would be trusted
 * at the next start. G_IO_ERROR_NOT_FOUND while it does not exist.
 */
static gboolean
hr_reservation_check_dir(const gchar *path, GError **error)
{
	g_autofree gchar *dir = g_path_get_dirname(path);

	if (!hr_safefile_check_dir(dir, getuid(), HR_SAFEFILE_SHARED, error)) {
		if (error != NULL && *error != NULL &&
		    !g_error_matches(*error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
			g_prefix_error(error, "state_dir: ");
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_reservation_store_parse(HrReservationStore *store, const gchar *text, gsize len, GError **error);

/*
 * @text reads back as the loader will read it at the next start, every
 * entry of it: a state that would not (a value out of the loader's range,
 * a serializer's bug) must never replace one that does. Parsed into a
 * store of its own, which touches nothing shared: the writer thread's.
 */
static gboolean
hr_reservation_validate(const gchar *text, gsize len, GError **error)
{
	g_autoptr(HrReservationStore) scratch = hr_reservation_store_new(NULL);
	g_autoptr(GError) local = NULL;

	if (!hr_reservation_store_parse(scratch, text, len, &local)) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT,
			    "the state to save does not read back (%s)", local->message);
		return FALSE;
	}
	if (scratch->skipped > 0) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT,
			    "the state to save does not read back: %u entries would be skipped "
			    "(%s)",
			    scratch->skipped,
			    (const gchar *)g_ptr_array_index(scratch->skipped_errors, 0));
		return FALSE;
	}
	return TRUE;
}

/* may run in the writer thread: touches nothing but @path */
static gboolean
hr_reservation_write(const gchar *path, const gchar *text, gsize len, GError **error)
{
	g_autofree gchar *dir = g_path_get_dirname(path);
	g_autoptr(GError) local = NULL;

	if (!hr_reservation_validate(text, len, &local)) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO,
			    "cannot save reservations (the previous %s is kept): %s", path,
			    local->message);
		return FALSE;
	}
	if (g_mkdir_with_parents(dir, 0750) != 0) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO,
			    "cannot create %s: %s", dir, g_strerror(errno));
		return FALSE;
	}
	if (!hr_reservation_check_dir(path, &local)) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO,
			    "cannot save reservations in %s: %s", dir, local->message);
		return FALSE;
	}
	/* a temporary file, fsync, rename: a crash leaves the old or the new file */
	if (!g_file_set_contents_full(path, text, len,
				      G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
				      0640, error)) {
		g_prefix_error(error,
			       "cannot save reservations (the previous %s is kept; free "
			       "space in its file system): ",
			       path);
		return FALSE;
	}
	return TRUE;
}

/* under lock: what the latest write of the state, @ok or with @error, means */
static void
hr_reservation_store_written(HrReservationStore *store, gboolean ok, const GError *error)
{
	if (ok) {
		if (store->save_error != NULL)
			g_message("%s written again, after %" G_GUINT64_FORMAT " failed writes: "
				  "it holds the daemon's state",
				  store->path, store->episode_failures);
		g_clear_pointer(&store->save_error, g_free);
		g_clear_pointer(&store->retry, g_free);
		store->episode_failures = 0;
		store->backoff_us = WRITE_RETRY_MIN_US;
		return;
	}
	store->save_failures++;
	store->episode_failures++;
	/* once per episode: the retries say nothing new until one succeeds */
	if (store->save_error == NULL)
		g_warning("%s; the daemon tries again every %d s at most until it succeeds, and a "
			  "restart meanwhile loses what changed since the last write "
			  "(hugeroom_state_file_stale is 1 until then)",
			  error->message, (gint)(WRITE_RETRY_MAX_US / G_USEC_PER_SEC));
	else
		g_debug("%s (failure %" G_GUINT64_FORMAT " in a row)", error->message,
			store->episode_failures);
	g_free(store->save_error);
	store->save_error = g_strdup(error->message);
}

gboolean
hr_reservation_store_save(HrReservationStore *store, GError **error)
{
	g_autofree gchar *text = NULL;
	g_autoptr(GError) local = NULL;
	gsize len = 0;
	gboolean ok;

	if (store->path == NULL)
		return TRUE;
	hr_reservation_store_flush(store);
	text = hr_reservation_store_to_data(store, &len);
	ok = hr_reservation_write(store->path, text, len, &local);
	g_mutex_lock(&store->lock);
	/* a newer state handed to the writer since is its to write */
	if (ok && store->pending == NULL && !store->writing)
		hr_reservation_store_written(store, TRUE, NULL);
	g_mutex_unlock(&store->lock);
	if (!ok)
		g_propagate_error(error, g_steal_pointer(&local));
	return ok;
}

/*
 * Under lock: wait for a newer state or the retry's time; FALSE: stop.
 * @retrying: what is pending is the retry, with no change since.
 */
static gboolean
hr_reservation_writer_wait(HrReservationStore *store, gboolean *retrying)
{
	*retrying = FALSE;
	while (store->pending == NULL) {
		if (store->retry == NULL || store->stopping)
			return FALSE;
		if (g_get_monotonic_time() >= store->retry_at) {
			store->pending = g_steal_pointer(&store->retry);
			store->pending_len = store->retry_len;
			*retrying = TRUE;
			break;
		}
		g_cond_wait_until(&store->wake, &store->lock, store->retry_at);
	}
	return TRUE;
}

static gpointer
hr_reservation_writer(gpointer data)
{
	HrReservationStore *store = data;
	gboolean retrying;

	g_mutex_lock(&store->lock);
	while (hr_reservation_writer_wait(store, &retrying)) {
		g_autofree gchar *text = g_steal_pointer(&store->pending);
		gsize len = store->pending_len;
		g_autoptr(GError) error = NULL;
		gboolean ok;

		/* what it superseded needs no retry */
		g_clear_pointer(&store->retry, g_free);
		store->writing = TRUE;
		g_mutex_unlock(&store->lock);
		ok = hr_reservation_write(store->path, text, len, &error);
		g_mutex_lock(&store->lock);
		store->writing = FALSE;
		hr_reservation_store_written(store, ok, error);
		/* writes a change asked for come as they come; only retries back off */
		if (!ok && retrying)
			store->backoff_us = MIN(store->backoff_us * 2, WRITE_RETRY_MAX_US);
		if (!ok && store->pending == NULL) {
			store->retry = g_steal_pointer(&text);
			store->retry_len = len;
			store->retry_at = g_get_monotonic_time() + store->backoff_us;
		}
		g_cond_broadcast(&store->idle);
	}
	store->writer = NULL;
	g_cond_broadcast(&store->idle);
	g_mutex_unlock(&store->lock);
	return NULL;
}

/* hand the current state to the writer thread */
void
hr_reservation_store_save_async(HrReservationStore *store)
{
	gsize len = 0;
	gchar *text;

	if (store->path == NULL)
		return;
	text = hr_reservation_store_to_data(store, &len);
	g_mutex_lock(&store->lock);
	g_free(store->pending);
	store->pending = text;
	store->pending_len = len;
	if (store->writer == NULL) {
		store->writer = g_thread_new("hr-save", hr_reservation_writer, store);
		/* it ends on its own; flush() waits for it by the condition */
		g_thread_unref(store->writer);
	} else {
		/* waiting to retry: the newer state goes now */
		g_cond_signal(&store->wake);
	}
	g_mutex_unlock(&store->lock);
}

void
hr_reservation_store_flush(HrReservationStore *store)
{
	g_mutex_lock(&store->lock);
	while (store->pending != NULL || store->writing)
		g_cond_wait(&store->idle, &store->lock);
	g_mutex_unlock(&store->lock);
}

/* the last chance of a stale file is one more write; then the thread ends */
void
hr_reservation_store_stop_writer(HrReservationStore *store)
{
	g_mutex_lock(&store->lock);
	if (store->retry != NULL && store->pending == NULL) {
		store->pending = g_steal_pointer(&store->retry);
		store->pending_len = store->retry_len;
	}
	store->stopping = TRUE;
	g_cond_signal(&store->wake);
	while (store->writer != NULL)
		g_cond_wait(&store->idle, &store->lock);
	if (store->save_error != NULL)
		g_warning("%s is stale: the daemon's latest state could not be written (%s)",
			  store->path, store->save_error);
	g_mutex_unlock(&store->lock);
}

guint64
hr_reservation_store_save_failures(HrReservationStore *store)
{
	guint64 n;
	g_mutex_lock(&store->lock);
	n = store->save_failures;
	g_mutex_unlock(&store->lock);
	return n;
}

gchar *
hr_reservation_store_dup_save_error(HrReservationStore *store)
{
	gchar *e;
	g_mutex_lock(&store->lock);
	e = g_strdup(store->save_error);
	g_mutex_unlock(&store->lock);
	return e;
}

static gboolean
corrupt(GError **error, const gchar *format, ...)
{
	va_list ap;
	g_autofree gchar *msg = NULL;
	va_start(ap, format);
	msg = g_strdup_vprintf(format, ap);
	va_end(ap);
	g_set_error_literal(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT, msg);
	return FALSE;
}

static gboolean
get_int(JsonObject *o, const gchar *key, gint64 min, gint64 max, gint64 *value, GError **error)
{
	JsonNode *n = json_object_get_member(o, key);
	if (n == NULL || json_node_get_value_type(n) != G_TYPE_INT64)
		return corrupt(error, "\"%s\" is missing or not an integer", key);
	*value = json_node_get_int(n);
	if (*value < min || *value > max)
		return corrupt(error, "\"%s\" %" G_GINT64_FORMAT " is out of range", key, *value);
	return TRUE;
}

static gboolean
get_str(JsonObject *o, const gchar *key, gboolean nullable, gchar **value, GError **error)
{
	JsonNode *n = json_object_get_member(o, key);
	if (n != NULL && nullable && JSON_NODE_HOLDS_NULL(n)) {
		*value = NULL;
		return TRUE;
	}
	if (n == NULL || json_node_get_value_type(n) != G_TYPE_STRING)
		return corrupt(error, "\"%s\" is missing or not a string", key);
	*value = g_strdup(json_node_get_string(n));
	return TRUE;
}

static gboolean
get_bool(JsonObject *o, const gchar *key, gboolean *value, GError **error)
{
	JsonNode *n = json_object_get_member(o, key);
	if (n == NULL || json_node_get_value_type(n) != G_TYPE_BOOLEAN)
		return corrupt(error, "\"%s\" is missing or not a boolean", key);
	*value = json_node_get_boolean(n);
	return TRUE;
}

static gboolean
get_array(JsonObject *o, const gchar *key, JsonArray **value, GError **error)
{
	JsonNode *n = json_object_get_member(o, key);
	if (n == NULL || !JSON_NODE_HOLDS_ARRAY(n))
		return corrupt(error, "\"%s\" is missing or not an array", key);
	*value = json_node_get_array(n);
	return TRUE;
}

static gboolean
hr_reservation_ledger_load(HrReservationStore *store, JsonObject *o, GError **error)
{
	JsonArray *list;

	if (!get_array(o, "ledger", &list, error))
		return FALSE;
	for (guint i = 0; i < json_array_get_length(list); i++) {
		JsonNode *node = json_array_get_element(list, i);
		g_autofree gchar *key = NULL;
		g_autofree gchar *entry = NULL;
		GHashTable *entries;
		gint64 since = 0;

		if (!JSON_NODE_HOLDS_OBJECT(node))
			return corrupt(error, "ledger %u: not an object", i);
		if (!get_str(json_node_get_object(node), "guest_key", FALSE, &key, error) ||
		    !get_str(json_node_get_object(node), "entry", FALSE, &entry, error) ||
		    !get_int(json_node_get_object(node), "since_us", 0, G_MAXINT64, &since, error))
			return FALSE;
		if ((!g_str_has_prefix(entry, "b:") && !g_str_has_prefix(entry, "r:")) ||
		    !g_ascii_isxdigit(entry[2]))
			return corrupt(error, "ledger %u: entry \"%s\" is not b:GPA or r:ID", i,
				       entry);
		entries = g_hash_table_lookup(store->ledger, key);
		if (entries == NULL) {
			entries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
			g_hash_table_insert(store->ledger, g_strdup(key), entries);
		}
		g_hash_table_insert(entries, g_steal_pointer(&entry),
				    g_memdup2(&since, sizeof(since)));
	}
	return TRUE;
}

static gboolean
hr_reservation_gone_load(HrReservationStore *store, JsonObject *o, GError **error)
{
	g_autofree gchar *boot_id = NULL;
	gint64 now = res_boottime_us();
	gboolean same_boot;
	JsonArray *list;

	if (!get_str(o, "boot_id", TRUE, &boot_id, error) || !get_array(o, "gone", &list, error))
		return FALSE;
	/* unknown either side: the clock tells (a time ahead of it is another boot's) */
	same_boot =
	    boot_id == NULL || store->boot_id == NULL || g_strcmp0(boot_id, store->boot_id) == 0;
	for (guint i = 0; i < json_array_get_length(list); i++) {
		JsonNode *node = json_array_get_element(list, i);
		g_autofree gchar *key = NULL;
		gint64 since = 0;

		if (!JSON_NODE_HOLDS_OBJECT(node))
			return corrupt(error, "gone %u: not an object", i);
		if (!get_str(json_node_get_object(node), "guest_key", FALSE, &key, error) ||
		    !get_int(json_node_get_object(node), "since_boottime_us", 0, G_MAXINT64, &since,
			     error))
			return FALSE;
		/* a QEMU of an earlier boot is gone since before this one: its grace is over */
		if (!same_boot || since > now)
			since = 0;
		g_hash_table_insert(store->gone, g_steal_pointer(&key),
				    g_memdup2(&since, sizeof(since)));
	}
	return TRUE;
}

static gboolean
load_step(JsonNode *node, HrReservation *r, GError **error)
{
	JsonObject *o;
	HrReservationStep *s;
	g_autofree gchar *kind = NULL;
	g_autofree gchar *state = NULL;
	gint64 v = 0;

	if (!JSON_NODE_HOLDS_OBJECT(node))
		return corrupt(error, "a step is not an object");
	o = json_node_get_object(node);
	s = g_new0(HrReservationStep, 1);
	g_ptr_array_add(r->steps, s);
	if (!get_str(o, "kind", FALSE, &kind, error) ||
	    !get_str(o, "state", FALSE, &state, error) ||
	    !get_str(o, "detail", TRUE, &s->detail, error))
		return FALSE;
	if (hr_step_kind_from_string(kind) < 0)
		return corrupt(error, "a step's kind is not free, compact or donate");
	if (hr_step_state_from_string(state) < 0)
		return corrupt(error, "a step's state is not running, done, short or failed");
	s->kind = hr_step_kind_from_string(kind);
	s->state = hr_step_state_from_string(state);
	if (!get_int(o, "node", -1, G_MAXINT, &v, error))
		return FALSE;
	s->node = v;
	if (json_object_has_member(o, "guest_key") &&
	    !get_str(o, "guest_key", TRUE, &s->guest_key, error))
		return FALSE;
	if (json_object_has_member(o, "guest")) {
		if (!get_str(o, "guest", FALSE, &s->guest, error) ||
		    !get_int(o, "request_id", 0, G_MAXINT64, &v, error))
			return FALSE;
		s->request_id = v;
		if (!get_int(o, "blocks_asked", 0, G_MAXINT64, &v, error))
			return FALSE;
		s->blocks_asked = v;
		if (!get_int(o, "blocks_held", 0, G_MAXINT64, &v, error))
			return FALSE;
		s->blocks_held = v;
	}
	if (!get_int(o, "expect_milli", 0, G_MAXINT64, &v, error))
		return FALSE;
	s->expect_milli = v;
	if (!get_int(o, "gained", G_MININT64, G_MAXINT64, &s->gained, error) ||
	    !get_int(o, "pages_migrated", 0, G_MAXINT64, &v, error))
		return FALSE;
	s->pages_migrated = v;
	if (!get_int(o, "pages_scanned", 0, G_MAXINT64, &v, error))
		return FALSE;
	s->pages_scanned = v;
	if (!get_int(o, "elapsed_ms", 0, G_MAXINT64, &v, error))
		return FALSE;
	s->elapsed_ms = v;
	return get_int(o, "started_us", 0, G_MAXINT64, &s->started_at, error);
}

static gboolean
load_hold(JsonNode *node, HrReservation *r, gint version, GError **error)
{
	JsonObject *o;
	HrReservationHold *h;
	g_autofree gchar *gpa = NULL;
	gchar *end = NULL;

	if (!JSON_NODE_HOLDS_OBJECT(node))
		return corrupt(error, "a hold is not an object");
	o = json_node_get_object(node);
	h = g_new0(HrReservationHold, 1);
	g_ptr_array_add(r->holds, h);
	/* a hold migrated from version 1 keeps its UUID until a guest adopts it */
	if (version >= 2 && (!get_str(o, "guest_key", TRUE, &h->guest_key, error) ||
			     !get_str(o, "guest_uuid", TRUE, &h->guest_uuid, error)))
		return FALSE;
	if (version >= 2 && h->guest_key == NULL && h->guest_uuid == NULL)
		return corrupt(error, "a hold names no guest (guest_key and guest_uuid are null)");
	if (version == 1 && !get_str(o, "guest_uuid", FALSE, &h->guest_uuid, error))
		return FALSE;
	/* version 2 kept a hold's VM UUID in its key only */
	if (version == 2 && h->guest_uuid == NULL)
		h->guest_uuid = hr_guest_key_dup_uuid(h->guest_key);
	if (!get_str(o, "guest", FALSE, &h->guest_name, error) ||
	    !get_str(o, "gpa", FALSE, &gpa, error) ||
	    !get_int(o, "held_us", 0, G_MAXINT64, &h->held_at, error))
		return FALSE;
	if (!g_str_has_prefix(gpa, "0x"))
		return corrupt(error, "hold gpa \"%s\" is not hexadecimal", gpa);
	h->gpa = g_ascii_strtoull(gpa + 2, &end, 16);
	if (end == gpa + 2 || *end != '\0' || h->gpa % BLOCK_BYTES != 0)
		return corrupt(error, "hold gpa \"%s\" is not a 2 MiB aligned address", gpa);
	return TRUE;
}

/* the first reservation of @id in the store's list (the file's own: no call to the store) */
static HrReservation *
find_first(HrReservationStore *store, const gchar *id)
{
	for (guint i = 0; i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		if (g_strcmp0(r->id, id) == 0)
			return r;
	}
	return NULL;
}

static gboolean
load_reservation(JsonNode *node, HrReservationStore *store, gint version, GError **error)
{
	g_autoptr(GError) local = NULL;
	g_autofree gchar *state = NULL;
	JsonObject *o;
	JsonArray *steps, *holds;
	HrReservation *r;
	gint64 v = 0;
	gint st;

	if (!JSON_NODE_HOLDS_OBJECT(node))
		return corrupt(error, "a reservation is not an object");
	o = json_node_get_object(node);
	r = hr_reservation_new();
	g_ptr_array_add(store->list, r);
	if (!get_str(o, "id", FALSE, &r->id, &local))
		goto fail;
	if (!get_int(o, "bytes", 1, G_MAXINT64, &v, &local))
		goto fail;
	r->bytes = v;
	r->need_blocks = (r->bytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
	if (!get_int(o, "node", -1, G_MAXINT, &v, &local))
		goto fail;
	r->node = v;
	if (!get_int(o, "planned_node", -1, G_MAXINT, &v, &local))
		goto fail;
	r->planned_node = v;
	if (!get_bool(o, "strict", &r->strict, &local) ||
	    !get_bool(o, "partial", &r->partial, &local) ||
	    !get_str(o, "requester", TRUE, &r->requester, &local) ||
	    !get_str(o, "reason", TRUE, &r->reason, &local) ||
	    !get_str(o, "state", FALSE, &state, &local))
		goto fail;
	st = hr_reservation_state_from_string(state);
	if (st < 0) {
		corrupt(&local, "state \"%s\" is unknown", state);
		goto fail;
	}
	r->state = st;
	if (!get_int(o, "obtained", 0, r->need_blocks, &v, &local))
		goto fail;
	r->obtained = v;
	if (!get_int(o, "created_us", 0, G_MAXINT64, &r->created_at, &local) ||
	    !get_int(o, "deadline_us", 0, G_MAXINT64, &r->deadline_at, &local) ||
	    !get_int(o, "updated_us", 0, G_MAXINT64, &r->updated_at, &local) ||
	    !get_int(o, "finished_us", 0, G_MAXINT64, &r->finished_at, &local) ||
	    !get_int(o, "blocks_returned", 0, G_MAXINT64, &v, &local))
		goto fail;
	r->blocks_returned = v;
	/* files before owners have none */
	if (json_object_has_member(o, "owner") && !get_str(o, "owner", TRUE, &r->owner, &local))
		goto fail;
	/* files before idempotency keys have none */
	if (json_object_has_member(o, "idempotency_key") &&
	    (!get_str(o, "idempotency_key", TRUE, &r->idempotency_key, &local) ||
	     !get_str(o, "request_digest", TRUE, &r->request_digest, &local)))
		goto fail;
	/* files before the pool have none */
	if (json_object_has_member(o, "pool_blocks")) {
		if (!get_int(o, "pool_blocks", 0, G_MAXUINT32, &v, &local))
			goto fail;
		r->pool_blocks = v;
	}
	if (!get_array(o, "steps", &steps, &local) || !get_array(o, "holds", &holds, &local))
		goto fail;
	for (guint i = 0; i < json_array_get_length(steps); i++) {
		if (!load_step(json_array_get_element(steps, i), r, &local)) {
			g_prefix_error(&local, "step %u: ", i);
			goto fail;
		}
	}
	for (guint i = 0; i < json_array_get_length(holds); i++) {
		if (!load_hold(json_array_get_element(holds, i), r, version, &local)) {
			g_prefix_error(&local, "hold %u: ", i);
			goto fail;
		}
	}
	if (find_first(store, r->id) != r) {
		corrupt(&local, "id \"%s\" appears twice", r->id);
		goto fail;
	}
	return TRUE;
fail:
	g_propagate_prefixed_error(error, g_steal_pointer(&local),
				   "reservation %s: ", r->id != NULL ? r->id : "(no id)");
	return FALSE;
}

static gboolean
hr_reservation_store_parse(HrReservationStore *store, const gchar *text, gsize len, GError **error)
{
	g_autoptr(JsonParser) parser = json_parser_new();
	JsonObject *o;
	JsonArray *list = NULL;
	gint64 v = 0, version = 0;

	if (!json_parser_load_from_data(parser, text, len, error))
		return FALSE;
	if (json_parser_get_root(parser) == NULL)
		return corrupt(error, "the file is empty");
	if (!JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser)))
		return corrupt(error, "the top level is not an object");
	o = json_node_get_object(json_parser_get_root(parser));
	if (!get_int(o, "version", FILE_VERSION_MIN, FILE_VERSION, &version, error) ||
	    !get_int(o, "next_id", 1, G_MAXINT64, &v, error) ||
	    !get_array(o, "reservations", &list, error))
		return FALSE;
	store->next_id = v;
	for (guint i = 0; i < json_array_get_length(list); i++) {
		g_autoptr(GError) local = NULL;
		/* one bad entry costs that reservation, not all the others */
		if (!load_reservation(json_array_get_element(list, i), store, version, &local)) {
			g_ptr_array_remove_index(store->list, store->list->len - 1);
			/* a save's check reads into a store without a path, quietly */
			if (store->path != NULL)
				g_warning("%s: entry %u skipped: %s", store->path, i,
					  local->message);
			if (store->skipped_errors->len < HR_RESERVATION_SKIPPED_MAX)
				g_ptr_array_add(store->skipped_errors,
						g_strdup_printf("entry %u: %s", i, local->message));
			store->skipped++;
		}
	}
	/* version 1 has no ledger, 2 no gone */
	if (version >= 2 && !hr_reservation_ledger_load(store, o, error))
		return FALSE;
	if (version >= 3 && !hr_reservation_gone_load(store, o, error))
		return FALSE;
	store->load_version = version;
	return TRUE;
}

gboolean
hr_reservation_store_load(HrReservationStore *store, GError **error)
{
	g_autoptr(GError) local = NULL;
	g_autofree gchar *text = NULL;
	g_autofree gchar *aside = NULL;
	g_autoptr(GDateTime) now = NULL;
	g_autofree gchar *stamp = NULL;
	gsize len = 0;

	if (store->path == NULL)
		return TRUE;
	/* a directory others may write to: they could swap the file between reads */
	if (!hr_reservation_check_dir(store->path, &local)) {
		if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
			return TRUE;
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO,
			    "cannot read reservations from %s: %s", store->path, local->message);
		return FALSE;
	}
	/* no symlink, FIFO or file another user could have written: a FIFO
	 * would hang the start, a planted file would be trusted */
	if (!hr_safefile_get_contents(store->path, getuid(), HR_SAFEFILE_SHARED,
				      HR_RESERVATION_STATE_MAX, &text, &len, &local)) {
		if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
			return TRUE;
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_IO,
			    "cannot read reservations from %s: %s", store->path, local->message);
		return FALSE;
	}
	if (hr_reservation_store_parse(store, text, len, &local)) {
		if (store->skipped > 0) {
			/* the next write drops them: keep the file as it was for a person */
			g_autoptr(GDateTime) when = g_date_time_new_now_utc();
			g_autofree gchar *tag = g_date_time_format(when, "%Y%m%dT%H%M%S");
			g_autofree gchar *copy = g_strdup_printf("%s.skipped-%s", store->path, tag);
			if (!g_file_set_contents_full(copy, text, len,
						      G_FILE_SET_CONTENTS_CONSISTENT, 0640, &local))
				g_warning("%s", local->message);
			g_warning("%s: %u reservation(s) could not be read and were skipped; the "
				  "file as it was is kept as %s",
				  store->path, store->skipped, copy);
			hr_reservation_store_save_async(store);
		}
		if (store->load_version < FILE_VERSION) {
			g_message("%s: migrated from version %d to %d", store->path,
				  store->load_version, FILE_VERSION);
			hr_reservation_store_save_async(store);
		}
		return TRUE;
	}

	/* keep what we could not read for a person to look at, start empty */
	g_ptr_array_set_size(store->list, 0);
	store->next_id = 1;
	now = g_date_time_new_now_utc();
	stamp = g_date_time_format(now, "%Y%m%dT%H%M%S");
	aside = g_strdup_printf("%s.corrupt-%s", store->path, stamp);
	if (g_rename(store->path, aside) != 0) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT,
			    "%s is corrupt (%s) and cannot be moved aside: %s; starting with no "
			    "reservations",
			    store->path, local->message, g_strerror(errno));
		return FALSE;
	}
	g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_CORRUPT,
		    "%s is corrupt (%s); kept as %s, starting with no reservations", store->path,
		    local->message, aside);
	return FALSE;
}
