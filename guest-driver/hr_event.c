// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-hugeroom guest driver: the eventq senders.
 *
 * RESULT, PROGRESS, HOLD and RETURNED go out on eventq, one sender at a
 * time, each chain carrying the message out and a struct
 * virtio_hugeroom_ack in; the sender waits for the ack.  Each chain has
 * buffers of its own (VIRTIO_HUGEROOM_NR_EVENT_BUFS of them), owned by the
 * device from virtqueue_add_sgs() until virtqueue_get_buf() gives them
 * back, also after the sender stopped waiting: a chain whose ack did not
 * come in time stays "stuck" and its buffer is never rewritten, so a
 * device that pops it late reads the message that was sent.  Late acks
 * are settled when the chain comes back, by whoever next takes the event
 * lock: this file knows no message but its own, so it hands each late
 * chain to vh->event_late_ack (the holds' virtio_hugeroom_settle_late(),
 * hr_hold.c, set at probe), and calls nothing above it.
 *
 * Locks: event_lock (mutex) owns the chains, the free and late lists and
 * the event counters, and is held across the wait for an ack; nothing
 * allocates under it (the OOM notifier waits for it).  Order:
 * hr_internal.h.
 */

#include "hr_internal.h"

/* The one place that turns a device ack into an errno. */
int virtio_hugeroom_ack_errno(u32 status)
{
	switch (status) {
	case VIRTIO_HUGEROOM_ACK_OK:
		return 0;
	case VIRTIO_HUGEROOM_ACK_INVALID:
		return -EINVAL;
	case VIRTIO_HUGEROOM_ACK_NO_DISCARD:
		return -EOPNOTSUPP;
	default:
		return -EPROTO;
	}
}

/*
 * Take back every chain the device has used.  The one a sender waits for
 * is marked done and stays with that sender; a late one (its sender gave
 * up) goes to event_late for virtio_hugeroom_event_settle().  Runs in a
 * wait condition, so it does nothing that may sleep.  event_lock held.
 */
static void virtio_hugeroom_event_reap(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb;
	unsigned int used;

	if (!vh->ready)
		return;
	while ((eb = virtqueue_get_buf(vh->event_vq, &used))) {
		eb->used = used;
		if (eb->late)
			list_add_tail(&eb->node, &vh->event_late);
		else
			eb->done = true;
	}
}

/* Reap, then settle the late chains and free them.  event_lock held. */
void virtio_hugeroom_event_settle(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb, *tmp;

	virtio_hugeroom_event_reap(vh);
	list_for_each_entry_safe(eb, tmp, &vh->event_late, node) {
		/* News goes up: a late HOLD ack is the holds' (hr_hold.c). */
		if (vh->event_late_ack)
			vh->event_late_ack(vh, eb);
		eb->late = false;
		eb->limbo = false;
		vh->event_stuck--;
		vh->event_late_acks++;
		list_move(&eb->node, &vh->event_free);
	}
}

static bool virtio_hugeroom_event_acked(struct virtio_hugeroom *vh,
					struct virtio_hugeroom_evbuf *eb)
{
	virtio_hugeroom_event_reap(vh);
	return eb->done;
}

/*
 * A free chain to write a message into, or NULL while the device owns all
 * of them (chains stuck with it).  event_lock held.
 */
struct virtio_hugeroom_evbuf *
virtio_hugeroom_event_get(struct virtio_hugeroom *vh)
{
	struct virtio_hugeroom_evbuf *eb;

	virtio_hugeroom_event_settle(vh);
	eb = list_first_entry_or_null(&vh->event_free,
				      struct virtio_hugeroom_evbuf, node);
	if (eb)
		list_del(&eb->node);
	return eb;
}

/*
 * Send the @len byte message in @eb (from virtio_hugeroom_event_get()) and
 * wait for the device's ack, copied to @ack if not NULL.  @eb is the
 * device's until it comes back: after a timeout it stays stuck (-ETIMEDOUT)
 * and is settled and freed by whoever reaps it later.  Called with
 * event_lock held; sleeps.
 */
int virtio_hugeroom_event_send(struct virtio_hugeroom *vh,
			       struct virtio_hugeroom_evbuf *eb,
			       u32 len, struct virtio_hugeroom_ack *ack)
{
	struct scatterlist out, in, *sgs[2] = { &out, &in };
	int rc;

	if (!vh->ready) {
		rc = -ENODEV;
		goto out_free;
	}
	sg_init_one(&out, eb->msg, len);
	sg_init_one(&in, eb->ack, sizeof(*eb->ack));
	memset(eb->ack, 0xff, sizeof(*eb->ack));
	eb->done = false;
	virtio_hugeroom_fault_event_send(vh);
	/*
	 * Never allocate with event_lock held: the OOM notifier waits for it.
	 * Without an indirect table the ring uses direct descriptors.
	 */
	rc = virtqueue_add_sgs(vh->event_vq, sgs, 1, 1, eb,
			       GFP_NOWAIT | __GFP_NOWARN);
	if (rc)
		goto out_free;
	if (!virtio_hugeroom_fault_event_stall(vh))
		virtqueue_kick(vh->event_vq);

	if (!wait_event_timeout(vh->event_acked,
				virtio_hugeroom_event_acked(vh, eb),
				VIRTIO_HUGEROOM_TX_TIMEOUT)) {
		/* The device may still read it: @eb is not ours to reuse. */
		eb->late = true;
		vh->event_stuck++;
		vh->event_timeouts++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "eventq: no ack for message type %u in %u s, %u chains stuck\n",
				     le16_to_cpu(((struct virtio_hugeroom_hdr *)
						  eb->msg)->type),
				     VIRTIO_HUGEROOM_TX_TIMEOUT / HZ,
				     vh->event_stuck);
		/* Not settled here: the caller has not parked its blocks. */
		return -ETIMEDOUT;
	}
	virtio_hugeroom_event_settle(vh);
	if (eb->used < sizeof(*eb->ack)) {
		rc = -EPROTO;
	} else {
		if (ack)
			*ack = *eb->ack;
		rc = virtio_hugeroom_ack_errno(le32_to_cpu(eb->ack->status));
	}
