/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrRequest"

#include "hr-request.h"

#include <gio/gio.h>

static const gchar *state_names[HR_REQUEST_N_STATES] = {
    [HR_REQUEST_QUEUED] = "queued",	  [HR_REQUEST_SENT] = "sent",
    [HR_REQUEST_RUNNING] = "running",	  [HR_REQUEST_DONE] = "done",
    [HR_REQUEST_PARTIAL] = "partial",	  [HR_REQUEST_BUDGET] = "budget",
    [HR_REQUEST_CANCELLED] = "cancelled", [HR_REQUEST_FAILED] = "failed",
    [HR_REQUEST_TIMED_OUT] = "timed-out", [HR_REQUEST_LOST] = "lost",
};

const gchar *
hr_request_state_to_string(HrRequestState state)
{
	if ((guint)state >= HR_REQUEST_N_STATES)
		return "unknown";
	return state_names[state];
}

const gchar *
hr_request_kind_to_string(HrRequestKind kind)
{
	switch (kind) {
	case HR_REQUEST_EVACUATE:
		return "evacuate";
	case HR_REQUEST_CAPTURE:
		return "capture";
	case HR_REQUEST_RETURN:
		return "return";
	default:
		return "unknown";
	}
}

gboolean
hr_request_state_is_final(HrRequestState state)
{
	return state >= HR_REQUEST_DONE;
}

gboolean
hr_request_invalid(GError **error, const gchar *format, ...)
{
	va_list args;
	g_autofree gchar *text = NULL;

	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, text);
	return FALSE;
}

static gchar *
hr_request_ram_to_string(const HrRamRange *ram, guint nr_ram)
{
	g_autoptr(GString) str = g_string_new(NULL);
	for (guint i = 0; i < nr_ram; i++)
		g_string_append_printf(str, "%s0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x",
				       i > 0 ? ", " : "", ram[i].gpa, ram[i].gpa + ram[i].size);
	return g_string_free(g_steal_pointer(&str), FALSE);
}

guint
hr_gpa_hash(gconstpointer gpa)
{
	guint64 x = *(const guint64 *)gpa;

	x ^= x >> 33;
	x *= G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return (guint)x;
}

static gboolean
hr_request_check_gpas(const HrRequestParams *p, const HrRamRange *ram, guint nr_ram, GError **error)
{
	g_autoptr(GHashTable) seen = g_hash_table_new(hr_gpa_hash, g_int64_equal);

	if (p->nr_gpas > VIRTIO_HUGEROOM_MAX_CMD_BLOCKS)
		return hr_request_invalid(error,
					  "gpas: %u blocks exceed the limit of %u per command",
					  p->nr_gpas, (guint)VIRTIO_HUGEROOM_MAX_CMD_BLOCKS);
	for (guint i = 0; i < p->nr_gpas; i++) {
		guint64 gpa = p->gpas[i];
		gpointer first;
		if (gpa % VIRTIO_HUGEROOM_BLOCK_SIZE != 0)
			return hr_request_invalid(
			    error, "gpas[%u]: 0x%" G_GINT64_MODIFIER "x is not 2 MiB aligned", i,
			    gpa);
		if (g_hash_table_lookup_extended(seen, &p->gpas[i], NULL, &first))
			return hr_request_invalid(
			    error, "gpas[%u]: 0x%" G_GINT64_MODIFIER "x repeats gpas[%u]", i, gpa,
			    GPOINTER_TO_UINT(first));
		g_hash_table_insert(seen, (gpointer)&p->gpas[i], GUINT_TO_POINTER(i));
		if (ram != NULL && !hr_ram_contains(ram, nr_ram, gpa, VIRTIO_HUGEROOM_BLOCK_SIZE)) {
			g_autofree gchar *layout = hr_request_ram_to_string(ram, nr_ram);
			return hr_request_invalid(error,
						  "gpas[%u]: 0x%" G_GINT64_MODIFIER
						  "x is outside the guest's RAM (%s)",
						  i, gpa, layout);
		}
	}
	return TRUE;
}

