/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrLibvirt"

#include "hr-libvirt.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <string.h>

#include "hr-codec.h"

/* hugeroomd takes nodes 0-1023 */
#define HR_LIBVIRT_NODE_MAX 1023

G_DEFINE_QUARK(hr - libvirt - error - quark, hr_libvirt_error)

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlDoc, xmlFreeDoc)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlXPathContext, xmlXPathFreeContext)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlXPathObject, xmlXPathFreeObject)

/* xmlChar * from libxml2, freed with xmlFree */
typedef xmlChar HrXmlStr;
static void
hr_xml_str_free(HrXmlStr *str)
{
	xmlFree(str);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrXmlStr, hr_xml_str_free)

const gchar *
hr_libvirt_backing_to_string(HrLibvirtBacking backing)
{
	switch (backing) {
	case HR_LIBVIRT_BACKING_ANONYMOUS:
		return "anonymous";
	case HR_LIBVIRT_BACKING_MEMFD:
		return "memfd";
	case HR_LIBVIRT_BACKING_FILE:
		return "file";
	case HR_LIBVIRT_BACKING_HUGETLBFS:
		return "hugetlbfs";
	}
	return "?";
}

gboolean
hr_libvirt_backing_uses_thp(HrLibvirtBacking backing)
{
	return backing == HR_LIBVIRT_BACKING_ANONYMOUS || backing == HR_LIBVIRT_BACKING_MEMFD;
}

gboolean
hr_libvirt_parse_scaled(const gchar *value, const gchar *unit, guint64 default_scale,
			guint64 *bytes, GError **error)
{
	static const gchar prefixes[] = "kmgtpe";
	g_autofree gchar *digits = g_strstrip(g_strdup(value != NULL ? value : ""));
	guint64 scale = default_scale;
	guint64 n;

	if (!g_ascii_string_to_unsigned(digits, 10, 0, G_MAXUINT64, &n, NULL)) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "'%s' is not a non-negative integer", value != NULL ? value : "");
		return FALSE;
	}
	if (unit != NULL && unit[0] != '\0') {
		const gchar *p = strchr(prefixes, g_ascii_tolower(unit[0]));
		if (g_ascii_strcasecmp(unit, "b") == 0 || g_ascii_strcasecmp(unit, "byte") == 0 ||
		    g_ascii_strcasecmp(unit, "bytes") == 0) {
			scale = 1;
		} else if (p != NULL &&
			   (unit[1] == '\0' || g_ascii_strcasecmp(unit + 1, "ib") == 0 ||
			    g_ascii_strcasecmp(unit + 1, "b") == 0)) {
			guint64 base = g_ascii_strcasecmp(unit + 1, "b") == 0 ? 1000 : 1024;
			scale = 1;
			for (gsize i = 0; i <= (gsize)(p - prefixes); i++)
				scale *= base;
		} else {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
				    "unit '%s' is not one of b, KB, KiB, MB, MiB, ... EiB", unit);
			return FALSE;
		}
	}
	if (n > G_MAXUINT64 / scale) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "%s %s does not fit in 64 bits", value, unit != NULL ? unit : "");
		return FALSE;
	}
	*bytes = n * scale;
	return TRUE;
}

static gint
hr_libvirt_cmp_uint(gconstpointer a, gconstpointer b)
{
	guint x = *(const guint *)a, y = *(const guint *)b;
	return x < y ? -1 : x > y;
}

