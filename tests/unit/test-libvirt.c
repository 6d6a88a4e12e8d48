/* SPDX-License-Identifier: GPL-2.0-only */
/* What the libvirt hook reads from domain XML (fixtures/libvirt/) */

#define G_LOG_DOMAIN "TestLibvirt"

#include <string.h>

#include "hr-libvirt.h"

#define MiB (G_GUINT64_CONSTANT(1) << 20)
#define GiB (G_GUINT64_CONSTANT(1) << 30)

static HrLibvirtDomain *
parse_fixture(const gchar *name)
{
	g_autofree gchar *path = g_test_build_filename(G_TEST_DIST, "fixtures", "libvirt", name, NULL);
	g_autofree gchar *xml = NULL;
	g_autoptr(GError) error = NULL;
	HrLibvirtDomain *domain;
	gsize len;

	g_assert_true(g_file_get_contents(path, &xml, &len, &error));
	domain = hr_libvirt_domain_parse(xml, len, &error);
	g_assert_no_error(error);
	g_assert_nonnull(domain);
	return domain;
}

/* the error parsing @xml gives, which must mention @needle */
static void
assert_parse_error(const gchar *xml, gint code, const gchar *needle)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrLibvirtDomain) domain = hr_libvirt_domain_parse(xml, strlen(xml), &error);
	g_assert_null(domain);
	g_assert_error(error, HR_LIBVIRT_ERROR, code);
	if (strstr(error->message, needle) == NULL)
		g_error("error '%s' does not mention '%s'", error->message, needle);
}

/* ... and begins with @prefix, the element it is about */
static void
assert_parse_error_prefix(const gchar *xml, gint code, const gchar *prefix)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(HrLibvirtDomain) domain = hr_libvirt_domain_parse(xml, strlen(xml), &error);
	g_assert_null(domain);
	g_assert_error(error, HR_LIBVIRT_ERROR, code);
	if (!g_str_has_prefix(error->message, prefix))
		g_error("error '%s' does not begin with '%s'", error->message, prefix);
}

static void
assert_placement(HrLibvirtDomain *d, guint i, gint node, guint64 bytes)
{
	g_assert_cmpuint(d->placements->len, >, i);
	g_assert_cmpint(g_array_index(d->placements, HrLibvirtPlacement, i).node, ==, node);
	g_assert_cmpuint(g_array_index(d->placements, HrLibvirtPlacement, i).bytes, ==, bytes);
}

static void
test_plain(void)
{
	g_autoptr(HrLibvirtDomain) d = parse_fixture("plain-kib.xml");
	g_assert_cmpstr(d->name, ==, "web1");
	g_assert_cmpstr(d->uuid, ==, "6b1e3c2a-51c4-4c1e-9a43-0f6f1b0d7e11");
	g_assert_cmpuint(d->memory_bytes, ==, 4 * GiB);
	g_assert_cmpint(d->backing, ==, HR_LIBVIRT_BACKING_ANONYMOUS);
	g_assert_true(hr_libvirt_backing_uses_thp(d->backing));
	g_assert_null(d->numa_mode);
	g_assert_cmpuint(d->placements->len, ==, 1);
	assert_placement(d, 0, -1, 4 * GiB);
	g_assert_false(d->has_policy);
	g_assert_cmpint(d->policy.prepare, ==, HR_LIBVIRT_PREPARE_AUTO);
	g_assert_cmpint(d->policy.strict, ==, HR_LIBVIRT_TRI_UNSET);
	g_assert_cmpint(d->policy.deadline_s, ==, -1);
	g_assert_cmpint(d->policy.on_failure, ==, HR_LIBVIRT_FAILURE_UNSET);
}

