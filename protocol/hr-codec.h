/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hr-codec: encode, decode and validate every virtio-hugeroom message and
 * every device <-> daemon channel frame.
 *
 * The wire forms are the little-endian structs of virtio_hugeroom.h; the
 * decoded forms below are host-endian and own their variable-length arrays.
 * A decoder trusts nothing it reads: every length, count and address is
 * checked and a message that breaks a rule is rejected whole, with a GError
 * (HR_CODEC_ERROR) naming the message, the field and the value.
 */
#pragma once

#include <glib.h>

#include "virtio_hugeroom.h"

G_BEGIN_DECLS

#define HR_CODEC_ERROR (hr_codec_error_quark())

typedef enum {
	HR_CODEC_ERROR_INVALID,	     /* a field breaks a rule */
	HR_CODEC_ERROR_UNKNOWN_TYPE, /* a type this version does not know */
} HrCodecError;

GQuark
hr_codec_error_quark(void);

/* ---------------------------------------------------------------------- */
/* Virtqueue messages */

typedef struct {
	guint16 type;
	guint16 flags;
	guint32 len;
	guint64 request_id;
} HrMsgHdr;

typedef struct {
	guint16 nid;
	guint8 zone_idx;
	gchar name[12]; /* NUL terminated, checked */
	guint64 start_pfn;
	guint64 spanned_pages;
	guint64 managed_pages;
	guint64 free_pages;
	guint64 wmark_min;
	guint64 wmark_low;
	guint64 wmark_high;
	guint64 nr_free[VIRTIO_HUGEROOM_NR_ORDERS];
	guint64 nr_free_pb_mt[VIRTIO_HUGEROOM_NR_MT];
	guint32 hist[VIRTIO_HUGEROOM_NR_HIST];
	guint32 pcp_count;
	guint32 pcp_high;
	guint32 pcp_batch;
	guint32 pcp_high_min;
	guint32 pcp_high_max;
	guint8 pcp_policy;     /* enum virtio_hugeroom_pcp_policy in force */
	guint32 pcp_fraction;  /* the guest's percpu_pagelist_high_fraction */
} HrZone;

typedef struct {
	guint64 gpa;
	guint16 free_pages;
	guint8 migratetype;
	guint8 zone;
} HrCandidate;

typedef struct {
	HrMsgHdr hdr;
	guint64 seq;
	guint64 uptime_ns;
	guint64 build_ns;
	guint64 mem_total_pages;
	guint64 mem_free_pages;
	guint64 mem_available_pages;
	guint32 held_blocks;
	guint32 page_shift;
	guint32 pageblock_order;
	guint16 nr_zones;
	guint16 nr_candidates;
	guint64 vmstat[VIRTIO_HUGEROOM_NR_VMSTAT];
	HrZone *zones;		 /* nr_zones */
	HrCandidate *candidates; /* nr_candidates */
} HrStatus;

/* RESULT and PROGRESS */
typedef struct {
	HrMsgHdr hdr;
	guint32 status;
	guint32 blocks_tried;
	guint32 blocks_freed;
	guint32 failed[VIRTIO_HUGEROOM_NR_REASONS];
	guint64 pages_migrated;
	guint64 elapsed_us;
} HrResult;

/* HOLD and RETURNED */
typedef struct {
	HrMsgHdr hdr;
	guint32 nr_blocks;
	guint32 reason;
	guint64 *gpas; /* nr_blocks */
} HrBlocks;

typedef struct {
	guint64 start;
	guint64 end;
} HrRange;

/*
 * Any command (cmdq). hdr.type says which; fields a command does not carry
 * are zero: REPORT and CANCEL are the header alone, CAPTURE has count and
 * budget_ms, RETURN count and gpas, SET_PCP policy and high, EVACUATE all
 * but policy and high.
 */
typedef struct {
	HrMsgHdr hdr;
	guint32 count;
	guint32 budget_ms;
	guint64 budget_pages;
	guint32 policy;
	guint32 high; /* SET_PCP EXPLICIT */
	guint32 nr_gpas;
	guint64 *gpas;
	guint32 nr_ranges;
	HrRange *ranges;
} HrCmd;

/* A message from the guest: exactly one of the pointers is set. */
typedef struct {
	guint16 type;
	HrStatus *status;
	HrResult *result;
	HrBlocks *blocks;
} HrGuestMsg;

HrStatus *
hr_status_new(guint16 nr_zones, guint16 nr_candidates);
void
hr_status_free(HrStatus *status);
HrStatus *
hr_status_copy(const HrStatus *status);
HrStatus *
hr_status_decode(const guint8 *buf, gsize len, GError **error);
GBytes *
hr_status_encode(const HrStatus *status);

HrResult *
hr_result_decode(const guint8 *buf, gsize len, GError **error);
GBytes *
hr_result_encode(const HrResult *result);

HrBlocks *
hr_blocks_new(guint16 type, guint32 nr_blocks);
void
hr_blocks_free(HrBlocks *blocks);
HrBlocks *
hr_blocks_decode(const guint8 *buf, gsize len, GError **error);
GBytes *
hr_blocks_encode(const HrBlocks *blocks);

HrCmd *
hr_cmd_new(guint16 type, guint64 request_id);
void
hr_cmd_free(HrCmd *cmd);
HrCmd *
hr_cmd_decode(const guint8 *buf, gsize len, GError **error);
GBytes *
hr_cmd_encode(const HrCmd *cmd);

void
hr_guest_msg_free(HrGuestMsg *msg);
HrGuestMsg *
hr_guest_msg_decode(const guint8 *buf, gsize len, GError **error);

const gchar *
hr_msg_type_to_string(guint16 type);
const gchar *
hr_mt_to_string(guint8 migratetype);
const gchar *
hr_vmstat_to_string(guint idx);
const gchar *
hr_result_status_to_string(guint32 status);

