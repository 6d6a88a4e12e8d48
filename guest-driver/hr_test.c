// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: test aids, only in a test build.
 *
 * Kbuild links this file only with CONFIG_VIRTIO_HUGEROOM_TEST=y
 * (scripts/build-module.sh --test); hr_internal.h stubs its hooks out
 * otherwise, so the module users load has none of this code.  The aids
 * (debugfs pin_unmovable, inject, fault_inject) pin memory that nothing
 * can migrate, send malformed messages and delay or stall the driver.
 *
 * Locks: pin_lock (a mutex, alone) guards the pinned pages; injected
 * STATUS messages are sent under report_lock, injected HOLDs and the
 * event_stall flags under event_lock; hold_lock is taken alone to pick a
 * held block.  Everything here runs in a debugfs writer and sleeps.
 */

#include "hr_internal.h"

/* ---------------------------------------------------------------------- */
/*
 * Test aids, only in a test build (make CONFIG_VIRTIO_HUGEROOM_TEST=y, as
 * scripts/build-module.sh --test does): debugfs files that pin memory that
 * nothing can migrate and send malformed messages.  The module users load
 * has none of this code.
 */
static void virtio_hugeroom_unpin(struct virtio_hugeroom *vh)
{
	unsigned int i;

	for (i = 0; i < vh->nr_pins; i++)
		__free_page(vh->pins[i]);
	kvfree(vh->pins);
	vh->pins = NULL;
	vh->nr_pins = 0;
}

/*
 * "pin_unmovable", a test aid: writing N keeps N pages that nothing can
 * migrate, so that a test can name a block that must fail with
 * R_UNMOVABLE.  By default they come from movable pageblocks
 * (GFP_HIGHUSER_MOVABLE, never put on an LRU: like a long-term pin), which
 * EVACUATE accepts and alloc_contig_range() cannot empty; "kernel N"
 * allocates GFP_KERNEL pages instead (unmovable pageblocks: R_ZONE).
 * Writing 0 frees them; so does unloading.  Reading lists their gpas.
 */
static ssize_t virtio_hugeroom_pin_write(struct file *file,
					 const char __user *ubuf,
					 size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh =
		((struct seq_file *)file->private_data)->private;
	gfp_t gfp = GFP_HIGHUSER_MOVABLE;
	char buf[32], *p;
	size_t n = min(count, sizeof(buf) - 1);
	unsigned int nr, i;
	int rc;

	if (copy_from_user(buf, ubuf, n))
		return -EFAULT;
	buf[n] = '\0';
	p = strim(buf);
	if (str_has_prefix(p, "kernel ")) {
		gfp = GFP_KERNEL;
		p = strim(p + strlen("kernel "));
	}
	rc = kstrtouint(p, 0, &nr);
	if (rc)
		return rc;
	if (nr > VIRTIO_HUGEROOM_MAX_PINS)
		return -E2BIG;

	mutex_lock(&vh->pin_lock);
	virtio_hugeroom_unpin(vh);
	if (nr) {
		vh->pins = kvcalloc(nr, sizeof(*vh->pins), GFP_KERNEL);
		if (!vh->pins) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		for (i = 0; i < nr; i++) {
			vh->pins[i] = alloc_page(gfp | __GFP_NOWARN);
			if (!vh->pins[i]) {
				rc = -ENOMEM;
				break;
			}
			vh->nr_pins++;
		}
	}
out_unlock:
	mutex_unlock(&vh->pin_lock);
	return rc ? rc : count;
}

static int virtio_hugeroom_pin_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	unsigned int i;

	mutex_lock(&vh->pin_lock);
	for (i = 0; i < vh->nr_pins; i++)
		seq_printf(m, "0x%llx\n",
			   (u64)PFN_PHYS(page_to_pfn(vh->pins[i])));
	mutex_unlock(&vh->pin_lock);
	return 0;
}

static int virtio_hugeroom_pin_open(struct inode *inode, struct file *file)
{
	return single_open(file, virtio_hugeroom_pin_show, inode->i_private);
}

static const struct file_operations virtio_hugeroom_pin_fops = {
	.owner = THIS_MODULE,
	.open = virtio_hugeroom_pin_open,
	.read = seq_read,
	.write = virtio_hugeroom_pin_write,
	.llseek = seq_lseek,
	.release = single_release,
};

