// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: the device.
 *
 * The device lets the host see how the guest's free memory is laid out and
 * order targeted compaction of 2 MiB guest-physical blocks, which the
 * guest then holds for the host.  The wire format is
 * protocol/virtio_hugeroom.h; hr_internal.h says which file does what.
 * This file has the device: its virtqueues, probe/remove/PM and the
 * command worker with its one dispatch switch; the eventq senders are
 * hr_event.c's, holds and reclaim hr_hold.c's.
 *
 * Virtqueues and who drives them:
 *
 * * statusq: the driver sends one STATUS report at a time (an out buffer)
 *   and waits until the device has used it.  Reports go out once after
 *   probe, every status_interval_ms (config; 0 = only on request), on a
 *   REPORT command and on a debugfs request (hr_report.c).
 *
 * * cmdq: the driver keeps VIRTIO_HUGEROOM_NR_CMD_BUFS in buffers posted.
 *   The command worker copies each used buffer out, reposts it at once,
 *   decodes the copy strictly (hr_cmd.c) and dispatches it from one switch.
 *
 * * eventq: RESULT, PROGRESS, HOLD and RETURNED messages, one sender at a
 *   time, each chain carrying the message out and a struct
 *   virtio_hugeroom_ack in; the driver waits for the ack.  Each chain has
 *   buffers of its own (VIRTIO_HUGEROOM_NR_EVENT_BUFS of them), owned by
 *   the device from virtqueue_add_sgs() until virtqueue_get_buf() gives
 *   them back, also after the driver stopped waiting: a chain whose ack did
 *   not come in time stays "stuck" and its buffer is never rewritten, so a
 *   device that pops it late reads the message that was sent (hr_event.c).
 *   Late acks are settled when the chain comes back (a late HOLD ack takes
 *   its blocks out of limbo, hr_hold.c), and no evacuation runs while a
 *   chain is stuck.
 *
 * Context: virtqueue callbacks and config_changed run in interrupt context
 * and only wake a waiter or queue work.  Everything that sleeps runs in work
 * items on the device's unbound workqueue, or in a debugfs writer; the
 * memory-pressure, memory-offline and PM notifiers act in the notifying
 * task.  The one exception is the job (EVACUATE, CAPTURE): it runs on a
 * kthread worker of its own, at the nice level evac_nice (hr_evac.c), so
 * that the guest's own tasks come first while it migrates their pages.
 * Neither is freezable: a long EVACUATE would keep the freezer waiting
 * until suspend fails, so a PM notifier cancels and flushes the job before
 * the freezer runs, and ->freeze stops the rest.
 *
 * Locks here: stop_lock (irqsave) guards vh->stop, so that no work is
 * queued once the device stops; event_lock owns the eventq and is held
 * across the wait for an ack; job_lock guards the job slot.  start/stop
 * take report_lock then event_lock to flip vh->ready; stop holds
 * return_lock across the reset.  Order: hr_internal.h.
 */

#include "hr_internal.h"
#include "hr_pcp.h"

