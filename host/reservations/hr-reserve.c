/* SPDX-License-Identifier: GPL-2.0-only */

/*
 * The standing reserve (hr-reserve.h): its parts are the executor's
 * reservations, so this file only decides when a part is started, given
 * back or handed over; what a part holds is the executor's business.
 */

#define G_LOG_DOMAIN "HrReserve"

#include "hr-reserve.h"

#include <string.h>

#define BLOCK_BYTES (G_GUINT64_CONSTANT(2) << 20)
/* a part: filled in one go by the executor, given back in one go */
#define PART_BLOCKS 256 /* 512 MiB */
/* after a donor gave blocks back for its own pressure: no refill this long */
#define GUEST_PRESSURE_PAUSE_US (60 * G_USEC_PER_SEC)
/* under host pressure: one part back at most this often */
#define GIVE_BACK_EVERY_US (5 * G_USEC_PER_SEC)
/* a part that ended short (no more sources): the next one waits this long */
#define SHORT_BACKOFF_US (30 * G_USEC_PER_SEC)

struct _HrReserve {
	const HrConfig *config;
	HrReservationStore *store;
	HrReserveExecutor exec;
	gpointer executor;
	guint64 bytes; /* to keep; 0: none */
	gint node;     /* or HR_RESERVATION_ANY_NODE */
	gchar *conf;   /* config->reserve as last applied */
	gboolean conf_seen;
	gchar *filling;	     /* the id of the part being filled, or NULL */
	gint64 next_fill_us; /* monotonic: the rate limit */
	gint64 next_give_back_us;
	gboolean pressure_known;
	guint64 pressure_returns;
	gint64 guest_pressure_until;
	const gchar *paused; /* why the refill waits, or NULL */
	guint64 taken_blocks;
	guint64 given_back_blocks;
	gint64 short_since_us; /* a take left it short: when (monotonic), else 0 */
	gint64 last_refill_ms; /* how long the last refill after a take took, -1 none yet */
};

gboolean
hr_reserve_parse(const gchar *str, guint64 *bytes, gint *node, GError **error)
{
	g_autofree gchar *size = NULL;
	const gchar *at;

	*bytes = 0;
	*node = HR_RESERVATION_ANY_NODE;
	if (str == NULL || *str == '\0' || g_strcmp0(str, "0") == 0)
		return TRUE;
	at = strchr(str, '@');
	size = at != NULL ? g_strndup(str, at - str) : g_strdup(str);
	if (!hr_parse_size(size, bytes)) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
			    "reserve: '%s' is not SIZE[@NODE] such as \"10G\" or \"512M@1\"", str);
		return FALSE;
	}
	if (at != NULL) {
		gchar *end = NULL;
		guint64 n = g_ascii_strtoull(at + 1, &end, 10);
		if (end == at + 1 || *end != '\0' || n > 1023) {
			g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
				    "reserve: '%s': the node after @ must be a number from 0 to "
				    "1023",
				    str);
			return FALSE;
		}
		*node = (gint)n;
	}
	return TRUE;
}

gboolean
hr_reserve_is_part(const HrReservation *r)
{
	return g_strcmp0(r->requester, HR_RESERVE_REQUESTER) == 0;
}

HrReserve *
hr_reserve_new(const HrConfig *config, HrReservationStore *store, const HrReserveExecutor *exec,
	       gpointer executor)
{
	HrReserve *reserve = g_new0(HrReserve, 1);
	reserve->config = config;
	reserve->store = store;
	reserve->exec = *exec;
	reserve->executor = executor;
	reserve->node = HR_RESERVATION_ANY_NODE;
	reserve->last_refill_ms = -1;
	return reserve;
}

void
hr_reserve_free(HrReserve *reserve)
{
	if (reserve == NULL)
		return;
	g_free(reserve->conf);
	g_free(reserve->filling);
	g_free(reserve);
}

gboolean
hr_reserve_set(HrReserve *reserve, guint64 bytes, gint node, GError **error)
{
	if (bytes > 0 && !reserve->config->hold_in_pool) {
		g_set_error(error, HR_RESERVATION_ERROR, HR_RESERVATION_ERROR_INVALID,
			    "a standing reserve is held in the hugetlb pool, and hold_in_pool is "
			    "false in hugeroomd.conf");
		return FALSE;
	}
	if (bytes != reserve->bytes || node != reserve->node)
		g_message("standing reserve: %" G_GUINT64_FORMAT " MiB on node %d (-1: any)",
			  bytes >> 20, node);
	reserve->bytes = bytes;
	reserve->node = node;
	reserve->next_fill_us = 0;
	/* until a reload changes reserve= in the config (an API's set holds till then) */
	reserve->conf_seen = TRUE;
	g_free(reserve->conf);
	reserve->conf = g_strdup(reserve->config->reserve);
	return TRUE;
}

static gboolean
part_live(const HrReservation *r)
{
	return hr_reserve_is_part(r) && hr_reservation_state_is_live(r->state);
}

