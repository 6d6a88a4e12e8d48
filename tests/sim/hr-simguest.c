/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * hr-simguest: many simulated hugeroom devices in one process.
 *
 * Each simulated guest is one connection to hugeroomd's VM socket that
 * speaks the device <-> daemon channel exactly as the QEMU device does
 * (SPEC Part 2): HELLO with a name, UUID and RAM layout, the (empty) resync
 * ended by a DEVICE_STATE, then STATUS reports at the interval WELCOME or
 * SET_INTERVAL gives, and answers to HOST_CMDs as the guest driver would
 * (SPEC 1.6.3-1.6.8): HOLD, PROGRESS and RESULT for EVACUATE and CAPTURE,
 * RETURNED and RESULT for RETURN, a STATUS for REPORT, CANCEL stopping the
 * running command.
 *
 * The guest memory is a model, not memory: per 2 MiB block its free pages
 * (0-512), whether it is held, and whether it is pinned. It is generated
 * from --seed and the guest's index, so that a run is reproducible: each
 * guest uses 30-80 % of its memory, part in whole blocks, part scattered;
 * a few blocks are unmovable pageblocks, and --fail-rate of the movable
 * ones hold a pinned page and fail with R_UNMOVABLE when evacuated.
 *
 * Evacuation runs in simulated time: a block costs its used pages times
 * --migrate-ns, worked off in 10 ms ticks, so a guest does a few hundred
 * blocks a second, as TCG guests do. Admission follows SPEC 1.6.3.2 item 6:
 * a block that would take its zone below the high watermark fails R_NOMEM
 * and ends the command.
 */

#define G_LOG_DOMAIN "HrSimGuest"

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>
#include <string.h>

#include "hr-codec.h"

#define PAGES 512
#define BLOCK VIRTIO_HUGEROOM_BLOCK_SIZE
#define GiB (G_GUINT64_CONSTANT(1) << 30)
#define TICK_MS 10
#define PROGRESS_MS 200
#define LOW_END (2 * GiB)  /* RAM below the PCI hole */
#define HIGH_START (4 * GiB)

enum {
	BLK_HELD = 1 << 0,
	BLK_UNMOVABLE = 1 << 1, /* an unmovable pageblock: never a candidate */
	BLK_PINNED = 1 << 2,	/* movable, but a page is pinned: R_UNMOVABLE */
};

static gint opt_guests = 1;
static gint opt_mem_gib = 4;
static gchar *opt_socket;
static gint opt_interval_ms = -1;
static gint opt_candidates = 256;
static gdouble opt_fail_rate = 0.05;
static gint opt_seed = 1;
static gchar *opt_prefix;
static gint opt_duration_s;
static gint opt_migrate_ns = 5000;
static gint opt_floor_mb;
static gint opt_resync_blocks;

typedef struct _Sim Sim;

typedef struct {
	guint64 request_id;
	guint16 type;
	guint32 count;
	guint64 budget_pages;
	guint32 budget_ms;
	GArray *order; /* guint32 block indexes to try, in order */
	guint next;
	guint32 tried;
	guint32 freed;
	guint32 failed[VIRTIO_HUGEROOM_NR_REASONS];
	guint64 pages;
	gint64 started;
	gint64 last_progress;
	gboolean cancelled;
	gboolean stop_nomem;
	gboolean stop_budget;
	GArray *hold; /* guint64 gpas freed, not yet sent */
} Job;

typedef struct {
	Sim *sim;
	guint index;
	gchar name[32];
	guint8 uuid[16];
	guint64 mem;
	guint64 n_blocks;
	guint64 low_blocks; /* blocks below LOW_END: zone DMA32 */
	guint16 *free;
	guint8 *flags;
	guint64 zone_free[2];  /* pages */
	guint64 zone_taken[2]; /* pages the guest reused for migrated pages */
	guint64 zone_managed[2];
	guint32 held;
	guint64 seq;
	GSocket *socket;
	GSource *in_source;
	GSource *out_source;
	GByteArray *outbuf;
	HrFrameReader *reader;
	gboolean welcomed;
	gboolean closed;
	guint32 interval_ms;
	guint status_id;
	HrChanDeviceState state;
	Job *job;
	guint job_id;
	HrStatus *cached; /* zones and candidates; rebuilt when dirty */
	gboolean dirty;
	gint64 start_us;
} SimGuest;

struct _Sim {
	GMainLoop *loop;
	GPtrArray *guests;
	guint welcomed;
	guint closed;
	guint64 statuses;
	gboolean announced;
};

static guint64
block_gpa(SimGuest *g, guint64 i)
{
	return i < g->low_blocks ? i * BLOCK : HIGH_START + (i - g->low_blocks) * BLOCK;
}

static gboolean
gpa_block(SimGuest *g, guint64 gpa, guint64 *index)
{
	if (gpa % BLOCK != 0)
		return FALSE;
	if (gpa < g->low_blocks * BLOCK) {
		*index = gpa / BLOCK;
		return TRUE;
	}
	if (gpa < HIGH_START)
		return FALSE;
	*index = g->low_blocks + (gpa - HIGH_START) / BLOCK;
	return *index < g->n_blocks;
}