enum virtio_hugeroom_inject {
	VIRTIO_HUGEROOM_INJ_BAD_LEN,
	VIRTIO_HUGEROOM_INJ_BAD_TYPE,
	VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE,
	VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES,
	VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME,
	VIRTIO_HUGEROOM_INJ_TRUNCATED,
	/* Hostile lists on eventq, from here on. */
	VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE,
	VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED,
	VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE,
	VIRTIO_HUGEROOM_INJ_HOLD_HELD,
	VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED,
};

static const char * const virtio_hugeroom_inject_names[] = {
	[VIRTIO_HUGEROOM_INJ_BAD_LEN] = "bad_len",
	[VIRTIO_HUGEROOM_INJ_BAD_TYPE] = "bad_type",
	[VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE] = "unaligned_candidate",
	[VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES] = "too_many_zones",
	[VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME] = "bad_zone_name",
	[VIRTIO_HUGEROOM_INJ_TRUNCATED] = "truncated",
	[VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE] = "hold_outside",
	[VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED] = "hold_unaligned",
	[VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE] = "hold_duplicate",
	[VIRTIO_HUGEROOM_INJ_HOLD_HELD] = "hold_held",
	[VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED] = "hold_oversized",
};

/* A request id no daemon hands out, for injected HOLDs. */
#define VIRTIO_HUGEROOM_INJ_REQUEST	(U64_MAX - 1)
/* Block aligned, far outside any guest's RAM (SPEC caps pfns at 2^52). */
#define VIRTIO_HUGEROOM_INJ_FAR_GPA	BIT_ULL(50)

/*
 * Send a hostile HOLD of kind @what on eventq; the device must reject it
 * whole (ACK_INVALID) and discard nothing.  Only addresses that cannot
 * hurt the guest should a device accept them: far outside RAM, or blocks
 * the device holds (and so has discarded) already.
 */
static int virtio_hugeroom_inject_hold(struct virtio_hugeroom *vh, int what)
{
	struct virtio_hugeroom_evbuf *eb;
	struct virtio_hugeroom_blocks *msg;
	__le64 *gpas;
	u32 nr = 1, len;
	u64 held = 0;
	int rc;

	spin_lock(&vh->hold_lock);
	if (!list_empty(&vh->held))
		held = PFN_PHYS(page_to_pfn(list_first_entry(&vh->held,
							     struct page,
							     lru)));
	spin_unlock(&vh->hold_lock);
	if (!held && what != VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE &&
	    what != VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED)
		return -ENODATA;

	mutex_lock(&vh->event_lock);
	eb = virtio_hugeroom_event_get(vh);
	if (!eb) {
		mutex_unlock(&vh->event_lock);
		return -EBUSY;
	}
	msg = eb->msg;
	gpas = (void *)(msg + 1);
	memset(msg, 0, sizeof(*msg));
	msg->hdr.type = cpu_to_le16(VIRTIO_HUGEROOM_MSG_HOLD);
	msg->hdr.request_id = cpu_to_le64(VIRTIO_HUGEROOM_INJ_REQUEST);
	switch (what) {
	case VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE:
		gpas[0] = cpu_to_le64(VIRTIO_HUGEROOM_INJ_FAR_GPA);
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_UNALIGNED:
		gpas[0] = cpu_to_le64(VIRTIO_HUGEROOM_INJ_FAR_GPA + PAGE_SIZE);
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_DUPLICATE:
		gpas[0] = cpu_to_le64(held);
		gpas[1] = cpu_to_le64(held);
		nr = 2;
		break;
	case VIRTIO_HUGEROOM_INJ_HOLD_HELD:
		gpas[0] = cpu_to_le64(held);
		break;
	default:
		/* nr_blocks * 8 wraps to 8 in 32 bits: one gpa sent. */
		gpas[0] = cpu_to_le64(held);
		nr = 0x20000001;
		break;
	}
	len = sizeof(*msg) + sizeof(*gpas) *
	      (what == VIRTIO_HUGEROOM_INJ_HOLD_OVERSIZED ? 1 : nr);
	msg->hdr.len = cpu_to_le32(len);
	msg->nr_blocks = cpu_to_le32(nr);
	rc = virtio_hugeroom_event_send(vh, eb, len, NULL);
	mutex_unlock(&vh->event_lock);
	dev_info(&vh->vdev->dev, "injected %s (%u bytes): ack %d\n",
		 virtio_hugeroom_inject_names[what], len, rc);
	if (!rc)
		dev_warn(&vh->vdev->dev, "device accepted a hostile %s\n",
			 virtio_hugeroom_inject_names[what]);
	/* Rejected is the expected outcome; a transport failure is not. */
	return rc == -EINVAL || !rc ? 0 : rc;
}

