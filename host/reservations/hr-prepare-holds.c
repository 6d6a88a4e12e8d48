/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The hold book: giving held blocks back to their guests, and reconciling what
 * guests hold with who owns it (reservations, the API's ledger, donations a
 * previous daemon left running, a migration's source).
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare-private.h"

/* ---------------------------------------------------------------------- */
/* Giving holds back */

static void
guest_index_end(HrPrepare *p);

static void
guest_index_begin(HrPrepare *p);

/*
 * The guest that holds @h: the one bound to the same QEMU process. A hold
 * from a version 1 state file names its guest by UUID only: a guest with
 * that UUID known adopts it.
 */
static HrGuest *
find_hold_guest(HrPrepare *p, HrReservationHold *h)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	if (p->guest_index != NULL && h->guest_key != NULL)
		return g_hash_table_lookup(p->guest_index, h->guest_key);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (h->guest_key != NULL
			? g_strcmp0(hr_guest_get_key(guest), h->guest_key) == 0
			: hr_guest_get_known_uuid(guest) != NULL && h->guest_uuid != NULL &&
			      g_ascii_strcasecmp(hr_guest_get_known_uuid(guest), h->guest_uuid) ==
				  0) {
			if (h->guest_key == NULL)
				h->guest_key = g_strdup(hr_guest_get_key(guest));
			return guest;
		}
	}
	return NULL;
}

/*
 * The QEMU process that held @h is gone (killed, or the VM shut down):
 * the block went back to the host with its memory, nobody is to return it.
 */
static gboolean
hold_process_gone(HrGuest *guest, HrReservationHold *h)
{
	if (guest != NULL)
		return !hr_guest_is_connected(guest) && !hr_peer_is_alive(hr_guest_get_peer(guest));
	/* a version 1 hold names no process: it waits for its guest */
	return h->guest_key != NULL && !hr_peer_key_alive(h->guest_key);
}

/*
 * @h's QEMU is gone but less than migration_grace_s ago (counted from when
 * a daemon first saw it gone: the store keeps that across restarts): the VM may run on in a migration's
 * destination that has not connected yet (it connects late, or the daemon
 * restarted mid-migration), whose resync will bring the block. Until then
 * the hold is the reservation's still, but nobody can be asked to RETURN
 * it, and its memory is not in any running QEMU (the host counts it free
 * already): it is neither returned nor dropped, nor given return room.
 */
static gboolean
hold_in_grace(HrPrepare *p, HrGuest *guest, HrReservationHold *h)
{
	if (h->guest_key == NULL || !hold_process_gone(guest, h))
		return FALSE;
	return hr_reservation_store_gone_for(p->store, h->guest_key) <
	       (gint64)p->config->migration_grace_s * G_USEC_PER_SEC;
}

/* a RETURN that did not give everything back: the rest are still holds */
void
prep_return_notify(HrRequest *request, gpointer user_data)
{
	Op *op = user_data;
	HrPrepare *p = op->prepare;
	HrReservation *r;
	HrGuest *guest;
	g_autoptr(GHashTable) back = NULL;
	guint kept = 0;

	if (p == NULL || !hr_request_state_is_final(request->state))
		return;
	hr_request_remove_listener(request, prep_return_notify, op);
	if (op->submitting) {
		op->ended_early = TRUE;
		return;
	}
	prep_host_changed(p);
	r = hr_reservation_store_find(p->store, op->res_id);
	guest = prep_find_guest(p, op->guest_id);
	back = g_hash_table_new(hr_gpa_hash, g_int64_equal);
	for (guint i = 0; request->blocks != NULL && i < request->blocks->len; i++)
		g_hash_table_add(back, &g_array_index(request->blocks, guint64, i));
	for (guint i = 0; r != NULL && guest != NULL && i < op->returning->len; i++) {
		guint64 *gpa = &g_array_index(op->returning, guint64, i);
		if (g_hash_table_contains(back, gpa) ||
		    !g_hash_table_contains(hr_guest_get_held(guest), gpa))
			continue;
		hr_reservation_add_hold(r, hr_guest_get_key(guest), hr_guest_get_name(guest), *gpa);
		kept++;
	}
	if (kept > 0) {
		r->blocks_returned -= MIN(r->blocks_returned, kept);
		g_message("reservation %s: %s kept %u blocks its RETURN ended %s without; "
			  "trying again later",
			  r->id, hr_guest_get_name(guest), kept,
			  hr_request_state_to_string(request->state));
		hr_reservation_touch(p->store, r);
	}
	g_ptr_array_remove(p->ops, op);
	prep_op_free(op);
}

/*
 * RETURN up to @max of @r's holds, oldest first, to guests that are
 * connected now; holds of a guest that no longer holds the block (it took
 * it back under pressure, or its QEMU restarted) are dropped. Returns how
 * many were sent back.
 */