static guint
block_zone(SimGuest *g, guint64 i)
{
	return i < g->low_blocks ? 0 : 1;
}

/* a deterministic hash of the seed, the guest and a block */
static guint32
sim_hash(guint32 seed, guint32 guest, guint64 block)
{
	guint64 x = ((guint64)seed << 40) ^ ((guint64)guest << 24) ^ block;
	x ^= x >> 33;
	x *= G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= G_GUINT64_CONSTANT(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return (guint32)x;
}

static void
sim_guest_generate(SimGuest *g)
{
	g_autoptr(GRand) rand = g_rand_new_with_seed(sim_hash(opt_seed, g->index, 0));
	gdouble used = 0.3 + 0.5 * g_rand_double(rand);

	g->n_blocks = g->mem / BLOCK;
	g->low_blocks = MIN(g->n_blocks, LOW_END / BLOCK);
	g->free = g_new0(guint16, g->n_blocks);
	g->flags = g_new0(guint8, g->n_blocks);
	for (guint64 i = 0; i < g->n_blocks; i++) {
		gdouble r = g_rand_double(rand);
		guint z = block_zone(g, i);
		/* the kernel, DMA and early allocations sit in the first 16 MiB */
		if (i < 8) {
			g->flags[i] = BLK_UNMOVABLE;
		} else if (r < (1.0 - used) * 0.35) {
			g->free[i] = PAGES;
		} else if (r < (1.0 - used) * 0.35 + used * 0.55) {
			g->free[i] = 0;
		} else {
			/* scattered: mostly a little free, some nearly empty */
			gdouble f = g_rand_double(rand);
			g->free[i] = 1 + (guint16)(f * f * (PAGES - 2));
		}
		if (i >= 8 && g->free[i] < PAGES && g_rand_double(rand) < 0.03)
			g->flags[i] = BLK_UNMOVABLE;
		else if (g->free[i] < PAGES &&
			 sim_hash(opt_seed + 1, g->index, i) < opt_fail_rate * G_MAXUINT32)
			g->flags[i] |= BLK_PINNED;
		g->zone_free[z] += g->free[i];
		g->zone_managed[z] += PAGES;
	}
	/* held when it connects (a daemon restarted under it): its resync lists them */
	for (guint64 i = g->n_blocks; i-- > 8 && g->held < (guint64)opt_resync_blocks;) {
		if (g->flags[i] & BLK_UNMOVABLE)
			continue;
		g->zone_free[block_zone(g, i)] -= g->free[i];
		g->free[i] = 0;
		g->flags[i] = BLK_HELD;
		g->held++;
	}
	g->dirty = TRUE;
}

static void sim_guest_close(SimGuest *g, const gchar *why);

static gboolean
sim_guest_out_cb(GSocket *socket, GIOCondition cond, gpointer user_data);

static void
sim_guest_flush(SimGuest *g)
{
	while (g->outbuf->len > 0 && !g->closed) {
		g_autoptr(GError) error = NULL;
		gssize n = g_socket_send(g->socket, (const gchar *)g->outbuf->data, g->outbuf->len,
					 NULL, &error);
		if (n < 0) {
			if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
				if (g->out_source == NULL) {
					g->out_source = g_socket_create_source(g->socket, G_IO_OUT,
									       NULL);
					g_source_set_callback(g->out_source,
							      (GSourceFunc)(GCallback)sim_guest_out_cb,
							      g, NULL);
					g_source_attach(g->out_source, NULL);
				}
				return;
			}
			sim_guest_close(g, error->message);
			return;
		}
		g_byte_array_remove_range(g->outbuf, 0, n);
	}
}

static gboolean
sim_guest_out_cb(GSocket *socket, GIOCondition cond, gpointer user_data)
{
	SimGuest *g = user_data;
	(void)socket;
	(void)cond;
	g_clear_pointer(&g->out_source, g_source_unref);
	sim_guest_flush(g);
	return G_SOURCE_REMOVE;
}

static void
sim_guest_send(SimGuest *g, guint16 type, GBytes *payload)
{
	g_autoptr(GBytes) frame = hr_chan_frame_encode(type, payload);
	gsize len;
	const guint8 *data = g_bytes_get_data(frame, &len);
	if (g->closed)
		return;
	g_byte_array_append(g->outbuf, data, len);
	if (g->out_source == NULL)
		sim_guest_flush(g);
}

static void
sim_guest_send_msg(SimGuest *g, GBytes *msg)
{
	g->state.msgs_relayed++;
	sim_guest_send(g, HR_CHAN_GUEST_MSG, msg);
}

static void
sim_guest_send_state(SimGuest *g)
{
	g_autoptr(GBytes) payload = NULL;
	g->state.num_held = g->held;
	payload = hr_chan_device_state_encode(&g->state);
	sim_guest_send(g, HR_CHAN_DEVICE_STATE, payload);
}

