/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the device's checks (hw/virtio/virtio-hugeroom-check.c, in
 * qemu-patches/) take from QEMU's qemu/osdep.h, for fuzz-device.c
 * outside QEMU: the C library, glib and QEMU_IS_ALIGNED.
 */
#ifndef QEMU_OSDEP_H
#define QEMU_OSDEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>

#define QEMU_IS_ALIGNED(n, m) (((n) % (m)) == 0)

#endif
