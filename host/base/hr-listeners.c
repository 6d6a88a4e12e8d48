/* SPDX-License-Identifier: GPL-2.0-only */

#include "hr-listeners.h"

typedef struct {
	GCallback func;
	gpointer func_data;
	gboolean removed;
} HrListener;

struct _HrListeners {
	GArray *list;	/* HrListener */
	guint emitting; /* nesting depth: removals only mark while > 0 */
};

HrListeners *
hr_listeners_new(void)
{
	HrListeners *listeners = g_new0(HrListeners, 1);
	listeners->list = g_array_new(FALSE, FALSE, sizeof(HrListener));
	return listeners;
}

void
hr_listeners_free(HrListeners *listeners)
{
	if (listeners == NULL)
		return;
	g_array_unref(listeners->list);
	g_free(listeners);
}

void
hr_listeners_add(HrListeners *listeners, GCallback func, gpointer func_data)
{
	HrListener l = {.func = func, .func_data = func_data};
	g_array_append_val(listeners->list, l);
}

gboolean
hr_listeners_remove(HrListeners *listeners, GCallback func, gpointer func_data)
{
	for (guint i = 0; i < listeners->list->len; i++) {
		HrListener *l = &g_array_index(listeners->list, HrListener, i);
		if (l->removed || l->func != func || l->func_data != func_data)
			continue;
		if (listeners->emitting > 0)
			l->removed = TRUE;
		else
			g_array_remove_index(listeners->list, i);
		return TRUE;
	}
	return FALSE;
}

void
hr_listeners_emit(HrListeners *listeners, HrListenersInvoke invoke, gpointer invoke_data)
{
	guint n = listeners->list->len;

	listeners->emitting++;
	for (guint i = 0; i < n; i++) {
		/* re-read: a callback may have added to (and so moved) the array */
		HrListener l = g_array_index(listeners->list, HrListener, i);
		if (!l.removed)
			invoke(l.func, l.func_data, invoke_data);
	}
	if (--listeners->emitting > 0)
		return;
	for (guint i = listeners->list->len; i > 0; i--) {
		if (g_array_index(listeners->list, HrListener, i - 1).removed)
			g_array_remove_index(listeners->list, i - 1);
	}
}