guint
prep_return_holds(HrPrepare *p, HrReservation *r, guint max, const gchar *why)
{
	g_autoptr(GHashTable) per_guest = prep_guest_table_new((GDestroyNotify)g_array_unref);
	GPtrArray *old = r->holds;
	GHashTableIter iter;
	gpointer key, value;
	guint sent = 0, dropped = 0;

	/*
	 * @r keeps only what stays while the others are looked at: the store
	 * may write @r out in between (hold_in_grace() records when a QEMU
	 * was first seen gone, and saves), and must never see a hold twice or
	 * a slot emptied.
	 */
	r->holds = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_hold_free);
	for (guint i = 0; i < old->len; i++) {
		HrReservationHold *h = g_ptr_array_index(old, i);
		HrGuest *guest = find_hold_guest(p, h);
		GArray *gpas;

		if (hold_in_grace(p, guest, h)) {
			g_ptr_array_add(r->holds, h);
			continue;
		}
		if ((guest != NULL && hr_guest_is_ready(guest) &&
		     !g_hash_table_contains(hr_guest_get_held(guest), &h->gpa)) ||
		    hold_process_gone(guest, h)) {
			dropped++;
			hr_reservation_hold_free(h);
			continue;
		}
		if (sent >= max || guest == NULL || !hr_guest_is_connected(guest) ||
		    !hr_guest_is_ready(guest)) {
			g_ptr_array_add(r->holds, h);
			continue;
		}
		gpas = g_hash_table_lookup(per_guest, &(guint64){hr_guest_get_id(guest)});
		if (gpas == NULL) {
			gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
			g_hash_table_insert(
			    per_guest,
			    g_memdup2(&(guint64){hr_guest_get_id(guest)}, sizeof(guint64)), gpas);
		}
		g_array_append_val(gpas, h->gpa);
		sent++;
		hr_reservation_hold_free(h);
	}
	/* each of @old's holds is in r->holds now, or freed */
	g_ptr_array_set_free_func(old, NULL);
	g_ptr_array_unref(old);

	g_hash_table_iter_init(&iter, per_guest);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		HrGuest *guest = prep_find_guest(p, *(guint64 *)key);
		GArray *gpas = value;
		for (guint off = 0; off < gpas->len; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
			g_autoptr(GError) error = NULL;
			HrRequestParams params = {0};
			HrRequest *request;
			Op *op = g_new0(Op, 1);

			params.kind = HR_REQUEST_RETURN;
			params.gpas = &g_array_index(gpas, guint64, off);
			params.nr_gpas = MIN(gpas->len - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
			params.notify = prep_return_notify;
			params.notify_data = op;
			op->prepare = p;
			op->res_id = g_strdup(r->id);
			op->guest_id = hr_guest_get_id(guest);
			op->returning = g_array_new(FALSE, FALSE, sizeof(guint64));
			g_array_append_vals(op->returning, params.gpas, params.nr_gpas);
			op->submitting = TRUE;
			request = prep_submit(p, guest, &params, &error);
			op->submitting = FALSE;
			if (request == NULL) {
				/* they stay holds: the next tick tries again */
				for (guint i = 0; i < params.nr_gpas; i++)
					hr_reservation_add_hold(r, hr_guest_get_key(guest),
								hr_guest_get_name(guest),
								params.gpas[i]);
				sent -= params.nr_gpas;
				g_warning("reservation %s: cannot return %u blocks to %s: %s",
					  r->id, params.nr_gpas, hr_guest_get_name(guest),
					  error->message);
				prep_op_free(op);
				continue;
			}
			op->request = hr_request_ref(request);
			g_ptr_array_add(p->ops, op);
			if (op->ended_early)
				prep_return_notify(request, op);
		}
		g_info("reservation %s: returning %u blocks to %s (%s)", r->id, gpas->len,
		       hr_guest_get_name(guest), why);
	}
	r->blocks_returned += sent;
	if (sent > 0 || dropped > 0)
		hr_reservation_touch(p->store, r);
	return sent;
}

/* consumed reservations: holds go back once a node has room again, oldest first */
void
prep_return_by_high_mark(HrPrepare *p, const HrHostState *host)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	guint64 mark_pages = p->config->return_high_mark_mb * 256;
	g_autoptr(GPtrArray) holds = g_ptr_array_new();
	g_autoptr(GHashTable) count = g_hash_table_new(g_direct_hash, g_direct_equal);
	guint64 room = 0;

	if (mark_pages == 0)
		return;
	for (guint n = 0; n < host->nodes->len; n++) {
		const HrNodeState *ns = g_ptr_array_index(host->nodes, n);
		if (ns->free_pages > mark_pages)
			room += (ns->free_pages - mark_pages) / BLOCK_PAGES;
	}
	if (room == 0)
		return;
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		if (r->state != HR_RESERVATION_CONSUMED)
			continue;
		guest_index_begin(p);
		for (guint h = 0; h < r->holds->len; h++) {
			HrReservationHold *hold = g_ptr_array_index(r->holds, h);
			if (!hold_in_grace(p, find_hold_guest(p, hold), hold))
				g_ptr_array_add(holds, r);
		}
		guest_index_end(p);
	}
	if (holds->len == 0)
		return;
	/* per reservation holds are oldest first; across them, oldest reservation first */
	for (guint i = 0; i < holds->len && i < room; i++) {
		gpointer r = g_ptr_array_index(holds, i);
		g_hash_table_insert(
		    count, r,
		    GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(count, r)) + 1));
	}
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint n = GPOINTER_TO_UINT(g_hash_table_lookup(count, r));
		if (n > 0)
			prep_return_holds(p, r, n, "the host has room again");
	}
}

/* ---------------------------------------------------------------------- */
/* Reconciling what guests hold */

/*
 * Every block a guest holds has an owner: a reservation (its holds, or a
 * donation in flight), the API (an operator's own evacuation, kept in the
 * store's ledger), or a donation a previous daemon left running, whose
 * blocks come in unasked after a restart (Interrupted). A block nobody
 * owns (a HOLD for a request nobody knows, a block a resync lists that no
 * reservation recorded) is an orphan: it would stay out of the guest for
 * good, so it is given back.
 */

/* the donations a previous run left "running" */
void
prep_find_interrupted(HrPrepare *p)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		for (guint j = 0; j < r->steps->len; j++) {
			HrReservationStep *s = g_ptr_array_index(r->steps, j);
			Interrupted *it;
			if (s->kind != HR_STEP_DONATE || s->state != HR_STEP_RUNNING)
				continue;
			it = g_new0(Interrupted, 1);
			it->res_id = g_strdup(r->id);
			it->step_index = j;
			it->request_id = s->request_id;
			it->guest_key = g_strdup(s->guest_key);
			it->left = s->blocks_asked;
			g_ptr_array_add(p->interrupted, it);
			hr_reservation_step_set_state(s, HR_STEP_FAILED,
						      "the daemon restarted while it ran");
			g_message("reservation %s: the donation of %s (request %" G_GUINT64_FORMAT
				  ") was running when the daemon stopped; what it freed is kept "
				  "when the guest reports it",
				  r->id, s->guest, s->request_id);
		}
	}
}