GArray *
hr_libvirt_parse_nodeset(const gchar *str, GError **error)
{
	g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(guint));
	gboolean in[HR_LIBVIRT_NODE_MAX + 1] = {FALSE};
	g_auto(GStrv) items = g_strsplit(str != NULL ? str : "", ",", -1);

	for (guint i = 0; items[i] != NULL; i++) {
		gchar *item = g_strstrip(items[i]);
		gboolean exclude = item[0] == '^';
		g_auto(GStrv) ends = g_strsplit(item + (exclude ? 1 : 0), "-", 3);
		guint64 lo, hi;

		if (ends[0] == NULL ||
		    !g_ascii_string_to_unsigned(ends[0], 10, 0, HR_LIBVIRT_NODE_MAX, &lo, NULL) ||
		    (ends[1] != NULL && (exclude || ends[2] != NULL ||
					 !g_ascii_string_to_unsigned(
					     ends[1], 10, lo, HR_LIBVIRT_NODE_MAX, &hi, NULL)))) {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
				    "nodeset '%s': '%s' is not N, N-M or ^N with nodes 0-%d", str,
				    item, HR_LIBVIRT_NODE_MAX);
			return NULL;
		}
		if (ends[1] == NULL)
			hi = lo;
		for (guint64 n = lo; n <= hi; n++)
			in[n] = !exclude;
	}
	for (guint n = 0; n <= HR_LIBVIRT_NODE_MAX; n++)
		if (in[n])
			g_array_append_val(nodes, n);
	if (nodes->len == 0) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "nodeset '%s' names no node", str != NULL ? str : "");
		return NULL;
	}
	g_array_sort(nodes, hr_libvirt_cmp_uint);
	return g_steal_pointer(&nodes);
}

void
hr_libvirt_domain_free(HrLibvirtDomain *domain)
{
	if (domain == NULL)
		return;
	g_free(domain->name);
	g_free(domain->uuid);
	g_free(domain->numa_mode);
	g_clear_pointer(&domain->placements, g_array_unref);
	g_free(domain->policy.pcp);
	g_free(domain);
}

/* the string value of @expr, NULL when it selects nothing */
static gchar *
hr_xpath_string(xmlXPathContext *ctxt, const gchar *expr)
{
	g_autoptr(xmlXPathObject) obj = xmlXPathEvalExpression((const xmlChar *)expr, ctxt);
	if (obj == NULL || obj->type != XPATH_NODESET || obj->nodesetval == NULL ||
	    obj->nodesetval->nodeNr == 0)
		return NULL;
	{
		g_autoptr(HrXmlStr) s = xmlNodeGetContent(obj->nodesetval->nodeTab[0]);
		return g_strdup(s != NULL ? (const gchar *)s : "");
	}
}

static gboolean
hr_xpath_exists(xmlXPathContext *ctxt, const gchar *expr)
{
	g_autoptr(xmlXPathObject) obj = xmlXPathEvalExpression((const xmlChar *)expr, ctxt);
	return obj != NULL && obj->type == XPATH_NODESET && obj->nodesetval != NULL &&
	       obj->nodesetval->nodeNr > 0;
}

/* the value of attribute @name of @node, NULL without one */
static gchar *
hr_xml_attr(xmlNode *node, const gchar *name)
{
	g_autoptr(HrXmlStr) s = xmlGetProp(node, (const xmlChar *)name);
	return s != NULL ? g_strdup((const gchar *)s) : NULL;
}

/* one host node for a nodeset of exactly one node, else -1 (any) */
static gboolean
hr_libvirt_single_node(const gchar *nodeset, gint *node, GError **error)
{
	g_autoptr(GArray) nodes = NULL;
	*node = -1;
	if (nodeset == NULL)
		return TRUE;
	nodes = hr_libvirt_parse_nodeset(nodeset, error);
	if (nodes == NULL)
		return FALSE;
	if (nodes->len == 1)
		*node = (gint)g_array_index(nodes, guint, 0);
	return TRUE;
}

static void
hr_libvirt_place(GArray *placements, gint node, guint64 bytes)
{
	guint i;
	if (bytes == 0)
		return;
	for (i = 0; i < placements->len; i++) {
		HrLibvirtPlacement *p = &g_array_index(placements, HrLibvirtPlacement, i);
		if (p->node == node) {
			p->bytes += bytes;
			return;
		}
		if (p->node > node)
			break;
	}
	g_array_insert_val(placements, i, ((HrLibvirtPlacement){.node = node, .bytes = bytes}));
}

/*
 * Where the memory goes: the guest NUMA cells' memory to the host node their
 * <memnode> names, the rest to <numatune><memory>'s node; one node only
 * when a nodeset names exactly one (hugeroomd reserves on one node or any).
 */
