/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrVirt"

#include "hr-virt.h"

#ifdef HAVE_LIBVIRT

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "hr-libvirt.h"

#define MiB (1024 * 1024)

/*
 * The pool thread owns the connection; the main loop owns the rest. A
 * lookup's result holds a reference, so one that lands after
 * hr_virt_free() finds config NULL and is dropped.
 */
struct _HrVirt {
	gint ref;
	HrConfig *config; /* main loop only; NULL once freed */
	gchar *uri;
	GThreadPool *pool;
	virConnectPtr conn; /* the pool thread only */
	gboolean warned;    /* the pool thread only: the failure to connect was logged */
};

typedef struct {
	HrVirt *virt;
	gchar *uuid;
	gchar *name;	     /* the guest's, from its hello */
	gchar *domain;	     /* the domain's, NULL when none was found */
	gboolean has_policy; /* else no policy, or one that did not parse */
	HrDomainPolicy policy;
} Lookup;

static void
hr_virt_unref(HrVirt *virt)
{
	if (!g_atomic_int_dec_and_test(&virt->ref))
		return;
	g_free(virt->uri);
	g_free(virt);
}

static void
lookup_free(Lookup *l)
{
	hr_virt_unref(l->virt);
	g_free(l->uuid);
	g_free(l->name);
	g_free(l->domain);
	g_free(l);
}

/* libvirt prints every error to stderr unless told otherwise: we log our own */
static void
hr_virt_quiet(void *data, virErrorPtr error)
{
	(void)data;
	(void)error;
}

static const gchar *
hr_virt_error(void)
{
	const gchar *msg = virGetLastErrorMessage();
	return msg != NULL ? msg : "unknown error";
}

/* main loop */
static gboolean
hr_virt_apply_cb(gpointer user_data)
{
	Lookup *l = user_data;
	g_autofree gchar *floor = NULL;

	if (l->virt->config == NULL)
		return G_SOURCE_REMOVE;
	if (l->domain == NULL)
		return G_SOURCE_REMOVE;
	if (!l->has_policy) {
		hr_config_set_domain_policy(l->virt->config, l->name, NULL);
		g_info("%s: libvirt domain %s has no hugeroom policy", l->name, l->domain);
		return G_SOURCE_REMOVE;
	}
	hr_config_set_domain_policy(l->virt->config, l->name, &l->policy);
	floor = l->policy.floor_mb >= 0
		    ? g_strdup_printf("%" G_GINT64_FORMAT " MiB", l->policy.floor_mb)
		    : g_strdup("unset");
	g_message("%s: libvirt domain %s (%s): policy donor=%s floor=%s applied", l->name,
		  l->domain, l->uuid,
		  l->policy.donor < 0 ? "unset"
		  : l->policy.donor   ? "yes"
				      : "no",
		  floor);
	return G_SOURCE_REMOVE;
}

static gboolean
hr_virt_connect(HrVirt *virt)
{
	if (virt->conn != NULL && virConnectIsAlive(virt->conn) == 1)
		return TRUE;
	g_clear_pointer(&virt->conn, virConnectClose);
	virt->conn = virConnectOpenReadOnly(virt->uri);
	if (virt->conn == NULL) {
		/* once, not for every guest of a host without libvirtd */
		if (!virt->warned)
			g_warning("cannot connect to libvirt at %s: %s; guests' domain policies "
				  "are not applied (libvirt_uri in hugeroomd.conf)",
				  virt->uri, hr_virt_error());
		virt->warned = TRUE;
		return FALSE;
	}
	if (virt->warned)
		g_message("connected to libvirt at %s", virt->uri);
	virt->warned = FALSE;
	return TRUE;
}