/* A PCP policy (SPEC 1.6.7): @high only with VIRTIO_HUGEROOM_PCP_EXPLICIT. */
typedef struct {
	guint32 policy;
	guint32 high;
} HrPcpPolicy;

/* "default", "latency", "balanced", "density", "explicit"; NULL if unknown */
const gchar *
hr_pcp_policy_to_string(guint32 policy);
/* "latency", ..., or "explicit:HIGH"; the text form of config, CLI, hook */
gboolean
hr_pcp_policy_parse(const gchar *text, HrPcpPolicy *policy, GError **error);
gchar *
hr_pcp_policy_format(const HrPcpPolicy *policy);
/* the rules of SPEC 1.6.7 the host can check */
gboolean
hr_pcp_policy_check(const HrPcpPolicy *policy, GError **error);
const gchar *
hr_reason_to_string(guint32 reason);

/* ---------------------------------------------------------------------- */
/* Device <-> daemon channel */

typedef struct {
	guint64 gpa;
	guint64 size;
	guint64 hva;
} HrRamRange;

typedef struct {
	guint32 proto_version;
	guint32 nr_ram;
	guint8 uuid[16];
	gchar name[64]; /* NUL terminated UTF-8, checked */
	guint64 ram_size;
	guint64 guest_features;
	HrRamRange *ram; /* nr_ram */
} HrChanHello;

typedef struct {
	guint32 proto_version;
	guint32 status_interval_ms;
	guint32 chan_features; /* HR_CHAN_F_*; 0 when proto_version is 1 */
} HrChanWelcome;

typedef struct {
	guint32 nr_ram;
	guint64 ram_size;
	HrRamRange *ram; /* nr_ram, checked as SPEC 2.5.1 says */
} HrChanLayout;

typedef struct {
	guint64 guest_features;
	guint64 msgs_relayed;
	guint64 msgs_rejected;
	guint64 cmds_dropped;
	guint32 num_held;
	guint32 driver_ok;
	guint32 discard_disabled;
	guint32 chan_features; /* HR_CHAN_F_* the device uses */
} HrChanDeviceState;

/* One whole frame: the header's type and its payload. */
typedef struct {
	guint16 type;
	GBytes *payload;
} HrChanFrame;

const gchar *
hr_chan_type_to_string(guint16 type);

HrChanFrame *
hr_chan_frame_new(guint16 type, GBytes *payload);
void
hr_chan_frame_free(HrChanFrame *frame);
/* header + payload, ready to write to the socket */
GBytes *
hr_chan_frame_encode(guint16 type, GBytes *payload);
gboolean
hr_chan_hdr_decode(const guint8 *buf, gsize len, guint16 *type, guint32 *payload_len,
		   GError **error);

HrChanHello *
hr_chan_hello_new(guint32 nr_ram);
void
hr_chan_hello_free(HrChanHello *hello);
HrChanHello *
hr_chan_hello_decode(GBytes *payload, GError **error);
GBytes *
hr_chan_hello_encode(const HrChanHello *hello);
gchar *
hr_chan_hello_uuid_to_string(const HrChanHello *hello);
/* TRUE when [gpa, gpa + size) lies entirely inside one of the ranges */
gboolean
hr_ram_contains(const HrRamRange *ram, guint32 nr_ram, guint64 gpa, guint64 size);

void
hr_chan_layout_free(HrChanLayout *layout);
HrChanLayout *
hr_chan_layout_decode(GBytes *payload, GError **error);
GBytes *
hr_chan_layout_encode(const HrChanLayout *layout);

/* 8 bytes for proto_version 1, 16 from 2 (SPEC 2.4) */
gboolean
hr_chan_welcome_decode(GBytes *payload, HrChanWelcome *welcome, GError **error);
GBytes *
hr_chan_welcome_encode(const HrChanWelcome *welcome);

gboolean
hr_chan_set_interval_decode(GBytes *payload, guint32 *interval_ms, GError **error);
GBytes *
hr_chan_set_interval_encode(guint32 interval_ms);

gboolean
hr_chan_device_state_decode(GBytes *payload, HrChanDeviceState *state, GError **error);
GBytes *
hr_chan_device_state_encode(const HrChanDeviceState *state);

/* GUEST_MSG carries a guest message, HOST_CMD a command. */
HrGuestMsg *
hr_chan_guest_msg_decode(GBytes *payload, GError **error);
HrCmd *
hr_chan_host_cmd_decode(GBytes *payload, GError **error);

/*
 * A streaming frame reader: push the bytes a stream gives, in whatever
 * pieces, and take whole frames out. A header that breaks a rule (magic,
 * version, type, payload over HR_CHAN_MAX_PAYLOAD) is an error the moment
 * its 16 bytes are in; the reader is then poisoned and keeps failing.
 */
typedef struct _HrFrameReader HrFrameReader;

HrFrameReader *
hr_frame_reader_new(void);
void
hr_frame_reader_free(HrFrameReader *reader);
void
hr_frame_reader_push(HrFrameReader *reader, const guint8 *data, gsize len);
/*
 * Returns a frame, or NULL: with @error set when the stream is broken,
 * without when more bytes are needed.
 */
HrChanFrame *
hr_frame_reader_next(HrFrameReader *reader, GError **error);
gsize
hr_frame_reader_get_pending(HrFrameReader *reader);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrStatus, hr_status_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrResult, g_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrBlocks, hr_blocks_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrCmd, hr_cmd_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrGuestMsg, hr_guest_msg_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrChanFrame, hr_chan_frame_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrChanHello, hr_chan_hello_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrChanLayout, hr_chan_layout_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrFrameReader, hr_frame_reader_free)

G_END_DECLS