static gboolean
hr_libvirt_parse_placement(HrLibvirtDomain *domain, xmlXPathContext *ctxt, GError **error)
{
	g_autoptr(xmlXPathObject) cells = NULL;
	g_autofree gchar *nodeset = hr_xpath_string(ctxt, "/domain/numatune/memory/@nodeset");
	g_autofree gchar *placement = hr_xpath_string(ctxt, "/domain/numatune/memory/@placement");
	guint64 in_cells = 0;
	gint domain_node;

	domain->numa_mode = hr_xpath_string(ctxt, "/domain/numatune/memory/@mode");
	if (domain->numa_mode == NULL && hr_xpath_exists(ctxt, "/domain/numatune/memory"))
		domain->numa_mode = g_strdup("strict");
	if (nodeset != NULL && nodeset[0] == '\0')
		g_clear_pointer(&nodeset, g_free);
	if (g_strcmp0(placement, "auto") == 0)
		g_clear_pointer(&nodeset, g_free); /* numad decides at start: any node */
	if (!hr_libvirt_single_node(nodeset, &domain_node, error)) {
		g_prefix_error(error, "<numatune><memory>: ");
		return FALSE;
	}
	domain->placements = g_array_new(FALSE, FALSE, sizeof(HrLibvirtPlacement));
	cells = xmlXPathEvalExpression((const xmlChar *)"/domain/cpu/numa/cell", ctxt);
	for (gint i = 0;
	     cells != NULL && cells->nodesetval != NULL && i < cells->nodesetval->nodeNr; i++) {
		xmlNode *cell = cells->nodesetval->nodeTab[i];
		g_autofree gchar *id = hr_xml_attr(cell, "id");
		g_autofree gchar *memory = hr_xml_attr(cell, "memory");
		g_autofree gchar *unit = hr_xml_attr(cell, "unit");
		g_autofree gchar *expr = NULL;
		g_autofree gchar *cell_nodeset = NULL;
		guint64 bytes;
		gint node = domain_node;

		if (!hr_libvirt_parse_scaled(memory, unit, 1024, &bytes, error)) {
			g_prefix_error(error, "<cell id='%s' memory>: ", id != NULL ? id : "?");
			return FALSE;
		}
		/* each cell and all of them together: no sum may wrap */
		if (bytes > HR_LIBVIRT_MEMORY_MAX - in_cells) {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
				    "<cell id='%s' memory>: the cells' memory adds up to more than "
				    "the %" G_GUINT64_FORMAT
				    " bytes (2^63 - 1) a reservation can be",
				    id != NULL ? id : "?", (guint64)HR_LIBVIRT_MEMORY_MAX);
			return FALSE;
		}
		if (id != NULL && strchr(id, '\'') == NULL) {
			expr =
			    g_strdup_printf("/domain/numatune/memnode[@cellid='%s']/@nodeset", id);
			cell_nodeset = hr_xpath_string(ctxt, expr);
		}
		if (cell_nodeset != NULL && !hr_libvirt_single_node(cell_nodeset, &node, error)) {
			g_prefix_error(error, "<memnode cellid='%s'>: ", id);
			return FALSE;
		}
		hr_libvirt_place(domain->placements, node, bytes);
		in_cells += bytes;
	}
	if (in_cells < domain->memory_bytes)
		hr_libvirt_place(domain->placements, domain_node, domain->memory_bytes - in_cells);
	return TRUE;
}

static void
hr_libvirt_parse_backing(HrLibvirtDomain *domain, xmlXPathContext *ctxt)
{
	g_autofree gchar *source = hr_xpath_string(ctxt, "/domain/memoryBacking/source/@type");
	g_autofree gchar *access = hr_xpath_string(ctxt, "/domain/memoryBacking/access/@mode");

	if (hr_xpath_exists(ctxt, "/domain/memoryBacking/hugepages"))
		domain->backing = HR_LIBVIRT_BACKING_HUGETLBFS;
	else if (g_strcmp0(source, "memfd") == 0)
		domain->backing = HR_LIBVIRT_BACKING_MEMFD;
	/* shared memory that is not memfd is a file in libvirt's memory_backing_dir */
	else if (g_strcmp0(source, "file") == 0 || g_strcmp0(access, "shared") == 0)
		domain->backing = HR_LIBVIRT_BACKING_FILE;
	else
		domain->backing = HR_LIBVIRT_BACKING_ANONYMOUS;
}

