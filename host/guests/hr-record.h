/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * A debug aid for the fuzz corpus (tests/fuzz/README.md "A corpus from
 * real messages"): with HUGEROOM_RECORD_DIR set in hugeroomd's
 * environment, every channel frame it reads from a device or sends to one
 * is written out as inputs for the fuzz targets, DIR/TARGET/SHA1 (equal
 * inputs once): the frame for fuzz-chan, a GUEST_MSG's guest message (as
 * the guest put it on its virtqueue, SPEC 2.6) for fuzz-status or
 * fuzz-event and fuzz-device, a HOST_CMD's command for fuzz-cmd,
 * fuzz-device and, with the guest's features, fuzz-guest-cmd. Off
 * without the variable; it writes from the main loop, so it is for test
 * runs only.
 */

#include <glib.h>

G_BEGIN_DECLS

/* @from_device: read from the device, else sent to it; @guest_features as negotiated */
void
hr_record_frame(gboolean from_device, guint16 type, GBytes *payload, guint64 guest_features);

G_END_DECLS
