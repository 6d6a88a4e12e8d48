/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The executor's state that its files share (hr-prepare-private.h): the
 * tables of runs, guests and operations, kicking the next tick, the
 * executor's news to its listeners, and submitting its own requests.
 * The bottom of the executor: it calls none of its other files.
 */

#define G_LOG_DOMAIN "HrPrepare"

#include "hr-prepare-private.h"

/* a table keyed by guest id (guint64 *, owned) */
GHashTable *
prep_guest_table_new(GDestroyNotify value_free)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, value_free);
}

void
prep_guest_plan_state_free(GuestPlanState *gs)
{
	g_clear_pointer(&gs->map, hr_thpmap_free);
	g_free(gs);
}

void
prep_interrupted_free(Interrupted *it)
{
	g_free(it->res_id);
	g_free(it->guest_key);
	g_free(it);
}

void
prep_measure_free(Measure *m)
{
	g_free(m->res_id);
	g_free(m);
}

void
prep_run_free(Run *run)
{
	g_hash_table_unref(run->tried);
	g_hash_table_unref(run->strikes);
	g_free(run->why_not);
	if (run->pool_cancel != NULL) {
		g_cancellable_cancel(run->pool_cancel);
		g_object_unref(run->pool_cancel);
	}
	g_free(run->last_plan);
	g_free(run);
}

void
prep_op_free(Op *op)
{
	g_free(op->res_id);
	g_free(op->guest_key);
	g_clear_pointer(&op->request, hr_request_unref);
	g_clear_pointer(&op->returning, g_array_unref);
	g_free(op);
}

Run *
prep_get_run(HrPrepare *p, HrReservation *r)
{
	Run *run = g_hash_table_lookup(p->runs, r->id);
	if (run == NULL) {
		run = g_new0(Run, 1);
		run->tried = prep_guest_table_new((GDestroyNotify)g_hash_table_unref);
		run->strikes = prep_guest_table_new(NULL);
		g_hash_table_insert(p->runs, g_strdup(r->id), run);
	}
	return run;
}

GuestPlanState *
prep_get_gstate(HrPrepare *p, HrGuest *guest)
{
	GuestPlanState *gs = g_hash_table_lookup(p->gstates, &(guint64){hr_guest_get_id(guest)});
	if (gs == NULL) {
		gs = g_new0(GuestPlanState, 1);
		g_hash_table_insert(
		    p->gstates, g_memdup2(&(guint64){hr_guest_get_id(guest)}, sizeof(guint64)), gs);
	}
	return gs;
}

static gboolean
kick_cb(gpointer user_data)
{
	HrPrepare *p = user_data;
	p->kick_id = 0;
	p->tick(p); /* hr_prepare_tick(), which is above this file */
	return G_SOURCE_REMOVE;
}

/* drive again soon, from the main loop */
void
prep_kick(HrPrepare *p)
{
	if (p->kick_id == 0)
		p->kick_id = g_idle_add(kick_cb, p);
}

/* something we did changed the host: decide on nothing read before it */
void
prep_host_changed(HrPrepare *p)
{
	p->epoch++;
}

void
hr_prepare_host_changed(HrPrepare *p)
{
	prep_host_changed(p);
}

typedef struct {
	HrPrepare *prepare;
	const HrPrepareEvent *event;
} Emission;

static void
invoke(GCallback func, gpointer func_data, gpointer invoke_data)
{
	Emission *e = invoke_data;
	((HrPrepareFunc)(void (*)(void))func)(e->prepare, e->event, func_data);
}

void
prep_emit(HrPrepare *p, HrPrepareEventKind kind, HrReservation *r, gint64 duration_us)
{
	HrPrepareEvent event = {.kind = kind, .reservation = r, .duration_us = duration_us};
	Emission e = {.prepare = p, .event = &event};
	hr_listeners_emit(p->listeners, invoke, &e);
}

/* our own requests: the events they raise while submitted are not the API's */
HrRequest *
prep_submit(HrPrepare *p, HrGuest *guest, const HrRequestParams *params, GError **error)
{
	HrRequest *request;

	p->submitting++;
	request = hr_core_submit(p->core, guest, params, error);
	p->submitting--;
	return request;
}

/* the guest entry of @id, or NULL */
HrGuest *
prep_find_guest(HrPrepare *p, guint64 id)
{
	GPtrArray *guests = hr_core_get_guests(p->core);
	for (guint i = 0; i < guests->len; i++) {
		HrGuest *guest = g_ptr_array_index(guests, i);
		if (hr_guest_get_id(guest) == id)
			return guest;
	}
	return NULL;
}