/* the interrupted donation @block of @guest belongs to, or NULL */
static Interrupted *
interrupted_for(HrPrepare *p, HrGuest *guest, const HrHeldBlock *block)
{
	for (guint i = 0; i < p->interrupted->len; i++) {
		Interrupted *it = g_ptr_array_index(p->interrupted, i);
		if (it->left == 0 || g_strcmp0(it->guest_key, hr_guest_get_key(guest)) != 0)
			continue;
		/* its late HOLDs name it; what it froze before, the resync lists */
		if (block->request_id == it->request_id || block->request_id == 0)
			return it;
	}
	return NULL;
}

static void
interrupted_claim(HrPrepare *p, Interrupted *it, HrGuest *guest, guint64 gpa)
{
	HrReservation *r = hr_reservation_store_find(p->store, it->res_id);

	it->left--;
	if (r == NULL)
		return;
	hr_reservation_add_hold(r, hr_guest_get_key(guest), hr_guest_get_name(guest), gpa);
	if (it->step_index < r->steps->len) {
		HrReservationStep *s = g_ptr_array_index(r->steps, it->step_index);
		g_autofree gchar *detail = NULL;
		s->blocks_held++;
		detail = g_strdup_printf("the daemon restarted while it ran; %" G_GUINT64_FORMAT
					 " blocks it freed were found held",
					 s->blocks_held);
		hr_reservation_step_set_state(s, HR_STEP_SHORT, detail);
	}
	hr_reservation_touch(p->store, r);
}

gboolean
prep_executor_request(HrPrepare *p, guint64 request_id)
{
	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		if (op->request != NULL && op->request->id == request_id)
			return TRUE;
	}
	return FALSE;
}

typedef struct {
	HrGuest *guest;
	gint64 now;
} LiveCtx;

/* an API request in the ledger is live while the guest may still run it */
static gboolean
ledger_request_live(guint64 request_id, gint64 since, gpointer data)
{
	LiveCtx *ctx = data;
	HrRequest *request = hr_guest_find_request(ctx->guest, request_id);
	if (request != NULL)
		return !hr_request_state_is_final(request->state);
	/* from before a restart: no request outlives a day (request_timeout_s) */
	return ctx->now - since < (gint64)86400 * G_USEC_PER_SEC;
}

static gboolean
return_orphans(HrPrepare *p, HrGuest *guest, GArray *orphans)
{
	for (guint off = 0; off < orphans->len; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
		g_autoptr(GError) error = NULL;
		HrRequestParams params = {0};

		params.kind = HR_REQUEST_RETURN;
		params.gpas = &g_array_index(orphans, guint64, off);
		params.nr_gpas = MIN(orphans->len - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
		if (prep_submit(p, guest, &params, &error) == NULL) {
			g_warning("%s: cannot return %u blocks nobody owns: %s",
				  hr_guest_get_name(guest), params.nr_gpas, error->message);
			return FALSE;
		}
		hr_guest_mark_orphans(guest, params.gpas, params.nr_gpas);
	}
	return TRUE;
}

/* index the guests by key for a pass over every reservation's holds */
static void
guest_index_begin(HrPrepare *p)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	p->guest_index = g_hash_table_new(g_str_hash, g_str_equal);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		g_hash_table_insert(p->guest_index, (gpointer)hr_guest_get_key(guest), guest);
	}
}

static void
guest_index_end(HrPrepare *p)
{
	g_clear_pointer(&p->guest_index, g_hash_table_unref);
}

/* forget the holds of every reservation that @pred says are no more, saying @why */
void
prep_drop_holds(HrPrepare *p, HoldPred pred, gpointer data, const gchar *why)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	guest_index_begin(p);
	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint dropped = 0;
		for (guint j = r->holds->len; j-- > 0;) {
			if (!pred(p, g_ptr_array_index(r->holds, j), data))
				continue;
			g_ptr_array_remove_index(r->holds, j);
			dropped++;
		}
		if (dropped > 0) {
			g_message("reservation %s: %u holds dropped: %s", r->id, dropped, why);
			hr_reservation_touch(p->store, r);
		}
	}
	guest_index_end(p);
}

/* look at the clock once per this many items of work done in slices */
#define SLICE_CHECK_EVERY 256

gboolean
prep_drop_holds_walk(HrPrepare *p, HoldWalk *walk, HoldPred pred, gpointer data, const gchar *why,
		     gint64 deadline)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	guint looked = 0;
	gboolean done = TRUE;

	guest_index_begin(p);
	for (; walk->res < list->len; walk->res++, walk->hold = 0) {
		HrReservation *r = g_ptr_array_index(list, walk->res);
		guint dropped = 0;
		while (walk->hold < r->holds->len) {
			if (++looked % SLICE_CHECK_EVERY == 0 &&
			    g_get_monotonic_time() >= deadline) {
				done = FALSE;
				break;
			}
			if (!pred(p, g_ptr_array_index(r->holds, walk->hold), data)) {
				walk->hold++;
				continue;
			}
			g_ptr_array_remove_index(r->holds, walk->hold);
			dropped++;
		}
		if (dropped > 0) {
			g_message("reservation %s: %u holds dropped: %s", r->id, dropped, why);
			hr_reservation_touch(p->store, r);
		}
		if (!done)
			break;
	}
	guest_index_end(p);
	if (done)
		*walk = (HoldWalk){0, 0};
	return done;
}

/*
 * A hold on a block its guest no longer holds (it took it back under
 * pressure, an operator returned it, its device was reset): nothing to
 * give back. Blocks a donation in flight got are not holds yet.
 */
static gboolean
hold_stale(HrPrepare *p, HrReservationHold *h, gpointer data)
{
	HrGuest *guest = data;
	return !g_hash_table_contains(hr_guest_get_held(guest), &h->gpa) &&
	       find_hold_guest(p, h) == guest;
}

/*
 * A hold of a live reservation whose QEMU is gone: its memory went with
 * it, unless the VM runs on in another QEMU of this host (a live
 * migration's source exits), where the hold follows the guest, or may yet
 * (hold_in_grace: a destination that has not connected).
 */