static void virtio_hugeroom_queue_work(struct virtio_hugeroom *vh,
				       struct work_struct *work)
{
	unsigned long flags;

	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		queue_work(vh->wq, work);
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* (Re)arm the periodic report @delay_ms from now; 0 runs it at once. */
static void virtio_hugeroom_arm_status(struct virtio_hugeroom *vh,
				       unsigned int delay_ms)
{
	unsigned long flags;

	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		mod_delayed_work(vh->wq, &vh->status_work,
				 msecs_to_jiffies(delay_ms));
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* ---------------------------------------------------------------------- */
/* cmdq */

static int virtio_hugeroom_post_cmd_buf(struct virtio_hugeroom *vh, void *buf)
{
	struct scatterlist sg;

	sg_init_one(&sg, buf, VIRTIO_HUGEROOM_CMD_BUF);
	return virtqueue_add_inbuf(vh->cmd_vq, &sg, 1, buf, GFP_KERNEL);
}

static int virtio_hugeroom_post_cmd_bufs(struct virtio_hugeroom *vh)
{
	unsigned int i;
	int rc;

	for (i = 0; i < VIRTIO_HUGEROOM_NR_CMD_BUFS; i++) {
		rc = virtio_hugeroom_post_cmd_buf(vh, vh->cmd_bufs +
						  i * VIRTIO_HUGEROOM_CMD_BUF);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Start an EVACUATE or CAPTURE in job_work, or answer S_BUSY (another job
 * runs, or the guest is about to suspend).
 */
static void virtio_hugeroom_start_job(struct virtio_hugeroom *vh,
				      const void *buf, u32 len, u64 id)
{
	unsigned long flags;
	bool busy;

	spin_lock(&vh->job_lock);
	busy = vh->job_busy || vh->job_blocked;
	if (!busy) {
		vh->job_busy = true;
		vh->job_cancel = false;
		vh->job_id = id;
	}
	spin_unlock(&vh->job_lock);
	if (busy) {
		virtio_hugeroom_send_result(vh, id, VIRTIO_HUGEROOM_S_BUSY);
		return;
	}
	memcpy(vh->job_cmd, buf, len);
	vh->job_len = len;
	spin_lock_irqsave(&vh->stop_lock, flags);
	if (!vh->stop)
		kthread_queue_work(vh->job_worker, &vh->job_work);
	spin_unlock_irqrestore(&vh->stop_lock, flags);
}

/* CANCEL: stop the running command it names; otherwise ignore it. */
static void virtio_hugeroom_cancel(struct virtio_hugeroom *vh, u64 id)
{
	spin_lock(&vh->job_lock);
	if (vh->job_busy && vh->job_id == id)
		vh->job_cancel = true;
	spin_unlock(&vh->job_lock);
}

static unsigned int virtio_hugeroom_features[] = {
	VIRTIO_HUGEROOM_F_STATUS,
	VIRTIO_HUGEROOM_F_EVACUATE,
	VIRTIO_HUGEROOM_F_HOLD,
	VIRTIO_HUGEROOM_F_PCP,
	VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM,
	VIRTIO_HUGEROOM_F_BACKGROUND,
};

/*
 * The negotiated features as the decoder takes them.  Only features in the
 * driver's table are asked for: virtio_has_feature() BUG()s on any other.
 */
static u64 virtio_hugeroom_cmd_features(struct virtio_hugeroom *vh)
{
	u64 features = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(virtio_hugeroom_features); i++)
		if (virtio_has_feature(vh->vdev, virtio_hugeroom_features[i]))
			features |= BIT_ULL(virtio_hugeroom_features[i]);
	return features;
}

/*
 * Decode one command and act on it: the one switch that decides what each
 * command does.  Runs in cmd_work; sleeps.
 */
static void virtio_hugeroom_handle_cmd(struct virtio_hugeroom *vh,
				       const void *buf, u32 len)
{
	const struct virtio_hugeroom_hdr *hdr = buf;
	u64 request_id = 0;
	u16 type = 0;
	u32 status;

	vh->cmds_received++;
	if (len >= sizeof(*hdr)) {
		request_id = le64_to_cpu(hdr->request_id);
		type = le16_to_cpu(hdr->type);
	}
	status = virtio_hugeroom_check_cmd(buf, len,
					   virtio_hugeroom_cmd_features(vh));
	if (status) {
		vh->cmds_invalid++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "command type %u (%u bytes) refused: status %u\n",
				     type, len, status);
		/* CANCEL has no id of its own; id 0 names no command. */
		if (type != VIRTIO_HUGEROOM_CMD_CANCEL && request_id)
			virtio_hugeroom_send_result(vh, request_id, status);
		return;
	}

	switch (type) {
	case VIRTIO_HUGEROOM_CMD_REPORT:
		/* A failure is logged; the statusq is then broken anyway. */
		virtio_hugeroom_report(vh, request_id, true);
		break;
	case VIRTIO_HUGEROOM_CMD_CANCEL:
		virtio_hugeroom_cancel(vh, request_id);
		break;
	case VIRTIO_HUGEROOM_CMD_EVACUATE:
	case VIRTIO_HUGEROOM_CMD_CAPTURE:
		virtio_hugeroom_start_job(vh, buf, len, request_id);
		break;
	case VIRTIO_HUGEROOM_CMD_RETURN:
		virtio_hugeroom_do_return(vh, buf);
		break;
	default: {
		const struct virtio_hugeroom_set_pcp *pcp = buf;

		status = virtio_hugeroom_pcp_set(&vh->vdev->dev,
						 le32_to_cpu(pcp->policy),
						 le32_to_cpu(pcp->high));
		virtio_hugeroom_send_result(vh, request_id, status);
		break;
	}
	}
}

static void virtio_hugeroom_cmd_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(work, struct virtio_hugeroom,
						  cmd_work);
	unsigned int len;
	void *buf;

	while ((buf = virtqueue_get_buf(vh->cmd_vq, &len))) {
		u32 copied = min_t(u32, len, VIRTIO_HUGEROOM_CMD_BUF);

		/* Copy out and repost first: the device may queue more. */
		memcpy(vh->cmd_copy, buf, copied);
		if (virtio_hugeroom_post_cmd_buf(vh, buf))
			dev_warn_ratelimited(&vh->vdev->dev,
					     "cannot repost a command buffer\n");
		virtqueue_kick(vh->cmd_vq);
		/* The decoder rejects a @len beyond the buffer. */
		virtio_hugeroom_handle_cmd(vh, vh->cmd_copy, len);
	}
}

/* ---------------------------------------------------------------------- */
/* Periodic reports and config */

static void virtio_hugeroom_read_config(struct virtio_hugeroom *vh)
{
	u32 interval, max_cands;

	virtio_cread_le(vh->vdev, struct virtio_hugeroom_config,
			status_interval_ms, &interval);
	virtio_cread_le(vh->vdev, struct virtio_hugeroom_config,
			max_candidates, &max_cands);
	if (interval && interval < VIRTIO_HUGEROOM_MIN_INTERVAL_MS)
		interval = VIRTIO_HUGEROOM_MIN_INTERVAL_MS;
	WRITE_ONCE(vh->status_interval_ms, interval);
	WRITE_ONCE(vh->max_candidates,
		   min_t(u32, max_cands, VIRTIO_HUGEROOM_MAX_CANDIDATES));
}

static void virtio_hugeroom_status_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(to_delayed_work(work),
						  struct virtio_hugeroom,
						  status_work);
	u32 interval;

