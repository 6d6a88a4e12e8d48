/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The store of reservations: the list, ids, the most it keeps, the
 * promises per node, the ledger of who owns which held guest block, and when
 * the QEMUs holds name were seen gone (migration grace).
 */

#define G_LOG_DOMAIN "HrReservation"

#include "hr-reservation-store-private.h"

#include <string.h>
#include <sys/random.h>

void
hr_reservation_store_set_max(HrReservationStore *store, guint max)
{
	store->max = MAX(max, 1);
}

const gchar *
hr_reservation_store_get_path(HrReservationStore *store)
{
	return store->path;
}

GPtrArray *
hr_reservation_store_list(HrReservationStore *store)
{
	return store->list;
}

HrReservation *
hr_reservation_store_find(HrReservationStore *store, const gchar *id)
{
	for (guint i = 0; i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		if (g_strcmp0(r->id, id) == 0)
			return r;
	}
	return NULL;
}

HrReservation *
hr_reservation_store_find_by_idempotency_key(HrReservationStore *store, const gchar *key)
{
	for (guint i = 0; key != NULL && i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		if (g_strcmp0(r->idempotency_key, key) == 0)
			return r;
	}
	return NULL;
}

guint
hr_reservation_store_get_skipped(HrReservationStore *store, GPtrArray **errors)
{
	if (errors != NULL)
		*errors = store->skipped_errors;
	return store->skipped;
}

/* ---------------------------------------------------------------------- */
/* The ledger */

static gchar *
ledger_entry(guint64 gpa, guint64 request_id)
{
	return gpa != 0 ? g_strdup_printf("b:%" G_GINT64_MODIFIER "x", gpa)
			: g_strdup_printf("r:%" G_GUINT64_FORMAT, request_id);
}

void
hr_reservation_store_ledger_add(HrReservationStore *store, const gchar *guest_key, guint64 gpa,
				guint64 request_id)
{
	GHashTable *entries = g_hash_table_lookup(store->ledger, guest_key);
	gchar *entry = ledger_entry(gpa, request_id);
	gint64 now = g_get_real_time();

	if (entries == NULL) {
		entries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
		g_hash_table_insert(store->ledger, g_strdup(guest_key), entries);
	}
	if (g_hash_table_contains(entries, entry)) {
		g_free(entry);
		return;
	}
	g_hash_table_insert(entries, entry, g_memdup2(&now, sizeof(now)));
	hr_reservation_touch(store, NULL);
}

gboolean
hr_reservation_store_ledger_has(HrReservationStore *store, const gchar *guest_key, guint64 gpa,
				guint64 request_id)
{
	GHashTable *entries = g_hash_table_lookup(store->ledger, guest_key);
	g_autofree gchar *entry = ledger_entry(gpa, request_id);
	return entries != NULL && g_hash_table_contains(entries, entry);
}

gboolean
hr_reservation_store_ledger_has_requests(HrReservationStore *store, const gchar *guest_key)
{
	GHashTable *entries = g_hash_table_lookup(store->ledger, guest_key);
	GHashTableIter iter;
	const gchar *entry;

	if (entries == NULL)
		return FALSE;
	g_hash_table_iter_init(&iter, entries);
	while (g_hash_table_iter_next(&iter, (gpointer *)&entry, NULL)) {
		if (g_str_has_prefix(entry, "r:"))
			return TRUE;
	}
	return FALSE;
}

void
hr_reservation_store_ledger_sync(
    HrReservationStore *store, const gchar *guest_key, GHashTable *held,
    gboolean (*is_live)(guint64 request_id, gint64 since, gpointer data), gpointer data)
{
	GHashTable *entries = g_hash_table_lookup(store->ledger, guest_key);
	GHashTableIter iter;
	const gchar *entry;
	gint64 *since;
	guint gone = 0;

	if (entries == NULL)
		return;
	g_hash_table_iter_init(&iter, entries);
	while (g_hash_table_iter_next(&iter, (gpointer *)&entry, (gpointer *)&since)) {
		guint64 v = g_ascii_strtoull(entry + 2, NULL, entry[0] == 'b' ? 16 : 10);
		if (entry[0] == 'b' ? g_hash_table_contains(held, &v) : is_live(v, *since, data))
			continue;
		g_hash_table_iter_remove(&iter);
		gone++;
	}
	if (g_hash_table_size(entries) == 0)
		g_hash_table_remove(store->ledger, guest_key);
	if (gone > 0)
		hr_reservation_touch(store, NULL);
}