static void
test_numatune(void)
{
	g_autoptr(HrLibvirtDomain) single = parse_fixture("numatune-single.xml");
	g_autoptr(HrLibvirtDomain) inter = parse_fixture("numatune-interleave.xml");

	g_assert_cmpuint(single->memory_bytes, ==, 8 * GiB);
	g_assert_cmpstr(single->numa_mode, ==, "strict");
	g_assert_cmpuint(single->placements->len, ==, 1);
	assert_placement(single, 0, 1, 8 * GiB);

	/* interleaved over nodes 0, 1, 3: hugeroomd reserves on one node, so any */
	g_assert_cmpuint(inter->memory_bytes, ==, 2 * GiB);
	g_assert_cmpstr(inter->numa_mode, ==, "interleave");
	g_assert_cmpuint(inter->placements->len, ==, 1);
	assert_placement(inter, 0, -1, 2 * GiB);
}

static void
test_numa_cells(void)
{
	g_autoptr(HrLibvirtDomain) d = parse_fixture("numa-cells.xml");

	/* cell 0 -> node 0, cell 1 -> node 1, cell 2 (0-1) and cell 3 (the
	 * domain's 0-1) -> any */
	g_assert_cmpuint(d->memory_bytes, ==, 6 * GiB);
	g_assert_cmpuint(d->placements->len, ==, 3);
	assert_placement(d, 0, -1, 2 * GiB);
	assert_placement(d, 1, 0, 2 * GiB);
	assert_placement(d, 2, 1, 2 * GiB);
}

static void
test_backing(void)
{
	g_autoptr(HrLibvirtDomain) hp = parse_fixture("hugepages.xml");
	g_autoptr(HrLibvirtDomain) memfd = parse_fixture("memfd.xml");
	g_autoptr(HrLibvirtDomain) shared = parse_fixture("shared-file.xml");

	g_assert_cmpint(hp->backing, ==, HR_LIBVIRT_BACKING_HUGETLBFS);
	g_assert_false(hr_libvirt_backing_uses_thp(hp->backing));
	g_assert_cmpuint(hp->memory_bytes, ==, 4 * GiB);
	g_assert_cmpint(memfd->backing, ==, HR_LIBVIRT_BACKING_MEMFD);
	g_assert_true(hr_libvirt_backing_uses_thp(memfd->backing));
	g_assert_cmpuint(memfd->memory_bytes, ==, 1000 * 1000 * 1000);
	/* no unit: KiB */
	g_assert_cmpint(shared->backing, ==, HR_LIBVIRT_BACKING_FILE);
	g_assert_cmpuint(shared->memory_bytes, ==, GiB);
}

static void
test_policy(void)
{
	g_autoptr(HrLibvirtDomain) d = parse_fixture("policy.xml");

	g_assert_true(d->has_policy);
	g_assert_cmpint(d->policy.prepare, ==, HR_LIBVIRT_PREPARE_YES);
	g_assert_cmpint(d->policy.strict, ==, HR_LIBVIRT_TRI_YES);
	g_assert_cmpint(d->policy.deadline_s, ==, 45);
	g_assert_cmpint(d->policy.on_failure, ==, HR_LIBVIRT_FAILURE_CLOSED);
	g_assert_cmpint(d->policy.donor, ==, HR_LIBVIRT_TRI_NO);
	g_assert_cmpint(d->policy.floor_bytes, ==, (gint64)GiB);
	g_assert_cmpstr(d->policy.pcp, ==, "latency");
	g_assert_cmpuint(d->memory_bytes, ==, 512 * MiB);
}

#define DOMAIN_WITH_POLICY(children)                                                          \
	"<domain><name>p</name><memory>1024</memory><metadata>"                               \
	"<hugeroom:policy xmlns:hugeroom='https://hugeroom.org/xmlns/1'>" children            \
	"</hugeroom:policy></metadata></domain>"