gboolean
prep_hold_gone(HrPrepare *p, HrReservationHold *h, gpointer data)
{
	HrGuest *guest = find_hold_guest(p, h);
	(void)data;
	/* only a disconnected guest can have lost its process */
	if ((guest != NULL && hr_guest_is_connected(guest)) || !hold_process_gone(guest, h))
		return FALSE;
	if (guest != NULL && prep_follow_migration(p, guest))
		return FALSE;
	return !hold_in_grace(p, guest, h);
}

/* is @guest's QEMU process gone: disconnected, and its pidfd says it exited? */
static gboolean
guest_process_gone(HrGuest *guest)
{
	return !hr_guest_is_connected(guest) && !hr_peer_is_alive(hr_guest_get_peer(guest));
}

/*
 * Is @other the same VM as @guest in another QEMU process (same non-zero
 * UUID and name) that is gone: the source of a live migration to @guest?
 * Only migration brings held blocks into a new process (SPEC 2.9), so a
 * block @guest's resync lists that @other owned moves to @guest with its
 * owner. Never while @other's process runs: a process that claims a
 * running VM's identity takes nothing of it (SPEC 2.10 item 6); a
 * migration's destination gets the source's blocks once the source exits.
 */
static gboolean
migration_twin(HrGuest *guest, HrGuest *other)
{
	return other != guest && hr_guest_same_vm(guest, other) && guest_process_gone(other);
}

/* the same VM as @guest in another QEMU process that runs (a migration's source, or not) */
static gboolean
running_twin(HrGuest *guest, HrGuest *other)
{
	return other != guest && hr_guest_same_vm(guest, other) && !guest_process_gone(other);
}

/* what @from's QEMU process owned (holds, ledger) becomes @to's */
void
prep_rekey_owner(HrPrepare *p, const gchar *from, HrGuest *to)
{
	GPtrArray *list = hr_reservation_store_list(p->store);

	for (guint i = 0; i < list->len; i++) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint moved = 0;
		for (guint j = 0; j < r->holds->len; j++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, j);
			if (g_strcmp0(h->guest_key, from) != 0)
				continue;
			hr_reservation_hold_set_key(h, hr_guest_get_key(to));
			moved++;
		}
		if (moved > 0) {
			g_message("reservation %s: %u holds of %s are %s's now", r->id, moved, from,
				  hr_guest_get_key(to));
			hr_reservation_touch(p->store, r);
		}
	}
	hr_reservation_store_ledger_rekey(p->store, from, hr_guest_get_key(to));
}

/*
 * @gone is disconnected and its QEMU exited (or is forgotten): when the
 * VM runs on in another QEMU of this host, what @gone's process owned
 * went there with the guest (a live migration whose source exited before
 * the destination's resync was reconciled, or that was pruned first, or
 * a destination taking the guest back after a failed migration). FALSE
 * when no other QEMU of the VM runs.
 */
gboolean
prep_follow_migration(HrPrepare *p, HrGuest *gone)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	HrGuest *to = NULL;

	for (guint i = 0; i < guests->len; i++) {
		HrGuest *other = g_ptr_array_index(guests, i);
		if (other == gone || !hr_guest_same_vm(gone, other))
			continue;
		if (!hr_guest_is_connected(other) && !hr_peer_is_alive(hr_guest_get_peer(other)))
			continue;
		/* a connected one first, then the one started last */
		if (to == NULL || (hr_guest_is_connected(other) && !hr_guest_is_connected(to)) ||
		    (hr_guest_is_connected(other) == hr_guest_is_connected(to) &&
		     hr_guest_get_peer(other)->starttime > hr_guest_get_peer(to)->starttime))
			to = other;
	}
	if (to == NULL)
		return FALSE;
	g_info("%s: QEMU pid %d is gone, the VM runs on in pid %d: what it owned follows",
	       hr_guest_get_name(gone), hr_guest_get_pid(gone), hr_guest_get_pid(to));
	prep_rekey_owner(p, hr_guest_get_key(gone), to);
	return TRUE;
}

/* give @h, a hold of @r that a twin's process owned, to @guest, where its block is now */
static void
adopt_hold(HrPrepare *p, HrReservation *r, HrReservationHold *h, HrGuest *guest)
{
	g_info("%s: block 0x%" G_GINT64_MODIFIER "x came with the migration from %s, still "
	       "reservation %s's",
	       hr_guest_get_name(guest), h->gpa, h->guest_key, r->id);
	hr_reservation_hold_set_key(h, hr_guest_get_key(guest));
	hr_reservation_touch(p->store, r);
}

/*
 * Was @h held by a QEMU of @guest's VM: the same UUID where both have one
 * (names can be reused by another VM, or be copied), else the same name?
 */
static gboolean
hold_of_vm(HrReservationHold *h, HrGuest *guest)
{
	const gchar *uuid = hr_guest_vm_uuid(guest);

	if (h->guest_uuid != NULL && uuid != NULL)
		return g_ascii_strcasecmp(h->guest_uuid, uuid) == 0;
	return g_strcmp0(h->guest_name, hr_guest_get_name(guest)) == 0;
}

/* the API request @twin ran when its device went away, or still runs */
static HrRequest *
twin_running_request(HrPrepare *p, HrGuest *twin)
{
	HrRequest *request = hr_guest_get_active_request(twin);

	if (request == NULL) {
		request = hr_guest_get_last_finished(twin);
		if (request != NULL && request->state != HR_REQUEST_LOST)
			request = NULL;
	}
	if (request == NULL || request->kind == HR_REQUEST_RETURN ||
	    prep_executor_request(p, request->id))
		return NULL;
	return request;
}

/* a hold of a reservation, as an index of holds by gpa finds it */
typedef struct {
	HrReservation *r;
	HrReservationHold *h;
} HoldRef;

/*
 * What a guest's reconcile adopts blocks from, read once per reconcile
 * when a block nobody owns first needs it: the guest's migration twins,
 * the latest of them and the API request it ran, and the holds a twin's
 * process or a QEMU of the VM owned, by gpa. Each block then costs a few
 * lookups, not a scan of every guest and every hold (issue 18: 200k
 * blocks with 1000 gone guest entries took 13.6 s of main loop).
 */
