/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-hugeroom: per-CPU page list policy (SET_PCP, SPEC 1.6.7).
 */
#ifndef HR_PCP_H
#define HR_PCP_H

#include <linux/device.h>
#include <linux/seq_file.h>
#include <linux/types.h>

#include "virtio_hugeroom.h"

struct zone;

u32 virtio_hugeroom_pcp_set(struct device *dev, u32 policy, u32 high);
void virtio_hugeroom_pcp_restore(struct device *dev);
void virtio_hugeroom_pcp_check(struct device *dev);
void virtio_hugeroom_pcp_fill_zone(struct virtio_hugeroom_zone *z);
void virtio_hugeroom_pcp_show(struct seq_file *m);
void virtio_hugeroom_pcp_drain_zone(struct zone *zone);

#endif /* HR_PCP_H */