static gboolean
hr_request_check_ranges(const HrRequestParams *p, const HrRamRange *ram, guint nr_ram,
			GError **error)
{
	if (p->nr_ranges > VIRTIO_HUGEROOM_MAX_CMD_RANGES)
		return hr_request_invalid(error, "ranges: %u ranges exceed the limit of %u",
					  p->nr_ranges, (guint)VIRTIO_HUGEROOM_MAX_CMD_RANGES);
	for (guint i = 0; i < p->nr_ranges; i++) {
		const HrRange *r = &p->ranges[i];
		if (r->start % VIRTIO_HUGEROOM_BLOCK_SIZE != 0)
			return hr_request_invalid(error,
						  "ranges[%u].start: 0x%" G_GINT64_MODIFIER
						  "x is not 2 MiB aligned",
						  i, r->start);
		if (r->end % VIRTIO_HUGEROOM_BLOCK_SIZE != 0)
			return hr_request_invalid(
			    error, "ranges[%u].end: 0x%" G_GINT64_MODIFIER "x is not 2 MiB aligned",
			    i, r->end);
		if (r->end <= r->start)
			return hr_request_invalid(error,
						  "ranges[%u].end: 0x%" G_GINT64_MODIFIER
						  "x is not above start 0x%" G_GINT64_MODIFIER "x",
						  i, r->end, r->start);
		if (i > 0 && r->start < p->ranges[i - 1].end)
			return hr_request_invalid(
			    error,
			    "ranges[%u].start: 0x%" G_GINT64_MODIFIER
			    "x is below the end of ranges[%u]; ranges must be "
			    "sorted and must not overlap",
			    i, r->start, i - 1);
		if (ram != NULL && !hr_ram_contains(ram, nr_ram, r->start, r->end - r->start)) {
			g_autofree gchar *layout = hr_request_ram_to_string(ram, nr_ram);
			return hr_request_invalid(
			    error,
			    "ranges[%u]: 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER
			    "x is not inside one range of the guest's RAM (%s)",
			    i, r->start, r->end, layout);
		}
	}
	return TRUE;
}