typedef struct {
	gboolean built;
	GPtrArray *twins;	/* HrGuest: migration_twin(), in the registry's order */
	HrGuest *source;	/* the latest twin (the migration's source), or NULL */
	HrRequest *request;	/* twin_running_request() of @source, or NULL */
	HrGuest *running;	/* a running_twin(), or NULL */
	GHashTable *twin_holds; /* gpa -> GArray of HoldRef: holds keyed by a twin */
	GHashTable *vm_holds;	/* gpa -> GArray of HoldRef: hold_of_vm() */
	gint ledger_requests;	/* ledger_has_requests() of the guest; -1: not read yet */
} Adopt;

static void
adopt_index_add(GHashTable *index, HrReservation *r, HrReservationHold *h)
{
	GArray *refs = g_hash_table_lookup(index, &h->gpa);
	HoldRef ref = {r, h};

	if (refs == NULL) {
		refs = g_array_new(FALSE, FALSE, sizeof(HoldRef));
		g_hash_table_insert(index, &h->gpa, refs);
	}
	g_array_append_val(refs, ref);
}

static void
adopt_build(HrPrepare *p, HrGuest *guest, Adopt *a)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	GPtrArray *list = hr_reservation_store_list(p->store);
	g_autoptr(GHashTable) twin_keys = g_hash_table_new(g_str_hash, g_str_equal);
	gint64 latest = 0;

	a->built = TRUE;
	a->twins = g_ptr_array_new();
	a->twin_holds =
	    g_hash_table_new_full(hr_gpa_hash, g_int64_equal, NULL, (GDestroyNotify)g_array_unref);
	a->vm_holds =
	    g_hash_table_new_full(hr_gpa_hash, g_int64_equal, NULL, (GDestroyNotify)g_array_unref);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *other = g_ptr_array_index(guests, i);
		/* gone_at is 0 while connected: the latest of all */
		gint64 gone =
		    hr_guest_get_gone_at(other) != 0 ? hr_guest_get_gone_at(other) : G_MAXINT64;
		if (a->running == NULL && running_twin(guest, other))
			a->running = other;
		if (!migration_twin(guest, other))
			continue;
		g_ptr_array_add(a->twins, other);
		g_hash_table_add(twin_keys, (gpointer)hr_guest_get_key(other));
		if (gone > latest) {
			a->source = other;
			latest = gone;
		}
	}
	a->request = a->source != NULL ? twin_running_request(p, a->source) : NULL;
	/* in the order of the reservations and their holds, the first match wins */
	for (guint j = 0; j < list->len; j++) {
		HrReservation *r = g_ptr_array_index(list, j);
		for (guint k = 0; k < r->holds->len; k++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, k);
			if (h->guest_key != NULL && g_hash_table_contains(twin_keys, h->guest_key))
				adopt_index_add(a->twin_holds, r, h);
			if (hold_of_vm(h, guest))
				adopt_index_add(a->vm_holds, r, h);
		}
	}
}

static void
adopt_clear(Adopt *a)
{
	g_clear_pointer(&a->twins, g_ptr_array_unref);
	g_clear_pointer(&a->twin_holds, g_hash_table_unref);
	g_clear_pointer(&a->vm_holds, g_hash_table_unref);
}

/*
 * @gpa, which @guest holds, was held for a reservation by a QEMU of the
 * same VM (hold_of_vm) that is gone and whose entry is not known (pruned,
 * or before a restart of the daemon), within migration_grace_s: the
 * migration's source. Only a migration brings held blocks into a new QEMU
 * (SPEC 2.9).
 */
static gboolean
adopt_unknown_source(HrPrepare *p, HrGuest *guest, guint64 gpa, Adopt *a)
{
	GArray *refs = g_hash_table_lookup(a->vm_holds, &gpa);

	for (guint i = 0; refs != NULL && i < refs->len; i++) {
		HoldRef *ref = &g_array_index(refs, HoldRef, i);
		if (!hold_of_vm(ref->h, guest) || find_hold_guest(p, ref->h) != NULL ||
		    !hold_in_grace(p, NULL, ref->h))
			continue;
		adopt_hold(p, ref->r, ref->h, guest);
		return TRUE;
	}
	return FALSE;
}

/* @gpa, which @guest holds, was a twin's: give its owner's record to @guest */
static gboolean
adopt_twin_record(HrPrepare *p, HrGuest *guest, guint64 gpa, Adopt *a)
{
	GArray *refs = g_hash_table_lookup(a->twin_holds, &gpa);

	for (guint i = 0; i < a->twins->len; i++) {
		HrGuest *other = g_ptr_array_index(a->twins, i);
		if (hr_reservation_store_ledger_has(p->store, hr_guest_get_key(other), gpa, 0)) {
			hr_reservation_store_ledger_add(p->store, hr_guest_get_key(guest), gpa, 0);
			g_info("%s: block 0x%" G_GINT64_MODIFIER
			       "x came with the migration from pid "
			       "%d, still the operator's",
			       hr_guest_get_name(guest), gpa, hr_guest_get_pid(other));
			return TRUE;
		}
		for (guint j = 0; refs != NULL && j < refs->len; j++) {
			HoldRef *ref = &g_array_index(refs, HoldRef, j);
			if (g_strcmp0(ref->h->guest_key, hr_guest_get_key(other)) != 0)
				continue;
			adopt_hold(p, ref->r, ref->h, guest);
			return TRUE;
		}
	}
	return adopt_unknown_source(p, guest, gpa, a);
}

/*
 * @block, which @guest holds, was a twin's, or was held by the command
 * the API request of the latest twin (the migration's source) had sent,
 * which migrated with the guest and held it on the destination (SPEC 1.7
 * item 5; resynced with request id 0 if held before the destination's
 * device reconnected): give its owner's record to @guest.
 */
static gboolean
adopt_from_twin(HrPrepare *p, HrGuest *guest, const HrHeldBlock *block, Adopt *a)
{
	HrRequest *request;

	if (!a->built)
		adopt_build(p, guest, a);
	if (adopt_twin_record(p, guest, block->gpa, a))
		return TRUE;
	request = a->request;
	if (request == NULL || (block->request_id != 0 && block->request_id != request->id))
		return FALSE;
	hr_reservation_store_ledger_add(p->store, hr_guest_get_key(guest), block->gpa, 0);
	g_info("%s: block 0x%" G_GINT64_MODIFIER "x held by request %" G_GUINT64_FORMAT
	       " of pid %d, which migrated with the guest: the operator's",
	       hr_guest_get_name(guest), block->gpa, request->id, hr_guest_get_pid(a->source));
	return TRUE;
}

