/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrGuest"

#include "hr-guest.h"

#include <string.h>

GHashTable *
hr_guest_held_new(void)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
}

void
hr_guest_held_add(HrGuest *guest, GHashTable *set, guint64 gpa)
{
	(void)guest;
	g_hash_table_add(set, g_memdup2(&gpa, sizeof(gpa)));
}

HrGuest *
hr_guest_new(guint64 id, const HrChanHello *hello, gint pid)
{
	HrGuest *guest = g_new0(HrGuest, 1);
	guest->id = id;
	guest->ram = g_array_new(FALSE, TRUE, sizeof(HrRamRange));
	guest->held = hr_guest_held_new();
	guest->pending = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	hr_guest_update_identity(guest, hello, pid);
	return guest;
}

void
hr_guest_free(HrGuest *guest)
{
	if (guest == NULL)
		return;
	g_free(guest->name);
	g_free(guest->uuid);
	g_array_unref(guest->ram);
	g_clear_pointer(&guest->connected_at, g_date_time_unref);
	g_clear_pointer(&guest->disconnected_at, g_date_time_unref);
	hr_status_free(guest->status);
	g_hash_table_unref(guest->held);
	g_hash_table_unref(guest->pending);
	g_free(guest->last_result);
	g_free(guest->last_reject_reason);
	g_free(guest);
}

void
hr_guest_update_identity(HrGuest *guest, const HrChanHello *hello, gint pid)
{
	g_free(guest->name);
	guest->name = g_utf8_make_valid(hello->name, -1);
	memcpy(guest->uuid_bytes, hello->uuid, sizeof(guest->uuid_bytes));
	g_free(guest->uuid);
	guest->uuid = hr_chan_hello_uuid_to_string(hello);
	guest->pid = pid;
	guest->proto_version = MIN(hello->proto_version, VIRTIO_HUGEROOM_VERSION);
	guest->ram_size = hello->ram_size;
	guest->hello_features = hello->guest_features;
	g_array_set_size(guest->ram, 0);
	g_array_append_vals(guest->ram, hello->ram, hello->nr_ram);
}

static gboolean
hr_uuid_is_null(const guint8 *uuid)
{
	for (guint i = 0; i < 16; i++) {
		if (uuid[i] != 0)
			return FALSE;
	}
	return TRUE;
}

gboolean
hr_guest_matches(HrGuest *guest, const HrChanHello *hello)
{
	/* a VM without -uuid is known by its name alone */
	if (hr_uuid_is_null(hello->uuid) && hr_uuid_is_null(guest->uuid_bytes))
		return hello->name[0] != '\0' && g_strcmp0(guest->name, hello->name) == 0;
	return memcmp(guest->uuid_bytes, hello->uuid, sizeof(guest->uuid_bytes)) == 0;
}

gboolean
hr_guest_is_connected(HrGuest *guest)
{
	return guest->device != NULL;
}

void
hr_guest_reject(HrGuest *guest, const gchar *reason)
{
	guest->rejected++;
	g_free(guest->last_reject_reason);
	guest->last_reject_reason = g_strdup(reason);
}

gint64
hr_guest_status_age_ms(HrGuest *guest)
{
	if (guest->status == NULL)
		return -1;
	return (g_get_monotonic_time() - guest->status_at) / 1000;
}