/* SPEC 1.6.3, 1.6.5 and 1.6.6, with the names the API uses */
static HrCmd *
hr_request_build_cmd(guint64 id, const HrRequestParams *p, const HrRamRange *ram, guint nr_ram,
		     GError **error)
{
	g_autoptr(HrCmd) cmd = NULL;
	const gchar *kind = hr_request_kind_to_string(p->kind);

	if (p->kind != HR_REQUEST_EVACUATE && p->nr_ranges > 0) {
		hr_request_invalid(error, "ranges: only evacuate takes ranges, not %s", kind);
		return NULL;
	}
	if (p->kind != HR_REQUEST_EVACUATE && p->budget_pages > 0) {
		hr_request_invalid(error, "budget_pages: only evacuate takes a page budget, not %s",
				   kind);
		return NULL;
	}
	if (p->kind != HR_REQUEST_EVACUATE && p->background) {
		hr_request_invalid(
		    error, "background: only evacuate runs in the background, not %s", kind);
		return NULL;
	}
	if (p->kind == HR_REQUEST_RETURN && p->budget_ms > 0) {
		hr_request_invalid(error, "budget_ms: return takes no time budget");
		return NULL;
	}
	if (p->kind == HR_REQUEST_CAPTURE && p->nr_gpas > 0) {
		hr_request_invalid(error, "gpas: capture lets the guest choose; it takes no gpas");
		return NULL;
	}
	if (p->all && p->kind != HR_REQUEST_RETURN) {
		hr_request_invalid(error, "all: only return takes all");
		return NULL;
	}
	if (!hr_request_check_gpas(p, ram, nr_ram, error) ||
	    !hr_request_check_ranges(p, ram, nr_ram, error))
		return NULL;

	switch (p->kind) {
	case HR_REQUEST_EVACUATE:
		cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_EVACUATE, id);
		if (p->nr_gpas > 0) {
			if (p->nr_ranges > 0) {
				hr_request_invalid(error, "ranges: only with blocks (the guest "
							  "picks the cheapest), not with gpas");
				return NULL;
			}
			if (p->count > p->nr_gpas) {
				hr_request_invalid(error, "blocks: %u exceeds the %u gpas given",
						   p->count, p->nr_gpas);
				return NULL;
			}
			cmd->count = p->count > 0 ? p->count : p->nr_gpas;
			cmd->nr_gpas = p->nr_gpas;
			cmd->gpas = g_memdup2(p->gpas, sizeof(guint64) * p->nr_gpas);
		} else {
			if (p->count == 0) {
				hr_request_invalid(error, "blocks: give a number of blocks (1 or "
							  "more) or a list of gpas");
				return NULL;
			}
			cmd->hdr.flags = VIRTIO_HUGEROOM_EVAC_F_CHEAPEST;
			cmd->count = p->count;
			if (p->nr_ranges > 0) {
				cmd->hdr.flags |= VIRTIO_HUGEROOM_EVAC_F_RANGES;
				cmd->nr_ranges = p->nr_ranges;
				cmd->ranges = g_memdup2(p->ranges, sizeof(HrRange) * p->nr_ranges);
			}
		}
		if (p->background)
			cmd->hdr.flags |= VIRTIO_HUGEROOM_EVAC_F_BACKGROUND;
		cmd->budget_pages = p->budget_pages;
		cmd->budget_ms = p->budget_ms;
		break;
	case HR_REQUEST_CAPTURE:
		if (p->count == 0) {
			hr_request_invalid(error, "blocks: capture needs a number of blocks (1 or "
						  "more)");
			return NULL;
		}
		cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_CAPTURE, id);
		cmd->count = p->count;
		cmd->budget_ms = p->budget_ms;
		break;
	case HR_REQUEST_RETURN: {
		guint ways = (p->all ? 1 : 0) + (p->nr_gpas > 0 ? 1 : 0) + (p->count > 0 ? 1 : 0);
		if (ways != 1) {
			hr_request_invalid(error,
					   "blocks: return takes exactly one of blocks, gpas "
					   "or all");
			return NULL;
		}
		cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_RETURN, id);
		if (p->nr_gpas > 0) {
			cmd->count = p->nr_gpas;
			cmd->nr_gpas = p->nr_gpas;
			cmd->gpas = g_memdup2(p->gpas, sizeof(guint64) * p->nr_gpas);
		} else {
			cmd->count = p->all ? HR_REQUEST_RETURN_ALL : p->count;
		}
		break;
	}
	default:
		hr_request_invalid(error, "kind %d is not a request", p->kind);
		return NULL;
	}
	/* what we send must pass the rules the device and driver apply */
	{
		g_autoptr(GBytes) wire = hr_cmd_encode(cmd);
		g_autoptr(HrCmd) check =
		    hr_cmd_decode(g_bytes_get_data(wire, NULL), g_bytes_get_size(wire), error);
		if (check == NULL) {
			g_prefix_error(error, "internal: ");
			return NULL;
		}
	}
	return g_steal_pointer(&cmd);
}

HrRequest *
hr_request_new(guint64 id, const HrRequestParams *params, const HrRamRange *ram, guint nr_ram,
	       GError **error)
{
	HrCmd *cmd;
	HrRequest *request;

	g_return_val_if_fail(id != 0, NULL);
	cmd = hr_request_build_cmd(id, params, ram, nr_ram, error);
	if (cmd == NULL)
		return NULL;
	request = g_new0(HrRequest, 1);
	request->refcount = 1;
	request->id = id;
	request->kind = params->kind;
	request->state = HR_REQUEST_QUEUED;
	request->cmd = cmd;
	request->all = params->all;
	request->timeout_s = params->timeout_s;
	request->blocks = g_array_new(FALSE, FALSE, sizeof(guint64));
	request->created_at = g_date_time_new_now_utc();
	request->listeners = hr_listeners_new();
	if (params->notify != NULL)
		hr_request_add_listener(request, params->notify, params->notify_data);
	return request;
}

HrRequest *
hr_request_ref(HrRequest *request)
{
	request->refcount++;
	return request;
}

void
hr_request_unref(HrRequest *request)
{
	if (request == NULL || --request->refcount > 0)
		return;
	g_clear_handle_id(&request->timeout_id, g_source_remove);
	hr_cmd_free(request->cmd);
	g_free(request->error);
	g_array_unref(request->blocks);
	g_clear_pointer(&request->created_at, g_date_time_unref);
	g_clear_pointer(&request->sent_at, g_date_time_unref);
	g_clear_pointer(&request->started_at, g_date_time_unref);
	g_clear_pointer(&request->finished_at, g_date_time_unref);
	hr_listeners_free(request->listeners);
	g_free(request);
}