/*
 * Reconciling a guest is work that grows with what it holds and what the
 * reservations hold (a resync of 1 M blocks): it runs in slices of at most
 * RECONCILE_SLICE_US, the first at once, the rest from an idle source, so
 * that requests and guest messages are served in between (issue 18 item
 * 4). One guest at a time; the others wait for the next tick.
 *
 * Between two slices anything may happen. Each slice therefore reads the
 * guest and its held set anew (a block no longer held is skipped; what
 * became held since is the next reconcile's, as its held_gen changed), the
 * API's requests and the executor's operations anew. What a slice cannot
 * read anew is what the holds owned when the walk over them ran (@owned)
 * and the index of a migration's holds (@adopt): when any hold was made,
 * moved or given another owner by someone else since (hr_reservation_hold_changes()),
 * the reconcile starts again from the walk, and after
 * RECONCILE_MAX_RESTARTS of those runs to its end in one go, so that it
 * always ends. Every decision it takes is one the same reconcile would
 * take again (a ledger entry or an adopted hold is then owned): a restart
 * neither doubles nor loses anything.
 */
#define RECONCILE_SLICE_US 10000
#define RECONCILE_MAX_RESTARTS 3

typedef enum {
	RECONCILE_COPY,	  /* a copy of the held set's gpas */
	RECONCILE_OWNED,  /* walk the holds for what they own of the guest */
	RECONCILE_BLOCKS, /* each held block: whose is it */
	RECONCILE_STALE,  /* the guest's holds on blocks it no longer holds */
} ReconcilePhase;

struct _ReconcileJob {
	guint64 guest_id;
	ReconcilePhase phase;
	GArray *gpas;	     /* guint64: the held set, copied in RECONCILE_COPY */
	GHashTableIter copy; /* over the held set, valid while its held_gen is @copy_gen */
	guint64 copy_gen;
	guint next;	   /* the next of @gpas */
	GHashTable *owned; /* owned_key(gpa): what holds own */
	HoldWalk walk;	   /* over the holds, in RECONCILE_OWNED and RECONCILE_STALE */
	GArray *orphans;   /* guint64 */
	Adopt adopt;	   /* built when a block first needs it; cleared when holds changed */
	guint64 changes;   /* hr_reservation_hold_changes() when the last slice ended */
	guint restarts;
	guint waiting;	  /* blocks left for a running twin (migration source) */
	gint waiting_pid; /* that twin's pid */
	gint64 now;	  /* real time the reconcile began at (ledger_request_live) */
	guint64 slices;
};

static void
reconcile_job_free(ReconcileJob *job)
{
	g_array_unref(job->gpas);
	g_hash_table_unref(job->owned);
	g_array_unref(job->orphans);
	adopt_clear(&job->adopt);
	g_free(job);
}

/*
 * A block of @owned is its 2 MiB block number in the key itself: no
 * allocation per block, so that a set of 1 M is freed in one go cheaply
 * (with a copy of each gpa it took 115 ms).
 */
static gpointer
owned_key(guint64 gpa)
{
	return GSIZE_TO_POINTER(gpa / VIRTIO_HUGEROOM_BLOCK_SIZE);
}

static guint
owned_hash(gconstpointer key)
{
	guint64 v = GPOINTER_TO_SIZE(key);
	return hr_gpa_hash(&v);
}

static void
owned_add(GHashTable *owned, guint64 gpa)
{
	g_hash_table_add(owned, owned_key(gpa));
}

static gboolean
owned_has(GHashTable *owned, guint64 gpa)
{
	return g_hash_table_contains(owned, owned_key(gpa));
}

/* (re)start at the walk over the holds */
static void
reconcile_restart(ReconcileJob *job)
{
	job->phase = MAX(job->phase, RECONCILE_OWNED);
	job->walk = (HoldWalk){0, 0};
	job->next = 0;
	g_hash_table_remove_all(job->owned);
	g_array_set_size(job->orphans, 0);
	job->waiting = 0;
	adopt_clear(&job->adopt);
	job->adopt = (Adopt){.ledger_requests = -1};
}

static ReconcileJob *
reconcile_job_new(HrPrepare *p, HrGuest *guest)
{
	ReconcileJob *job = g_new0(ReconcileJob, 1);
	g_autoptr(GPtrArray) requests = hr_guest_list_requests(guest);
	job->guest_id = hr_guest_get_id(guest);
	job->gpas = g_array_sized_new(FALSE, FALSE, sizeof(guint64),
				      g_hash_table_size(hr_guest_get_held(guest)));
	job->owned = g_hash_table_new(owned_hash, g_direct_equal);
	job->orphans = g_array_new(FALSE, FALSE, sizeof(guint64));
	job->now = g_get_real_time();
	job->adopt = (Adopt){.ledger_requests = -1};
	job->phase = RECONCILE_COPY;
	job->copy_gen = hr_guest_get_held_gen(guest);
	g_hash_table_iter_init(&job->copy, hr_guest_get_held(guest));
	/* the API's requests that run: their blocks are the operator's */
	for (guint i = 0; i < requests->len; i++) {
		HrRequest *request = g_ptr_array_index(requests, i);
		if (request->kind != HR_REQUEST_RETURN &&
		    !hr_request_state_is_final(request->state) &&
		    request->state != HR_REQUEST_QUEUED && !prep_executor_request(p, request->id))
			hr_reservation_store_ledger_add(p->store, hr_guest_get_key(guest), 0,
							request->id);
	}
	return job;
}

