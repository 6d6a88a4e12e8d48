/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The executor's types (hr-prepare.h is its API), apart so that the files
 * the executor is split into share them without depending on the file at
 * its top.
 */

#include "hr-reservation.h"

G_BEGIN_DECLS

typedef struct _HrPrepare HrPrepare;

/* the executor's news, for the layers above (the event stream, the metrics) */
typedef enum {
	HR_PREPARE_RESERVATION_CHANGED, /* a reservation was created or changed */
	HR_PREPARE_PLAN_MADE,		/* the planner decided for a reservation */
	HR_PREPARE_N_KINDS,
} HrPrepareEventKind;

typedef struct {
	HrPrepareEventKind kind;
	HrReservation *reservation;
	gint64 duration_us; /* PLAN_MADE: the planner's decision time */
} HrPrepareEvent;

typedef void (*HrPrepareFunc)(HrPrepare *prepare, const HrPrepareEvent *event, gpointer user_data);

G_END_DECLS