	virtio_hugeroom_report(vh, 0, false);
	interval = READ_ONCE(vh->status_interval_ms);
	if (interval)
		virtio_hugeroom_arm_status(vh, interval);
}

static void virtio_hugeroom_config_work(struct work_struct *work)
{
	struct virtio_hugeroom *vh = container_of(work, struct virtio_hugeroom,
						  config_work);
	u32 old = READ_ONCE(vh->status_interval_ms);
	u32 interval;

	virtio_hugeroom_read_config(vh);
	interval = READ_ONCE(vh->status_interval_ms);
	if (interval == old ||
	    !virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_STATUS))
		return;
	if (interval)
		virtio_hugeroom_arm_status(vh, interval);
	else
		cancel_delayed_work(&vh->status_work);
}

/* ---------------------------------------------------------------------- */
/* Interrupt context: wake or queue, nothing else. */

static void virtio_hugeroom_status_done(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	wake_up(&vh->status_acked);
}

static void virtio_hugeroom_cmd_ready(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	virtio_hugeroom_queue_work(vh, &vh->cmd_work);
}

static void virtio_hugeroom_event_done(struct virtqueue *vq)
{
	struct virtio_hugeroom *vh = vq->vdev->priv;

	wake_up(&vh->event_acked);
}

static void virtio_hugeroom_config_changed(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh = vdev->priv;

	virtio_hugeroom_queue_work(vh, &vh->config_work);
}