void
hr_request_add_listener(HrRequest *request, HrRequestFunc func, gpointer user_data)
{
	hr_listeners_add(request->listeners, G_CALLBACK(func), user_data);
}

void
hr_request_remove_listener(HrRequest *request, HrRequestFunc func, gpointer user_data)
{
	hr_listeners_remove(request->listeners, G_CALLBACK(func), user_data);
}

static void
hr_request_invoke(GCallback func, gpointer func_data, gpointer invoke_data)
{
	((HrRequestFunc)(void (*)(void))func)(invoke_data, func_data);
}

static void
hr_request_changed(HrRequest *request)
{
	/* a listener may drop the last reference to us */
	g_autoptr(HrRequest) self = hr_request_ref(request);
	hr_listeners_emit(request->listeners, hr_request_invoke, request);
}

void
hr_request_set_state(HrRequest *request, HrRequestState state, const gchar *error)
{
	request->state = state;
	if (error != NULL) {
		g_free(request->error);
		request->error = g_strdup(error);
	}
	if (state == HR_REQUEST_RUNNING && request->started_at == NULL)
		request->started_at = g_date_time_new_now_utc();
	if (hr_request_state_is_final(state)) {
		g_clear_handle_id(&request->timeout_id, g_source_remove);
		if (request->finished_at == NULL)
			request->finished_at = g_date_time_new_now_utc();
	}
	hr_request_changed(request);
}

void
hr_request_sent(HrRequest *request)
{
	g_clear_pointer(&request->sent_at, g_date_time_unref);
	request->sent_at = g_date_time_new_now_utc();
	hr_request_set_state(request, HR_REQUEST_SENT, NULL);
}

gboolean
hr_request_progress(HrRequest *request, const HrResult *progress)
{
	/* cumulative counts (SPEC 1.6.3.1): an older PROGRESS adds nothing */
	if (progress->pages_migrated < request->progress.pages_migrated ||
	    progress->blocks_tried < request->progress.blocks_tried)
		return FALSE;
	request->progress = *progress;
	if (request->state == HR_REQUEST_SENT)
		hr_request_set_state(request, HR_REQUEST_RUNNING, NULL);
	else
		hr_request_changed(request);
	return TRUE;
}

void
hr_request_result(HrRequest *request, const HrResult *result)
{
	HrRequestState state;
	g_autofree gchar *error = NULL;

	request->have_result = TRUE;
	request->result = *result;
	request->progress = *result;
	request->progress.hdr.type = VIRTIO_HUGEROOM_MSG_PROGRESS;
	if (hr_request_state_is_final(request->state)) {
		/* late: it timed out or was lost, but this is what happened */
		hr_request_changed(request);
		return;
	}
	switch (result->status) {
	case VIRTIO_HUGEROOM_S_OK:
		state = HR_REQUEST_DONE;
		break;
	case VIRTIO_HUGEROOM_S_PARTIAL:
		state = HR_REQUEST_PARTIAL;
		break;
	case VIRTIO_HUGEROOM_S_BUDGET:
		state = HR_REQUEST_BUDGET;
		break;
	case VIRTIO_HUGEROOM_S_CANCELLED:
		state = HR_REQUEST_CANCELLED;
		break;
	case VIRTIO_HUGEROOM_S_INVALID:
		state = HR_REQUEST_FAILED;
		error = g_strdup("the guest driver rejected the command as invalid");
		break;
	case VIRTIO_HUGEROOM_S_UNSUPPORTED:
		state = HR_REQUEST_FAILED;
		error = g_strdup("the guest driver does not support this command (feature not "
				 "negotiated)");
		break;
	default:
		state = HR_REQUEST_FAILED;
		error = g_strdup_printf("the guest driver answered %s",
					hr_result_status_to_string(result->status));
		break;
	}
	hr_request_set_state(request, state, error);
}

void
hr_request_add_blocks(HrRequest *request, const guint64 *gpas, guint32 nr)
{
	g_array_append_vals(request->blocks, gpas, nr);
	if (request->state == HR_REQUEST_SENT)
		hr_request_set_state(request, HR_REQUEST_RUNNING, NULL);
	else
		hr_request_changed(request);
}

guint32
hr_request_target(HrRequest *request)
{
	if (request->all)
		return 0;
	return request->cmd->count;
}