out_free:
	list_add(&eb->node, &vh->event_free);
	return rc;
}

/* Is a chain stuck with the device?  Reaps first.  Takes event_lock. */
bool virtio_hugeroom_event_stuck(struct virtio_hugeroom *vh)
{
	bool stuck;

	if (!READ_ONCE(vh->event_stuck))
		return false;
	mutex_lock(&vh->event_lock);
	virtio_hugeroom_event_settle(vh);
	stuck = vh->event_stuck;
	mutex_unlock(&vh->event_lock);
	return stuck;
}

/*
 * After a device reset every chain is ours again; a stuck HOLD's blocks are
 * still in limbo, for virtio_hugeroom_release_all().  event_lock not
 * needed: no sender runs.
 */
void virtio_hugeroom_event_reset(struct virtio_hugeroom *vh)
{
	unsigned int i;

	INIT_LIST_HEAD(&vh->event_free);
	INIT_LIST_HEAD(&vh->event_late);
	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		struct virtio_hugeroom_evbuf *eb = &vh->evbufs[i];

		eb->done = false;
		eb->late = false;
		eb->limbo = false;
		list_add_tail(&eb->node, &vh->event_free);
	}
	vh->event_stuck = 0;
}

/* Virtqueue buffers must be in the linear map: kmalloc, not vmalloc. */
int virtio_hugeroom_event_alloc(struct virtio_hugeroom *vh)
{
	unsigned int i;

	for (i = 0; i < VIRTIO_HUGEROOM_NR_EVENT_BUFS; i++) {
		struct virtio_hugeroom_evbuf *eb = &vh->evbufs[i];

		eb->msg = kmalloc(VIRTIO_HUGEROOM_MAX_MSG, GFP_KERNEL);
		eb->ack = kmalloc(sizeof(*eb->ack), GFP_KERNEL);
		if (!eb->msg || !eb->ack)
			return -ENOMEM;
	}
	virtio_hugeroom_event_reset(vh);
	return 0;
}

/* Send a RESULT or PROGRESS (@type) with @c for @request_id. */
int virtio_hugeroom_send_counts(struct virtio_hugeroom *vh, u16 type,
				u64 request_id, u32 status,
				const struct virtio_hugeroom_counts *c)
{
	struct virtio_hugeroom_evbuf *eb;
	struct virtio_hugeroom_result *res;
	unsigned int i;
	int rc = -EBUSY;

	mutex_lock(&vh->event_lock);
	eb = virtio_hugeroom_event_get(vh);
	if (!eb)
		goto out_err;
	res = eb->msg;
	memset(res, 0, sizeof(*res));
	res->hdr.type = cpu_to_le16(type);
	res->hdr.len = cpu_to_le32(sizeof(*res));
	res->hdr.request_id = cpu_to_le64(request_id);
	res->status = cpu_to_le32(status);
	if (c) {
		res->blocks_tried = cpu_to_le32(c->tried);
		res->blocks_freed = cpu_to_le32(c->freed);
		for (i = 0; i < VIRTIO_HUGEROOM_NR_REASONS; i++)
			res->failed[i] = cpu_to_le32(c->failed[i]);
		res->pages_migrated = cpu_to_le64(c->migrated);
		res->elapsed_us = cpu_to_le64(div_u64(ktime_get_ns() -
						      c->start_ns,
						      NSEC_PER_USEC));
	}
	rc = virtio_hugeroom_event_send(vh, eb, sizeof(*res), NULL);
out_err:
	if (rc) {
		vh->event_errors++;
		dev_warn_ratelimited(&vh->vdev->dev,
				     "%s for request %llu failed: %d\n",
				     type == VIRTIO_HUGEROOM_MSG_RESULT ?
				     "result" : "progress", request_id, rc);
	} else {
		vh->events_sent++;
	}
	mutex_unlock(&vh->event_lock);
	return rc;
}

/* Send a RESULT with @status and nothing done for @request_id. */
int virtio_hugeroom_send_result(struct virtio_hugeroom *vh, u64 request_id,
				u32 status)
{
	return virtio_hugeroom_send_counts(vh, VIRTIO_HUGEROOM_MSG_RESULT,
					   request_id, status, NULL);
}