void
hr_reservation_store_ledger_rekey(HrReservationStore *store, const gchar *from, const gchar *to)
{
	GHashTable *entries, *into;
	GHashTableIter iter;
	gpointer old_key, entry, since;

	if (g_strcmp0(from, to) == 0 ||
	    !g_hash_table_steal_extended(store->ledger, from, &old_key, (gpointer *)&entries))
		return;
	g_free(old_key);
	into = g_hash_table_lookup(store->ledger, to);
	if (into == NULL) {
		g_hash_table_insert(store->ledger, g_strdup(to), entries);
	} else {
		g_hash_table_iter_init(&iter, entries);
		while (g_hash_table_iter_next(&iter, &entry, &since)) {
			g_hash_table_iter_steal(&iter);
			if (g_hash_table_contains(into, entry)) {
				g_free(entry);
				g_free(since);
			} else {
				g_hash_table_insert(into, entry, since);
			}
		}
		g_hash_table_unref(entries);
	}
	hr_reservation_touch(store, NULL);
}

guint
hr_reservation_store_ledger_size(HrReservationStore *store)
{
	GHashTableIter iter;
	GHashTable *entries;
	guint n = 0;

	g_hash_table_iter_init(&iter, store->ledger);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&entries))
		n += g_hash_table_size(entries);
	return n;
}

/* ---------------------------------------------------------------------- */
/* When QEMUs were seen gone (migration grace) */

gint64
hr_reservation_store_gone_for(HrReservationStore *store, const gchar *guest_key)
{
	gint64 now = res_boottime_us();
	gint64 *since = g_hash_table_lookup(store->gone, guest_key);

	if (since == NULL) {
		since = g_memdup2(&now, sizeof(now));
		g_hash_table_insert(store->gone, g_strdup(guest_key), since);
		hr_reservation_touch(store, NULL);
	}
	return *since == 0 ? G_MAXINT64 : now - *since;
}

void
hr_reservation_store_gone_prune(HrReservationStore *store)
{
	g_autoptr(GHashTable) named = g_hash_table_new(g_str_hash, g_str_equal);
	GHashTableIter iter;
	const gchar *key;
	guint gone = 0;

	if (g_hash_table_size(store->gone) == 0)
		return;
	for (guint i = 0; i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		for (guint j = 0; j < r->holds->len; j++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, j);
			if (h->guest_key != NULL)
				g_hash_table_add(named, h->guest_key);
		}
	}
	g_hash_table_iter_init(&iter, store->gone);
	while (g_hash_table_iter_next(&iter, (gpointer *)&key, NULL)) {
		if (!g_hash_table_contains(named, key)) {
			g_hash_table_iter_remove(&iter);
			gone++;
		}
	}
	if (gone > 0)
		hr_reservation_touch(store, NULL);
}

/* ---------------------------------------------------------------------- */
/* Changes */

void
hr_reservation_touch(HrReservationStore *store, HrReservation *r)
{
	if (r != NULL)
		r->updated_at = g_get_real_time();
	hr_reservation_store_save_async(store);
	if (r != NULL && store->changed != NULL)
		store->changed(r, store->changed_data);
}

void
hr_reservation_store_set_changed_func(HrReservationStore *store, HrReservationFunc func,
				      gpointer user_data)
{
	store->changed = func;
	store->changed_data = user_data;
}

/* make room for one more: forget the oldest settled reservation holding nothing */
static gboolean
hr_reservation_store_make_room(HrReservationStore *store, GError **error)
{
	if (store->list->len < store->max)
		return TRUE;
	for (guint i = 0; i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		if (!hr_reservation_state_is_settled(r->state) ||
		    r->state == HR_RESERVATION_READY || r->holds->len > 0 || r->pool_blocks > 0)
			continue;
		g_info("reservation %s forgotten: %u are kept at most", r->id, store->max);
		g_ptr_array_remove_index(store->list, i);
		return TRUE;
	}
	g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
		    "%u reservations are live or hold blocks already, the most the daemon keeps "
		    "(max_reservations): release some first",
		    store->list->len);
	return FALSE;
}

/*
 * "r-" and 26 characters of Crockford's base32, as a ULID: 48 bits of
 * the wall clock's milliseconds, then 80 random bits. Unique across
 * restarts and hosts (a fleet keeps ids of many daemons in one place),
 * and in the order they were made. Files of before have "r1", "r2", ...:
 * those stay what they were.
 */