/*
 * Derive a malformed STATUS of kind @what from the last report into
 * vh->inject.  Returns the number of bytes to send.  report_lock held.
 */
static u32 virtio_hugeroom_make_inject(struct virtio_hugeroom *vh, int what)
{
	struct virtio_hugeroom_status *st = vh->inject;
	struct virtio_hugeroom_zone *z = (void *)(st + 1);
	struct virtio_hugeroom_candidate *c;
	u32 len = vh->report_len;
	u16 nr_zones, nr_cands;
	unsigned int i;

	memcpy(st, vh->report, len);
	nr_zones = le16_to_cpu(st->nr_zones);
	nr_cands = le16_to_cpu(st->nr_candidates);
	c = (void *)&z[nr_zones];

	switch (what) {
	case VIRTIO_HUGEROOM_INJ_BAD_LEN:
		st->hdr.len = cpu_to_le32(len - sizeof(*c));
		break;
	case VIRTIO_HUGEROOM_INJ_BAD_TYPE:
		st->hdr.type = cpu_to_le16(0x7f);
		break;
	case VIRTIO_HUGEROOM_INJ_UNALIGNED_CANDIDATE:
		if (!nr_cands) {
			memset(c, 0, sizeof(*c));
			c->free_pages = cpu_to_le16(1);
			c->migratetype = VIRTIO_HUGEROOM_MT_MOVABLE;
			st->nr_candidates = cpu_to_le16(1);
			len += sizeof(*c);
		}
		c->gpa = cpu_to_le64(le64_to_cpu(c->gpa) + PAGE_SIZE);
		break;
	case VIRTIO_HUGEROOM_INJ_TOO_MANY_ZONES:
		/* Consistent length, but more zones than any device accepts. */
		for (i = 1; i <= VIRTIO_HUGEROOM_MAX_ZONES; i++)
			z[i] = z[0];
		st->nr_zones = cpu_to_le16(VIRTIO_HUGEROOM_MAX_ZONES + 1);
		st->nr_candidates = 0;
		len = sizeof(*st) + (VIRTIO_HUGEROOM_MAX_ZONES + 1) * sizeof(*z);
		break;
	case VIRTIO_HUGEROOM_INJ_BAD_ZONE_NAME:
		/* Not NUL terminated, and not printable. */
		memset(z->name, 0x01, sizeof(z->name));
		break;
	case VIRTIO_HUGEROOM_INJ_TRUNCATED:
		/* hdr.len promises the whole report; half a zone arrives. */
		return sizeof(*st) + sizeof(*z) / 2;
	}
	if (what != VIRTIO_HUGEROOM_INJ_BAD_LEN)
		st->hdr.len = cpu_to_le32(len);
	return len;
}

static ssize_t virtio_hugeroom_inject_write(struct file *file,
					    const char __user *ubuf,
					    size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	char name[32];
	size_t n = min(count, sizeof(name) - 1);
	int what, rc;
	u32 len;

	if (copy_from_user(name, ubuf, n))
		return -EFAULT;
	name[n] = '\0';
	what = sysfs_match_string(virtio_hugeroom_inject_names, strim(name));
	if (what < 0)
		return what;
	if (what >= VIRTIO_HUGEROOM_INJ_HOLD_OUTSIDE) {
		if (!virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_HOLD))
			return -EOPNOTSUPP;
		rc = virtio_hugeroom_inject_hold(vh, what);
		return rc ? rc : count;
	}

	mutex_lock(&vh->report_lock);
	if (!vh->report_len) {
		/* Injections are derived from a report the device accepted. */
		rc = -ENODATA;
		goto out_unlock;
	}
	rc = virtio_hugeroom_status_reap(vh, true);
	if (rc)
		goto out_unlock;
	len = virtio_hugeroom_make_inject(vh, what);
	rc = virtio_hugeroom_status_send(vh, vh->inject, len);
	dev_info(&vh->vdev->dev, "injected %s (%u bytes): %d\n",
		 virtio_hugeroom_inject_names[what], len, rc);
out_unlock:
	mutex_unlock(&vh->report_lock);
	return rc ? rc : count;
}

static const struct file_operations virtio_hugeroom_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_inject_write,
	.llseek = noop_llseek,
};

