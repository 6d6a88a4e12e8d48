/* SPDX-License-Identifier: GPL-2.0-or-later */
/* As in QEMU: the types come from qemu/osdep.h. */
