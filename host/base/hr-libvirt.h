/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * What hugeroom reads from a libvirt domain's XML, and what it writes for
 * one: the memory a domain will allocate at start and where (its
 * <numatune>), what backs that memory, and the hugeroom policy in the
 * domain's <metadata>; the <qemu:commandline> that gives a domain the
 * virtio-hugeroom device.
 */

#include <glib.h>

G_BEGIN_DECLS

#define HR_LIBVIRT_POLICY_NS "https://hugeroom.org/xmlns/1"
#define HR_LIBVIRT_QEMU_NS "http://libvirt.org/schemas/domain/qemu/1.0"
/* a domain XML is a few KiB; this bounds what the hook reads from stdin */
#define HR_LIBVIRT_XML_MAX (16 * 1024 * 1024)

#define HR_LIBVIRT_ERROR (hr_libvirt_error_quark())
GQuark
hr_libvirt_error_quark(void);
typedef enum {
	HR_LIBVIRT_ERROR_XML,	 /* not a domain XML */
	HR_LIBVIRT_ERROR_POLICY, /* the hugeroom policy in <metadata> is not valid */
} HrLibvirtError;

/* What QEMU will back guest RAM with (<memoryBacking>). */
typedef enum {
	HR_LIBVIRT_BACKING_ANONYMOUS, /* private anonymous memory: THP */
	HR_LIBVIRT_BACKING_MEMFD,     /* <source type='memfd'/>: shmem THP (shmem_enabled) */
	HR_LIBVIRT_BACKING_FILE,      /* <source type='file'/>: a file, no THP */
	HR_LIBVIRT_BACKING_HUGETLBFS, /* <hugepages/>: the hugetlb pool the admin sized */
} HrLibvirtBacking;

typedef enum {
	HR_LIBVIRT_TRI_UNSET = -1,
	HR_LIBVIRT_TRI_NO = 0,
	HR_LIBVIRT_TRI_YES = 1,
} HrLibvirtTri;

typedef enum {
	HR_LIBVIRT_PREPARE_AUTO, /* when the backing can use THP */
	HR_LIBVIRT_PREPARE_YES,
	HR_LIBVIRT_PREPARE_NO,
} HrLibvirtPrepare;

typedef enum {
	HR_LIBVIRT_FAILURE_UNSET,
	HR_LIBVIRT_FAILURE_OPEN,   /* start the domain anyway, with a warning */
	HR_LIBVIRT_FAILURE_CLOSED, /* refuse the start */
} HrLibvirtFailure;

/*
 * <hugeroom:policy> in the domain's <metadata>. Unset members take the
 * hook's configuration. The hook applies prepare, strict, deadline and
 * on-failure, and sends pcp to the daemon (PUT /v1/guests/NAME/pcp) at
 * prepare; hugeroomd (hr-virt.c) applies donor and floor when it looks up
 * the domain of a guest that connects.
 */
typedef struct {
	HrLibvirtPrepare prepare;
	HrLibvirtTri strict;
	gint64 deadline_s; /* -1: unset; else 1-86400 */
	HrLibvirtFailure on_failure;
	HrLibvirtTri donor;
	gint64 floor_bytes; /* -1: unset */
	gchar *pcp;	    /* hr_pcp_policy_parse()'s form; NULL: unset */
} HrLibvirtPolicy;

/* Memory a reservation should make free on one host node (-1: any). */
typedef struct {
	gint node;
	guint64 bytes;
} HrLibvirtPlacement;

typedef struct {
	gchar *name;
	gchar *uuid;
	guint64 memory_bytes; /* <memory>: what QEMU allocates at start */
	HrLibvirtBacking backing;
	/* <numatune><memory mode>, or NULL without one */
	gchar *numa_mode;
	/* where the memory goes, by host node, nodes ascending, -1 (any) first */
	GArray *placements;
	gboolean has_policy;
	HrLibvirtPolicy policy;
} HrLibvirtDomain;

/* the most memory a domain may have: the API's bytes are a signed 64-bit number */
#define HR_LIBVIRT_MEMORY_MAX G_MAXINT64

/* errors name the element, not the domain: the caller knows which domain it read */
HrLibvirtDomain *
hr_libvirt_domain_parse(const gchar *xml, gsize len, GError **error);
/*
 * <hugeroom:on-failure> of @xml on its own, for when hr_libvirt_domain_parse()
 * refused the domain or its policy: a domain that asks to fail closed does,
 * whatever else in its policy is wrong. A value other than "open" (a typo
 * too) is CLOSED; UNSET without the element or when @xml is no domain.
 */
HrLibvirtFailure
hr_libvirt_domain_on_failure(const gchar *xml, gsize len);
void
hr_libvirt_domain_free(HrLibvirtDomain *domain);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrLibvirtDomain, hr_libvirt_domain_free)

const gchar *
hr_libvirt_backing_to_string(HrLibvirtBacking backing);
/* does this backing take its memory from the buddy allocator as THP? */
gboolean
hr_libvirt_backing_uses_thp(HrLibvirtBacking backing);

/*
 * A libvirt scaled integer: @value in @unit (libvirt's units, any case:
 * "b", "bytes", "KB" = 1000, "k" = "KiB" = 1024, up to "E"/"EiB"), or in
 * @default_scale bytes without a unit.
 */
gboolean
hr_libvirt_parse_scaled(const gchar *value, const gchar *unit, guint64 default_scale,
			guint64 *bytes, GError **error);
/*
 * A libvirt nodeset ("0", "0-3", "0-7,^3"): the nodes in it, ascending
 * (guint); an empty set is an error.
 */
GArray *
hr_libvirt_parse_nodeset(const gchar *str, GError **error);

/* the <qemu:commandline> a domain needs for the device, talking to @vm_socket */
gchar *
hr_libvirt_qemu_commandline(const gchar *vm_socket);

G_END_DECLS