/* the domain's policy from its XML; FALSE when it has none or it does not parse */
static gboolean
hr_virt_read_policy(Lookup *l, const gchar *xml)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrLibvirtDomain) dom = hr_libvirt_domain_parse(xml, strlen(xml), &error);

	if (dom == NULL) {
		g_warning("%s: libvirt domain %s: %s; its policy is not applied", l->name,
			  l->domain, error->message);
		return FALSE;
	}
	if (!dom->has_policy)
		return FALSE;
	l->policy.donor = dom->policy.donor == HR_LIBVIRT_TRI_UNSET
			      ? -1
			      : dom->policy.donor == HR_LIBVIRT_TRI_YES;
	/* a floor is a minimum: part of a MiB counts as a whole one */
	l->policy.floor_mb =
	    dom->policy.floor_bytes < 0 ? -1 : (dom->policy.floor_bytes + MiB - 1) / MiB;
	return TRUE;
}

/* the pool thread */
static void
hr_virt_lookup_cb(gpointer data, gpointer user_data)
{
	Lookup *l = data;
	HrVirt *virt = user_data;
	virDomainPtr dom;
	gchar *xml;

	if (hr_virt_connect(virt)) {
		dom = virDomainLookupByUUIDString(virt->conn, l->uuid);
		if (dom == NULL) {
			g_info("%s: no libvirt domain with UUID %s: %s", l->name, l->uuid,
			       hr_virt_error());
		} else {
			l->domain = g_strdup(virDomainGetName(dom));
			xml = virDomainGetXMLDesc(dom, 0);
			if (xml == NULL)
				g_warning("%s: cannot read libvirt domain %s: %s", l->name,
					  l->domain, hr_virt_error());
			else
				l->has_policy = hr_virt_read_policy(l, xml);
			free(xml);
			virDomainFree(dom);
		}
	}
	g_main_context_invoke_full(NULL, G_PRIORITY_DEFAULT, hr_virt_apply_cb, l,
				   (GDestroyNotify)lookup_free);
}

HrVirt *
hr_virt_new(HrConfig *config)
{
	HrVirt *virt;

	if (config->libvirt_uri == NULL || config->libvirt_uri[0] == '\0')
		return NULL;
	if (virInitialize() < 0) {
		g_warning("libvirt does not initialize: %s; no domain lookups", hr_virt_error());
		return NULL;
	}
	virSetErrorFunc(NULL, hr_virt_quiet);
	virt = g_new0(HrVirt, 1);
	virt->ref = 1;
	virt->config = config;
	virt->uri = g_strdup(config->libvirt_uri);
	/* one thread: one connection, lookups in the order guests came */
	virt->pool = g_thread_pool_new_full(hr_virt_lookup_cb, virt, (GDestroyNotify)lookup_free, 1,
					    FALSE, NULL);
	return virt;
}

void
hr_virt_free(HrVirt *virt)
{
	if (virt == NULL)
		return;
	virt->config = NULL;
	g_thread_pool_free(virt->pool, TRUE, TRUE);
	g_clear_pointer(&virt->conn, virConnectClose);
	hr_virt_unref(virt);
}

void
hr_virt_lookup(HrVirt *virt, const gchar *uuid, const gchar *name)
{
	Lookup *l;

	if (virt == NULL)
		return;
	l = g_new0(Lookup, 1);
	g_atomic_int_inc(&virt->ref);
	l->virt = virt;
	l->uuid = g_strdup(uuid);
	l->name = g_strdup(name);
	l->policy.donor = -1;
	l->policy.floor_mb = -1;
	g_thread_pool_push(virt->pool, l, NULL);
}

#else /* !HAVE_LIBVIRT */

HrVirt *
hr_virt_new(HrConfig *config)
{
	if (config->libvirt_uri != NULL && config->libvirt_uri[0] != '\0')
		g_info("built without libvirt: libvirt_uri=%s is not used", config->libvirt_uri);
	return NULL;
}

void
hr_virt_free(HrVirt *virt)
{
	(void)virt;
}

void
hr_virt_lookup(HrVirt *virt, const gchar *uuid, const gchar *name)
{
	(void)virt;
	(void)uuid;
	(void)name;
}

#endif
