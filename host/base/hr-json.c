/* SPDX-License-Identifier: GPL-2.0-only */
/* JSON members the API's objects (guests, requests, reservations, plans) share */

#include "hr-json.h"

void
hr_json_add_int(JsonBuilder *b, const gchar *key, gint64 value)
{
	json_builder_set_member_name(b, key);
	json_builder_add_int_value(b, value);
}

void
hr_json_add_time(JsonBuilder *b, const gchar *key, GDateTime *dt)
{
	json_builder_set_member_name(b, key);
	if (dt == NULL) {
		json_builder_add_null_value(b);
	} else {
		g_autofree gchar *str = g_date_time_format_iso8601(dt);
		json_builder_add_string_value(b, str);
	}
}
