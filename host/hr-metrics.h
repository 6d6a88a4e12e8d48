/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include "hr-core.h"
#include "hr-prepare.h"

G_BEGIN_DECLS

/* GET /metrics: the guests' and, with @prepare, the host's and reservations' */
gchar *
hr_metrics_text(HrCore *core, HrPrepare *prepare);

G_END_DECLS