static gboolean
hr_libvirt_policy_invalid(GError **error, const gchar *element, const gchar *value,
			  const gchar *expected)
{
	g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_POLICY,
		    "<hugeroom:policy><hugeroom:%s>: '%s' is not %s", element, value, expected);
	return FALSE;
}

static gboolean
hr_libvirt_policy_bool(const gchar *element, const gchar *value, HrLibvirtTri *out, GError **error)
{
	if (g_strcmp0(value, "yes") == 0 || g_strcmp0(value, "on") == 0)
		*out = HR_LIBVIRT_TRI_YES;
	else if (g_strcmp0(value, "no") == 0 || g_strcmp0(value, "off") == 0)
		*out = HR_LIBVIRT_TRI_NO;
	else
		return hr_libvirt_policy_invalid(error, element, value, "yes or no");
	return TRUE;
}

/* one child element of <hugeroom:policy> */
static gboolean
hr_libvirt_policy_element(HrLibvirtPolicy *policy, xmlNode *child, GError **error)
{
	const gchar *name = (const gchar *)child->name;
	g_autoptr(HrXmlStr) content = xmlNodeGetContent(child);
	g_autofree gchar *value = g_strstrip(g_strdup(content != NULL ? (gchar *)content : ""));
	guint64 n;

	if (g_strcmp0(name, "prepare") == 0) {
		if (g_strcmp0(value, "auto") == 0)
			policy->prepare = HR_LIBVIRT_PREPARE_AUTO;
		else if (g_strcmp0(value, "yes") == 0 || g_strcmp0(value, "on") == 0)
			policy->prepare = HR_LIBVIRT_PREPARE_YES;
		else if (g_strcmp0(value, "no") == 0 || g_strcmp0(value, "off") == 0)
			policy->prepare = HR_LIBVIRT_PREPARE_NO;
		else
			return hr_libvirt_policy_invalid(error, name, value, "auto, yes or no");
	} else if (g_strcmp0(name, "strict") == 0) {
		return hr_libvirt_policy_bool(name, value, &policy->strict, error);
	} else if (g_strcmp0(name, "donor") == 0) {
		return hr_libvirt_policy_bool(name, value, &policy->donor, error);
	} else if (g_strcmp0(name, "deadline") == 0) {
		if (!g_ascii_string_to_unsigned(value, 10, 1, 86400, &n, NULL))
			return hr_libvirt_policy_invalid(error, name, value,
							 "a number of seconds, 1-86400");
		policy->deadline_s = (gint64)n;
	} else if (g_strcmp0(name, "on-failure") == 0) {
		if (g_strcmp0(value, "open") == 0)
			policy->on_failure = HR_LIBVIRT_FAILURE_OPEN;
		else if (g_strcmp0(value, "closed") == 0)
			policy->on_failure = HR_LIBVIRT_FAILURE_CLOSED;
		else
			return hr_libvirt_policy_invalid(error, name, value, "open or closed");
	} else if (g_strcmp0(name, "floor") == 0) {
		g_autofree gchar *unit = hr_xml_attr(child, "unit");
		g_autoptr(GError) local = NULL;
		if (!hr_libvirt_parse_scaled(value, unit, 1024, &n, &local) || n > G_MAXINT64) {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_POLICY,
				    "<hugeroom:policy><hugeroom:floor>: %s",
				    local != NULL ? local->message : "too large");
			return FALSE;
		}
		policy->floor_bytes = (gint64)n;
	} else if (g_strcmp0(name, "pcp") == 0) {
		HrPcpPolicy pcp;
		if (!hr_pcp_policy_parse(value, &pcp, NULL))
			return hr_libvirt_policy_invalid(error, name, value,
							 "default, latency, balanced, density or "
							 "explicit:HIGH");
		g_free(policy->pcp);
		policy->pcp = g_steal_pointer(&value);
	} else {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_POLICY,
			    "<hugeroom:policy>: unknown element <hugeroom:%s>; known: prepare, "
			    "strict, deadline, on-failure, donor, floor, pcp",
			    name);
		return FALSE;
	}
	return TRUE;
}

