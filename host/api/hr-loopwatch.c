/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrLoopWatch"

#include "hr-loopwatch.h"

#include <time.h>

/* above every source of the daemon: prepared and checked on every turn */
#define HR_LOOP_WATCH_PRIORITY (G_PRIORITY_HIGH - 1000)

/* turns take microseconds: finer than the other histograms at the low end */
static const gdouble hr_loop_watch_bounds[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
					       0.005,	0.01,	0.025,	 0.05,	 0.1,	0.25,
					       0.5,	1,	2.5,	 0};

/* all fields belong to the thread that iterates the context */
typedef struct {
	GSource source;
	gint64 woke_us;	    /* monotonic, when the poll returned; 0 before a check */
	gint64 woke_cpu_ns; /* the thread's CPU time then */
	gint64 cpu_max_ns;
	HrMetricsHistogram *stall;
} HrLoopWatchSource;

struct _HrLoopWatch {
	HrLoopWatchSource *source;
};

static gint64
hr_loop_watch_thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (gint64)ts.tv_sec * G_GINT64_CONSTANT(1000000000) + ts.tv_nsec;
}

static gboolean
hr_loop_watch_prepare(GSource *source, gint *timeout)
{
	HrLoopWatchSource *w = (HrLoopWatchSource *)source;

	*timeout = -1;
	if (w->woke_us != 0) {
		gint64 cpu = hr_loop_watch_thread_cpu_ns() - w->woke_cpu_ns;
		hr_metrics_histogram_observe(w->stall, 0,
					     (g_get_monotonic_time() - w->woke_us) / 1e6);
		w->cpu_max_ns = MAX(w->cpu_max_ns, cpu);
		w->woke_us = 0;
	}
	return FALSE;
}

static gboolean
hr_loop_watch_check(GSource *source)
{
	HrLoopWatchSource *w = (HrLoopWatchSource *)source;

	w->woke_us = g_get_monotonic_time();
	w->woke_cpu_ns = hr_loop_watch_thread_cpu_ns();
	return FALSE;
}

static void
hr_loop_watch_finalize(GSource *source)
{
	hr_metrics_histogram_free(((HrLoopWatchSource *)source)->stall);
}

static GSourceFuncs hr_loop_watch_funcs = {
    .prepare = hr_loop_watch_prepare,
    .check = hr_loop_watch_check,
    .finalize = hr_loop_watch_finalize,
};

HrLoopWatch *
hr_loop_watch_new(void)
{
	HrLoopWatch *watch = g_new0(HrLoopWatch, 1);
	GSource *source = g_source_new(&hr_loop_watch_funcs, sizeof(HrLoopWatchSource));

	watch->source = (HrLoopWatchSource *)source;
	watch->source->stall = hr_metrics_histogram_new(
	    "hugeroom_main_loop_stall_seconds",
	    "wall-clock time each turn of the daemon's main loop spent before it polled again: "
	    "how long a request or guest message arriving meanwhile waited at most",
	    NULL, NULL, hr_loop_watch_bounds);
	g_source_set_priority(source, HR_LOOP_WATCH_PRIORITY);
	g_source_set_name(source, "hr-loop-watch");
	g_source_attach(source, g_main_context_get_thread_default());
	return watch;
}

void
hr_loop_watch_free(HrLoopWatch *watch)
{
	if (watch == NULL)
		return;
	g_source_destroy(&watch->source->source);
	g_source_unref(&watch->source->source);
	g_free(watch);
}

gint64
hr_loop_watch_cpu_max_us(HrLoopWatch *watch)
{
	return watch->source->cpu_max_ns / 1000;
}

void
hr_loop_watch_append(GString *out, HrLoopWatch *watch)
{
	hr_metrics_histogram_append(out, watch->source->stall);
	g_string_append(out, "# HELP hugeroom_main_loop_stall_cpu_max_seconds the longest CPU "
			     "time the main thread spent in one turn of its loop since the daemon "
			     "started\n# TYPE hugeroom_main_loop_stall_cpu_max_seconds gauge\n");
	g_string_append_printf(out, "hugeroom_main_loop_stall_cpu_max_seconds %.17g\n",
			       watch->source->cpu_max_ns / 1e9);
}
