/* SPDX-License-Identifier: GPL-2.0-only */
/* The commands a guest was sent, of every kind (hr-inflight.h) */

#include "hr-inflight.h"

struct _HrInflight {
	GHashTable *cmds;		   /* request id -> HrInflightCmd */
	guint counts[HR_INFLIGHT_N_KINDS]; /* per kind */
};

static void
hr_inflight_cmd_free(HrInflightCmd *cmd)
{
	if (cmd->data_free != NULL && cmd->data != NULL)
		cmd->data_free(cmd->data);
	g_free(cmd);
}

HrInflight *
hr_inflight_new(void)
{
	HrInflight *table = g_new0(HrInflight, 1);
	table->cmds = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL,
					    (GDestroyNotify)hr_inflight_cmd_free);
	return table;
}

void
hr_inflight_free(HrInflight *table)
{
	if (table == NULL)
		return;
	g_hash_table_unref(table->cmds);
	g_free(table);
}

HrInflightCmd *
hr_inflight_add(HrInflight *table, guint64 request_id, HrInflightKind kind, guint16 type,
		gpointer data, GDestroyNotify data_free)
{
	HrInflightCmd *cmd = g_new0(HrInflightCmd, 1);

	g_return_val_if_fail(kind < HR_INFLIGHT_N_KINDS, NULL);
	cmd->request_id = request_id;
	cmd->kind = kind;
	cmd->type = type;
	cmd->sent_at = g_get_monotonic_time();
	cmd->data = data;
	cmd->data_free = data_free;
	if (!g_hash_table_insert(table->cmds, &cmd->request_id, cmd))
		g_warning("request id %" G_GUINT64_FORMAT " was in flight already", request_id);
	else
		table->counts[kind]++;
	return cmd;
}

HrInflightCmd *
hr_inflight_lookup(HrInflight *table, guint64 request_id, HrInflightKind kind)
{
	HrInflightCmd *cmd = g_hash_table_lookup(table->cmds, &request_id);
	if (cmd == NULL || (kind != HR_INFLIGHT_N_KINDS && cmd->kind != kind))
		return NULL;
	return cmd;
}

gboolean
hr_inflight_remove(HrInflight *table, guint64 request_id)
{
	HrInflightCmd *cmd = g_hash_table_lookup(table->cmds, &request_id);
	if (cmd == NULL)
		return FALSE;
	table->counts[cmd->kind]--;
	return g_hash_table_remove(table->cmds, &request_id);
}

guint
hr_inflight_count(HrInflight *table, HrInflightKind kind)
{
	if (kind >= HR_INFLIGHT_N_KINDS)
		return g_hash_table_size(table->cmds);
	return table->counts[kind];
}

void
hr_inflight_foreach_remove(HrInflight *table, HrInflightKind kind, HrInflightFunc func,
			   gpointer user_data)
{
	g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(guint64));
	GHashTableIter iter;
	HrInflightCmd *cmd;

	/* by id: @func may end other commands, or add some */
	g_hash_table_iter_init(&iter, table->cmds);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&cmd)) {
		if (kind == HR_INFLIGHT_N_KINDS || cmd->kind == kind)
			g_array_append_val(ids, cmd->request_id);
	}
	for (guint i = 0; i < ids->len; i++) {
		guint64 id = g_array_index(ids, guint64, i);
		cmd = hr_inflight_lookup(table, id, kind);
		if (cmd != NULL && func(cmd, user_data))
			hr_inflight_remove(table, id);
	}
}
