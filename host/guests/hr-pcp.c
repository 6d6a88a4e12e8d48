/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrPcp"

#include "hr-pcp.h"

#include "hr-guest-private.h"

#include <gio/gio.h>

/* one SET_PCP sent and not answered yet */
typedef struct {
	HrGuest *guest;
	guint64 request_id;
	HrPcpPolicy policy;
	HrPcpDone done;
	gpointer user_data;
	guint timeout_id;
} HrPcpCall;

static void
hr_pcp_call_end(HrPcpCall *call, gint status)
{
	HrGuest *guest = call->guest;

	hr_inflight_remove(guest->commands, call->request_id);
	g_clear_handle_id(&call->timeout_id, g_source_remove);
	if (status == VIRTIO_HUGEROOM_S_OK) {
		guest->pcp_applied = call->policy;
		guest->pcp_applied_set = TRUE;
	}
	if (call->done != NULL)
		call->done(guest, status, call->user_data);
	g_free(call);
}

static gboolean
hr_pcp_timeout_cb(gpointer user_data)
{
	HrPcpCall *call = user_data;

	call->timeout_id = 0;
	g_warning("%s: set-pcp request %" G_GUINT64_FORMAT " unanswered, counted as lost",
		  call->guest->name, call->request_id);
	call->guest->cmds_lost++;
	hr_pcp_call_end(call, -1);
	return G_SOURCE_REMOVE;
}

gboolean
hr_pcp_supported(HrGuest *guest, GError **error)
{
	return hr_guest_check_feature(guest, VIRTIO_HUGEROOM_F_PCP, "F_PCP",
				      "tune its per-CPU page lists", error);
}

gboolean
hr_pcp_send(const HrConfig *config, HrGuest *guest, const HrPcpPolicy *policy, HrPcpDone done,
	    gpointer user_data, GError **error)
{
	g_autoptr(HrCmd) cmd = NULL;
	g_autofree gchar *text = hr_pcp_policy_format(policy);
	g_autoptr(GError) error_local = NULL;
	HrPcpCall *call;

	if (!hr_pcp_policy_check(policy, &error_local)) {
		g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
				    error_local->message);
		return FALSE;
	}
	if (!hr_pcp_supported(guest, error))
		return FALSE;
	cmd = hr_cmd_new(VIRTIO_HUGEROOM_CMD_SET_PCP, hr_guest_new_request_id(guest));
	cmd->policy = policy->policy;
	cmd->high = policy->high;
	call = g_new0(HrPcpCall, 1);
	call->guest = guest;
	call->request_id = cmd->hdr.request_id;
	call->policy = *policy;
	call->done = done;
	call->user_data = user_data;
	call->timeout_id = g_timeout_add(config->command_timeout_ms, hr_pcp_timeout_cb, call);
	hr_inflight_add(guest->commands, call->request_id, HR_INFLIGHT_SET_PCP,
			VIRTIO_HUGEROOM_CMD_SET_PCP, call, NULL);
	hr_guest_send_cmd(guest, cmd);
	g_info("%s: sent set-pcp %s (request %" G_GUINT64_FORMAT ")", guest->name, text,
	       call->request_id);
	return TRUE;
}

gboolean
hr_pcp_handle_result(HrGuest *guest, const HrResult *result)
{
	HrInflightCmd *cmd =
	    hr_inflight_lookup(guest->commands, result->hdr.request_id, HR_INFLIGHT_SET_PCP);
	HrPcpCall *call;
	g_autofree gchar *text = NULL;

	if (cmd == NULL)
		return FALSE;
	call = cmd->data;
	text = hr_pcp_policy_format(&call->policy);
	g_info("%s: set-pcp %s (request %" G_GUINT64_FORMAT "): %s", guest->name, text,
	       call->request_id, hr_result_status_to_string(result->status));
	hr_pcp_call_end(call, (gint)result->status);
	return TRUE;
}

/* policies set for guests not seen yet, by name; one daemon per process */
static GHashTable *hr_pcp_stashed;

void
hr_pcp_stash(const gchar *name, const HrPcpPolicy *policy)
{
	if (hr_pcp_stashed == NULL)
		hr_pcp_stashed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	g_hash_table_replace(hr_pcp_stashed, g_strdup(name), g_memdup2(policy, sizeof(*policy)));
}

void
hr_pcp_set_wanted(HrGuest *guest, const HrPcpPolicy *policy)
{
	guest->pcp_want = *policy;
	guest->pcp_want_set = TRUE;
}

gboolean
hr_pcp_evacuating(const HrGuest *guest)
{
	return guest->pcp_evacuations > 0;
}