/*
 * "fault_inject", a test aid: writing "event_stall" makes the device see
 * the next eventq chain only when the driver is about to send the one
 * after it, well past the ack timeout, as a stalled device would;
 * "sweep_delay_ms N" makes EVACUATE CHEAPEST's sweep sleep N ms every
 * VIRTIO_HUGEROOM_SCAN_BATCH blocks, as on a guest of many TiB;
 * "block_delay_ms N" makes EVACUATE sleep N ms before each block, as a
 * pass of thousands of blocks would take, with its claims in place.
 */
static ssize_t virtio_hugeroom_fault_write(struct file *file,
					   const char __user *ubuf,
					   size_t count, loff_t *ppos)
{
	struct virtio_hugeroom *vh = file->private_data;
	char buf[32], *p;
	size_t n = min(count, sizeof(buf) - 1);
	unsigned int ms;
	int rc;

	if (copy_from_user(buf, ubuf, n))
		return -EFAULT;
	buf[n] = '\0';
	p = strim(buf);
	if (str_has_prefix(p, "sweep_delay_ms ")) {
		rc = kstrtouint(strim(p + strlen("sweep_delay_ms ")), 0, &ms);
		if (rc)
			return rc;
		WRITE_ONCE(vh->evac_scan.fault_delay_ms, min(ms, 10000U));
		return count;
	}
	if (str_has_prefix(p, "block_delay_ms ")) {
		rc = kstrtouint(strim(p + strlen("block_delay_ms ")), 0, &ms);
		if (rc)
			return rc;
		WRITE_ONCE(vh->evac_scan.fault_block_ms, min(ms, 10000U));
		return count;
	}
	if (strcmp(p, "event_stall"))
		return -EINVAL;
	mutex_lock(&vh->event_lock);
	vh->fault_stall_next = true;
	mutex_unlock(&vh->event_lock);
	return count;
}

static const struct file_operations virtio_hugeroom_fault_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_fault_write,
	.llseek = noop_llseek,
};

/*
 * "evac_log", a test aid: the blocks the last EVACUATE tried to empty
 * (the first VIRTIO_HUGEROOM_EVAC_LOG), one a line: gpa, free pages when
 * the block was chosen, free pages just before alloc_contig_range(),
 * pages migrated, its result (0: taken).  A test compares what each
 * block cost with what the occupancy it was chosen by said.
 */
void virtio_hugeroom_test_evac_start(struct virtio_hugeroom *vh)
{
	spin_lock(&vh->hold_lock);
	vh->nr_evac_log = 0;
	spin_unlock(&vh->hold_lock);
}

void virtio_hugeroom_test_evac_rec(struct virtio_hugeroom *vh,
				   unsigned long pfn, unsigned int chosen_free,
				   unsigned int free, u64 migrated, int rc)
{
	struct virtio_hugeroom_evac_rec *e;

	spin_lock(&vh->hold_lock);
	if (vh->nr_evac_log < VIRTIO_HUGEROOM_EVAC_LOG) {
		e = &vh->evac_log[vh->nr_evac_log++];
		e->pfn = pfn;
		e->chosen_free = chosen_free;
		e->free = free;
		e->migrated = min_t(u64, migrated, U32_MAX);
		e->rc = rc;
	}
	spin_unlock(&vh->hold_lock);
}

