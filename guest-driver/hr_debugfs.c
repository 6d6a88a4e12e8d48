// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: debugfs files every build has.
 *
 * /sys/kernel/debug/virtio_hugeroom/ (the first device only):
 *   status      counters and the last report sent, decoded
 *   report_now  write 1: send a report now
 *   held        one held block's gpa per line
 * The test build adds its aids to the same directory (hr_test.c).
 *
 * Locks: status takes report_lock, then event_lock and hold_lock under
 * it, as hr_internal.h orders them; held takes hold_lock.  Readers sleep.
 * debugfs_remove_recursive() in remove waits for readers still inside.
 */

#include "hr_internal.h"
#include "hr_pcp.h"

static const char * const virtio_hugeroom_vmstat_names[] = {
	[VIRTIO_HUGEROOM_VS_COMPACT_STALL] = "compact_stall",
	[VIRTIO_HUGEROOM_VS_COMPACT_FAIL] = "compact_fail",
	[VIRTIO_HUGEROOM_VS_COMPACT_SUCCESS] = "compact_success",
	[VIRTIO_HUGEROOM_VS_COMPACT_MIGRATE_SCANNED] = "compact_migrate_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_FREE_SCANNED] = "compact_free_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_ISOLATED] = "compact_isolated",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_WAKE] = "compact_daemon_wake",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_MIGRATE_SCANNED] =
		"compact_daemon_migrate_scanned",
	[VIRTIO_HUGEROOM_VS_COMPACT_DAEMON_FREE_SCANNED] =
		"compact_daemon_free_scanned",
	[VIRTIO_HUGEROOM_VS_PGMIGRATE_SUCCESS] = "pgmigrate_success",
	[VIRTIO_HUGEROOM_VS_PGMIGRATE_FAIL] = "pgmigrate_fail",
	[VIRTIO_HUGEROOM_VS_THP_FAULT_ALLOC] = "thp_fault_alloc",
	[VIRTIO_HUGEROOM_VS_THP_FAULT_FALLBACK] = "thp_fault_fallback",
	[VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC] = "thp_collapse_alloc",
	[VIRTIO_HUGEROOM_VS_THP_COLLAPSE_ALLOC_FAILED] =
		"thp_collapse_alloc_failed",
	[VIRTIO_HUGEROOM_VS_THP_SPLIT_PAGE] = "thp_split_page",
};

/* ---------------------------------------------------------------------- */
/* debugfs */

/* Start a "zone <nid> <idx> <name> <what>" line, ending the previous one. */
static void virtio_hugeroom_show_zone(struct seq_file *m,
				      const struct virtio_hugeroom_zone *z,
				      const char *what)
{
	if (strcmp(what, "nr_free"))
		seq_putc(m, '\n');
	seq_printf(m, "zone %u %u %.12s %s", le16_to_cpu(z->nid), z->zone_idx,
		   z->name, what);
}

