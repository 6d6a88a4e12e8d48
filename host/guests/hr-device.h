/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <gio/gio.h>

#include "hr-config.h"
#include "hr-guest.h"

G_BEGIN_DECLS

/*
 * One connected QEMU device: reads its frames asynchronously, validates
 * every one, keeps its guest's state current and closes the connection on
 * the first frame that breaks a rule (SPEC.md 2.8).
 *
 * What happens to the connection goes up to its owner, the guest
 * registry (hr-core.c), through @hooks: the channel never calls it.
 */
typedef struct {
	/*
	 * a HELLO identified the peer: the guest it speaks for (takes @peer),
	 * or NULL and @error when the registry refuses it (a bound)
	 */
	HrGuest *(*attach)(gpointer owner, HrDevice *device, const HrChanHello *hello, HrPeer *peer,
			   GError **error);
	/* a new STATUS is in @guest */
	void (*status)(gpointer owner, HrGuest *guest);
	/* the connection closed: @guest NULL before a HELLO, @reason NULL when clean */
	void (*closed)(gpointer owner, HrDevice *device, HrGuest *guest, const gchar *reason);
} HrDeviceHooks;

HrDevice *
hr_device_new(const HrConfig *config, const HrDeviceHooks *hooks, gpointer owner,
	      GSocketConnection *connection, guint32 status_interval_ms);
HrDevice *
hr_device_ref(HrDevice *device);
void
hr_device_unref(HrDevice *device);
void
hr_device_start(HrDevice *device);
/* close the connection; @reason is logged and counted when not NULL */
void
hr_device_close(HrDevice *device, const gchar *reason);
gint
hr_device_get_pid(HrDevice *device);
/* queue a frame to the device */
void
hr_device_send(HrDevice *device, guint16 type, GBytes *payload);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrDevice, hr_device_unref)

G_END_DECLS