/* HOLDs with request id 0 for every block held, at most a command's worth each */
static void
sim_guest_send_resync(SimGuest *g)
{
	g_autoptr(GArray) gpas = g_array_new(FALSE, FALSE, sizeof(guint64));

	for (guint64 i = 0; i < g->n_blocks; i++) {
		if (g->flags[i] & BLK_HELD)
			g_array_append_val(gpas, *(guint64[]){block_gpa(g, i)});
	}
	for (guint off = 0; off < gpas->len; off += VIRTIO_HUGEROOM_MAX_CMD_BLOCKS) {
		guint n = MIN(gpas->len - off, VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
		g_autoptr(HrBlocks) b = hr_blocks_new(VIRTIO_HUGEROOM_MSG_HOLD, n);
		g_autoptr(GBytes) msg = NULL;
		memcpy(b->gpas, &g_array_index(gpas, guint64, off), n * sizeof(guint64));
		msg = hr_blocks_encode(b);
		sim_guest_send_msg(g, msg);
	}
}

static void
sim_zone_fill(SimGuest *g, HrZone *z, guint zi, guint64 start_pfn, guint64 spanned)
{
	guint64 whole = 0, partial = 0, rest;
	guint64 first = zi == 0 ? 0 : g->low_blocks;
	guint64 last = zi == 0 ? g->low_blocks : g->n_blocks;

	g_strlcpy(z->name, zi == 0 ? "DMA32" : "Normal", sizeof(z->name));
	z->zone_idx = zi == 0 ? 1 : 2;
	z->start_pfn = start_pfn;
	z->spanned_pages = spanned;
	z->managed_pages = g->zone_managed[zi];
	z->free_pages = g->zone_free[zi] - MIN(g->zone_free[zi], g->zone_taken[zi]);
	z->wmark_min = z->managed_pages / 512;
	z->wmark_low = z->wmark_min * 5 / 4;
	z->wmark_high = z->wmark_min * 3 / 2;
	for (guint64 i = first; i < last; i++) {
		guint b;
		if (g->flags[i] & BLK_HELD)
			continue;
		if (g->free[i] == PAGES)
			whole++;
		b = g->free[i] == PAGES ? 0 : g->free[i] >= 448 ? 1 : g->free[i] >= 256 ? 2
		    : g->free[i] >= 64 ? 3 : g->free[i] >= 1 ? 4 : 5;
		if (!(g->flags[i] & BLK_UNMOVABLE))
			z->hist[b]++;
	}
	/* pages the guest reused come out of whole blocks first */
	whole -= MIN(whole, g->zone_taken[zi] / PAGES);
	partial = z->free_pages > whole * PAGES ? z->free_pages - whole * PAGES : 0;
	z->nr_free[10] = whole / 2;
	z->nr_free[9] = whole % 2;
	z->nr_free_pb_mt[VIRTIO_HUGEROOM_MT_MOVABLE] = whole * PAGES;
	rest = partial;
	z->nr_free[3] = rest / 10 / 8;
	rest -= z->nr_free[3] * 8;
	z->nr_free[2] = rest / 5 / 4;
	rest -= z->nr_free[2] * 4;
	z->nr_free[1] = rest / 3 / 2;
	rest -= z->nr_free[1] * 2;
	z->nr_free[0] = rest;
	z->free_pages = whole * PAGES + partial;
	z->pcp_count = 120;
	z->pcp_high = 744;
	z->pcp_batch = 63;
}

/* neither held nor unmovable, and inside one of @ranges if there are any */
static gboolean
sim_block_eligible(SimGuest *g, guint64 i, const HrRange *ranges, guint nr_ranges)
{
	guint64 gpa;

	if (g->flags[i] & (BLK_HELD | BLK_UNMOVABLE))
		return FALSE;
	if (nr_ranges == 0)
		return TRUE;
	gpa = block_gpa(g, i);
	for (guint r = 0; r < nr_ranges; r++) {
		if (gpa >= ranges[r].start && gpa + BLOCK <= ranges[r].end)
			return TRUE;
	}
	return FALSE;
}

/* counting sort of the eligible blocks by free pages, most first */
static GArray *
sim_guest_rank(SimGuest *g, const HrRange *ranges, guint nr_ranges, guint limit)
{
	g_autofree guint32 *bucket = g_new0(guint32, PAGES + 2);
	GArray *order = g_array_new(FALSE, FALSE, sizeof(guint32));
	guint32 *pos;
	guint64 n = 0;

	for (guint64 i = 0; i < g->n_blocks; i++) {
		if (!sim_block_eligible(g, i, ranges, nr_ranges))
			continue;
		bucket[PAGES - g->free[i] + 1]++;
		n++;
	}
	for (guint b = 1; b <= PAGES + 1; b++)
		bucket[b] += bucket[b - 1];
	g_array_set_size(order, n);
	pos = bucket;
	for (guint64 i = 0; i < g->n_blocks; i++) {
		if (!sim_block_eligible(g, i, ranges, nr_ranges))
			continue;
		g_array_index(order, guint32, pos[PAGES - g->free[i]]++) = (guint32)i;
	}
	if (limit > 0 && order->len > limit)
		g_array_set_size(order, limit);
	return order;
}

/* the zones and candidates, rebuilt only after the memory changed */
static HrStatus *
sim_guest_build(SimGuest *g)
{
	g_autoptr(GArray) cands = NULL;
	HrStatus *s;
	guint nz = g->n_blocks > g->low_blocks ? 2 : 1;
	guint64 free_total = 0;

	cands = sim_guest_rank(g, NULL, 0, opt_candidates);
	s = hr_status_new(nz, cands->len);
	s->build_ns = 40000 + 200 * cands->len;
	sim_zone_fill(g, &s->zones[0], 0, 0, HIGH_START >> 12);
	if (nz == 2)
		sim_zone_fill(g, &s->zones[1], 1, HIGH_START >> 12,
			      (g->n_blocks - g->low_blocks) * PAGES);
	for (guint z = 0; z < nz; z++) {
		s->mem_total_pages += s->zones[z].managed_pages;
		free_total += s->zones[z].free_pages;
	}
	s->mem_total_pages -= (guint64)g->held * PAGES;
	s->mem_free_pages = free_total;
	s->mem_available_pages = free_total + s->mem_total_pages / 10;
	s->held_blocks = g->held;
	s->page_shift = 12;
	s->pageblock_order = 9;
	for (guint c = 0; c < cands->len; c++) {
		guint32 i = g_array_index(cands, guint32, c);
		s->candidates[c].gpa = block_gpa(g, i);
		s->candidates[c].free_pages = g->free[i];
		s->candidates[c].migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
		s->candidates[c].zone = nz == 2 ? block_zone(g, i) : 0;
	}
	return s;
}

static GBytes *
sim_guest_status(SimGuest *g, guint64 request_id)
{
	if (g->dirty || g->cached == NULL) {
		hr_status_free(g->cached);
		g->cached = sim_guest_build(g);
		g->dirty = FALSE;
	}
	g->cached->hdr.request_id = request_id;
	g->cached->seq = ++g->seq;
	g->cached->uptime_ns = (g_get_monotonic_time() - g->start_us + 30 * G_USEC_PER_SEC) * 1000;
	g->cached->vmstat[VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS] = g->state.msgs_relayed;
	return hr_status_encode(g->cached);
}

static void
sim_guest_report(SimGuest *g, guint64 request_id)
{
	g_autoptr(GBytes) msg = sim_guest_status(g, request_id);
	g->sim->statuses++;
	sim_guest_send_msg(g, msg);
}

static gboolean
sim_guest_status_cb(gpointer user_data)
{
	SimGuest *g = user_data;
	sim_guest_report(g, 0);
	return G_SOURCE_CONTINUE;
}

static void
sim_guest_set_interval(SimGuest *g, guint32 interval_ms)
{
	g_clear_handle_id(&g->status_id, g_source_remove);
	g->interval_ms = opt_interval_ms >= 0 ? (guint32)opt_interval_ms : interval_ms;
	if (g->interval_ms > 0)
		g->status_id = g_timeout_add(g->interval_ms, sim_guest_status_cb, g);
}

static void
sim_send_result(SimGuest *g, guint16 type, guint64 id, guint32 status, const Job *job)
{
	HrResult r = {0};
	g_autoptr(GBytes) msg = NULL;
	r.hdr.type = type;
	r.hdr.request_id = id;
	r.status = status;
	if (job != NULL) {
		r.blocks_tried = job->tried;
		r.blocks_freed = job->freed;
		memcpy(r.failed, job->failed, sizeof(r.failed));
		r.pages_migrated = job->pages;
		r.elapsed_us = g_get_monotonic_time() - job->started;
	}
	msg = hr_result_encode(&r);
	sim_guest_send_msg(g, msg);
}

static void
sim_send_blocks(SimGuest *g, guint16 type, guint64 id, guint32 reason, GArray *gpas)
{
	g_autoptr(HrBlocks) b = NULL;
	g_autoptr(GBytes) msg = NULL;
	if (gpas->len == 0)
		return;
	b = hr_blocks_new(type, gpas->len);
	b->hdr.request_id = id;
	b->reason = reason;
	memcpy(b->gpas, gpas->data, gpas->len * sizeof(guint64));
	msg = hr_blocks_encode(b);
	sim_guest_send_msg(g, msg);
	g_array_set_size(gpas, 0);
	sim_guest_send_state(g);
}

static void
job_free(Job *job)
{
	g_array_unref(job->order);
	g_array_unref(job->hold);
	g_free(job);
}

/* try one block; the simulated time it took, in ns */
static guint64
sim_job_try(SimGuest *g, Job *job, guint32 i)
{
	guint z = block_zone(g, i);
	guint64 used = PAGES - g->free[i];
	guint64 zone_free = g->zone_free[z] - MIN(g->zone_free[z], g->zone_taken[z]);
	guint64 high = g->zone_managed[z] / 512 * 3 / 2;
	guint64 floor = (guint64)opt_floor_mb * 256;

	job->tried++;
	if (g->flags[i] & BLK_HELD) {
		job->failed[VIRTIO_HUGEROOM_R_HELD]++;
		return 1000;
	}
	if ((g->flags[i] & BLK_UNMOVABLE) || i < 8) {
		job->failed[VIRTIO_HUGEROOM_R_ZONE]++;
		return 1000;
	}
	if (zone_free < PAGES + MAX(high, floor)) {
		job->failed[VIRTIO_HUGEROOM_R_NOMEM]++;
		job->stop_nomem = TRUE;
		return 1000;
	}
	if (g->flags[i] & BLK_PINNED) {
		/* the migration moved part of the block before it hit the pinned page */
		job->pages += used / 2;
		job->failed[VIRTIO_HUGEROOM_R_UNMOVABLE]++;
		return (used / 2 + 50) * opt_migrate_ns;
	}
	job->pages += used;
	job->freed++;
	g->zone_free[z] -= g->free[i];
	g->zone_taken[z] += used;
	g->free[i] = 0;
	g->flags[i] |= BLK_HELD;
	g->held++;
	g_array_append_val(job->hold, *(guint64[]){block_gpa(g, i)});
	return (used + 20) * opt_migrate_ns;
}

static void
sim_job_finish(SimGuest *g)
{
	Job *job = g->job;
	guint32 status = VIRTIO_HUGEROOM_S_OK;

	sim_send_blocks(g, VIRTIO_HUGEROOM_MSG_HOLD, job->request_id, 0, job->hold);
	if (job->cancelled)
		status = VIRTIO_HUGEROOM_S_CANCELLED;
	else if (job->stop_budget)
		status = VIRTIO_HUGEROOM_S_BUDGET;
	else if (job->freed < job->count)
		status = VIRTIO_HUGEROOM_S_PARTIAL;
	sim_send_result(g, VIRTIO_HUGEROOM_MSG_RESULT, job->request_id, status, job);
	g_clear_handle_id(&g->job_id, g_source_remove);
	g_clear_pointer(&g->job, job_free);
	g->dirty = TRUE;
}

static gboolean
sim_job_tick_cb(gpointer user_data)
{
	SimGuest *g = user_data;
	Job *job = g->job;
	guint64 spent = 0;
	gint64 now = g_get_monotonic_time();

	while (spent < TICK_MS * G_GUINT64_CONSTANT(1000000)) {
		guint32 i;
		if (job->cancelled || job->stop_nomem || job->freed >= job->count ||
		    job->next >= job->order->len) {
			sim_job_finish(g);
			return G_SOURCE_REMOVE;
		}
		if ((job->budget_pages > 0 && job->pages >= job->budget_pages) ||
		    (job->budget_ms > 0 && now - job->started >= (gint64)job->budget_ms * 1000)) {
			job->stop_budget = TRUE;
			sim_job_finish(g);
			return G_SOURCE_REMOVE;
		}
		i = g_array_index(job->order, guint32, job->next++);
		spent += sim_job_try(g, job, i);
	}
	sim_send_blocks(g, VIRTIO_HUGEROOM_MSG_HOLD, job->request_id, 0, job->hold);
	if (now - job->last_progress >= PROGRESS_MS * 1000) {
		job->last_progress = now;
		sim_send_result(g, VIRTIO_HUGEROOM_MSG_PROGRESS, job->request_id, 0, job);
	}
	return G_SOURCE_CONTINUE;
}

static void
sim_guest_evacuate(SimGuest *g, const HrCmd *cmd)
{
	Job *job;

	if (g->job != NULL) {
		sim_send_result(g, VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
				VIRTIO_HUGEROOM_S_BUSY, NULL);
		return;
	}
	job = g_new0(Job, 1);
	job->request_id = cmd->hdr.request_id;
	job->type = cmd->hdr.type;
	job->count = cmd->count;
	job->budget_pages = cmd->budget_pages;
	job->budget_ms = cmd->budget_ms;
	job->started = job->last_progress = g_get_monotonic_time();
	job->hold = g_array_new(FALSE, FALSE, sizeof(guint64));
	if (cmd->nr_gpas > 0) {
		job->order = g_array_new(FALSE, FALSE, sizeof(guint32));
		for (guint k = 0; k < cmd->nr_gpas; k++) {
			guint64 i;
			if (!gpa_block(g, cmd->gpas[k], &i)) {
				/* not RAM: rejected without an attempt, but counted */
				job->tried++;
				job->failed[VIRTIO_HUGEROOM_R_OFFLINE]++;
				continue;
			}
			g_array_append_val(job->order, *(guint32[]){(guint32)i});
		}
	} else {
		job->order = sim_guest_rank(g, cmd->ranges, cmd->nr_ranges, 0);
	}
	g->job = job;
	g->job_id = g_timeout_add(TICK_MS, sim_job_tick_cb, g);
}

static void
sim_guest_return(SimGuest *g, const HrCmd *cmd)
{
	g_autoptr(GArray) gpas = g_array_new(FALSE, FALSE, sizeof(guint64));
	Job job = {.started = g_get_monotonic_time()};

	for (guint64 i = 0; i < g->n_blocks; i++) {
		if (cmd->nr_gpas > 0)
			break;
		if (job.freed >= cmd->count)
			break;
		if (!(g->flags[i] & BLK_HELD))
			continue;
		g_array_append_val(gpas, *(guint64[]){block_gpa(g, i)});
		job.freed++;
	}
	for (guint k = 0; k < cmd->nr_gpas; k++) {
		guint64 i;
		if (!gpa_block(g, cmd->gpas[k], &i) || !(g->flags[i] & BLK_HELD)) {
			job.failed[VIRTIO_HUGEROOM_R_OTHER]++;
			continue;
		}
		g_array_append_val(gpas, cmd->gpas[k]);
		job.freed++;
	}
	job.tried = job.freed;
	for (guint r = 0; r < VIRTIO_HUGEROOM_NR_REASONS; r++)
		job.tried += job.failed[r];
	for (guint k = 0; k < gpas->len; k++) {
		guint64 i = 0;
		/* every gpa in the list was checked above: the lookup succeeds */
		gpa_block(g, g_array_index(gpas, guint64, k), &i);
		/* the guest's next touch faults in fresh, free memory */
		g->flags[i] &= ~BLK_HELD;
		g->free[i] = PAGES;
		g->zone_free[block_zone(g, i)] += PAGES;
		g->held--;
	}
	sim_send_blocks(g, VIRTIO_HUGEROOM_MSG_RETURNED, cmd->hdr.request_id,
			VIRTIO_HUGEROOM_RET_HOST, gpas);
	sim_send_result(g, VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
			job.failed[VIRTIO_HUGEROOM_R_OTHER] > 0 ? VIRTIO_HUGEROOM_S_PARTIAL
								  : VIRTIO_HUGEROOM_S_OK,
			&job);
	g->dirty = TRUE;
}

static void
sim_guest_command(SimGuest *g, const HrCmd *cmd)
{
	switch (cmd->hdr.type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		sim_guest_report(g, cmd->hdr.request_id);
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		sim_guest_evacuate(g, cmd);
		break;
	case VIRTIO_HUGEROOM_CMD_RETURN:
		sim_guest_return(g, cmd);
		break;
	case VIRTIO_HUGEROOM_CMD_SET_PCP:
		sim_send_result(g, VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
				VIRTIO_HUGEROOM_S_OK, NULL);
		break;
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		/* a CANCEL naming nothing that runs is ignored (SPEC 1.6.8.1) */
		if (g->job != NULL && g->job->request_id == cmd->hdr.request_id)
			g->job->cancelled = TRUE;
		break;
	default:
		sim_send_result(g, VIRTIO_HUGEROOM_MSG_RESULT, cmd->hdr.request_id,
				VIRTIO_HUGEROOM_S_UNSUPPORTED, NULL);
	}
}

static void
sim_guest_frame(SimGuest *g, HrChanFrame *frame)
{
	g_autoptr(GError) error = NULL;

	switch (frame->type) {
	case HR_CHAN_WELCOME: {
		HrChanWelcome welcome;
		if (!hr_chan_welcome_decode(frame->payload, &welcome, &error)) {
			sim_guest_close(g, error->message);
			return;
		}
		g->welcomed = TRUE;
		/* the resync (HOLDs with request id 0) ends with the first DEVICE_STATE */
		sim_guest_send_resync(g);
		sim_guest_send_state(g);
		sim_guest_report(g, 0);
		sim_guest_set_interval(g, welcome.status_interval_ms);
		if (++g->sim->welcomed == g->sim->guests->len && !g->sim->announced) {
			g->sim->announced = TRUE;
			g_print("ready %u guests\n", g->sim->welcomed);
		}
		break;
	}
	case HR_CHAN_SET_INTERVAL: {
		guint32 ms;
		if (hr_chan_set_interval_decode(frame->payload, &ms, &error))
			sim_guest_set_interval(g, ms);
		break;
	}
	case HR_CHAN_HOST_CMD: {
		g_autoptr(HrCmd) cmd = hr_chan_host_cmd_decode(frame->payload, &error);
		if (cmd == NULL) {
			/* the device drops what it cannot validate */
			g->state.cmds_dropped++;
			sim_guest_send_state(g);
			return;
		}
		sim_guest_command(g, cmd);
		break;
	}
	default:
		sim_guest_close(g, "unexpected frame from the daemon");
	}
}

static gboolean
sim_guest_in_cb(GSocket *socket, GIOCondition cond, gpointer user_data)
{
	SimGuest *g = user_data;
	guint8 buf[16384];
	g_autoptr(GError) error = NULL;
	gssize n;
	(void)cond;

	n = g_socket_receive(socket, (gchar *)buf, sizeof(buf), NULL, &error);
	if (n < 0 && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
		return G_SOURCE_CONTINUE;
	if (n <= 0) {
		sim_guest_close(g, n == 0 ? "the daemon closed the connection" : error->message);
		return G_SOURCE_REMOVE;
	}
	hr_frame_reader_push(g->reader, buf, n);
	for (;;) {
		g_autoptr(HrChanFrame) frame = hr_frame_reader_next(g->reader, &error);
		if (frame == NULL) {
			if (error != NULL) {
				sim_guest_close(g, error->message);
				return G_SOURCE_REMOVE;
			}
			break;
		}
		sim_guest_frame(g, frame);
		if (g->closed)
			return G_SOURCE_REMOVE;
	}
	return G_SOURCE_CONTINUE;
}

static void
sim_guest_close(SimGuest *g, const gchar *why)
{
	if (g->closed)
		return;
	g->closed = TRUE;
	g_printerr("%s: %s\n", g->name, why);
	g_clear_handle_id(&g->status_id, g_source_remove);
	g_clear_handle_id(&g->job_id, g_source_remove);
	if (g->in_source != NULL) {
		g_source_destroy(g->in_source);
		g_clear_pointer(&g->in_source, g_source_unref);
	}
	if (g->out_source != NULL) {
		g_source_destroy(g->out_source);
		g_clear_pointer(&g->out_source, g_source_unref);
	}
	g_socket_close(g->socket, NULL);
	if (++g->sim->closed == g->sim->guests->len)
		g_main_loop_quit(g->sim->loop);
}

static void
sim_guest_free(SimGuest *g)
{
	if (!g->closed) {
		g->sim->closed--; /* not counted: we are shutting down */
		sim_guest_close(g, "shut down");
	}
	g_clear_object(&g->socket);
	g_byte_array_unref(g->outbuf);
	hr_frame_reader_free(g->reader);
	if (g->job != NULL)
		job_free(g->job);
	hr_status_free(g->cached);
	g_free(g->free);
	g_free(g->flags);
	g_free(g);
}

static gboolean
sim_guest_connect(Sim *sim, guint index, GError **error)
{
	g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(opt_socket);
	g_autoptr(HrChanHello) hello = NULL;
	g_autoptr(GBytes) payload = NULL;
	SimGuest *g = g_new0(SimGuest, 1);
	guint nr_ram;

	g->sim = sim;
	g->index = index;
	g->mem = (guint64)opt_mem_gib * GiB;
	g->start_us = g_get_monotonic_time();
	g->outbuf = g_byte_array_new();
	g->reader = hr_frame_reader_new();
	g_snprintf(g->name, sizeof(g->name), "%s%u", opt_prefix, index);
	for (guint i = 0; i < 16; i++)
		g->uuid[i] = (guint8)(sim_hash(opt_seed, index, 1000 + i));
	g->uuid[6] = (g->uuid[6] & 0x0f) | 0x40;
	g->uuid[8] = (g->uuid[8] & 0x3f) | 0x80;
	g->state.guest_features = 0x1f;
	g->state.driver_ok = 1;
	sim_guest_generate(g);
	g_ptr_array_add(sim->guests, g);

	g->socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
				 G_SOCKET_PROTOCOL_DEFAULT, error);
	if (g->socket == NULL)
		return FALSE;
	/* blocking: a full backlog makes us wait for the daemon's accept */
	if (!g_socket_connect(g->socket, addr, NULL, error)) {
		g_prefix_error(error, "%s: cannot connect to %s: ", g->name, opt_socket);
		return FALSE;
	}
	g_socket_set_blocking(g->socket, FALSE);
	g->in_source = g_socket_create_source(g->socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
	g_source_set_callback(g->in_source, (GSourceFunc)(GCallback)sim_guest_in_cb, g, NULL);
	g_source_attach(g->in_source, NULL);

	nr_ram = g->n_blocks > g->low_blocks ? 2 : 1;
	hello = hr_chan_hello_new(nr_ram);
	hello->proto_version = VIRTIO_HUGEROOM_VERSION;
	memcpy(hello->uuid, g->uuid, 16);
	g_strlcpy(hello->name, g->name, sizeof(hello->name));
	hello->ram_size = g->mem;
	hello->guest_features = 0x1f;
	hello->ram[0].gpa = 0;
	hello->ram[0].size = g->low_blocks * BLOCK;
	hello->ram[0].hva = G_GUINT64_CONSTANT(0x7f0000000000) + (guint64)index * 0x2000000000;
	if (nr_ram == 2) {
		hello->ram[1].gpa = HIGH_START;
		hello->ram[1].size = (g->n_blocks - g->low_blocks) * BLOCK;
		hello->ram[1].hva = hello->ram[0].hva + HIGH_START;
	}
	payload = hr_chan_hello_encode(hello);
	sim_guest_send(g, HR_CHAN_HELLO, payload);
	return TRUE;
}

static gboolean
sim_quit_cb(gpointer user_data)
{
	g_main_loop_quit(((Sim *)user_data)->loop);
	return G_SOURCE_REMOVE;
}

int
main(int argc, char **argv)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GOptionContext) context = g_option_context_new("- simulated hugeroom guests");
	GOptionEntry entries[] = {
	    {"guests", 'n', 0, G_OPTION_ARG_INT, &opt_guests, "guests to simulate (1)", "N"},
	    {"mem-gib", 'm', 0, G_OPTION_ARG_INT, &opt_mem_gib, "RAM of each guest (4)", "G"},
	    {"socket", 's', 0, G_OPTION_ARG_FILENAME, &opt_socket,
	     "hugeroomd's VM socket (/run/hugeroom/vm.sock)", "PATH"},
	    {"interval-ms", 'i', 0, G_OPTION_ARG_INT, &opt_interval_ms,
	     "status period, overriding the daemon's (0: only on REPORT)", "MS"},
	    {"candidates", 'k', 0, G_OPTION_ARG_INT, &opt_candidates,
	     "candidate blocks per report (256)", "K"},
	    {"fail-rate", 'f', 0, G_OPTION_ARG_DOUBLE, &opt_fail_rate,
	     "share of partly used movable blocks that fail unmovable (0.05)", "RATE"},
	    {"seed", 0, 0, G_OPTION_ARG_INT, &opt_seed, "memory layout seed (1)", "SEED"},
	    {"prefix", 0, 0, G_OPTION_ARG_STRING, &opt_prefix, "guest name prefix (sim)", "NAME"},
	    {"duration", 'd', 0, G_OPTION_ARG_INT, &opt_duration_s,
	     "exit after this many seconds (0: on SIGTERM or when all are closed)", "S"},
	    {"migrate-ns", 0, 0, G_OPTION_ARG_INT, &opt_migrate_ns,
	     "simulated time per page migrated (5000)", "NS"},
	    {"floor-mb", 0, 0, G_OPTION_ARG_INT, &opt_floor_mb,
	     "free memory a guest keeps per zone, besides its watermark (0)", "MB"},
	    {"resync-blocks", 0, 0, G_OPTION_ARG_INT, &opt_resync_blocks,
	     "blocks each guest holds when it connects, listed in its resync (0)", "N"},
	    {NULL}};
	Sim sim = {0};
	int rc;

	g_option_context_add_main_entries(context, entries, NULL);
	if (!g_option_context_parse(context, &argc, &argv, &error)) {
		g_printerr("hr-simguest: %s\n", error->message);
		return 2;
	}
	if (opt_guests < 1 || opt_mem_gib < 1 || opt_mem_gib > 16384 || opt_candidates < 0 ||
	    opt_candidates > VIRTIO_HUGEROOM_MAX_CANDIDATES || opt_fail_rate < 0 ||
	    opt_fail_rate > 1 || opt_migrate_ns < 0 || opt_floor_mb < 0) {
		g_printerr("hr-simguest: --guests and --mem-gib must be >= 1, --candidates "
			   "0-%u, --fail-rate 0-1\n",
			   VIRTIO_HUGEROOM_MAX_CANDIDATES);
		return 2;
	}
	if (opt_socket == NULL)
		opt_socket = g_strdup("/run/hugeroom/vm.sock");
	if (opt_prefix == NULL)
		opt_prefix = g_strdup("sim");

	sim.loop = g_main_loop_new(NULL, FALSE);
	sim.guests = g_ptr_array_new_with_free_func((GDestroyNotify)sim_guest_free);
	for (gint i = 0; i < opt_guests; i++) {
		if (!sim_guest_connect(&sim, i, &error)) {
			g_printerr("hr-simguest: %s\n", error->message);
			return 1;
		}
		/* let the daemon's answers in while we connect the rest */
		while (g_main_context_iteration(NULL, FALSE))
			;
	}
	g_unix_signal_add(SIGTERM, sim_quit_cb, &sim);
	g_unix_signal_add(SIGINT, sim_quit_cb, &sim);
	if (opt_duration_s > 0)
		g_timeout_add_seconds(opt_duration_s, sim_quit_cb, &sim);
	g_main_loop_run(sim.loop);
	g_print("done: %u guests, %u welcomed, %u closed, %" G_GUINT64_FORMAT " statuses\n",
		sim.guests->len, sim.welcomed, sim.closed, sim.statuses);
	/* every guest dropped by the daemon is a failure for a caller's script */
	rc = sim.closed > 0 && sim.closed == sim.guests->len ? 1 : 0;
	g_ptr_array_unref(sim.guests);
	g_main_loop_unref(sim.loop);
	return rc;
}