static int virtio_hugeroom_status_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	const struct virtio_hugeroom_status *st = vh->report;
	const struct virtio_hugeroom_zone *z = (const void *)(st + 1);
	const struct virtio_hugeroom_candidate *c;
	unsigned int i, j, nr_zones, nr_cands;

	mutex_lock(&vh->report_lock);
	seq_printf(m, "reports_sent %llu\nreport_errors %llu\n",
		   vh->reports_sent, vh->report_errors);
	seq_printf(m, "cmds_received %llu\ncmds_invalid %llu\n",
		   vh->cmds_received, vh->cmds_invalid);
	seq_printf(m, "scan_sweeps %llu\nscan_last_sweep_ns %llu\n",
		   vh->scan.sweeps, vh->scan.last_sweep_ns);
	seq_printf(m, "scan_blocks %lu\n", vh->scan.done->nr_blocks);
	mutex_lock(&vh->event_lock);
	virtio_hugeroom_event_settle(vh);
	seq_printf(m, "events_sent %llu\nevent_errors %llu\n",
		   vh->events_sent, vh->event_errors);
	seq_printf(m, "event_timeouts %llu\nevent_late_acks %llu\n",
		   vh->event_timeouts, vh->event_late_acks);
	seq_printf(m, "eventq_stuck %u\n", vh->event_stuck);
	mutex_unlock(&vh->event_lock);
	spin_lock(&vh->hold_lock);
	seq_printf(m, "held_blocks_driver %u\nhold_limbo %u\n", vh->nr_held,
		   vh->nr_limbo);
	seq_printf(m, "blocks_held_total %llu\n", vh->blocks_held_total);
	seq_printf(m, "blocks_returned_host %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_HOST]);
	seq_printf(m, "blocks_returned_pressure %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_PRESSURE]);
	seq_printf(m, "blocks_returned_unload %llu\n",
		   vh->blocks_returned[VIRTIO_HUGEROOM_RET_UNLOAD]);
	seq_puts(m, "evac_blocks_failed");
	for (i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
		seq_printf(m, " %llu", vh->evac_failed[i]);
	seq_printf(m, "\nevac_pages_estimate %llu\n", vh->evac_pages_estimate);
	seq_printf(m, "evac_pages_migrated %llu\n", vh->evac_pages_migrated);
	seq_printf(m, "evac_taken_blocks %llu\nevac_taken_used %llu\n",
		   vh->evac_taken_blocks, vh->evac_taken_used);
	seq_printf(m, "evac_taken_migrated %llu\n", vh->evac_taken_migrated);
	seq_printf(m, "evac_claim_ns %llu\nevac_claim_calls %llu\n",
		   vh->evac_claim_ns, vh->evac_claim_calls);
	seq_printf(m, "evac_claim_failed %llu\n", vh->evac_claim_failed);
	seq_printf(m, "evac_sweep_ns %llu\nevac_block_ns %llu\nevac_block_calls %llu\n",
		   vh->evac_sweep_ns, vh->evac_block_ns, vh->evac_block_calls);
	seq_printf(m, "evac_span_calls %llu\nevac_span_blocks %llu\n",
		   vh->evac_span_calls, vh->evac_span_blocks);
	seq_printf(m, "evac_call_enomem %llu\n", vh->evac_call_enomem);
	seq_printf(m, "evac_take_ns %llu\nevac_hold_ns %llu\nevac_hold_sends %llu\n",
		   vh->evac_take_ns, vh->evac_hold_ns, vh->evac_hold_sends);
	seq_printf(m, "evac_claims_supported %d\n",
		   virtio_hugeroom_claims_supported());
	seq_printf(m, "evac_claims_pressure %llu\n", vh->claims_pressure);
	spin_unlock(&vh->hold_lock);
	seq_printf(m, "evac_claimed %lu\nevac_claims_isolated %llu\n",
		   READ_ONCE(vh->nr_claimed), READ_ONCE(vh->claims_isolated));
	seq_printf(m, "pressure_polls %llu\npressure_idle_ns %llu\n",
		   READ_ONCE(vh->pressure_polls),
		   READ_ONCE(vh->pressure_idle_ns));
	seq_printf(m, "pressure_returns %llu\npressure_blocks %llu\n",
		   READ_ONCE(vh->pressure_returns),
		   READ_ONCE(vh->pressure_blocks));
	seq_printf(m, "pressure_ahead_pages %lu\n",
		   READ_ONCE(vh->pressure_ahead));
	virtio_hugeroom_pcp_show(m);
	if (!vh->report_len) {
		seq_puts(m, "report none\n");
		goto out_unlock;
	}

	nr_zones = le16_to_cpu(st->nr_zones);
	nr_cands = le16_to_cpu(st->nr_candidates);
	c = (const void *)&z[nr_zones];
	seq_printf(m, "seq %llu\n", le64_to_cpu(st->seq));
	seq_printf(m, "report_bytes %u\n", vh->report_len);
	seq_printf(m, "build_ns %llu\n", le64_to_cpu(st->build_ns));
	seq_printf(m, "uptime_ns %llu\n", le64_to_cpu(st->uptime_ns));
	seq_printf(m, "request_id %llu\n", le64_to_cpu(st->hdr.request_id));
	seq_printf(m, "flags 0x%x\n", le16_to_cpu(st->hdr.flags));
	seq_printf(m, "mem_total_pages %llu\n",
		   le64_to_cpu(st->mem_total_pages));
	seq_printf(m, "mem_free_pages %llu\n",
		   le64_to_cpu(st->mem_free_pages));
	seq_printf(m, "mem_available_pages %llu\n",
		   le64_to_cpu(st->mem_available_pages));
	seq_printf(m, "held_blocks %u\n", le32_to_cpu(st->held_blocks));
	seq_printf(m, "page_shift %u\n", le32_to_cpu(st->page_shift));
	seq_printf(m, "pageblock_order %u\n",
		   le32_to_cpu(st->pb_order));
	seq_printf(m, "nr_zones %u\n", nr_zones);
	seq_printf(m, "nr_candidates %u\n", nr_cands);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_VMSTAT; i++)
		seq_printf(m, "%s %llu\n", virtio_hugeroom_vmstat_names[i],
			   le64_to_cpu(st->vmstat[i]));

	for (i = 0; i < nr_zones; i++, z++) {
		virtio_hugeroom_show_zone(m, z, "nr_free");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_ORDERS; j++)
			seq_printf(m, " %llu", le64_to_cpu(z->nr_free[j]));
		virtio_hugeroom_show_zone(m, z, "pages");
		seq_printf(m, " free %llu managed %llu spanned %llu start_pfn %llu",
			   le64_to_cpu(z->free_pages),
			   le64_to_cpu(z->managed_pages),
			   le64_to_cpu(z->spanned_pages),
			   le64_to_cpu(z->start_pfn));
		virtio_hugeroom_show_zone(m, z, "wmark");
		seq_printf(m, " min %llu low %llu high %llu",
			   le64_to_cpu(z->wmark_min),
			   le64_to_cpu(z->wmark_low),
			   le64_to_cpu(z->wmark_high));
		virtio_hugeroom_show_zone(m, z, "pb_mt");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_MT; j++)
			seq_printf(m, " %llu", le64_to_cpu(z->nr_free_pb_mt[j]));
		virtio_hugeroom_show_zone(m, z, "hist");
		for (j = 0; j < VIRTIO_HUGEROOM_NR_HIST; j++)
			seq_printf(m, " %u", le32_to_cpu(z->hist[j]));
		virtio_hugeroom_show_zone(m, z, "pcp");
		seq_printf(m, " count %u high %u batch %u high_min %u high_max %u policy %u fraction %u\n",
			   le32_to_cpu(z->pcp_count), le32_to_cpu(z->pcp_high),
			   le32_to_cpu(z->pcp_batch),
			   le32_to_cpu(z->pcp_high_min),
			   le32_to_cpu(z->pcp_high_max), z->pcp_policy,
			   le32_to_cpu(z->pcp_fraction));
	}
	for (i = 0; i < nr_cands; i++, c++)
		seq_printf(m, "candidate 0x%llx free %u mt %u zone %u\n",
			   le64_to_cpu(c->gpa), le16_to_cpu(c->free_pages),
			   c->migratetype, c->zone);