/* ---------------------------------------------------------------------- */
/* Device lifecycle */

static int virtio_hugeroom_init_vqs(struct virtio_hugeroom *vh)
{
	struct virtqueue *vqs[VIRTIO_HUGEROOM_NR_VQS];
	int rc;

#ifdef VIRTIO_HUGEROOM_HAVE_VQ_INFO
	struct virtqueue_info vqs_info[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = { "status",
						virtio_hugeroom_status_done },
		[VIRTIO_HUGEROOM_VQ_CMD] = { "cmd", virtio_hugeroom_cmd_ready },
		[VIRTIO_HUGEROOM_VQ_EVENT] = { "event",
					       virtio_hugeroom_event_done },
	};

	rc = virtio_find_vqs(vh->vdev, VIRTIO_HUGEROOM_NR_VQS, vqs, vqs_info,
			     NULL);
#else
	vq_callback_t *callbacks[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = virtio_hugeroom_status_done,
		[VIRTIO_HUGEROOM_VQ_CMD] = virtio_hugeroom_cmd_ready,
		[VIRTIO_HUGEROOM_VQ_EVENT] = virtio_hugeroom_event_done,
	};
	static const char * const names[VIRTIO_HUGEROOM_NR_VQS] = {
		[VIRTIO_HUGEROOM_VQ_STATUS] = "status",
		[VIRTIO_HUGEROOM_VQ_CMD] = "cmd",
		[VIRTIO_HUGEROOM_VQ_EVENT] = "event",
	};

	rc = virtio_find_vqs(vh->vdev, VIRTIO_HUGEROOM_NR_VQS, vqs, callbacks,
			     names, NULL);
#endif
	if (rc)
		return rc;
	vh->status_vq = vqs[VIRTIO_HUGEROOM_VQ_STATUS];
	vh->cmd_vq = vqs[VIRTIO_HUGEROOM_VQ_CMD];
	vh->event_vq = vqs[VIRTIO_HUGEROOM_VQ_EVENT];
	return 0;
}

/*
 * Bring the queues up and the device live: post the command buffers, set
 * DRIVER_OK, and send the first report.  Used by probe and restore.
 */
static int virtio_hugeroom_start(struct virtio_hugeroom *vh)
{
	unsigned long flags;
	int rc;

	rc = virtio_hugeroom_init_vqs(vh);
	if (rc)
		return rc;
	rc = virtio_hugeroom_post_cmd_bufs(vh);
	if (rc)
		goto out_del_vqs;

	virtio_hugeroom_read_config(vh);
	virtio_device_ready(vh->vdev);
	virtqueue_kick(vh->cmd_vq);

	mutex_lock(&vh->report_lock);
	mutex_lock(&vh->event_lock);
	vh->ready = true;
	mutex_unlock(&vh->event_lock);
	mutex_unlock(&vh->report_lock);

	spin_lock_irqsave(&vh->stop_lock, flags);
	vh->stop = false;
	spin_unlock_irqrestore(&vh->stop_lock, flags);
	/* Commands or config changes may have come before work could. */
	virtio_hugeroom_queue_work(vh, &vh->cmd_work);
	virtio_hugeroom_queue_work(vh, &vh->config_work);
	if (virtio_has_feature(vh->vdev, VIRTIO_HUGEROOM_F_STATUS))
		virtio_hugeroom_arm_status(vh, 0);
	return 0;

out_del_vqs:
	vh->vdev->config->del_vqs(vh->vdev);
	return rc;
}

