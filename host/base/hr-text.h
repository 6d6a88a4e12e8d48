/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/*
 * @text made safe for a terminal or a log line, as util-linux's tables
 * (libsmartcols) encode what they cannot print: control characters (a
 * newline, ESC), Unicode format characters (bidirectional overrides), line
 * separators, bytes that are not UTF-8 and the backslash itself as \xHH,
 * byte by byte; everything else as it is. Names come from guests and
 * domain XML, which anyone who runs a VM writes: the daemon's log lines
 * and hugeroomctl's tables both go through this.
 */
gchar *
hr_text_escape(const gchar *text);
/* would hr_text_escape() leave @text as it is? (cheap for plain ASCII) */
gboolean
hr_text_is_safe(const gchar *text);

G_END_DECLS
