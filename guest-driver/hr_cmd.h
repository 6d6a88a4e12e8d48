/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-hugeroom guest driver: the command decoder's interface (hr_cmd.c).
 * Included by the module and by the user-space fuzz target, so it names
 * no kernel type beyond the fixed-width integers.
 */
#ifndef _HR_CMD_H
#define _HR_CMD_H

u32 virtio_hugeroom_check_cmd(const void *buf, u32 len, u64 features);

#endif /* _HR_CMD_H */
