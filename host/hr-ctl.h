/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* human tables for hugeroomctl, from the API's JSON */
gboolean
hr_ctl_render_guests(JsonNode *root, GString *out, GError **error);
gboolean
hr_ctl_render_guest(JsonNode *root, GString *out, GError **error);
/* "1.5 GiB" from 4 KiB pages */
gchar *
hr_ctl_format_pages(gint64 pages);

G_END_DECLS
