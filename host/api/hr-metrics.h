/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include "hr-core.h"
#include "hr-monitor.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

/*
 * GET /metrics (host/API.md "Metrics"): guests, nodes, reservations, and
 * histograms of the planner's decisions, the reservations' time to ready
 * and the guests' requests, which it follows on the core's events.
 */
typedef struct _HrMetrics HrMetrics;

HrMetrics *
hr_metrics_new(HrCore *core, HrPrepare *prepare);
void
hr_metrics_free(HrMetrics *metrics);
/* @host: a snapshot read @read_us microseconds long, or NULL to leave the nodes out */
void
hr_metrics_append(GString *out, HrMetrics *metrics, const HrHostState *host, gint64 read_us);

G_END_DECLS