/* blocks the ready parts hold, and those the part being filled is for */
static void
count(HrReserve *reserve, guint64 *ready, guint64 *filling, guint *parts)
{
	GPtrArray *list = hr_reservation_store_list(reserve->store);
	*ready = *filling = 0;
	*parts = 0;
	for (guint i = 0; i < list->len; i++) {
		const HrReservation *r = g_ptr_array_index(list, i);
		if (!part_live(r))
			continue;
		(*parts)++;
		if (r->state == HR_RESERVATION_READY)
			*ready += r->pool_blocks;
		else
			*filling += r->need_blocks;
	}
}

/* a reservation somebody asked for is being prepared: it goes first */
static gboolean
demand(HrReserve *reserve)
{
	GPtrArray *list = hr_reservation_store_list(reserve->store);
	for (guint i = 0; i < list->len; i++) {
		const HrReservation *r = g_ptr_array_index(list, i);
		if (!hr_reserve_is_part(r) &&
		    (r->state == HR_RESERVATION_CREATED || r->state == HR_RESERVATION_IN_PROGRESS))
			return TRUE;
	}
	return FALSE;
}

/* give the newest part back (its pool blocks to the host, its holds to the guests) */
static gboolean
give_back_newest(HrReserve *reserve, const gchar *why)
{
	GPtrArray *list = hr_reservation_store_list(reserve->store);
	g_autoptr(GError) error = NULL;

	for (guint i = list->len; i-- > 0;) {
		HrReservation *r = g_ptr_array_index(list, i);
		guint64 blocks;
		if (!part_live(r))
			continue;
		blocks = r->state == HR_RESERVATION_READY ? r->pool_blocks : r->obtained;
		g_message("standing reserve: giving part %s back (%" G_GUINT64_FORMAT
			  " blocks): %s",
			  r->id, blocks, why);
		if (!reserve->exec.release(reserve->executor, r->id, &error)) {
			g_warning("standing reserve: %s", error->message);
			return FALSE;
		}
		reserve->given_back_blocks += blocks;
		if (g_strcmp0(reserve->filling, r->id) == 0)
			g_clear_pointer(&reserve->filling, g_free);
		return TRUE;
	}
	return FALSE;
}

guint64
hr_reserve_take(HrReserve *reserve, HrReservation *r)
{
	GPtrArray *list = hr_reservation_store_list(reserve->store);
	guint64 moved = 0;

	if (hr_reserve_is_part(r))
		return 0;
	for (guint i = 0; i < list->len && r->pool_blocks < r->need_blocks; i++) {
		HrReservation *part = g_ptr_array_index(list, i);
		g_autoptr(GError) error = NULL;
		guint64 k;
		guint holds;

		/* a part being filled gives what it holds so far too (it fills the rest) */
		if (!part_live(part) || part->pool_blocks == 0)
			continue;
		if ((r->node >= 0 && part->planned_node != r->node) ||
		    (r->planned_node >= 0 && part->planned_node != r->planned_node))
			continue;
		k = MIN(r->need_blocks - r->pool_blocks, part->pool_blocks);
		/* the guests' blocks behind them go with the pool blocks, in proportion */
		holds = k == part->pool_blocks
			    ? part->holds->len
			    : (guint)((guint64)part->holds->len * k / part->pool_blocks);
		hr_reservation_move_holds(part, r, holds);
		part->pool_blocks -= k;
		hr_reservation_set_obtained(reserve->store, part, part->pool_blocks);
		r->pool_blocks += k;
		r->planned_node = part->planned_node;
		moved += k;
		hr_reservation_touch(reserve->store, part);
		if (part->pool_blocks == 0 && part->state == HR_RESERVATION_READY &&
		    !reserve->exec.consume(reserve->executor, part->id, &error))
			g_warning("standing reserve: %s", error->message);
	}
	if (moved > 0) {
		hr_reservation_touch(reserve->store, r);
		reserve->taken_blocks += moved;
		if (reserve->short_since_us == 0)
			reserve->short_since_us = g_get_monotonic_time();
		g_info("standing reserve: reservation %s took %" G_GUINT64_FORMAT " blocks", r->id,
		       moved);
	}
	return moved;
}

static void
apply_config(HrReserve *reserve)
{
	g_autoptr(GError) error = NULL;
	guint64 bytes;
	gint node;

	if (reserve->conf_seen && g_strcmp0(reserve->conf, reserve->config->reserve) == 0)
		return;
	reserve->conf_seen = TRUE;
	g_free(reserve->conf);
	reserve->conf = g_strdup(reserve->config->reserve);
	if (!hr_reserve_parse(reserve->config->reserve, &bytes, &node, &error) ||
	    !hr_reserve_set(reserve, bytes, node, &error))
		g_warning("hugeroomd.conf: %s; keeping %" G_GUINT64_FORMAT " MiB", error->message,
			  reserve->bytes >> 20);
}