static gboolean
hr_libvirt_parse_policy(HrLibvirtDomain *domain, xmlXPathContext *ctxt, GError **error)
{
	g_autoptr(xmlXPathObject) obj =
	    xmlXPathEvalExpression((const xmlChar *)"/domain/metadata/hugeroom:policy", ctxt);
	HrLibvirtPolicy *policy = &domain->policy;
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);

	policy->prepare = HR_LIBVIRT_PREPARE_AUTO;
	policy->strict = HR_LIBVIRT_TRI_UNSET;
	policy->deadline_s = -1;
	policy->on_failure = HR_LIBVIRT_FAILURE_UNSET;
	policy->donor = HR_LIBVIRT_TRI_UNSET;
	policy->floor_bytes = -1;
	if (obj == NULL || obj->nodesetval == NULL || obj->nodesetval->nodeNr == 0)
		return TRUE;
	domain->has_policy = TRUE;
	for (xmlNode *child = obj->nodesetval->nodeTab[0]->children; child != NULL;
	     child = child->next) {
		if (child->type != XML_ELEMENT_NODE)
			continue;
		if (child->ns == NULL ||
		    g_strcmp0((const gchar *)child->ns->href, HR_LIBVIRT_POLICY_NS) != 0) {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_POLICY,
				    "<hugeroom:policy>: <%s> is not in the namespace %s; write "
				    "<hugeroom:%s>",
				    child->name, HR_LIBVIRT_POLICY_NS, child->name);
			return FALSE;
		}
		if (!g_hash_table_add(seen, (gpointer)child->name)) {
			g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_POLICY,
				    "<hugeroom:policy>: <hugeroom:%s> is given twice", child->name);
			return FALSE;
		}
		if (!hr_libvirt_policy_element(policy, child, error))
			return FALSE;
	}
	return TRUE;
}

/* @xml as a document whose root is <domain> */
static xmlDoc *
hr_libvirt_read(const gchar *xml, gsize len, GError **error)
{
	g_autoptr(xmlDoc) doc = NULL;
	xmlNode *root;

	if (len > HR_LIBVIRT_XML_MAX || len > G_MAXINT) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "the domain XML is %" G_GSIZE_FORMAT " bytes, more than %d", len,
			    HR_LIBVIRT_XML_MAX);
		return NULL;
	}
	/* no network, no entity expansion, no DTD: the XML is only data */
	doc = xmlReadMemory(xml, (int)len, "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (doc == NULL) {
		const xmlError *e = xmlGetLastError();
		g_autofree gchar *what =
		    e != NULL && e->message != NULL ? g_strstrip(g_strdup(e->message)) : NULL;
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "the domain XML does not parse: %s (line %d)",
			    what != NULL ? what : "not XML", e != NULL ? e->line : 0);
		return NULL;
	}
	root = xmlDocGetRootElement(doc);
	if (root == NULL || g_strcmp0((const gchar *)root->name, "domain") != 0) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "the XML is not a libvirt domain: its root is <%s>, not <domain>",
			    root != NULL ? (const gchar *)root->name : "");
		return NULL;
	}
	return g_steal_pointer(&doc);
}