/* Stop all work and take the device down; the inverse of _start(). */
static void virtio_hugeroom_stop(struct virtio_hugeroom *vh)
{
	unsigned long flags;
	u64 orphan = 0;

	spin_lock_irqsave(&vh->stop_lock, flags);
	vh->stop = true;
	spin_unlock_irqrestore(&vh->stop_lock, flags);
	/* A running EVACUATE/CAPTURE stops between blocks (SPEC 1.6.3.2 11). */
	spin_lock(&vh->job_lock);
	vh->job_cancel = true;
	spin_unlock(&vh->job_lock);
	cancel_work_sync(&vh->config_work);
	cancel_work_sync(&vh->cmd_work);
	cancel_delayed_work_sync(&vh->status_work);
	kthread_cancel_work_sync(&vh->job_work);
	cancel_delayed_work_sync(&vh->pressure_work);
	/* A job that was accepted but never started still owes a RESULT. */
	spin_lock(&vh->job_lock);
	if (vh->job_busy)
		orphan = vh->job_id;
	vh->job_busy = false;
	vh->job_cancel = false;
	spin_unlock(&vh->job_lock);
	if (orphan)
		virtio_hugeroom_send_result(vh, orphan,
					    VIRTIO_HUGEROOM_S_CANCELLED);

	/*
	 * SPEC 1.6.7.1 item 4: the guest's own PCP sizing across the reset.
	 * Not under return_lock: it opens and writes a sysctl file, which
	 * allocates with GFP_KERNEL, and an allocation that meets OOM there
	 * would have the OOM notifier wait for the lock its own task holds
	 * (hr_internal.h).  No SET_PCP can come any more: cmd_work is done.
	 */
	virtio_hugeroom_pcp_restore(&vh->vdev->dev);

	/*
	 * Give every held block back before the reset (SPEC 1.6.6.1 item 4).
	 * return_lock stays held until the lists are empty, so that no
	 * shrinker or OOM notifier has blocks in flight across the reset.
	 */
	mutex_lock(&vh->return_lock);
	virtio_hugeroom_return_locked(vh, NULL, UINT_MAX,
				      VIRTIO_HUGEROOM_RET_UNLOAD, 0, false);

	mutex_lock(&vh->report_lock);
	mutex_lock(&vh->event_lock);
	vh->ready = false;
	mutex_unlock(&vh->event_lock);
	mutex_unlock(&vh->report_lock);

	virtio_reset_device(vh->vdev);
	/* All buffers are ours and preallocated: nothing to free per buffer. */
	vh->status_inflight = NULL;
	virtio_hugeroom_event_reset(vh);
	vh->vdev->config->del_vqs(vh->vdev);
	/*
	 * The reset emptied the device's held set: blocks a broken device
	 * did not take back, and blocks in limbo, are safe to reuse now.
	 */
	virtio_hugeroom_release_all(vh);
	mutex_unlock(&vh->return_lock);
}

/*
 * Before the freezer runs: end a running EVACUATE or CAPTURE (it sends its
 * S_CANCELLED RESULT while the device still works) and start none until
 * the guest is back.  The workqueue is not freezable, so nothing else
 * would stop a job that runs for minutes; ->freeze stops the rest.  Runs
 * in the suspending task; sleeps.
 */
static int virtio_hugeroom_pm_notify(struct notifier_block *nb,
				     unsigned long action, void *unused)
{
	struct virtio_hugeroom *vh = container_of(nb, struct virtio_hugeroom,
						  pm_nb);

	switch (action) {
	case PM_HIBERNATION_PREPARE:
	case PM_SUSPEND_PREPARE:
		spin_lock(&vh->job_lock);
		vh->job_blocked = true;
		if (vh->job_busy)
			vh->job_cancel = true;
		spin_unlock(&vh->job_lock);
		kthread_flush_work(&vh->job_work);
		break;
	case PM_POST_HIBERNATION:
	case PM_POST_SUSPEND:
		spin_lock(&vh->job_lock);
		vh->job_blocked = false;
		spin_unlock(&vh->job_lock);
		break;
	}
	return NOTIFY_OK;
}