gboolean
hr_reserve_wants_ticks(HrReserve *reserve)
{
	return reserve->bytes > 0 ||
	       (reserve->conf_seen ? g_strcmp0(reserve->conf, reserve->config->reserve) != 0
				   : reserve->config->reserve != NULL);
}

void
hr_reserve_tick(HrReserve *reserve, const HrHostState *host)
{
	gint64 now = g_get_monotonic_time();
	guint64 target, ready, filling, returns;
	guint parts;
	guint limit = reserve->config->reserve_pause_psi * 100;

	apply_config(reserve);
	target = (reserve->bytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
	count(reserve, &ready, &filling, &parts);
	reserve->paused = NULL;

	/* a donor that gave blocks back for its own pressure: the reserve's go first */
	returns = reserve->exec.pressure_returns(reserve->executor);
	if (reserve->pressure_known && returns > reserve->pressure_returns) {
		reserve->guest_pressure_until = now + GUEST_PRESSURE_PAUSE_US;
		if (give_back_newest(reserve,
				     "a donor gave blocks back for its own memory pressure"))
			count(reserve, &ready, &filling, &parts);
	}
	reserve->pressure_known = TRUE;
	reserve->pressure_returns = returns;
	if (host->has_psi && host->psi_full_avg10 >= limit && now >= reserve->next_give_back_us) {
		reserve->next_give_back_us = now + GIVE_BACK_EVERY_US;
		if (give_back_newest(reserve, "the host is under memory pressure (PSI full)"))
			count(reserve, &ready, &filling, &parts);
	}
	/* more than asked (a smaller reserve set): the newest parts go */
	while (parts > 0 && ready + filling > target) {
		if (!give_back_newest(reserve, "more than the reserve's size"))
			break;
		count(reserve, &ready, &filling, &parts);
	}

	if (reserve->filling != NULL) {
		HrReservation *r = hr_reservation_store_find(reserve->store, reserve->filling);
		if (r == NULL || !hr_reservation_state_is_live(r->state) ||
		    r->state == HR_RESERVATION_READY) {
			if (r == NULL || r->state != HR_RESERVATION_READY || r->partial)
				reserve->next_fill_us =
				    MAX(reserve->next_fill_us, now + SHORT_BACKOFF_US);
			g_clear_pointer(&reserve->filling, g_free);
		}
	}
	if (ready >= target && filling == 0) {
		if (reserve->short_since_us != 0 && target > 0) {
			reserve->last_refill_ms = (now - reserve->short_since_us) / 1000;
			g_info("standing reserve: refilled to %" G_GUINT64_FORMAT
			       " blocks in %" G_GINT64_FORMAT " ms",
			       ready, reserve->last_refill_ms);
		}
		reserve->short_since_us = 0;
		return;
	}
	if (demand(reserve))
		reserve->paused = "a reservation is being prepared";
	else if (host->has_psi && host->psi_some_avg10 >= limit)
		reserve->paused = "host memory pressure";
	else if (now < reserve->guest_pressure_until)
		reserve->paused = "a donor's memory pressure";
	else if (filling > 0)
		reserve->paused = NULL; /* a part is being filled */
	else if (now < reserve->next_fill_us)
		reserve->paused = "rate limit";
	if (reserve->paused != NULL || filling > 0 || !reserve->config->hold_in_pool) {
		if (!reserve->config->hold_in_pool)
			reserve->paused = "hold_in_pool is false";
		return;
	}
	{
		guint64 blocks = MIN(target - ready, (guint64)PART_BLOCKS);
		g_autoptr(GError) error = NULL;
		HrReservation *part = reserve->exec.create(reserve->executor, blocks * BLOCK_BYTES,
							   reserve->node, &error);
		if (part == NULL) {
			g_warning("standing reserve: cannot start a part: %s", error->message);
			reserve->next_fill_us = now + SHORT_BACKOFF_US;
			return;
		}
		reserve->filling = g_strdup(part->id);
		/* the rate limit: this part's MiB at reserve_rate_mb MiB/s before the next */
		reserve->next_fill_us = now + (gint64)(blocks * 2 * G_USEC_PER_SEC /
						       MAX(reserve->config->reserve_rate_mb, 1));
		g_info("standing reserve: filling part %s of %" G_GUINT64_FORMAT
		       " blocks (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " ready)",
		       part->id, blocks, ready, target);
	}
}

void
hr_reserve_get_view(HrReserve *reserve, HrReserveView *view)
{
	*view = (HrReserveView){0};
	count(reserve, &view->blocks_ready, &view->blocks_filling, &view->parts);
	view->bytes = reserve->bytes;
	view->node = reserve->node;
	view->blocks = (reserve->bytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
	view->paused = reserve->paused;
	view->taken_blocks = reserve->taken_blocks;
	view->given_back_blocks = reserve->given_back_blocks;
	view->last_refill_ms = reserve->last_refill_ms;
}