static gchar *
hr_reservation_new_id(void)
{
	static const gchar digits[] = "0123456789abcdefghjkmnpqrstvwxyz";
	guint64 ms = (guint64)g_get_real_time() / 1000;
	guint8 rnd[10];
	gchar id[2 + 26 + 1] = "r-";
	guint bits = 0, nbits = 0, n = 2;

	/* ids are made on the main loop only: these need no lock */
	static guint64 last_ms;
	static guint8 last_rnd[10];

	if (ms <= last_ms) {
		/* the same millisecond (or a clock that stepped back): the last
		 * id's random part plus one, so that ids still sort as made */
		ms = last_ms;
		memcpy(rnd, last_rnd, sizeof(rnd));
		for (gint i = (gint)sizeof(rnd) - 1; i >= 0 && ++rnd[i] == 0; i--)
			;
	} else if (getrandom(rnd, sizeof(rnd), 0) != (gssize)sizeof(rnd)) {
		for (guint i = 0; i < sizeof(rnd); i++)
			rnd[i] = (guint8)g_random_int();
	}
	last_ms = ms;
	memcpy(last_rnd, rnd, sizeof(rnd));
	for (gint shift = 45; shift >= 0; shift -= 5)
		id[n++] = digits[(ms >> shift) & 31];
	for (guint i = 0; i < sizeof(rnd); i++) {
		bits = (bits << 8) | rnd[i];
		nbits += 8;
		while (nbits >= 5) {
			nbits -= 5;
			id[n++] = digits[(bits >> nbits) & 31];
		}
	}
	id[n] = '\0';
	return g_strdup(id);
}

HrReservation *
hr_reservation_store_create(HrReservationStore *store, guint64 bytes, gint node, gint64 deadline_at,
			    gboolean strict, const gchar *requester, GError **error)
{
	HrReservation *r;

	if (bytes == 0) {
		g_set_error_literal(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
				    "bytes: a reservation needs at least one byte");
		return NULL;
	}
	if (node < HR_RESERVATION_ANY_NODE) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
			    "node: %d is not a node number", node);
		return NULL;
	}
	if (!hr_reservation_store_make_room(store, error))
		return NULL;
	r = hr_reservation_new();
	r->id = hr_reservation_new_id();
	store->next_id++;
	r->bytes = bytes;
	r->need_blocks = (bytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
	r->node = node;
	r->strict = strict;
	r->requester = g_strdup(requester);
	r->state = HR_RESERVATION_CREATED;
	r->created_at = g_get_real_time();
	r->deadline_at = deadline_at;
	g_ptr_array_add(store->list, r);
	hr_reservation_touch(store, r);
	return r;
}

guint64
hr_reservation_store_promised(HrReservationStore *store, gint node, const HrReservation *except)
{
	guint64 sum = 0;
	for (guint i = 0; i < store->list->len; i++) {
		HrReservation *r = g_ptr_array_index(store->list, i);
		if (r == except || !hr_reservation_state_is_live(r->state))
			continue;
		if (r->planned_node < 0 || (node >= 0 && r->planned_node != node))
			continue;
		/* blocks in the hugetlb pool are not free memory any more */
		sum += r->obtained - MIN(r->obtained, r->pool_blocks);
	}
	return sum;
}

gboolean
hr_reservation_set_state(HrReservationStore *store, HrReservation *r, HrReservationState state,
			 const gchar *reason, GError **error)
{
	if (!hr_reservation_transition_allowed(r->state, state)) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
			    "reservation %s is %s and cannot become %s", r->id,
			    hr_reservation_state_to_string(r->state),
			    hr_reservation_state_to_string(state));
		return FALSE;
	}
	g_info("reservation %s: %s -> %s%s%s", r->id, hr_reservation_state_to_string(r->state),
	       hr_reservation_state_to_string(state), reason != NULL ? ": " : "",
	       reason != NULL ? reason : "");
	r->state = state;
	if (reason != NULL) {
		g_free(r->reason);
		r->reason = g_strdup(reason);
	}
	if (hr_reservation_state_is_settled(state))
		r->finished_at = g_get_real_time();
	hr_reservation_touch(store, r);
	return TRUE;
}

void
hr_reservation_set_obtained(HrReservationStore *store, HrReservation *r, guint64 blocks)
{
	blocks = MIN(blocks, r->need_blocks);
	if (blocks == r->obtained)
		return;
	r->obtained = blocks;
	hr_reservation_touch(store, r);
}
