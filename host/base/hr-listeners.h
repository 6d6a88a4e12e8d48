/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/*
 * A list of callbacks, like a GObject signal's handlers without GObject:
 * the core's events and a request's changes each have one. A listener may
 * remove itself, or another, while the list is being emitted; those
 * removed are not called again, those added are called from the next
 * emission on.
 */
typedef struct _HrListeners HrListeners;

/* calls @func, cast to the list's own callback type, with @func_data */
typedef void (*HrListenersInvoke)(GCallback func, gpointer func_data, gpointer invoke_data);

HrListeners *
hr_listeners_new(void);
void
hr_listeners_free(HrListeners *listeners);
void
hr_listeners_add(HrListeners *listeners, GCallback func, gpointer func_data);
/* the first listener with @func and @func_data; FALSE when there is none */
gboolean
hr_listeners_remove(HrListeners *listeners, GCallback func, gpointer func_data);
void
hr_listeners_emit(HrListeners *listeners, HrListenersInvoke invoke, gpointer invoke_data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrListeners, hr_listeners_free)

G_END_DECLS