static void virtio_hugeroom_free(struct virtio_hugeroom *vh)
{
	unsigned int i;

	kvfree(vh->evac_scan.done);
	kvfree(vh->evac_scan.cur);
	kfree(vh->job_events);
	kfree(vh->job_cmd);
	kvfree(vh->scan.done);
	kvfree(vh->scan.cur);
	kfree(vh->vm_events);
	kfree(vh->cmd_copy);
	kfree(vh->cmd_bufs);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		kfree(vh->evbufs[i].ack);
		kfree(vh->evbufs[i].msg);
	}
	virtio_hugeroom_test_fini(vh);
	kfree(vh->report);
	kfree(vh);
}

static int virtio_hugeroom_probe(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh;
	u32 block_order;
	int rc;

	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_config) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_hdr) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_status) != 208);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_zone) != 256);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_candidate) != 16);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_result) != 80);
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_ack) != 8);
	/* The largest injected message: one zone more than allowed. */
	BUILD_BUG_ON(sizeof(struct virtio_hugeroom_status) +
		     (VIRTIO_HUGEROOM_MAX_ZONES + 1) *
		     sizeof(struct virtio_hugeroom_zone) >
		     VIRTIO_HUGEROOM_MAX_MSG);

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config access disabled\n");
		return -EINVAL;
	}
	virtio_cread_le(vdev, struct virtio_hugeroom_config, block_order,
			&block_order);
	if (block_order != VIRTIO_HUGEROOM_BLOCK_ORDER ||
	    pageblock_order + PAGE_SHIFT != VIRTIO_HUGEROOM_BLOCK_ORDER) {
		dev_err(&vdev->dev,
			"device block order %u, guest pageblocks 2^%u bytes: need both %u\n",
			block_order, (unsigned int)(pageblock_order + PAGE_SHIFT),
			VIRTIO_HUGEROOM_BLOCK_ORDER);
		return -EINVAL;
	}

	vh = kzalloc(sizeof(*vh), GFP_KERNEL);
	if (!vh)
		return -ENOMEM;
	vdev->priv = vh;
	vh->vdev = vdev;
	spin_lock_init(&vh->stop_lock);
	vh->stop = true;
	mutex_init(&vh->report_lock);
	mutex_init(&vh->event_lock);
	init_waitqueue_head(&vh->status_acked);
	init_waitqueue_head(&vh->event_acked);
	INIT_WORK(&vh->cmd_work, virtio_hugeroom_cmd_work);
	INIT_WORK(&vh->config_work, virtio_hugeroom_config_work);
	INIT_DELAYED_WORK(&vh->status_work, virtio_hugeroom_status_work);
	kthread_init_work(&vh->job_work, virtio_hugeroom_job_work);
	INIT_DELAYED_WORK(&vh->pressure_work, virtio_hugeroom_pressure_work);
	vh->event_late_ack = virtio_hugeroom_settle_late;
	vh->scan.nid = NUMA_NO_NODE;
	vh->evac_scan.nid = NUMA_NO_NODE;
	spin_lock_init(&vh->hold_lock);
	INIT_LIST_HEAD(&vh->held);
	INIT_LIST_HEAD(&vh->limbo);
	mutex_init(&vh->return_lock);
	spin_lock_init(&vh->job_lock);
	vh->oom_nb.notifier_call = virtio_hugeroom_oom_notify;
	vh->pm_nb.notifier_call = virtio_hugeroom_pm_notify;
	vh->memory_nb.notifier_call = virtio_hugeroom_memory_notify;

	rc = -ENOMEM;
	/* Virtqueue buffers must be in the linear map: kmalloc, not vmalloc. */
	vh->report = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
	vh->cmd_bufs = kcalloc(VIRTIO_HUGEROOM_NR_CMD_BUFS,
			       VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->cmd_copy = kmalloc(VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->vm_events = kcalloc(NR_VM_EVENT_ITEMS, sizeof(*vh->vm_events),
				GFP_KERNEL);
	vh->scan.cur = kvzalloc(sizeof(*vh->scan.cur), GFP_KERNEL);
	vh->scan.done = kvzalloc(sizeof(*vh->scan.done), GFP_KERNEL);
	vh->job_cmd = kmalloc(VIRTIO_HUGEROOM_CMD_BUF, GFP_KERNEL);
	vh->job_events = kcalloc(NR_VM_EVENT_ITEMS, sizeof(*vh->job_events),
				 GFP_KERNEL);
	vh->evac_scan.cur = kvzalloc(sizeof(*vh->evac_scan.cur), GFP_KERNEL);
	vh->evac_scan.done = kvzalloc(sizeof(*vh->evac_scan.done), GFP_KERNEL);
	if (!vh->report || virtio_hugeroom_event_alloc(vh) ||
	    !vh->cmd_bufs || !vh->cmd_copy || !vh->vm_events ||
	    !vh->scan.cur || !vh->scan.done || !vh->job_cmd ||
	    !vh->job_events || !vh->evac_scan.cur || !vh->evac_scan.done ||
	    virtio_hugeroom_test_init(vh))
		goto out_free;

	/*
	 * Not ordered: job_work (EVACUATE, CAPTURE) runs for long, and
	 * cmd_work must still take CANCEL, RETURN and REPORT meanwhile.  Not
	 * freezable: the freezer would wait for a long job until suspend
	 * fails; the PM notifier ends the job first instead.
	 */
	vh->wq = alloc_workqueue("virtio_hugeroom", WQ_UNBOUND, 0);
	if (!vh->wq)
		goto out_free;
	/*
	 * The job's own thread, so that its nice level is the driver's to
	 * set (hr_evac.c).  Woken here: from 6.14 kthread_create_worker()
	 * leaves it asleep, before that waking it again is harmless.
	 */
	vh->job_worker = kthread_create_worker(0, "hugeroom_job");
	if (IS_ERR(vh->job_worker)) {
		rc = PTR_ERR(vh->job_worker);
		vh->job_worker = NULL;
		goto out_destroy_wq;
	}
	wake_up_process(vh->job_worker->task);

	if (!virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_STATUS))
		dev_info(&vdev->dev, "device does not take status reports\n");
	if (!virtio_hugeroom_claims_supported())
		dev_info(&vdev->dev, "no hole claims: this kernel has no movable driver pages (claim_holes reads 0)\n");

	rc = virtio_hugeroom_start(vh);
	if (rc)
		goto out_destroy_wq;
	if (virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_HOLD)) {
		rc = virtio_hugeroom_shrinker_register(vh);
		if (rc)
			goto out_stop;
		rc = register_oom_notifier(&vh->oom_nb);
		if (rc)
			goto out_shrinker;
		vh->oom_registered = true;
		rc = register_memory_notifier(&vh->memory_nb);
		if (rc)
			goto out_oom;
		vh->memory_registered = true;
	}
	rc = register_pm_notifier(&vh->pm_nb);
	if (rc)
		goto out_memory;
	vh->pm_registered = true;
	virtio_hugeroom_debugfs_init(vh);
	return 0;

