/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * How long the main loop goes without polling: a GSource of the highest
 * priority that never dispatches; its check() runs first when the poll
 * returns and its prepare() first when the next turn begins, so the time
 * in between is what the turn spent dispatching, the longest wait of a
 * request or a guest message that arrived meanwhile. No timer: an idle
 * daemon is not woken to measure it.
 *
 * Each turn goes into a histogram of wall-clock time (what a client
 * waits, including time the host did not run the thread) and into the
 * maximum of the main thread's CPU time in one turn (what the daemon
 * itself spent, whatever the host's load).
 */

#include <glib.h>

#include "hr-prometheus.h"

G_BEGIN_DECLS

typedef struct _HrLoopWatch HrLoopWatch;

/* watches the thread-default main context of the caller */
HrLoopWatch *
hr_loop_watch_new(void);
void
hr_loop_watch_free(HrLoopWatch *watch);
/* the histogram hugeroom_main_loop_stall_seconds and the CPU maximum */
void
hr_loop_watch_append(GString *out, HrLoopWatch *watch);
/* the longest CPU time of one turn so far, in microseconds */
gint64
hr_loop_watch_cpu_max_us(HrLoopWatch *watch);

G_END_DECLS
