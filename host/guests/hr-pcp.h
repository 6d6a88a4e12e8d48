/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include "hr-config.h"
#include "hr-guest.h"

G_BEGIN_DECLS

/*
 * A guest's per-CPU page list policy (SPEC 1.6.7), as the host wants it.
 *
 * The wanted policy is the one last set through the API, else the one of
 * the guest's [guest:PATTERN] group (pcp=POLICY); the daemon sends it each
 * time the guest's driver comes up (boot, module load, resume, the QEMU
 * reconnecting), because the driver drops any policy across a reset. While
 * the executor evacuates a donor, the donor runs `density`, and gets its
 * wanted policy (or `default`) back when the last evacuation ends.
 */

/* told of the guest's answer: a RESULT status, or -1 if none came in time */
typedef void (*HrPcpDone)(HrGuest *guest, gint status, gpointer user_data);

/* can @guest take SET_PCP now? G_IO_ERROR_NOT_CONNECTED or _NOT_SUPPORTED */
gboolean
hr_pcp_supported(HrGuest *guest, GError **error);
/* send SET_PCP; @done (may be NULL) is called exactly once unless FALSE */
gboolean
hr_pcp_send(const HrConfig *config, HrGuest *guest, const HrPcpPolicy *policy, HrPcpDone done,
	    gpointer user_data, GError **error);
/* the policy the host wants for @guest; FALSE when it wants none */
gboolean
hr_pcp_wanted(const HrConfig *config, HrGuest *guest, HrPcpPolicy *policy);
/* the API's @policy for @guest: it wins over the [guest:] group's */
void
hr_pcp_set_wanted(HrGuest *guest, const HrPcpPolicy *policy);
/* is an executor's evacuation of @guest running (the guest runs density)? */
gboolean
hr_pcp_evacuating(const HrGuest *guest);
/* keep @policy for the guest called @name, not seen yet: wanted once it is */
void
hr_pcp_stash(const gchar *name, const HrPcpPolicy *policy);
/* what the host wants and the guest last took, for the guest's view */
typedef struct {
	gboolean supported;  /* connected, with a driver that takes SET_PCP */
	gboolean wanted_set; /* the API's or else the [guest:] group's */
	HrPcpPolicy wanted;
	gboolean applied_set; /* the last one the guest answered S_OK */
	HrPcpPolicy applied;
	gboolean donating; /* an executor's evacuation runs: density */
} HrPcpView;
void
hr_pcp_get_view(HrGuest *guest, HrPcpView *view);

/* for hr-device.c: a RESULT (TRUE if it answered a SET_PCP); the driver came up */
gboolean
hr_pcp_handle_result(HrGuest *guest, const HrResult *result);
void
hr_pcp_driver_ready(const HrConfig *config, HrGuest *guest);
/* for hr-prepare-steps.c: around each evacuation of a donor */
void
hr_pcp_evacuation_begin(const HrConfig *config, HrGuest *guest);
void
hr_pcp_evacuation_end(const HrConfig *config, HrGuest *guest);
/* for hr-core.c: before @guest is freed */
void
hr_pcp_guest_free(HrGuest *guest);

G_END_DECLS