static void
test_policy_invalid(void)
{
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:prepare>maybe</hugeroom:prepare>"),
			   HR_LIBVIRT_ERROR_POLICY, "'maybe' is not auto, yes or no");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:strict>1</hugeroom:strict>"),
			   HR_LIBVIRT_ERROR_POLICY, "<hugeroom:strict>: '1' is not yes or no");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:deadline>0</hugeroom:deadline>"),
			   HR_LIBVIRT_ERROR_POLICY, "1-86400");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:deadline>86401</hugeroom:deadline>"),
			   HR_LIBVIRT_ERROR_POLICY, "1-86400");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:on-failure>ajar</hugeroom:on-failure>"),
			   HR_LIBVIRT_ERROR_POLICY, "open or closed");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:floor unit='parsec'>1</hugeroom:floor>"),
			   HR_LIBVIRT_ERROR_POLICY, "unit 'parsec'");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:pcp>fast</hugeroom:pcp>"),
			   HR_LIBVIRT_ERROR_POLICY, "default, latency, balanced, density or explicit:HIGH");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:colour>red</hugeroom:colour>"),
			   HR_LIBVIRT_ERROR_POLICY, "unknown element <hugeroom:colour>");
	assert_parse_error(DOMAIN_WITH_POLICY("<donor>no</donor>"), HR_LIBVIRT_ERROR_POLICY,
			   "not in the namespace");
	assert_parse_error(DOMAIN_WITH_POLICY("<hugeroom:donor>no</hugeroom:donor>"
					      "<hugeroom:donor>yes</hugeroom:donor>"),
			   HR_LIBVIRT_ERROR_POLICY, "given twice");
	/* the messages begin with the element (the hook adds the domain) */
	assert_parse_error_prefix(DOMAIN_WITH_POLICY("<hugeroom:pcp>fast</hugeroom:pcp>"),
				  HR_LIBVIRT_ERROR_POLICY, "<hugeroom:policy><hugeroom:pcp>: ");
}

static void
test_malformed(void)
{
	assert_parse_error("", HR_LIBVIRT_ERROR_XML, "does not parse");
	assert_parse_error("<domain><name>x</name>", HR_LIBVIRT_ERROR_XML, "does not parse");
	assert_parse_error("<network><name>x</name></network>", HR_LIBVIRT_ERROR_XML,
			   "its root is <network>");
	assert_parse_error("<domain><memory>1</memory></domain>", HR_LIBVIRT_ERROR_XML,
			   "no <name>");
	assert_parse_error("<domain><name>x</name></domain>", HR_LIBVIRT_ERROR_XML, "no <memory>");
	assert_parse_error("<domain><name>x</name><memory>-5</memory></domain>",
			   HR_LIBVIRT_ERROR_XML, "'-5' is not a non-negative integer");
	assert_parse_error("<domain><name>x</name><memory unit='GiB'>99999999999999</memory>"
			   "</domain>",
			   HR_LIBVIRT_ERROR_XML, "does not fit in 64 bits");
	assert_parse_error("<domain><name>x</name><memory unit='KiBB'>1</memory></domain>",
			   HR_LIBVIRT_ERROR_XML, "unit 'KiBB'");
	assert_parse_error_prefix("<domain><name>x</name><memory>1024</memory><numatune>"
				  "<memory nodeset='2-1'/></numatune></domain>",
				  HR_LIBVIRT_ERROR_XML, "<numatune><memory>: nodeset '2-1'");
	assert_parse_error_prefix("<domain><name>x</name><memory>1024</memory><numatune>"
				  "<memnode cellid='0' nodeset='x'/></numatune><cpu><numa>"
				  "<cell id='0' memory='1024'/></numa></cpu></domain>",
				  HR_LIBVIRT_ERROR_XML, "<memnode cellid='0'>: nodeset 'x'");
	assert_parse_error_prefix("<domain><name>x</name><memory unit='KiBB'>1</memory></domain>",
				  HR_LIBVIRT_ERROR_XML, "<memory>: unit 'KiBB'");
	assert_parse_error("<domain><name>x</name><memory>1024</memory><numatune>"
			   "<memory nodeset='^0'/></numatune></domain>",
			   HR_LIBVIRT_ERROR_XML, "names no node");
	/* an external entity is not fetched, nor expanded */
	assert_parse_error("<!DOCTYPE d [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>"
			   "<domain><name>x</name><memory>&x;</memory></domain>",
			   HR_LIBVIRT_ERROR_XML, "is not a non-negative integer");
}

