/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/*
 * How the list tables (guests, reservations, requests, host) print:
 * hugeroomctl's --output COLUMNS, --noheadings and --raw. The tables come
 * from libsmartcols, which sizes the columns and encodes what a terminal
 * must not get raw (a newline or ESC in a guest's name) as \xHH.
 */
typedef struct {
	gchar **columns; /* NULL: all; names checked by hr_ctl_check_output() */
	gboolean noheadings;
	gboolean raw;
} HrCtlTableOptions;

void
hr_ctl_set_table_options(const HrCtlTableOptions *options);
/* is @table a list table that takes the options? */
gboolean
hr_ctl_table_exists(const gchar *table);
/* do the columns @columns exist in list table @table? */
gboolean
hr_ctl_check_output(const gchar *table, gchar **columns, GError **error);
/* "  NAME  what it is\n" for each column of @table */
gchar *
hr_ctl_table_help(const gchar *table);

/* the largest SIZE: the API's bytes are a signed 64-bit number */
#define HR_CTL_SIZE_MAX G_MAXINT64
/*
 * hugeroomctl's SIZE: a whole number with an optional K, M, G, T, P or E
 * (powers of 1024; "4G", "4GiB", "4GB" all mean 4 << 30), 1 byte to
 * HR_CTL_SIZE_MAX. Errors name the limit they passed.
 */
gboolean
hr_ctl_parse_size(const gchar *str, guint64 *bytes, GError **error);

/* human tables for hugeroomctl, from the API's JSON */
gboolean
hr_ctl_render_guests(JsonNode *root, GString *out, GError **error);
gboolean
hr_ctl_render_guest(JsonNode *root, GString *out, GError **error);
/* GET /v1/guests/{name}/requests as a table */
gboolean
hr_ctl_render_requests(JsonNode *root, GString *out, GError **error);
/* one request (GET .../requests/{id}): what was asked, what it did */
gboolean
hr_ctl_render_request(JsonNode *root, GString *out, GError **error);
/*
 * One line of progress for a request, @width columns at most: a bar when
 * the target is known, then state, blocks, failures, pages and time.
 */
gchar *
hr_ctl_progress_line(JsonNode *root, guint width, gboolean bar);
/* "1.2 s", "350 ms", "12 us" */
gchar *
hr_ctl_format_us(gint64 us);
/* "3.0 GiB"-style size from 4 KiB pages */
gchar *
hr_ctl_format_pages(gint64 pages);

/* reservations: GET /v1/reservations, one reservation with its steps */
gboolean
hr_ctl_render_reservations(JsonNode *root, GString *out, GError **error);
gboolean
hr_ctl_render_reservation(JsonNode *root, GString *out, GError **error);
gchar *
hr_ctl_reservation_progress_line(JsonNode *root, guint width, gboolean bar);
/* GET /v1/host, per node */
gboolean
hr_ctl_render_host(JsonNode *root, GString *out, GError **error);

/*
 * hugeroomctl status: {"host": GET /v1/host, "reservations": GET
 * /v1/reservations, "guests": GET /v1/guests} in one view
 */
gboolean
hr_ctl_render_status(JsonNode *root, GString *out, GError **error);
/* POST /v1/plan: what the planner would ask of which donors */
gboolean
hr_ctl_render_plan(JsonNode *root, GString *out, GError **error);

G_END_DECLS
