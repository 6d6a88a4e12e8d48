/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * A reservation (hr-reservation.h): its states and the moves between them,
 * its steps and holds. The store that keeps reservations is
 * hr-reservation-store.c, the state file hr-reservation-file.c.
 */

#define G_LOG_DOMAIN "HrReservation"

#include "hr-reservation.h"

#include <errno.h>

#include "hr-guest.h"

G_DEFINE_QUARK(hr - reservation - error - quark, hr_reservation_error)

static const gchar *state_names[HR_RESERVATION_N_STATES] = {
    [HR_RESERVATION_CREATED] = "created", [HR_RESERVATION_IN_PROGRESS] = "in-progress",
    [HR_RESERVATION_READY] = "ready",	  [HR_RESERVATION_CONSUMED] = "consumed",
    [HR_RESERVATION_EXPIRED] = "expired", [HR_RESERVATION_CANCELLED] = "cancelled",
    [HR_RESERVATION_FAILED] = "failed",
};

static const gchar *step_kind_names[HR_STEP_N_KINDS] = {
    [HR_STEP_FREE] = "free",
    [HR_STEP_COMPACT] = "compact",
    [HR_STEP_DONATE] = "donate",
    [HR_STEP_RESERVE] = "reserve",
};

static const gchar *step_state_names[HR_STEP_N_STATES] = {
    [HR_STEP_RUNNING] = "running",
    [HR_STEP_DONE] = "done",
    [HR_STEP_SHORT] = "short",
    [HR_STEP_FAILED] = "failed",
};

static gint
name_index(const gchar *const *names, guint n, const gchar *str)
{
	for (guint i = 0; i < n; i++) {
		if (g_strcmp0(str, names[i]) == 0)
			return i;
	}
	return -1;
}

const gchar *
hr_step_kind_to_string(HrStepKind kind)
{
	return kind < HR_STEP_N_KINDS ? step_kind_names[kind] : "unknown";
}

gint
hr_step_kind_from_string(const gchar *str)
{
	return name_index(step_kind_names, HR_STEP_N_KINDS, str);
}

const gchar *
hr_step_state_to_string(HrStepState state)
{
	return state < HR_STEP_N_STATES ? step_state_names[state] : "unknown";
}

gint
hr_step_state_from_string(const gchar *str)
{
	return name_index(step_state_names, HR_STEP_N_STATES, str);
}

void
hr_reservation_step_set_state(HrReservationStep *step, HrStepState state, const gchar *detail)
{
	step->state = state;
	g_free(step->detail);
	step->detail = g_strdup(detail);
}

const gchar *
hr_reservation_state_to_string(HrReservationState state)
{
	return state < HR_RESERVATION_N_STATES ? state_names[state] : "unknown";
}

gint
hr_reservation_state_from_string(const gchar *str)
{
	for (guint i = 0; i < HR_RESERVATION_N_STATES; i++) {
		if (g_strcmp0(str, state_names[i]) == 0)
			return i;
	}
	return -1;
}

gboolean
hr_reservation_state_is_settled(HrReservationState state)
{
	return state != HR_RESERVATION_CREATED && state != HR_RESERVATION_IN_PROGRESS;
}

gboolean
hr_reservation_state_is_live(HrReservationState state)
{
	return state == HR_RESERVATION_IN_PROGRESS || state == HR_RESERVATION_READY;
}

gboolean
hr_reservation_transition_allowed(HrReservationState from, HrReservationState to)
{
	switch (from) {
	case HR_RESERVATION_CREATED:
		return to == HR_RESERVATION_IN_PROGRESS || to == HR_RESERVATION_CANCELLED ||
		       to == HR_RESERVATION_FAILED;
	case HR_RESERVATION_IN_PROGRESS:
		return to == HR_RESERVATION_READY || to == HR_RESERVATION_CANCELLED ||
		       to == HR_RESERVATION_FAILED;
	case HR_RESERVATION_READY:
		return to == HR_RESERVATION_CONSUMED || to == HR_RESERVATION_EXPIRED ||
		       to == HR_RESERVATION_CANCELLED;
	default:
		/* consumed, expired, cancelled and failed are final */
		return FALSE;
	}
}

