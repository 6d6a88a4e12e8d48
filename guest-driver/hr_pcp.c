// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom: per-CPU page list policy from the host (SET_PCP, SPEC
 * 1.6.7).
 *
 * Mechanism: the driver writes vm.percpu_pagelist_high_fraction, the one
 * interface both 6.1 and 6.12 export for PCP sizing, through the file
 * /proc/sys/vm/percpu_pagelist_high_fraction (filp_open() and
 * kernel_write(); the sysctl's variable and handler are static).  The
 * kernel then sizes every pageset from that fraction itself, including
 * whenever it recomputes the sizes (CPU online and offline, memory
 * hotplug, min_free_kbytes and watermark_scale_factor changes), so the
 * policy survives every recompute with no window in which the kernel's own
 * sizing is back, and nothing here depends on the layout of the per-CPU
 * structures for correctness.  Setting the per-CPU fields directly would
 * instead need a hook after each recompute, and the kernel has none for
 * watermark changes.  What the fraction cannot do: `batch` (no kernel
 * since 5.14 lets it change), and a `high` per zone (it is per guest;
 * EXPLICIT gives the largest zone the `high` asked for and the others
 * their share, as the kernel would).
 *
 *   DEFAULT   the value in force before the first policy (the admin's)
 *   LATENCY   8: each zone's high_max, pinned (no auto-tuning)
 *   BALANCED  0: the kernel's own sizing (auto-tuning on 6.7 and later)
 *   DENSITY   INT_MAX: 4 * batch in every zone, whatever its size
 *   EXPLICIT  managed / (high * cpus) of the largest zone, >= 8
 *
 * The admin: the value found before the first policy is saved and written
 * back on DEFAULT, removal, freeze and device reset.  If someone else
 * writes the sysctl while a policy is in force, their value wins: the
 * driver notices it at the next report (or command), keeps it as the value
 * to restore, drops the policy and reports DEFAULT, and never writes over
 * it until the host sets a policy again.
 *
 * 6.7 and later clamp pcp->high into [high_min, high_max] only when a CPU
 * next allocates or frees in the zone, so after a change, and at each report
 * (a CPU that came online starts from 0), the driver clamps it itself,
 * under pcp->lock as the kernel's remote drain does, for the value in
 * force to show in /proc/zoneinfo.  Pages above the new high go back to
 * the buddy allocator at the CPU's next free, or, on 6.7 and later, within
 * seconds from the vmstat worker; DENSITY drains the lists at once
 * (virtio_hugeroom_pcp_drain()), and an EVACUATE drains each zone it touches.
 *
 * State is global, like the sysctl; the mutex serializes all of it.
 */

#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/memory_hotplug.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/page-flags.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/topology.h>

#include "hr_compat.h"
#include "hr_pcp.h"

#define HR_PCP_SYSCTL	"/proc/sys/vm/percpu_pagelist_high_fraction"
/* MIN_PERCPU_PAGELIST_HIGH_FRACTION: the kernel refuses 1..7. */
#define HR_PCP_MIN_FRACTION	8
#define HR_PCP_BALANCED_FRACTION	0
#define HR_PCP_DENSITY_FRACTION	INT_MAX
/* pageblocks virtio_hugeroom_pcp_drain() tries per zone */
#define HR_PCP_DRAIN_TRIES	16

static DEFINE_MUTEX(virtio_hugeroom_pcp_lock);
static struct {
	bool active;	/* a policy is in force: @saved is the admin's value */
	int saved;
	int applied;	/* what the driver last wrote */
	int now;	/* last read, for reports */
	u32 policy;
	u32 high;	/* EXPLICIT */
} hr_pcp;

static const char * const virtio_hugeroom_pcp_names[] = {
	[VIRTIO_HUGEROOM_PCP_DEFAULT] = "default",
	[VIRTIO_HUGEROOM_PCP_LATENCY] = "latency",
	[VIRTIO_HUGEROOM_PCP_BALANCED] = "balanced",
	[VIRTIO_HUGEROOM_PCP_DENSITY] = "density",
	[VIRTIO_HUGEROOM_PCP_EXPLICIT] = "explicit",
};

/*
 * The populated zone after @zone, or the first for NULL:
 * for_each_populated_zone() needs symbols modules do not get.
 */
static struct zone *virtio_hugeroom_pcp_next_zone(struct zone *zone)
{
	int nid = zone ? zone_to_nid(zone) : first_online_node;
	int zid = zone ? zone_idx(zone) + 1 : 0;

	for (; nid < MAX_NUMNODES; nid = next_online_node(nid), zid = 0) {
		for (; zid < MAX_NR_ZONES; zid++) {
			zone = &NODE_DATA(nid)->node_zones[zid];
			if (populated_zone(zone))
				return zone;
		}
	}
	return NULL;
}

static int virtio_hugeroom_pcp_sysctl(int *val, bool write)
{
	char buf[16];
	struct file *f;
	loff_t pos = 0;
	ssize_t n;
	int rc = 0;

	f = filp_open(HR_PCP_SYSCTL, write ? O_WRONLY : O_RDONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	if (write) {
		int len = scnprintf(buf, sizeof(buf), "%d\n", *val);

		n = kernel_write(f, buf, len, &pos);
		if (n != len)
			rc = n < 0 ? n : -EIO;
	} else {
		n = kernel_read(f, buf, sizeof(buf) - 1, &pos);
		if (n < 0) {
			rc = n;
		} else {
			buf[n] = '\0';
			rc = kstrtoint(strim(buf), 10, val);
		}
	}
	filp_close(f, NULL);
	return rc;
}

#ifdef VIRTIO_HUGEROOM_HAVE_PCP_HIGH_MIN
static void virtio_hugeroom_pcp_clamp(void)
{
	struct zone *zone;
	int cpu;

	for (zone = virtio_hugeroom_pcp_next_zone(NULL); zone;
	     zone = virtio_hugeroom_pcp_next_zone(zone)) {
		for_each_online_cpu(cpu) {
			struct per_cpu_pages *pcp;

			pcp = per_cpu_ptr(zone->per_cpu_pageset, cpu);
			spin_lock(&pcp->lock);
			pcp->high = clamp(pcp->high, READ_ONCE(pcp->high_min),
					  READ_ONCE(pcp->high_max));
			spin_unlock(&pcp->lock);
		}
	}
}
#else
/* Before 6.7 the kernel sets pcp->high itself. */
static void virtio_hugeroom_pcp_clamp(void)
{
}
#endif

/*
 * Give the pages idle on every CPU's lists of @zone back to the buddy
 * allocator now, not at each CPU's next free.  drain_all_pages() is not
 * exported; alloc_contig_range() drains the zone it works in once its
 * range is isolated, so take one free page of the zone with it (from the
 * first pageblocks whose head is free; one with unmovable pages refuses
 * the isolation, then the next is tried) and give it back.  Sleeps.
 */
void virtio_hugeroom_pcp_drain_zone(struct zone *zone)
{
	unsigned long pfn = ALIGN(zone->zone_start_pfn, pageblock_nr_pages);
	unsigned int tries = 0;

	for (; pfn < zone_end_pfn(zone) && tries < HR_PCP_DRAIN_TRIES;
	     pfn += pageblock_nr_pages) {
		struct page *page = pfn_to_online_page(pfn);

		if (!page || page_zone(page) != zone || !PageBuddy(page))
			continue;
		tries++;
		if (!virtio_hugeroom_acr(pfn, pfn + 1,
					 GFP_KERNEL | __GFP_NOWARN)) {
			free_contig_range(pfn, 1);
			break;
		}
	}
}

/*
 * DENSITY: drain every zone's lists (above), so that the next sweep and
 * EVACUATE see the blocks their pages belong to as free.  Sleeps.
 */
static void virtio_hugeroom_pcp_drain(void)
{
	struct zone *zone;

	for (zone = virtio_hugeroom_pcp_next_zone(NULL); zone;
	     zone = virtio_hugeroom_pcp_next_zone(zone))
		virtio_hugeroom_pcp_drain_zone(zone);
}

/*
 * EXPLICIT: the fraction that gives the largest zone a per-CPU high of
 * @high (the kernel splits managed / fraction over the node's CPUs), or
 * -EINVAL if the kernel cannot give it: below 4 * batch, or above the
 * high of the smallest fraction it accepts.
 */
static int virtio_hugeroom_pcp_explicit_fraction(u32 high)
{
	struct zone *zone, *big = NULL;
	unsigned long managed;
	unsigned int cpus;
	u64 f;

	for (zone = virtio_hugeroom_pcp_next_zone(NULL); zone;
	     zone = virtio_hugeroom_pcp_next_zone(zone))
		if (!big || zone_managed_pages(zone) > zone_managed_pages(big))
			big = zone;
	if (!big)
		return -EINVAL;
	cpus = cpumask_weight(cpumask_of_node(zone_to_nid(big)));
	if (!cpus)
		cpus = num_online_cpus();
	managed = zone_managed_pages(big);
	if (high < 4 * READ_ONCE(big->pageset_batch))
		return -EINVAL;
	f = div64_u64(managed, (u64)high * cpus);
	if (f < HR_PCP_MIN_FRACTION)
		return -EINVAL;
	return min_t(u64, f, INT_MAX);
}

/*
 * Under virtio_hugeroom_pcp_lock: read the sysctl, and if someone else changed it
 * while a policy was in force, let their value win.  Returns its value or
 * a negative errno.
 */
static int virtio_hugeroom_pcp_sync(struct device *dev, int *cur)
{
	int rc = virtio_hugeroom_pcp_sysctl(cur, false);

	if (rc)
		return rc;
	WRITE_ONCE(hr_pcp.now, *cur);
	if (hr_pcp.active && *cur != hr_pcp.applied) {
		dev_info(dev, "%s changed to %d by someone else: PCP policy %s dropped\n",
			 HR_PCP_SYSCTL, *cur, virtio_hugeroom_pcp_names[hr_pcp.policy]);
		hr_pcp.active = false;
		WRITE_ONCE(hr_pcp.policy, VIRTIO_HUGEROOM_PCP_DEFAULT);
		hr_pcp.high = 0;
	}
	return 0;
}

static int virtio_hugeroom_pcp_write(int cur, int target)
{
	int rc = 0;

	if (target != cur)
		rc = virtio_hugeroom_pcp_sysctl(&target, true);
	if (!rc) {
		hr_pcp.applied = target;
		WRITE_ONCE(hr_pcp.now, target);
		virtio_hugeroom_pcp_clamp();
	}
	return rc;
}

/*
 * SET_PCP, checked by virtio_hugeroom_check_cmd(): apply @policy (@high for
 * EXPLICIT) to every populated zone.  Returns the RESULT status; on any
 * failure nothing has changed.  Sleeps.
 */
u32 virtio_hugeroom_pcp_set(struct device *dev, u32 policy, u32 high)
{
	u32 status = VIRTIO_HUGEROOM_S_OK;
	int cur, target, rc;

	mutex_lock(&virtio_hugeroom_pcp_lock);
	rc = virtio_hugeroom_pcp_sync(dev, &cur);
	if (rc) {
		dev_warn(dev, "cannot read %s: %d\n", HR_PCP_SYSCTL, rc);
		status = VIRTIO_HUGEROOM_S_UNSUPPORTED;
		goto out;
	}
	switch (policy) {
	case VIRTIO_HUGEROOM_PCP_DEFAULT:
		target = hr_pcp.active ? hr_pcp.saved : cur;
		break;
	case VIRTIO_HUGEROOM_PCP_LATENCY:
		target = HR_PCP_MIN_FRACTION;
		break;
	case VIRTIO_HUGEROOM_PCP_BALANCED:
		target = HR_PCP_BALANCED_FRACTION;
		break;
	case VIRTIO_HUGEROOM_PCP_DENSITY:
		target = HR_PCP_DENSITY_FRACTION;
		break;
	default:
		target = virtio_hugeroom_pcp_explicit_fraction(high);
		break;
	}
	if (target < 0) {
		dev_info(dev, "PCP high %u is outside what the kernel can set\n",
			 high);
		status = VIRTIO_HUGEROOM_S_INVALID;
		goto out;
	}
	rc = virtio_hugeroom_pcp_write(cur, target);
	if (rc) {
		dev_warn(dev, "writing %d to %s: %d\n", target, HR_PCP_SYSCTL,
			 rc);
		status = VIRTIO_HUGEROOM_S_INVALID;
		goto out;
	}
	if (!hr_pcp.active)
		hr_pcp.saved = cur;
	hr_pcp.active = policy != VIRTIO_HUGEROOM_PCP_DEFAULT;
	WRITE_ONCE(hr_pcp.policy, policy);
	hr_pcp.high = high;
	if (policy == VIRTIO_HUGEROOM_PCP_DENSITY)
		virtio_hugeroom_pcp_drain();
out:
	mutex_unlock(&virtio_hugeroom_pcp_lock);
	return status;
}

/* Removal, freeze, device reset: back to the value before any policy. */
void virtio_hugeroom_pcp_restore(struct device *dev)
{
	int cur;

	mutex_lock(&virtio_hugeroom_pcp_lock);
	if (!virtio_hugeroom_pcp_sync(dev, &cur) && hr_pcp.active &&
	    virtio_hugeroom_pcp_write(cur, hr_pcp.saved))
		dev_warn(dev, "cannot restore %s to %d\n", HR_PCP_SYSCTL,
			 hr_pcp.saved);
	hr_pcp.active = false;
	WRITE_ONCE(hr_pcp.policy, VIRTIO_HUGEROOM_PCP_DEFAULT);
	hr_pcp.high = 0;
	mutex_unlock(&virtio_hugeroom_pcp_lock);
}

/*
 * Before each report: notice an admin's change, keep EXPLICIT's high when
 * the number of CPUs changed, and show the kernel's recomputed values.
 */
void virtio_hugeroom_pcp_check(struct device *dev)
{
	int cur, target;

	mutex_lock(&virtio_hugeroom_pcp_lock);
	if (virtio_hugeroom_pcp_sync(dev, &cur))
		goto out;
	if (!hr_pcp.active) {
		virtio_hugeroom_pcp_clamp();
		goto out;
	}
	target = cur;
	if (hr_pcp.policy == VIRTIO_HUGEROOM_PCP_EXPLICIT) {
		target = virtio_hugeroom_pcp_explicit_fraction(hr_pcp.high);
		if (target < 0)
			target = cur;	/* the nearest the kernel can do */
	}
	if (virtio_hugeroom_pcp_write(cur, target))
		dev_warn_ratelimited(dev, "cannot re-apply PCP policy\n");
out:
	mutex_unlock(&virtio_hugeroom_pcp_lock);
}

void virtio_hugeroom_pcp_fill_zone(struct virtio_hugeroom_zone *z)
{
	z->pcp_policy = READ_ONCE(hr_pcp.policy);
	z->pcp_fraction = cpu_to_le32(READ_ONCE(hr_pcp.now));
}

void virtio_hugeroom_pcp_show(struct seq_file *m)
{
	mutex_lock(&virtio_hugeroom_pcp_lock);
	seq_printf(m, "pcp_policy %s\npcp_fraction %d\npcp_saved %d\n",
		   virtio_hugeroom_pcp_names[hr_pcp.policy], hr_pcp.now,
		   hr_pcp.active ? hr_pcp.saved : hr_pcp.now);
	mutex_unlock(&virtio_hugeroom_pcp_lock);
}