HrLibvirtFailure
hr_libvirt_domain_on_failure(const gchar *xml, gsize len)
{
	g_autoptr(xmlDoc) doc = hr_libvirt_read(xml, len, NULL);
	g_autoptr(xmlXPathContext) ctxt = NULL;
	g_autoptr(xmlXPathObject) obj = NULL;
	HrLibvirtFailure failure = HR_LIBVIRT_FAILURE_UNSET;

	if (doc == NULL)
		return HR_LIBVIRT_FAILURE_UNSET;
	ctxt = xmlXPathNewContext(doc);
	/* in any namespace: <on-failure> without the prefix still says what was meant */
	obj = xmlXPathEvalExpression((const xmlChar *)"/domain/metadata/*[local-name()='policy']"
						      "/*[local-name()='on-failure']",
				     ctxt);
	for (gint i = 0; obj != NULL && obj->nodesetval != NULL && i < obj->nodesetval->nodeNr;
	     i++) {
		g_autoptr(HrXmlStr) content = xmlNodeGetContent(obj->nodesetval->nodeTab[i]);
		g_autofree gchar *value =
		    g_strstrip(g_strdup(content != NULL ? (const gchar *)content : ""));
		if (g_strcmp0(value, "open") != 0)
			return HR_LIBVIRT_FAILURE_CLOSED;
		failure = HR_LIBVIRT_FAILURE_OPEN;
	}
	return failure;
}

HrLibvirtDomain *
hr_libvirt_domain_parse(const gchar *xml, gsize len, GError **error)
{
	g_autoptr(HrLibvirtDomain) domain = g_new0(HrLibvirtDomain, 1);
	g_autoptr(xmlDoc) doc = hr_libvirt_read(xml, len, error);
	g_autoptr(xmlXPathContext) ctxt = NULL;
	g_autofree gchar *memory = NULL;
	g_autofree gchar *unit = NULL;

	if (doc == NULL)
		return NULL;
	ctxt = xmlXPathNewContext(doc);
	xmlXPathRegisterNs(ctxt, (const xmlChar *)"hugeroom",
			   (const xmlChar *)HR_LIBVIRT_POLICY_NS);

	domain->name = hr_xpath_string(ctxt, "/domain/name");
	domain->uuid = hr_xpath_string(ctxt, "/domain/uuid");
	if (domain->name == NULL || domain->name[0] == '\0') {
		g_set_error_literal(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
				    "the domain XML has no <name>");
		return NULL;
	}
	memory = hr_xpath_string(ctxt, "/domain/memory");
	unit = hr_xpath_string(ctxt, "/domain/memory/@unit");
	if (memory == NULL) {
		g_set_error_literal(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
				    "the domain XML has no <memory>");
		return NULL;
	}
	if (!hr_libvirt_parse_scaled(memory, unit, 1024, &domain->memory_bytes, error)) {
		g_prefix_error(error, "<memory>: ");
		return NULL;
	}
	if (domain->memory_bytes > HR_LIBVIRT_MEMORY_MAX) {
		g_set_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML,
			    "<memory>: %" G_GUINT64_FORMAT
			    " bytes is more than the %" G_GUINT64_FORMAT
			    " bytes (2^63 - 1) a reservation can be",
			    domain->memory_bytes, (guint64)HR_LIBVIRT_MEMORY_MAX);
		return NULL;
	}
	if (!hr_libvirt_parse_placement(domain, ctxt, error) ||
	    !hr_libvirt_parse_policy(domain, ctxt, error))
		return NULL;
	hr_libvirt_parse_backing(domain, ctxt);
	return g_steal_pointer(&domain);
}

gchar *
hr_libvirt_qemu_commandline(const gchar *vm_socket)
{
	g_autofree gchar *path = g_markup_escape_text(vm_socket, -1);
	/* QEMU's option syntax doubles a comma inside a value */
	g_auto(GStrv) parts = g_strsplit(path, ",", -1);
	g_autofree gchar *escaped = g_strjoinv(",,", parts);

	return g_strdup_printf(
	    "<qemu:commandline xmlns:qemu='" HR_LIBVIRT_QEMU_NS "'>\n"
	    "  <qemu:arg value='-chardev'/>\n"
	    "  <qemu:arg value='socket,id=hugeroom0,path=%s,reconnect-ms=1000'/>\n"
	    "  <qemu:arg value='-device'/>\n"
	    "  <qemu:arg value='virtio-hugeroom-pci,chardev=hugeroom0'/>\n"
	    "</qemu:commandline>\n",
	    escaped);
}