gboolean
hr_parse_size(const gchar *str, guint64 *bytes)
{
	gchar *end = NULL;
	guint64 v, shift = 0;

	if (str == NULL || !g_ascii_isdigit(*str))
		return FALSE;
	errno = 0;
	v = g_ascii_strtoull(str, &end, 10);
	if (errno != 0)
		return FALSE;
	switch (g_ascii_toupper(*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		return FALSE;
	}
	if (*end != '\0') {
		end++;
		/* "1G", "1GiB", "1GB" all mean 2^30 here */
		if (g_ascii_strcasecmp(end, "") != 0 && g_ascii_strcasecmp(end, "iB") != 0 &&
		    g_ascii_strcasecmp(end, "B") != 0)
			return FALSE;
	}
	/* a reservation's bytes are a signed 64-bit number in the API and the state file */
	if (v == 0 || v > ((guint64)G_MAXINT64 >> shift))
		return FALSE;
	*bytes = v << shift;
	return TRUE;
}

static void
hr_reservation_step_free(HrReservationStep *step)
{
	g_free(step->guest);
	g_free(step->guest_key);
	g_free(step->detail);
	g_free(step);
}

/*
 * every change of any reservation's holds; atomic, as the state writer's
 * check frees the holds it read back in its thread
 */
static gsize hold_changes;

guint64
hr_reservation_hold_changes(void)
{
	return (guint64)g_atomic_pointer_get(&hold_changes);
}

void
hr_reservation_hold_free(HrReservationHold *hold)
{
	g_atomic_pointer_add(&hold_changes, 1);
	g_free(hold->guest_key);
	g_free(hold->guest_uuid);
	g_free(hold->guest_name);
	g_free(hold);
}

void
hr_reservation_hold_set_key(HrReservationHold *hold, const gchar *guest_key)
{
	g_atomic_pointer_add(&hold_changes, 1);
	g_free(hold->guest_key);
	hold->guest_key = g_strdup(guest_key);
	g_free(hold->guest_uuid);
	hold->guest_uuid = hr_guest_key_dup_uuid(guest_key);
}

HrReservation *
hr_reservation_new(void)
{
	HrReservation *r = g_new0(HrReservation, 1);
	r->planned_node = -1;
	r->steps = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_step_free);
	r->holds = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_hold_free);
	return r;
}

void
hr_reservation_free(HrReservation *r)
{
	g_free(r->id);
	g_free(r->requester);
	g_free(r->idempotency_key);
	g_free(r->request_digest);
	g_free(r->owner);
	g_free(r->reason);
	g_ptr_array_unref(r->steps);
	g_ptr_array_unref(r->holds);
	g_free(r);
}

HrReservationStep *
hr_reservation_add_step(HrReservation *r, HrStepKind kind, gint node)
{
	HrReservationStep *s = g_new0(HrReservationStep, 1);
	s->kind = kind;
	s->node = node;
	s->state = HR_STEP_RUNNING;
	s->started_at = g_get_real_time();
	g_ptr_array_add(r->steps, s);
	return s;
}

void
hr_reservation_add_hold(HrReservation *r, const gchar *guest_key, const gchar *guest_name,
			guint64 gpa)
{
	HrReservationHold *h = g_new0(HrReservationHold, 1);
	hr_reservation_hold_set_key(h, guest_key);
	h->guest_name = g_strdup(guest_name);
	h->gpa = gpa;
	h->held_at = g_get_real_time();
	g_ptr_array_add(r->holds, h);
}

/*
 * Move the first @n holds of @from to the end of @to, in order: one pass
 * over @from (stealing index 0 @n times moved the rest @n times, O(n * len)
 * on the main loop when a release gives a queue's worth of a million
 * holds back per turn).
 */
static void
holds_steal_head(GPtrArray *from, GPtrArray *to, guint n)
{
	for (guint i = 0; i < n; i++)
		g_ptr_array_add(to, g_ptr_array_index(from, i));
	g_ptr_array_set_free_func(from, NULL);
	g_ptr_array_remove_range(from, 0, n);
	g_ptr_array_set_free_func(from, (GDestroyNotify)hr_reservation_hold_free);
}

GPtrArray *
hr_reservation_take_holds(HrReservation *r, guint max)
{
	GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)hr_reservation_hold_free);
	guint n = MIN(max, r->holds->len);
	g_atomic_pointer_add(&hold_changes, 1);
	/* holds are appended as they come: the head is the oldest */
	holds_steal_head(r->holds, out, n);
	r->blocks_returned += n;
	return out;
}

guint
hr_reservation_move_holds(HrReservation *from, HrReservation *to, guint max)
{
	guint n = MIN(max, from->holds->len);
	g_atomic_pointer_add(&hold_changes, 1);
	holds_steal_head(from->holds, to->holds, n);
	return n;
}