/* RECONCILE_COPY: TRUE once @job->gpas has every gpa the guest holds */
static gboolean
reconcile_copy(HrGuest *guest, ReconcileJob *job, gint64 deadline)
{
	HrHeldBlock *b;
	guint looked = 0;

	/* the set changed since the last slice: the iterator is no more */
	if (hr_guest_get_held_gen(guest) != job->copy_gen) {
		g_array_set_size(job->gpas, 0);
		job->copy_gen = hr_guest_get_held_gen(guest);
		g_hash_table_iter_init(&job->copy, hr_guest_get_held(guest));
	}
	while (++looked % SLICE_CHECK_EVERY != 0 || g_get_monotonic_time() < deadline) {
		if (!g_hash_table_iter_next(&job->copy, NULL, (gpointer *)&b))
			return TRUE;
		g_array_append_val(job->gpas, b->gpa);
	}
	return FALSE;
}

/* what the executor's operations in flight own of @guest: read anew in each slice */
static GHashTable *
ops_owned(HrPrepare *p, HrGuest *guest)
{
	GHashTable *owned = g_hash_table_new(hr_gpa_hash, g_int64_equal);

	for (guint i = 0; i < p->ops->len; i++) {
		Op *op = g_ptr_array_index(p->ops, i);
		if (op->guest_id != hr_guest_get_id(guest) || op->request == NULL)
			continue;
		/* what a donation in flight got, what a RETURN in flight gives back */
		for (guint j = 0; op->request->blocks != NULL && j < op->request->blocks->len; j++)
			g_hash_table_add(owned, &g_array_index(op->request->blocks, guint64, j));
		for (guint j = 0; op->returning != NULL && j < op->returning->len; j++)
			g_hash_table_add(owned, &g_array_index(op->returning, guint64, j));
	}
	return owned;
}

/* RECONCILE_OWNED: the gpas the reservations' holds own of @guest; TRUE when walked */
static gboolean
reconcile_owned(HrPrepare *p, HrGuest *guest, ReconcileJob *job, gint64 deadline)
{
	GPtrArray *list = hr_reservation_store_list(p->store);
	guint looked = 0;

	for (; job->walk.res < list->len; job->walk.res++, job->walk.hold = 0) {
		HrReservation *r = g_ptr_array_index(list, job->walk.res);
		for (; job->walk.hold < r->holds->len; job->walk.hold++) {
			HrReservationHold *h = g_ptr_array_index(r->holds, job->walk.hold);
			if (++looked % SLICE_CHECK_EVERY == 0 && g_get_monotonic_time() >= deadline)
				return FALSE;
			if (find_hold_guest(p, h) == guest)
				owned_add(job->owned, h->gpa);
		}
	}
	job->walk = (HoldWalk){0, 0};
	return TRUE;
}

/* RECONCILE_BLOCKS: whose each block @guest held at the start is; TRUE when all are */
static gboolean
reconcile_blocks(HrPrepare *p, HrGuest *guest, ReconcileJob *job, gint64 deadline)
{
	g_autoptr(GHashTable) in_flight = ops_owned(p, guest);
	GHashTable *held = hr_guest_get_held(guest);
	const gchar *key = hr_guest_get_key(guest);
	Adopt *adopt = &job->adopt;
	guint looked = 0;

	for (; job->next < job->gpas->len; job->next++) {
		guint64 gpa = g_array_index(job->gpas, guint64, job->next);
		HrHeldBlock *b;
		HrRequest *request;
		Interrupted *it;

		if (++looked % SLICE_CHECK_EVERY == 0 && g_get_monotonic_time() >= deadline)
			return FALSE;
		/* held no more: its RETURNED made another reconcile due */
		b = g_hash_table_lookup(held, &gpa);
		if (b == NULL || b->orphan || owned_has(job->owned, gpa) ||
		    g_hash_table_contains(in_flight, &gpa) ||
		    hr_reservation_store_ledger_has(p->store, key, gpa, 0))
			continue;
		if (b->request_id != 0 && prep_executor_request(p, b->request_id))
			continue;
		if (b->request_id != 0 &&
		    ((request = hr_guest_find_request(guest, b->request_id)) != NULL ||
		     hr_reservation_store_ledger_has(p->store, key, 0, b->request_id))) {
			if (request == NULL || request->kind != HR_REQUEST_RETURN)
				hr_reservation_store_ledger_add(p->store, key, gpa, 0);
			continue;
		}
		it = interrupted_for(p, guest, b);
		if (it != NULL) {
			interrupted_claim(p, it, guest, gpa);
			owned_add(job->owned, gpa);
			continue;
		}
		if (adopt_from_twin(p, guest, b, adopt)) {
			owned_add(job->owned, gpa);
			continue;
		}
		/*
		 * resynced after a restart while an operator's request of the
		 * previous daemon ran (its HOLDs went unseen): the operator's
		 */
		if (b->request_id == 0 && adopt->ledger_requests < 0)
			adopt->ledger_requests =
			    hr_reservation_store_ledger_has_requests(p->store, key);
		if (b->request_id == 0 && adopt->ledger_requests > 0) {
			hr_reservation_store_ledger_add(p->store, key, gpa, 0);
			continue;
		}
		/*
		 * another QEMU of the VM runs: it may be the migration's source
		 * (paused, or to resume if the migration fails) and own the
		 * block; the block waits until that process is gone
		 */
		if (adopt->running != NULL) {
			job->waiting++;
			job->waiting_pid = hr_guest_get_pid(adopt->running);
			continue;
		}
		g_array_append_val(job->orphans, gpa);
	}
	return TRUE;
}

/*
 * The end: the ledger follows the held set; orphans still held and unowned
 * go back, a command at a time while the guest's queue takes them (what
 * it does not take now the next reconcile finds again): the work of one
 * turn is what the queue can hold, not what the guest holds.
 */