out_memory:
	if (vh->memory_registered)
		unregister_memory_notifier(&vh->memory_nb);
out_oom:
	if (vh->oom_registered)
		unregister_oom_notifier(&vh->oom_nb);
out_shrinker:
	virtio_hugeroom_shrinker_unregister(vh);
out_stop:
	virtio_hugeroom_stop(vh);
out_destroy_wq:
	if (vh->job_worker)
		kthread_destroy_worker(vh->job_worker);
	destroy_workqueue(vh->wq);
out_free:
	virtio_hugeroom_free(vh);
	vdev->priv = NULL;
	return rc;
}

static void virtio_hugeroom_remove(struct virtio_device *vdev)
{
	struct virtio_hugeroom *vh = vdev->priv;

	/* Waits for debugfs readers and writers that are still inside. */
	debugfs_remove_recursive(vh->debugfs);
	if (vh->pm_registered)
		unregister_pm_notifier(&vh->pm_nb);
	if (vh->memory_registered)
		unregister_memory_notifier(&vh->memory_nb);
	if (vh->oom_registered)
		unregister_oom_notifier(&vh->oom_nb);
	virtio_hugeroom_shrinker_unregister(vh);
	virtio_hugeroom_stop(vh);
	kthread_destroy_worker(vh->job_worker);
	destroy_workqueue(vh->wq);
	virtio_hugeroom_free(vh);
	vdev->priv = NULL;
}

