/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* "key": value */
void
hr_json_add_int(JsonBuilder *b, const gchar *key, gint64 value);
/* "key": "ISO 8601 time", or null without a time */
void
hr_json_add_time(JsonBuilder *b, const gchar *key, GDateTime *dt);

G_END_DECLS
