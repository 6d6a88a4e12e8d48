/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <gio/gio.h>

#include "hr-guest.h"

G_BEGIN_DECLS

typedef struct _HrCore HrCore;

/*
 * One connected QEMU device: reads its frames asynchronously, validates
 * every one, keeps its guest's state current and closes the connection on
 * the first frame that breaks a rule (SPEC.md 2.8).
 */
HrDevice *
hr_device_new(HrCore *core, GSocketConnection *connection, guint32 status_interval_ms);
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