#ifdef CONFIG_PM_SLEEP
static int virtio_hugeroom_freeze(struct virtio_device *vdev)
{
	virtio_hugeroom_stop(vdev->priv);
	return 0;
}

static int virtio_hugeroom_restore(struct virtio_device *vdev)
{
	return virtio_hugeroom_start(vdev->priv);
}
#endif

/*
 * System shutdown, reboot and kexec: reset the device, as the virtio
 * core does by itself since 6.14 (virtio_dev_shutdown()).  Without it a
 * kexec'd kernel runs with the device's held set still set (nothing
 * resets the machine) until virtio_pci probes it again, and a migration
 * in that window would discard memory the new kernel uses.  Only what
 * cannot fail: the device is broken first, so that nothing of ours
 * touches a vq any more, then reset (which empties its held set); the
 * blocks the old kernel held are the new kernel's memory.
 */
static void virtio_hugeroom_shutdown(struct virtio_device *vdev)
{
	virtio_break_device(vdev);
	virtio_synchronize_cbs(vdev);
	virtio_reset_device(vdev);
}

#ifndef VIRTIO_HUGEROOM_HAVE_VIRTIO_SHUTDOWN
/* Before 6.14 the virtio bus has no shutdown: the driver core calls ours. */
static void virtio_hugeroom_dev_shutdown(struct device *dev)
{
	virtio_hugeroom_shutdown(dev_to_virtio(dev));
}
#endif

/*
 * SPEC 1.3.1 item 2: no EVACUATE or DEFLATE_ON_OOM without HOLD, no
 * BACKGROUND without EVACUATE.
 */
static int virtio_hugeroom_validate(struct virtio_device *vdev)
{
	if (!virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_HOLD)) {
		__virtio_clear_bit(vdev, VIRTIO_HUGEROOM_F_EVACUATE);
		__virtio_clear_bit(vdev, VIRTIO_HUGEROOM_F_DEFLATE_ON_OOM);
	}
	if (!virtio_has_feature(vdev, VIRTIO_HUGEROOM_F_EVACUATE))
		__virtio_clear_bit(vdev, VIRTIO_HUGEROOM_F_BACKGROUND);
	return 0;
}

static const struct virtio_device_id virtio_hugeroom_id_table[] = {
	{ VIRTIO_ID_HUGEROOM, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static struct virtio_driver virtio_hugeroom_driver = {
	.feature_table = virtio_hugeroom_features,
	.feature_table_size = ARRAY_SIZE(virtio_hugeroom_features),
	.driver.name = KBUILD_MODNAME,
	.id_table = virtio_hugeroom_id_table,
	.validate = virtio_hugeroom_validate,
	.probe = virtio_hugeroom_probe,
	.remove = virtio_hugeroom_remove,
	.config_changed = virtio_hugeroom_config_changed,
#ifdef VIRTIO_HUGEROOM_HAVE_VIRTIO_SHUTDOWN
	.shutdown = virtio_hugeroom_shutdown,
#else
	.driver.shutdown = virtio_hugeroom_dev_shutdown,
#endif
#ifdef CONFIG_PM_SLEEP
	.freeze = virtio_hugeroom_freeze,
	.restore = virtio_hugeroom_restore,
#endif
};

module_virtio_driver(virtio_hugeroom_driver);
MODULE_DEVICE_TABLE(virtio, virtio_hugeroom_id_table);
MODULE_DESCRIPTION("Virtio hugeroom driver: free-list reports and 2 MiB holds for the host");
MODULE_LICENSE("GPL");