static void
test_units(void)
{
	static const struct {
		const gchar *value, *unit;
		guint64 bytes;
	} ok[] = {
	    {"512", NULL, 512 * 1024},    {"512", "", 512 * 1024},
	    {"7", "b", 7},		  {"7", "bytes", 7},
	    {"1", "KB", 1000},		  {"1", "k", 1024},
	    {"1", "KiB", 1024},		  {"1", "kib", 1024},
	    {"3", "M", 3 * MiB},	  {"3", "MiB", 3 * MiB},
	    {"3", "MB", 3000000},	  {"2", "G", 2 * GiB},
	    {"2", "GiB", 2 * GiB},	  {"2", "GB", 2000000000},
	    {"1", "TiB", 1024 * GiB},	  {"1", "E", G_GUINT64_CONSTANT(1) << 60},
	    {" 64 ", "MiB", 64 * MiB},
	};
	for (guint i = 0; i < G_N_ELEMENTS(ok); i++) {
		g_autoptr(GError) error = NULL;
		guint64 bytes = 0;
		g_assert_true(hr_libvirt_parse_scaled(ok[i].value, ok[i].unit, 1024, &bytes, &error));
		g_assert_no_error(error);
		g_assert_cmpuint(bytes, ==, ok[i].bytes);
	}
	{
		g_autoptr(GError) error = NULL;
		guint64 bytes;
		g_assert_false(hr_libvirt_parse_scaled("16", "E", 1024, &bytes, &error));
		g_assert_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML);
	}
}

static void
test_nodeset(void)
{
	static const struct {
		const gchar *str;
		const gchar *nodes;
	} cases[] = {
	    {"0", "0"},	      {"3", "3"},	     {"0-3", "0 1 2 3"},
	    {"0-3,^2", "0 1 3"}, {"5, 1 ,3", "1 3 5"}, {"0-7,^1-3", NULL},
	    {"1024", NULL},   {"a", NULL},	     {"", NULL},
	    {"1-2-3", NULL},  {"^4", NULL},
	};
	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autoptr(GError) error = NULL;
		g_autoptr(GArray) nodes = hr_libvirt_parse_nodeset(cases[i].str, &error);
		g_autoptr(GString) got = g_string_new(NULL);
		if (cases[i].nodes == NULL) {
			g_assert_null(nodes);
			g_assert_error(error, HR_LIBVIRT_ERROR, HR_LIBVIRT_ERROR_XML);
			continue;
		}
		g_assert_no_error(error);
		for (guint n = 0; n < nodes->len; n++)
			g_string_append_printf(got, "%s%u", n ? " " : "", g_array_index(nodes, guint, n));
		g_assert_cmpstr(got->str, ==, cases[i].nodes);
	}
}

static void
test_commandline(void)
{
	g_autofree gchar *plain = hr_libvirt_qemu_commandline("/run/hugeroom/vm.sock");
	g_autofree gchar *odd = hr_libvirt_qemu_commandline("/srv/a,b&c/vm.sock");

	g_assert_cmpstr(plain, ==,
			"<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
			"  <qemu:arg value='-chardev'/>\n"
			"  <qemu:arg value='socket,id=hugeroom0,path=/run/hugeroom/vm.sock,"
			"reconnect-ms=1000'/>\n"
			"  <qemu:arg value='-device'/>\n"
			"  <qemu:arg value='virtio-hugeroom-pci,chardev=hugeroom0'/>\n"
			"</qemu:commandline>\n");
	/* a comma doubled for QEMU's option parser, & escaped for XML */
	g_assert_nonnull(strstr(odd, "path=/srv/a,,b&amp;c/vm.sock,reconnect-ms"));
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/libvirt/domain/plain", test_plain);
	g_test_add_func("/libvirt/domain/numatune", test_numatune);
	g_test_add_func("/libvirt/domain/numa-cells", test_numa_cells);
	g_test_add_func("/libvirt/domain/backing", test_backing);
	g_test_add_func("/libvirt/domain/malformed", test_malformed);
	g_test_add_func("/libvirt/policy/valid", test_policy);
	g_test_add_func("/libvirt/policy/invalid", test_policy_invalid);
	g_test_add_func("/libvirt/units", test_units);
	g_test_add_func("/libvirt/nodeset", test_nodeset);
	g_test_add_func("/libvirt/commandline", test_commandline);
	return g_test_run();
}