static int virtio_hugeroom_evac_log_show(struct seq_file *m, void *unused)
{
	struct virtio_hugeroom *vh = m->private;
	struct virtio_hugeroom_evac_rec e;
	unsigned int i;

	for (i = 0; ; i++) {
		spin_lock(&vh->hold_lock);
		if (i >= vh->nr_evac_log) {
			spin_unlock(&vh->hold_lock);
			break;
		}
		e = vh->evac_log[i];
		spin_unlock(&vh->hold_lock);
		seq_printf(m, "0x%llx %u %u %u %d\n", (u64)PFN_PHYS(e.pfn),
			   e.chosen_free, e.free, e.migrated, e.rc);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_evac_log);

/*
 * "occupancy", a test aid: every online pageblock outside ZONE_DMA, one a
 * line: gpa, free pages (the lockless count the sweep uses), migratetype
 * (the wire's MT_*).  A test picks "host-backed" blocks and the minimum
 * number of pages to migrate from it, as the host does from a STATUS.
 */
static int virtio_hugeroom_occupancy_show(struct seq_file *m, void *unused)
{
	int nid, zid;

	for_each_online_node(nid) {
		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &NODE_DATA(nid)->node_zones[zid];
			unsigned long pfn;

			if (!virtio_hugeroom_zone_blocks(zone))
				continue;
			for (pfn = ALIGN(zone->zone_start_pfn,
					 pageblock_nr_pages);
			     pfn + pageblock_nr_pages <= zone_end_pfn(zone);
			     pfn += pageblock_nr_pages) {
				struct page *head = pfn_to_online_page(pfn);

				if (!head || page_zone(head) != zone)
					continue;
				seq_printf(m, "0x%llx %u %u\n",
					   (u64)PFN_PHYS(pfn),
					   virtio_hugeroom_block_free(head, pfn),
					   virtio_hugeroom_wire_mt(virtio_hugeroom_block_mt(pfn)));
				cond_resched();
			}
		}
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_occupancy);

/* "claimed_blocks": the running pass's claimed blocks, "0x<gpa> pages". */
static int virtio_hugeroom_claims_show(struct seq_file *m, void *unused)
{
	virtio_hugeroom_claims_list(m->private, m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtio_hugeroom_claims);

/*
 * "contig" (write a gpa): take the 2 MiB block there with
 * alloc_contig_range() as virtio-mem's unplug does (GFP_KERNEL, up to 5
 * tries on -EBUSY), and free it at once: a contiguous allocation of
 * someone else over the block, e.g. over claimed pages.  The write
 * fails with alloc_contig_range()'s errno.
 */
static ssize_t virtio_hugeroom_contig_write(struct file *file,
					    const char __user *ubuf,
					    size_t count, loff_t *ppos)
{
	unsigned long pfn;
	unsigned int tries;
	u64 gpa;
	int rc;

	rc = kstrtou64_from_user(ubuf, count, 0, &gpa);
	if (rc)
		return rc;
	pfn = PHYS_PFN(gpa);
	if (!IS_ALIGNED(pfn, pageblock_nr_pages) || !pfn_to_online_page(pfn) ||
	    !pfn_to_online_page(pfn + pageblock_nr_pages - 1))
		return -EINVAL;
	for (tries = 0; tries < 5; tries++) {
		rc = virtio_hugeroom_acr(pfn, pfn + pageblock_nr_pages,
					 GFP_KERNEL);
		if (rc != -EBUSY)
			break;
		cond_resched();
	}
	if (rc)
		return rc;
	free_contig_range(pfn, pageblock_nr_pages);
	return count;
}

static const struct file_operations virtio_hugeroom_contig_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = virtio_hugeroom_contig_write,
	.llseek = noop_llseek,
};

int virtio_hugeroom_test_init(struct virtio_hugeroom *vh)
{
	mutex_init(&vh->pin_lock);
	vh->evac_log = kvcalloc(VIRTIO_HUGEROOM_EVAC_LOG,
				sizeof(*vh->evac_log), GFP_KERNEL);
	if (!vh->evac_log)
		return -ENOMEM;
	/* Virtqueue buffers must be in the linear map: kmalloc. */
	vh->inject = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
	if (!vh->inject) {
		kvfree(vh->evac_log);
		vh->evac_log = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* After the device is stopped. */
void virtio_hugeroom_test_fini(struct virtio_hugeroom *vh)
{
	virtio_hugeroom_unpin(vh);
	kfree(vh->inject);
	vh->inject = NULL;
	kvfree(vh->evac_log);
	vh->evac_log = NULL;
}

void virtio_hugeroom_test_debugfs(struct virtio_hugeroom *vh,
				  struct dentry *dir)
{
	dev_warn(&vh->vdev->dev,
		 "test build: debugfs can pin memory and inject faults\n");
	debugfs_create_file("inject", 0200, dir, vh,
			    &virtio_hugeroom_inject_fops);
	debugfs_create_file("pin_unmovable", 0600, dir, vh,
			    &virtio_hugeroom_pin_fops);
	debugfs_create_file("fault_inject", 0200, dir, vh,
			    &virtio_hugeroom_fault_fops);
	debugfs_create_file("evac_log", 0400, dir, vh,
			    &virtio_hugeroom_evac_log_fops);
	debugfs_create_file("occupancy", 0400, dir, vh,
			    &virtio_hugeroom_occupancy_fops);
	debugfs_create_file("claimed_blocks", 0400, dir, vh,
			    &virtio_hugeroom_claims_fops);
	debugfs_create_file("contig", 0200, dir, vh,
			    &virtio_hugeroom_contig_fops);
}