gboolean
hr_pcp_wanted(const HrConfig *config, HrGuest *guest, HrPcpPolicy *policy)
{
	HrGuestPolicy gp;
	HrPcpPolicy *stashed;

	stashed = hr_pcp_stashed != NULL ? g_hash_table_lookup(hr_pcp_stashed, guest->name) : NULL;
	if (stashed != NULL) {
		guest->pcp_want = *stashed;
		guest->pcp_want_set = TRUE;
		g_hash_table_remove(hr_pcp_stashed, guest->name);
	}

	hr_config_guest_policy(config, guest->name, &gp);
	guest->pcp_config_set = gp.pcp_set;
	guest->pcp_config = gp.pcp;
	if (guest->pcp_want_set)
		*policy = guest->pcp_want;
	else if (guest->pcp_config_set)
		*policy = guest->pcp_config;
	return guest->pcp_want_set || guest->pcp_config_set;
}

/* what the guest should run now: density while donating, else its wanted policy */
static gboolean
hr_pcp_due(const HrConfig *config, HrGuest *guest, HrPcpPolicy *policy)
{
	if (guest->pcp_evacuations > 0) {
		*policy = (HrPcpPolicy){VIRTIO_HUGEROOM_PCP_DENSITY, 0};
		return TRUE;
	}
	return hr_pcp_wanted(config, guest, policy);
}

void
hr_pcp_driver_ready(const HrConfig *config, HrGuest *guest)
{
	g_autoptr(GError) error = NULL;
	HrPcpPolicy policy;

	/* the driver came up with the guest's own sizing (SPEC 1.6.7.1 item 4) */
	guest->pcp_applied_set = FALSE;
	if (!hr_pcp_due(config, guest, &policy) || !hr_pcp_supported(guest, NULL))
		return;
	if (!hr_pcp_send(config, guest, &policy, NULL, NULL, &error))
		g_warning("%s: cannot send its PCP policy: %s", guest->name, error->message);
}

static void
hr_pcp_send_quietly(const HrConfig *config, HrGuest *guest, const HrPcpPolicy *policy)
{
	g_autoptr(GError) error = NULL;

	if (hr_pcp_supported(guest, NULL) &&
	    !hr_pcp_send(config, guest, policy, NULL, NULL, &error))
		g_info("%s: %s", guest->name, error->message);
}

void
hr_pcp_evacuation_begin(const HrConfig *config, HrGuest *guest)
{
	/*
	 * Pages parked on PCP lists keep blocks from becoming free, but with
	 * small lists the guest's migration targets come from its buddy
	 * allocator, often guest memory the host never backed: vm-headline
	 * measured 2.5-3.6% of what donors gave faulted back in with density,
	 * 0.19% without. Off unless donor_pcp_density says so.
	 */
	if (guest->pcp_evacuations++ == 0 && config->donor_pcp_density) {
		guest->pcp_density_sent = TRUE;
		hr_pcp_send_quietly(config, guest, &(HrPcpPolicy){VIRTIO_HUGEROOM_PCP_DENSITY, 0});
	}
}

void
hr_pcp_evacuation_end(const HrConfig *config, HrGuest *guest)
{
	HrPcpPolicy policy = {VIRTIO_HUGEROOM_PCP_DEFAULT, 0};

	g_return_if_fail(guest->pcp_evacuations > 0);
	if (--guest->pcp_evacuations > 0 || !guest->pcp_density_sent)
		return;
	guest->pcp_density_sent = FALSE;
	hr_pcp_wanted(config, guest, &policy);
	hr_pcp_send_quietly(config, guest, &policy);
}

void
hr_pcp_get_view(HrGuest *guest, HrPcpView *view)
{
	*view = (HrPcpView){0};
	view->supported = hr_pcp_supported(guest, NULL) && guest->have_state;
	view->wanted_set = guest->pcp_want_set || guest->pcp_config_set;
	view->wanted = guest->pcp_want_set ? guest->pcp_want : guest->pcp_config;
	view->applied_set = guest->pcp_applied_set;
	view->applied = guest->pcp_applied;
	view->donating = guest->pcp_evacuations > 0;
}

/* the guest goes: its calls end unanswered, telling nobody */
static gboolean
hr_pcp_drop_cb(HrInflightCmd *cmd, gpointer user_data)
{
	HrPcpCall *call = cmd->data;
	(void)user_data;
	call->done = NULL;
	hr_pcp_call_end(call, -1); /* removes @cmd */
	return FALSE;
}

void
hr_pcp_guest_free(HrGuest *guest)
{
	hr_inflight_foreach_remove(guest->commands, HR_INFLIGHT_SET_PCP, hr_pcp_drop_cb, NULL);
}
