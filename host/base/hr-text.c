/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrText"

#include "hr-text.h"

#include <string.h>

gchar *
hr_text_escape(const gchar *text)
{
	g_autoptr(GString) out = g_string_new(NULL);
	const gchar *p = text != NULL ? text : "";
	const gchar *end = p + strlen(p);

	while (p < end) {
		gunichar c = g_utf8_get_char_validated(p, end - p);
		const gchar *next =
		    c == (gunichar)-1 || c == (gunichar)-2 ? p + 1 : g_utf8_next_char(p);
		gboolean safe = next == p + 1 ? c >= 0x20 && c < 0x7f && c != '\\' : TRUE;

		if (next > p + 1) {
			switch (g_unichar_type(c)) {
			case G_UNICODE_CONTROL:
			case G_UNICODE_FORMAT:
			case G_UNICODE_LINE_SEPARATOR:
			case G_UNICODE_PARAGRAPH_SEPARATOR:
			case G_UNICODE_SURROGATE:
			case G_UNICODE_UNASSIGNED:
				safe = FALSE;
				break;
			default:
				break;
			}
		}
		if (safe) {
			g_string_append_len(out, p, next - p);
		} else {
			/* as util-linux encodes what it cannot print: each byte as \xHH */
			for (const gchar *b = p; b < next; b++)
				g_string_append_printf(out, "\\x%02x", (guint)(guchar)*b);
		}
		p = next;
	}
	return g_string_free(g_steal_pointer(&out), FALSE);
}

gboolean
hr_text_is_safe(const gchar *text)
{
	g_autofree gchar *escaped = NULL;

	for (const gchar *p = text; p != NULL && *p != '\0'; p++)
		if ((guchar)*p < 0x20 || (guchar)*p >= 0x7f || *p == '\\')
			goto slow;
	return TRUE;
slow:
	/* not plain ASCII: what the escape would change */
	escaped = hr_text_escape(text);
	return strcmp(escaped, text) == 0;
}