out_unlock:
	mutex_unlock(&vh->report_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_status);

static ssize_t virtio_hugeroom_report_now_write(struct file *file,
						const char __user *ubuf,
						size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	unsigned int val;
	int rc;

	rc = kstrtouint_from_user(ubuf, count, 0, &val);
	if (rc)
		return rc;
	if (val != 1)
		return -EINVAL;
	rc = virtio_hugeroom_report(vh, 0, true);
	return rc ? rc : count;
}

static const struct file_operations virtio_hugeroom_report_now_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_report_now_write,
	.llseek = noop_llseek,
};

/* "held": one held block's gpa per line, most recently held first. */
static int virtio_hugeroom_held_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	struct page *page;

	spin_lock(&vh->hold_lock);
	list_for_each_entry(page, &vh->held, lru)
		seq_printf(m, "0x%llx\n", (u64)PFN_PHYS(page_to_pfn(page)));
	spin_unlock(&vh->hold_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_held);

void virtio_hugeroom_debugfs_init(struct virtio_hugeroom *vh)
{
	struct dentry *dir;

	BUILD_BUG_ON(ARRAY_SIZE(virtio_hugeroom_vmstat_names) !=
		     VIRTIO_HUGEROOM_NR_VMSTAT);
	dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	if (IS_ERR(dir)) {
		/* A second device: only the first one gets debugfs files. */
		dev_info(&vh->vdev->dev, "no debugfs directory: %ld\n",
			 PTR_ERR(dir));
		return;
	}
	vh->debugfs = dir;
	debugfs_create_file("status", 0400, dir, vh,
			    &virtio_hugeroom_status_fops);
	debugfs_create_file("report_now", 0200, dir, vh,
			    &virtio_hugeroom_report_now_fops);
	debugfs_create_file("held", 0400, dir, vh, &virtio_hugeroom_held_fops);
	virtio_hugeroom_test_debugfs(vh, dir);
}