static void
reconcile_finish(HrPrepare *p, HrGuest *guest, ReconcileJob *job)
{
	LiveCtx ctx = {guest, job->now};
	GHashTable *held = hr_guest_get_held(guest);
	g_autoptr(GArray) chunk = g_array_new(FALSE, FALSE, sizeof(guint64));
	guint returned = 0;

	hr_reservation_store_ledger_sync(p->store, hr_guest_get_key(guest), held,
					 ledger_request_live, &ctx);
	if (job->slices > 1)
		g_info("%s: %u held blocks reconciled in %" G_GUINT64_FORMAT " slices",
		       hr_guest_get_name(guest), job->gpas->len, job->slices);
	if (job->waiting > 0) {
		g_info("%s: %u held blocks wait for pid %d, which runs the same VM, to exit before "
		       "they can be adopted or returned",
		       hr_guest_get_name(guest), job->waiting, job->waiting_pid);
		/* reconciled again at the next change of any guest's held set (its exit's) */
		prep_get_gstate(p, guest)->reconciled_gen = G_MAXUINT64;
	}
	if (job->orphans->len > 0 && !p->config->return_orphans) {
		g_message(
		    "%s: %u held blocks no reservation or request owns (return_orphans is off)",
		    hr_guest_get_name(guest), job->orphans->len);
		return;
	}
	for (guint i = 0; i < job->orphans->len; i++) {
		guint64 gpa = g_array_index(job->orphans, guint64, i);
		HrHeldBlock *b = g_hash_table_lookup(held, &gpa);
		if (b != NULL && !b->orphan)
			g_array_append_val(chunk, gpa);
		if (chunk->len < VIRTIO_HUGEROOM_MAX_CMD_BLOCKS && i + 1 < job->orphans->len)
			continue;
		if (chunk->len > 0 && !return_orphans(p, guest, chunk))
			break;
		returned += chunk->len;
		g_array_set_size(chunk, 0);
	}
	if (job->orphans->len > 0)
		g_message("%s: %u held blocks no reservation or request owns: %u returned%s",
			  hr_guest_get_name(guest), job->orphans->len, returned,
			  returned < job->orphans->len
			      ? ", the rest when the guest's queue has room"
			      : "");
}

/* one slice of @job, until @deadline; TRUE when the reconcile ended (or cannot go on) */
static gboolean
reconcile_slice(HrPrepare *p, ReconcileJob *job, gint64 deadline)
{
	HrGuest *guest = prep_find_guest(p, job->guest_id);
	gboolean done = FALSE;

	/* gone or disconnected: its held set changed, a new reconcile is due */
	if (guest == NULL || !hr_guest_is_connected(guest) || !hr_guest_is_ready(guest))
		return TRUE;
	job->slices++;
	if (job->slices > 1 && hr_reservation_hold_changes() != job->changes &&
	    job->phase != RECONCILE_STALE && job->phase != RECONCILE_COPY) {
		/* what was read of the holds may be stale: read it again */
		if (++job->restarts > RECONCILE_MAX_RESTARTS)
			deadline = G_MAXINT64;
		g_debug("%s: the holds changed while reconciling: again (%u)",
			hr_guest_get_name(guest), job->restarts);
		reconcile_restart(job);
	}
	if (job->phase == RECONCILE_COPY && reconcile_copy(guest, job, deadline))
		job->phase = RECONCILE_OWNED;
	guest_index_begin(p);
	if (job->phase == RECONCILE_OWNED && g_get_monotonic_time() < deadline &&
	    reconcile_owned(p, guest, job, deadline))
		job->phase = RECONCILE_BLOCKS;
	if (job->phase == RECONCILE_BLOCKS && g_get_monotonic_time() < deadline &&
	    reconcile_blocks(p, guest, job, deadline))
		job->phase = RECONCILE_STALE;
	guest_index_end(p);
	/* held no more and still the guest's: a test that reads only the present */
	if (job->phase == RECONCILE_STALE && g_get_monotonic_time() < deadline &&
	    prep_drop_holds_walk(p, &job->walk, hold_stale, guest,
				 "the guest does not hold them any more", deadline)) {
		reconcile_finish(p, guest, job);
		done = TRUE;
	}
	/* what changes the holds from now on is another's: the next slice reads them again */
	job->changes = hr_reservation_hold_changes();
	return done;
}

static gboolean
reconcile_cb(gpointer user_data)
{
	HrPrepare *p = user_data;

	if (!reconcile_slice(p, p->reconcile, g_get_monotonic_time() + RECONCILE_SLICE_US))
		return G_SOURCE_CONTINUE;
	p->reconcile_id = 0;
	g_clear_pointer(&p->reconcile, reconcile_job_free);
	/* the guests that waited */
	if (p->reconcile_all)
		prep_kick(p);
	return G_SOURCE_REMOVE;
}

/* reconcile @guest: a first slice now, the rest from an idle source */
static void
reconcile_guest(HrPrepare *p, HrGuest *guest)
{
	ReconcileJob *job = reconcile_job_new(p, guest);

	if (reconcile_slice(p, job, g_get_monotonic_time() + RECONCILE_SLICE_US)) {
		reconcile_job_free(job);
		return;
	}
	p->reconcile = job;
	p->reconcile_id = g_idle_add_full(G_PRIORITY_DEFAULT_IDLE, reconcile_cb, p, NULL);
}

void
prep_reconcile_stop(HrPrepare *p)
{
	g_clear_handle_id(&p->reconcile_id, g_source_remove);
	g_clear_pointer(&p->reconcile, reconcile_job_free);
}

void
prep_reconcile_guests(HrPrepare *p)
{
	GPtrArray *guests = hr_core_get_guests(p->core);

	/* one at a time: the others when it ended (reconcile_all stays set) */
	if (!p->reconcile_all || p->reconcile != NULL)
		return;
	p->reconcile_all = FALSE;
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		GuestPlanState *gs;
		/* a resync in progress is not the guest's whole held set yet */
		if (!hr_guest_is_connected(guest) || !hr_guest_is_ready(guest))
			continue;
		gs = prep_get_gstate(p, guest);
		if (gs->reconciled_gen == hr_guest_get_held_gen(guest) &&
		    hr_guest_get_held_gen(guest) != 0)
			continue;
		gs->reconciled_gen = hr_guest_get_held_gen(guest);
		reconcile_guest(p, guest);
		if (p->reconcile != NULL) {
			p->reconcile_all = TRUE;
			return;
		}
	}
}

void
hr_prepare_held_changed(HrPrepare *p, HrGuest *guest)
{
	(void)guest;
	p->reconcile_all = TRUE;
	prep_kick(p);
}
