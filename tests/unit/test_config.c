/*
 * nodepool.yaml loading and validation (lib/config/config.h): the real-world
 * configs of tests/data/configs (OpenDev's must load; the wild ones must get
 * upstream's config-validate verdict, with file:line:col errors naming the
 * same key or problem), and focused cases for every rule.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config/config.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The source tree: the parent of NP_BUILD (set by tests/run.sh), else ".". */
static char *
data_path(const char *rel)
{
	const char *b = getenv("NP_BUILD");
	char *top, *out;

	if (b == NULL) {
		top = strdup(".");
	} else {
		char *copy = strdup(b);

		top = strdup(dirname(copy));
		free(copy);
	}
	cr_assert(asprintf(&out, "%s/%s", top, rel) > 0);
	free(top);
	return out;
}

static char *
read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

static struct np_config *
load_str(const char *yaml, struct np_cfg_errors **errs)
{
	struct np_config *cfg = NULL;

	np_cfg_load_buffer("t.yaml", yaml, strlen(yaml), NULL, NULL, 0, &cfg, errs);
	return cfg;
}

static struct np_config *
load_ok(const char *yaml)
{
	struct np_cfg_errors *errs = NULL;
	struct np_config *cfg = load_str(yaml, &errs);

	if (cfg == NULL) {
		np_cfg_errors_print(errs, stderr);
		np_cfg_errors_free(errs);
		cr_assert_fail("config did not load");
	}
	cr_assert_null(errs);
	return cfg;
}

static char *
errs_text(const struct np_cfg_errors *errs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	np_cfg_errors_print(errs, f);
	fclose(f);
	return buf;
}

/* The errors of an invalid config, printed (caller frees). */
static char *
load_fail(const char *yaml, size_t *count)
{
	struct np_cfg_errors *errs = NULL;
	struct np_config *cfg = load_str(yaml, &errs);
	char *text;

	cr_assert_null(cfg, "config unexpectedly loaded");
	cr_assert_not_null(errs);
	text = errs_text(errs);
	if (count)
		*count = np_cfg_errors_count(errs);
	np_cfg_errors_free(errs);
	return text;
}

#define assert_has(text, needle)                                                                   \
	cr_assert(strstr((text), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (text))

/* ---- OpenDev's configs ---------------------------------------------------------- */

static const char *const opendev_files[] = {"nb07.opendev.org.yaml",
					    "nl01.opendev.org.yaml",
					    "nl02.opendev.org.yaml",
					    "nl03.opendev.org.yaml",
					    "nl04.opendev.org.yaml",
					    "nodepool.yaml",
					    NULL};

Test(config, opendev_configs_load)
{
	const char *const *f;

	for (f = opendev_files; *f; f++) {
		char rel[256], *path;
		struct np_config *cfg = NULL;
		struct np_cfg_errors *errs = NULL;
		int rc;

		snprintf(rel, sizeof(rel), "tests/data/configs/opendev/%s", *f);
		path = data_path(rel);
		rc = np_cfg_load(path, NULL, &cfg, &errs);
		if (rc != 0)
			np_cfg_errors_print(errs, stderr);
		cr_assert_eq(rc, 0, "%s did not load", *f);
		cr_assert_gt(cfg->nproviders, 0);
		cr_assert_gt(cfg->ndiskimages, 0, "%s has diskimages", *f);
		cr_assert_not_null(cfg->zk_hosts);
		np_cfg_free(cfg);
		free(path);
	}
}

Test(config, opendev_nl01_typed)
{
	char *path = data_path("tests/data/configs/opendev/nl01.opendev.org.yaml");
	struct np_config *cfg = NULL;
	const struct np_provider *p;
	const struct np_label *l;

	cr_assert_eq(np_cfg_load(path, NULL, &cfg, NULL), 0);
	cr_assert_str_eq(cfg->zk_hosts, "zk01.example.org:2281,zk02.example.org:2281,"
					"zk03.example.org:2281");
	cr_assert_eq(cfg->nproviders, 5);
	p = &cfg->providers[0];
	cr_assert_str_eq(p->driver, "openstack");
	cr_assert_eq(p->launch_retries, 3);
	cr_assert_eq(p->boot_timeout, 120);
	cr_assert_eq(p->max_concurrency, -1);
	cr_assert_eq(p->npools, 1);
	cr_assert_gt(p->pools[0].nlabels, 5);
	cr_assert_eq(p->pools[0].priority, 100);
	/* labels come from an anchor shared by every provider */
	cr_assert_eq(cfg->providers[1].pools[0].nlabels, p->pools[0].nlabels);
	l = np_cfg_label(cfg, p->pools[0].labels[0].name);
	cr_assert_not_null(l);
	cr_assert_not_null(np_cfg_diskimage(cfg, p->diskimages[0].name));
	np_cfg_free(cfg);
	free(path);
}

/* ---- wild configs: upstream's verdicts ------------------------------------------------ */

/* What upstream's error names, for each config it rejects: the key path
 * (suffix) and a message part, and whether the reported line/column must
 * point at that key in the file. */
struct wild_expect {
	const char *file_prefix;
	const char *path;
	const char *msg;
	int key_at_pos;
	int line; /* expected line, 0 = any */
};

static const struct wild_expect wild_expects[] = {
    {"GerritCodeReview__", "providers[0].pools[0].host-key-checking", "extra keys not allowed", 1,
     37},
    {"Juniper__", "cron", "extra keys not allowed", 1, 4},
    {"SovereignCloudStack__", "providers[2].pools", "expected a list", 0, 0},
    {"a10networks-ci__", "script-dir", "extra keys not allowed", 1, 1},
    {"ansible-network__windmill-config__nodepool__nl01.sjc1",
     "providers[0].cloud-images[0].username", "required key not provided", 0, 77},
    {"openstack__project-config__nodepool__nl01.openstack.org",
     "providers[0].pools[0].labels[2].name",
     "label debian-stretch in provider rax-dfw not in top-level labels", 0, 0},
    {"openstack__project-config__nodepool__nl02.openstack.org", "providers[0].diskimages[0].name",
     "diskimage centos-7 in provider citycloud-kna1 is not defined in the main diskimages "
     "list",
     0, 0},
    {"openstack__project-config__nodepool__nl04.opendev.org",
     "providers[0].pools[0].labels[19].diskimage",
     "label nested-virt-rockylinux-9 in provider ovh-bhs1 uses diskimage rockylinux-9 "
     "which is not defined in the main diskimages list",
     0, 0},
    {"openstack__project-config__nodepool__nodepoolv3", "cron", "extra keys not allowed", 1, 4},
    {"opentelekomcloud-infra__", "", "could not find expected ':'", 0, 42},
    {"opentelekomcloud-scs__zuul-config__nodepool__nodepool__at-93a6dbd", "providers[1].driver",
     "docker: unknown driver", 0, 0},
    {NULL, NULL, NULL, 0, 0},
};

/* Does the file's line (1-based) have `key` at column col (1-based)? */
static int
key_at(const char *path, int line, int col, const char *key)
{
	char *buf = read_all(path, NULL), *p = buf;
	int l = 1, ok;

	while (l < line && *p) {
		if (*p++ == '\n')
			l++;
	}
	ok = (int)strlen(p) >= col && strncmp(p + col - 1, key, strlen(key)) == 0;
	free(buf);
	return ok;
}

static const char *
last_key(const char *path)
{
	const char *dot = strrchr(path, '.');

	return dot ? dot + 1 : path;
}

Test(config, wild_configs_match_upstream_verdicts)
{
	char *dir = data_path("tests/data/configs/wild");
	char *readme_path, *readme, *line, *save = NULL;
	int rows = 0, valid = 0, invalid = 0;

	cr_assert(asprintf(&readme_path, "%s/README.md", dir) > 0);
	readme = read_all(readme_path, NULL);
	for (line = strtok_r(readme, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char file[512], *path, *cell, *verdict;
		const char *end;
		struct np_config *cfg = NULL;
		struct np_cfg_errors *errs = NULL;
		int rc, i;

		if (strncmp(line, "| ", 2) != 0 || strstr(line, ".yaml |") == NULL)
			continue;
		end = strstr(line + 2, " |");
		snprintf(file, sizeof(file), "%.*s", (int)(end - line - 2), line + 2);
		/* the verdict is the last cell */
		cell = strrchr(line, '|');
		*cell = '\0';
		verdict = strrchr(line, '|') + 2;
		cr_assert(asprintf(&path, "%s/%s", dir, file) > 0);
		rc = np_cfg_load(path, NULL, &cfg, &errs);
		rows++;
		if (strncmp(verdict, "valid", 5) == 0) {
			if (rc != 0)
				np_cfg_errors_print(errs, stderr);
			cr_assert_eq(rc, 0, "%s: upstream says valid", file);
			np_cfg_free(cfg);
			valid++;
		} else {
			const struct wild_expect *x;
			int found = 0;

			cr_assert_eq(strncmp(verdict, "invalid", 7), 0, "verdict of %s", file);
			cr_assert_neq(rc, 0, "%s: upstream says invalid", file);
			for (x = wild_expects; x->file_prefix; x++)
				if (strncmp(file, x->file_prefix, strlen(x->file_prefix)) == 0)
					break;
			cr_assert_not_null(x->file_prefix, "no expectation for %s", file);
			for (i = 0; i < (int)errs->n; i++) {
				const struct np_cfg_error *e = &errs->v[i];

				/* every error is positioned in this file */
				cr_assert_str_eq(e->file, path);
				cr_assert_gt(e->line, 0, "%s: error without a line", file);
				cr_assert_gt(e->col, 0);
				if (strcmp(e->path, x->path) != 0 || strstr(e->msg, x->msg) == NULL)
					continue;
				if (x->line)
					cr_assert_eq(e->line, x->line, "%s: line of %s", file,
						     x->path);
				if (x->key_at_pos)
					cr_assert(key_at(path, e->line, e->col, last_key(x->path)),
						  "%s:%d:%d is not at key %s", file, e->line,
						  e->col, x->path);
				found = 1;
			}
			if (!found)
				np_cfg_errors_print(errs, stderr);
			cr_assert(found, "%s: no error %s: %s", file, x->path, x->msg);
			np_cfg_errors_free(errs);
			invalid++;
		}
		free(path);
	}
	cr_assert_eq(rows, 25, "README rows read: %d", rows);
	cr_assert_eq(valid, 14);
	cr_assert_eq(invalid, 11);
	free(readme);
	free(readme_path);
	free(dir);
}

/* ---- schema rules --------------------------------------------------------------- */

Test(config, unknown_key_is_an_error_at_its_position)
{
	char *t = load_fail("labels:\n"
			    "  - name: small\n"
			    "    bogus: 1\n",
			    NULL);

	cr_assert_str_eq(t, "t.yaml:3:5: labels[0].bogus: extra keys not allowed\n");
	free(t);
}

Test(config, missing_required_key)
{
	char *t = load_fail("providers:\n"
			    "  - driver: static\n"
			    "    pools: []\n",
			    NULL);

	cr_assert_str_eq(t, "t.yaml:2:5: providers[0].name: required key not provided\n");
	free(t);
}

Test(config, wrong_type)
{
	char *t = load_fail("labels:\n"
			    "  - name: small\n"
			    "    min-ready: lots\n",
			    NULL);

	cr_assert_str_eq(t,
			 "t.yaml:3:16: labels[0].min-ready: expected an integer, got a string\n");
	free(t);
}

Test(config, every_error_at_once)
{
	size_t n = 0;
	char *t = load_fail("zookeeper-servers:\n"
			    "  - host: zk1\n"
			    "    port: '2281'\n"	/* 1: string port */
			    "zookeeper-timeout: soon\n" /* 2 */
			    "webapp:\n"
			    "  port: 99999\n" /* 3: not a port */
			    "  address: x\n"  /* 4: unknown */
			    "labels:\n"
			    "  - name: a\n"
			    "  - min-ready: 1\n" /* 5: no name */
			    "providers:\n"
			    "  - name: p1\n"
			    "    cloud: c\n"
			    "    rate: fast\n" /* 6: not a number */
			    "    pools:\n"
			    "      - name: main\n"
			    "        labels:\n"
			    "          - name: a\n"
			    "            min-ram: 1024\n" /* 7: no diskimage/cloud-image */
			    "          - name: b\n"	  /* 8: not a top label */
			    "            flavor-name: x\n"
			    "            cloud-image: nope\n" /* 9: no such cloud image */
			    "  - name: p2\n"
			    "    driver: docker\n" /* 10 */
			    "diskimages:\n"
			    "  - name: d\n"
			    "    parent: missing\n" /* 11 */
			    "bogus: 1\n",	    /* 12 */
			    &n);

	cr_assert_eq(n, 12, "errors:\n%s", t);
	assert_has(t, "t.yaml:3:11: zookeeper-servers[0].port: expected an integer, got a string");
	assert_has(t, "t.yaml:4:20: zookeeper-timeout: expected a number, got a string");
	assert_has(t, "t.yaml:6:9: webapp.port: must be a port number (1-65535)");
	assert_has(t, "t.yaml:7:3: webapp.address: extra keys not allowed");
	assert_has(t, "t.yaml:10:5: labels[1].name: required key not provided");
	assert_has(t, "t.yaml:14:11: providers[0].rate: expected a number, got a string");
	assert_has(t, "t.yaml:18:13: providers[0].pools[0].labels[0]: one of diskimage or "
		      "cloud-image is required");
	assert_has(t, "t.yaml:20:19: providers[0].pools[0].labels[1].name: label b in provider p1 "
		      "not in top-level labels");
	assert_has(t, "t.yaml:22:26: providers[0].pools[0].labels[1].cloud-image: cloud-image "
		      "nope does not exist in provider p1 but is referenced in label b");
	assert_has(t, "t.yaml:24:13: providers[1].driver: docker: unknown driver");
	assert_has(t, "t.yaml:27:13: diskimages[0].parent: diskimage d has non-existent parent: "
		      "missing");
	assert_has(t, "t.yaml:28:1: bogus: extra keys not allowed");
	free(t);
}

Test(config, exclusive_and_one_of_groups)
{
	char *t = load_fail("labels: [{name: a}]\n"
			    "diskimages: [{name: d}]\n"
			    "providers:\n"
			    "  - name: p\n"
			    "    cloud: c\n"
			    "    diskimages: [{name: d}]\n"
			    "    cloud-images: [{name: ci, image-id: x, image-name: y}]\n"
			    "    pools:\n"
			    "      - name: main\n"
			    "        labels:\n"
			    "          - {name: a, diskimage: d, cloud-image: ci}\n",
			    NULL);

	assert_has(t, "providers[0].cloud-images[0].image-name: 'image-id' and 'image-name' are "
		      "mutually exclusive");
	assert_has(t, "providers[0].pools[0].labels[0].cloud-image: 'diskimage' and "
		      "'cloud-image' are mutually exclusive");
	assert_has(t, "providers[0].pools[0].labels[0]: one of min-ram or flavor-name is required");
	free(t);
}

Test(config, empty_document_is_invalid_but_empty_sections_are_fine)
{
	struct np_config *cfg;
	char *t = load_fail("", NULL);

	cr_assert_str_eq(t, "t.yaml:1:1: expected a mapping, got null\n");
	free(t);
	cfg = load_ok("labels: []\nproviders: []\ndiskimages: []\n");
	cr_assert_eq(cfg->nproviders, 0);
	np_cfg_free(cfg);
}

Test(config, yaml_syntax_error_has_position)
{
	char *t = load_fail("labels:\n"
			    "  - name: a\n"
			    "  bad\n"
			    "providers: []\n",
			    NULL);

	/* where the scanner gave up, as PyYAML reports it */
	cr_assert_str_eq(t, "t.yaml:4:1: YAML syntax error: could not find expected ':' (while "
			    "scanning a simple key at line 3, column 3)\n");
	free(t);
}

Test(config, yaml_scalars_follow_yaml_1_1)
{
	static const char text[] =
	    "a: yes\nb: Off\nc: 012\nd: 0x1f\ne: 1:30\nf: 1.5\ng: 1e3\nh: ~\ni: 2001-12-14\n"
	    "j: '12'\nk: 1_000\nl: -.5\nm: .inf\nn: 0b101\no: 09\np: !!str 12\nq: !!float 3\n";
	struct np_cfg_errors *errs = np_cfg_errors_new();
	struct np_cfg_doc *doc = np_cfg_parse("s.yaml", text, strlen(text), errs);
	const struct np_cfg_node *r;

	cr_assert_not_null(doc);
	r = np_cfg_doc_root(doc);
	cr_assert_eq(np_cfg_get(r, "a")->kind, NP_CFG_BOOL);
	cr_assert_eq(np_cfg_bool(r, "a", 0), 1);
	cr_assert_eq(np_cfg_bool(r, "b", 1), 0);
	cr_assert_eq(np_cfg_int(r, "c", 0), 10);
	cr_assert_eq(np_cfg_int(r, "d", 0), 31);
	cr_assert_eq(np_cfg_int(r, "e", 0), 90);
	cr_assert_float_eq(np_cfg_num(r, "f", 0), 1.5, 1e-9);
	cr_assert_eq(np_cfg_get(r, "g")->kind, NP_CFG_FLOAT);
	cr_assert_eq(np_cfg_get(r, "h")->kind, NP_CFG_NULL);
	cr_assert_eq(np_cfg_get(r, "i")->kind, NP_CFG_TIME);
	cr_assert_str_eq(np_cfg_str(r, "j", ""), "12");
	cr_assert_eq(np_cfg_int(r, "k", 0), 1000);
	cr_assert_eq(np_cfg_get(r, "l")->kind, NP_CFG_STR); /* PyYAML: a string */
	cr_assert_eq(np_cfg_get(r, "m")->kind, NP_CFG_FLOAT);
	cr_assert_eq(np_cfg_int(r, "n", 0), 5);
	cr_assert_eq(np_cfg_get(r, "o")->kind, NP_CFG_STR); /* not octal, not decimal */
	cr_assert_str_eq(np_cfg_str(r, "p", ""), "12");
	cr_assert_float_eq(np_cfg_num(r, "q", 0), 3.0, 1e-9);
	cr_assert_eq(np_cfg_errors_count(errs), 0);
	np_cfg_doc_free(doc);
	/* unknown tags are refused, as PyYAML's safe loader */
	doc = np_cfg_parse("s.yaml", "a: !ruby/object 1\n", 18, errs);
	cr_assert_null(doc);
	cr_assert_str_eq(errs->v[0].msg,
			 "could not determine a constructor for the tag '!ruby/object'");
	np_cfg_errors_free(errs);
}

Test(config, timestamp_where_a_string_is_expected)
{
	char *t = load_fail("labels: [{name: a}]\n"
			    "diskimages:\n"
			    "  - name: d\n"
			    "    release: 2020-01-01\n",
			    NULL);

	cr_assert_str_eq(t, "t.yaml:4:14: diskimages[0].release: expected a string or an "
			    "integer, got a timestamp\n");
	free(t);
}

Test(config, duplicate_keys_keep_the_last_value)
{
	struct np_config *cfg = load_ok("labels:\n"
					"  - name: a\n"
					"    min-ready: 1\n"
					"    min-ready: 3\n");

	cr_assert_eq(cfg->labels[0].min_ready, 3);
	np_cfg_free(cfg);
}

/* ---- anchors, aliases, merge keys -------------------------------------------------------- */

Test(config, anchor_holder_keys_are_unknown_keys)
{
	/* a place to park anchors is still an unknown key, as upstream */
	char *t = load_fail("x-defaults: &d {min-ready: 1}\nlabels: [{<<: *d, name: a}]\n", NULL);

	cr_assert_str_eq(t, "t.yaml:1:1: x-defaults: extra keys not allowed\n");
	free(t);
}

Test(config, merge_keys_resolve_like_pyyaml)
{
	struct np_config *cfg = load_ok("labels: [{name: small}, {name: big}]\n"
					"diskimages: [{name: focal}]\n"
					"providers:\n"
					"  - name: one\n"
					"    cloud: c\n"
					"    diskimages: &imgs\n"
					"      - name: focal\n"
					"    pools:\n"
					"      - name: main\n"
					"        labels: &labels\n"
					"          - &defaults\n"
					"            name: small\n"
					"            flavor-name: m1.small\n"
					"            diskimage: focal\n"
					"            key-name: zuul\n"
					"          - <<: [{flavor-name: m1.big, key-name: first}, "
					"{key-name: second, min-ram: 1}]\n"
					"            <<: *defaults\n"
					"            name: big\n"
					"  - name: two\n"
					"    cloud: c\n"
					"    diskimages: *imgs\n"
					"    pools:\n"
					"      - name: main\n"
					"        labels: *labels\n");
	const struct np_pool_label *small, *big;

	cr_assert_eq(cfg->nproviders, 2);
	small = &cfg->providers[0].pools[0].labels[0];
	big = &cfg->providers[0].pools[0].labels[1];
	cr_assert_str_eq(small->flavor_name, "m1.small");
	cr_assert_str_eq(big->name, "big"); /* explicit key wins over merged */
	/* the later << (defaults) wins over the earlier list; in the list the
	 * first map wins: flavor m1.small from defaults, key-name zuul */
	cr_assert_str_eq(big->flavor_name, "m1.small");
	cr_assert_str_eq(big->key_name, "zuul");
	cr_assert_eq(big->min_ram, 1);
	cr_assert_str_eq(big->diskimage, "focal");
	/* the alias gives the second provider the same labels and images */
	cr_assert_eq(cfg->providers[1].pools[0].nlabels, 2);
	cr_assert_str_eq(cfg->providers[1].pools[0].labels[1].key_name, "zuul");
	cr_assert_eq(cfg->providers[1].ndiskimages, 1);
	/* shared node: same position for both */
	cr_assert_eq(cfg->providers[0].pools[0].labels[1].raw,
		     cfg->providers[1].pools[0].labels[1].raw);
	np_cfg_free(cfg);
}

Test(config, alias_errors)
{
	char *t = load_fail("labels: *nope\n", NULL);

	assert_has(t, "t.yaml:1:9: found undefined alias 'nope'");
	free(t);
	t = load_fail("a: &x [1, *x]\n", NULL);
	assert_has(t, "recursive alias 'x'");
	free(t);
	t = load_fail("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
		      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
		      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
		      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
		      "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
		      "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
		      "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
		      NULL);
	assert_has(t, "document too large");
	free(t);
	t = load_fail("a: 1\n<<: 5\n", NULL);
	assert_has(t, "expected a mapping or list of mappings for merging");
	free(t);
	/* a quoted '<<' is an ordinary key (PyYAML), so here an unknown one */
	t = load_fail("labels: [{'<<': {min-ready: 1}, name: a}]\n", NULL);
	cr_assert_str_eq(t, "t.yaml:1:11: labels[0].<<: extra keys not allowed\n");
	free(t);
	/* aliases can stack nesting: the expanded height is bounded too */
	{
		char *y = NULL, *p;
		size_t len = 0;
		FILE *f = open_memstream(&y, &len);
		int i, j;

		fprintf(f, "a0: &a0 x\n");
		for (i = 1; i <= 4; i++) {
			fprintf(f, "a%d: &a%d ", i, i);
			for (j = 0; j < 200; j++)
				fputc('[', f);
			fprintf(f, "*a%d", i - 1);
			for (j = 0; j < 200; j++)
				fputc(']', f);
			fputc('\n', f);
		}
		fclose(f);
		t = load_fail(y, NULL);
		assert_has(t, "nesting deeper than 512 levels once aliases are expanded");
		free(t);
		/* and plain nesting is bounded before that */
		p = y;
		y = calloc(1, 700);
		memset(y, '[', 600);
		t = load_fail(y, NULL);
		assert_has(t, "t.yaml:1:257: nesting deeper than 256 levels");
		free(t);
		free(y);
		free(p);
	}
}

/* ---- environment substitution --------------------------------------------------------- */

Test(config, env_substitution)
{
	struct np_config *cfg;
	char *t;

	setenv("NODEPOOL_ZK_HOST", "zk.example.org", 1);
	setenv("NODEPOOL_WEB_PORT", "8123", 1);
	setenv("NOT_NODEPOOL_X", "nope", 1);
	cfg = load_ok("zookeeper-servers:\n"
		      "  - host: %(NODEPOOL_ZK_HOST)\n"
		      "webapp:\n"
		      "  port: %(NODEPOOL_WEB_PORT)\n"
		      "  listen_address: '%(NOT_NODEPOOL_X)%(NODEPOOL_UNSET_VAR)'\n");
	cr_assert_str_eq(cfg->zk_servers[0].host, "zk.example.org");
	cr_assert_str_eq(cfg->zk_hosts, "zk.example.org:2281");
	cr_assert_eq(cfg->webapp_port, 8123); /* substituted before parsing: an int */
	cr_assert_str_eq(cfg->webapp_listen_address, "%(NOT_NODEPOOL_X)%(NODEPOOL_UNSET_VAR)");
	np_cfg_free(cfg);

	/* positions refer to the file as written, after a substitution too */
	setenv("NODEPOOL_LONG", "a-much-longer-value-than-the-reference", 1);
	t = load_fail("labels: [{name: %(NODEPOOL_LONG), min-ready: x}]\n", NULL);
	cr_assert_str_eq(t,
			 "t.yaml:1:46: labels[0].min-ready: expected an integer, got a string\n");
	free(t);
	setenv("NODEPOOL_TWO_LINES", "a\n  - name: b", 1);
	t = load_fail("labels:\n  - name: %(NODEPOOL_TWO_LINES)\n  - name: c\n    bad: 1\n", NULL);
	cr_assert_str_eq(t, "t.yaml:4:5: labels[2].bad: extra keys not allowed\n");
	free(t);
	unsetenv("NODEPOOL_ZK_HOST");
	unsetenv("NODEPOOL_WEB_PORT");
	unsetenv("NOT_NODEPOOL_X");
	unsetenv("NODEPOOL_LONG");
	unsetenv("NODEPOOL_TWO_LINES");
}

/* ---- secure.conf ---------------------------------------------------------------------- */

static const char secure_main[] = "zookeeper-servers:\n"
				  "  - host: zk-public\n"
				  "zookeeper-tls: {ca: /a/ca.pem, cert: /a/c.pem, key: /a/k}\n"
				  "labels: [{name: l}]\n"
				  "diskimages:\n"
				  "  - name: base\n"
				  "    abstract: true\n"
				  "  - name: focal\n"
				  "    parent: base\n"
				  "    env-vars: {A: main, B: main}\n";

Test(config, secure_conf_merge)
{
	const char *sec = "zookeeper-servers:\n"
			  "  - host: zk1.internal\n"
			  "    port: 2282\n"
			  "    chroot: /nodepool\n"
			  "  - host: 2001:db8::0:1\n"
			  "    chroot: /nodepool\n"
			  "zookeeper-tls: {ca: /s/ca.pem, cert: /s/c.pem, key: /s/k.pem}\n"
			  "diskimages:\n"
			  "  - name: focal\n"
			  "    env-vars: {B: secret, C: secret}\n";
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	const struct np_diskimage *d;

	cr_assert_eq(np_cfg_load_buffer("main.yaml", secure_main, strlen(secure_main),
					"secure.conf", sec, strlen(sec), &cfg, &errs),
		     0);
	cr_assert_eq(cfg->nzk_servers, 2);
	cr_assert_str_eq(cfg->zk_hosts, "zk1.internal:2282,[2001:db8::1]:2281/nodepool");
	cr_assert_str_eq(cfg->zk_tls_ca, "/s/ca.pem");
	cr_assert_str_eq(cfg->zk_tls_key, "/s/k.pem");
	d = np_cfg_diskimage(cfg, "focal");
	cr_assert_str_eq(json_string_value(json_object_get(d->env_vars, "A")), "main");
	cr_assert_str_eq(json_string_value(json_object_get(d->env_vars, "B")), "secret");
	cr_assert_str_eq(json_string_value(json_object_get(d->env_vars, "C")), "secret");
	np_cfg_free(cfg);
}

Test(config, secure_conf_errors)
{
	const char *sec = "diskimages:\n"
			  "  - name: base\n" /* abstract: not a buildable image */
			  "    env-vars: {X: y}\n"
			  "  - name: nope\n"
			  "    env-vars: {X: y}\n"
			  "providers: []\n";
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	char *t;

	cr_assert_neq(np_cfg_load_buffer("main.yaml", secure_main, strlen(secure_main),
					 "secure.conf", sec, strlen(sec), &cfg, &errs),
		      0);
	t = errs_text(errs);
	cr_assert_str_eq(t, "secure.conf:6:1: providers: extra keys not allowed\n");
	free(t);
	np_cfg_errors_free(errs);
	sec = "diskimages:\n  - name: base\n    env-vars: {X: y}\n  - name: nope\n"
	      "    env-vars: {X: y}\n";
	cr_assert_neq(np_cfg_load_buffer("main.yaml", secure_main, strlen(secure_main),
					 "secure.conf", sec, strlen(sec), &cfg, &errs),
		      0);
	t = errs_text(errs);
	cr_assert_str_eq(t, "secure.conf:2:11: diskimages[0].name: unknown diskimage base\n"
			    "secure.conf:4:11: diskimages[1].name: unknown diskimage nope\n");
	free(t);
	np_cfg_errors_free(errs);
	/* an empty secure.conf is fine */
	cr_assert_eq(np_cfg_load_buffer("main.yaml", secure_main, strlen(secure_main),
					"secure.conf", "", 0, &cfg, &errs),
		     0);
	cr_assert_str_eq(cfg->zk_hosts, "zk-public:2281");
	np_cfg_free(cfg);
}

Test(config, load_from_files_and_missing_file)
{
	char dir[] = "/tmp/np-config-XXXXXX", main_path[600], sec_path[600];
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	FILE *f;
	char *t;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(main_path, sizeof(main_path), "%s/nodepool.yaml", dir);
	snprintf(sec_path, sizeof(sec_path), "%s/secure.conf", dir);
	f = fopen(main_path, "w");
	fputs(secure_main, f);
	fclose(f);
	f = fopen(sec_path, "w");
	fputs("zookeeper-servers: [{host: zk-secret, port: 1}]\n", f);
	fclose(f);
	cr_assert_eq(np_cfg_load(main_path, sec_path, &cfg, &errs), 0);
	cr_assert_str_eq(cfg->zk_hosts, "zk-secret:1");
	cr_assert_str_eq(cfg->path, main_path);
	cr_assert_str_eq(cfg->secure_path, sec_path);
	np_cfg_free(cfg);
	unlink(main_path);
	cr_assert_neq(np_cfg_load(main_path, sec_path, &cfg, &errs), 0);
	t = errs_text(errs);
	cr_assert(strstr(t, "nodepool.yaml: cannot open: No such file or directory") != NULL, "%s",
		  t);
	free(t);
	np_cfg_errors_free(errs);
	unlink(sec_path);
	rmdir(dir);
}

/* ---- drivers ---------------------------------------------------------------------------- */

Test(config, static_driver_fields_and_defaults)
{
	struct np_config *cfg = load_ok("labels: [{name: small}, {name: big}, {name: win}]\n"
					"providers:\n"
					"  - name: rack\n"
					"    driver: static\n"
					"    priority: 7\n"
					"    pools:\n"
					"      - name: main\n"
					"        node-attributes: {rack: r1}\n"
					"        nodes:\n"
					"          - name: host1.example.org\n"
					"            labels: small  big\n"
					"          - name: host2.example.org\n"
					"            labels: [win]\n"
					"            username: admin\n"
					"            timeout: 13\n"
					"            host-key: [k1, k2]\n"
					"            host-key-checking: false\n"
					"            connection-type: winrm\n"
					"            ssh-port: 5986\n"
					"            shell-type: cmd\n"
					"            python-path: C:/py.exe\n"
					"            max-parallel-jobs: 2\n"
					"          - name: host1.example.org\n"
					"            labels: small\n"
					"            connection-port: 2222\n");
	const struct np_provider *p = np_cfg_provider(cfg, "rack");
	const struct np_pool *pool = np_provider_pool(p, "main");
	const struct np_static_node *a = &pool->nodes[0], *b = &pool->nodes[1];

	cr_assert_eq(pool->nnodes, 3);
	cr_assert_eq(pool->priority, 7); /* the provider's */
	cr_assert_eq(pool->max_servers, -1);
	cr_assert_str_eq(json_string_value(json_object_get(pool->node_attributes, "rack")), "r1");
	cr_assert_eq(a->labels.n, 2);
	cr_assert_str_eq(a->labels.v[1], "big");
	cr_assert_str_eq(a->username, "zuul");
	cr_assert_eq(a->timeout, 5);
	cr_assert_eq(a->host_keys.n, 0);
	cr_assert_eq(a->host_key_checking, 1);
	cr_assert_str_eq(a->connection_type, "ssh");
	cr_assert_eq(a->connection_port, 22);
	cr_assert_null(a->shell_type);
	cr_assert_str_eq(a->python_path, "auto");
	cr_assert_eq(a->max_parallel_jobs, 1);
	cr_assert_str_eq(b->username, "admin");
	cr_assert_eq(b->timeout, 13);
	cr_assert_eq(b->host_keys.n, 2);
	cr_assert_eq(b->host_key_checking, 0);
	cr_assert_str_eq(b->connection_type, "winrm");
	cr_assert_eq(b->connection_port, 5986); /* legacy ssh-port */
	cr_assert_str_eq(b->shell_type, "cmd");
	cr_assert_str_eq(b->python_path, "C:/py.exe");
	cr_assert_eq(b->max_parallel_jobs, 2);
	cr_assert_eq(pool->nodes[2].connection_port, 2222);
	cr_assert_eq(pool->label_names.n, 3);
	np_cfg_free(cfg);
}

Test(config, static_driver_errors)
{
	char *t = load_fail("labels: [{name: small}]\n"
			    "providers:\n"
			    "  - name: rack\n"
			    "    driver: static\n"
			    "    cloud: no-cloud\n"
			    "    pools:\n"
			    "      - name: main\n"
			    "        nodes:\n"
			    "          - name: h1\n"
			    "            labels: small missing\n"
			    "      - name: second\n"
			    "        nodes:\n"
			    "          - name: h1\n"
			    "            labels: [small]\n"
			    "          - labels: small\n",
			    NULL);

	assert_has(t, "t.yaml:5:5: providers[0].cloud: extra keys not allowed");
	assert_has(t, "t.yaml:10:21: providers[0].pools[0].nodes[0].labels: label missing in "
		      "provider rack not in top-level labels");
	assert_has(t, "t.yaml:13:19: providers[0].pools[1].nodes[0].name: static node h1 "
		      "(username zuul, port 22) is already defined (line 9)");
	assert_has(t, "providers[0].pools[1].nodes[1].name: required key not provided");
	free(t);
}

Test(config, every_upstream_driver_validates)
{
	struct np_config *cfg = load_ok(
	    "labels:\n"
	    "  - {name: os}\n  - {name: ec2}\n  - {name: gce}\n  - {name: az}\n"
	    "  - {name: ns}\n  - {name: pod}\n  - {name: proj}\n  - {name: meta}\n"
	    "  - {name: ibm}\n  - {name: fk}\n"
	    "diskimages: [{name: img}]\n"
	    "providers:\n"
	    "  - name: os\n"
	    "    cloud: c\n"
	    "    rate: '0.5'\n"
	    "    diskimages: [{name: img, connection-type: winrm}]\n"
	    "    pools: [{name: p, max-servers: 3, labels: [{name: os, diskimage: img, min-ram: "
	    "1}]}]\n"
	    "  - name: ec2\n"
	    "    driver: aws\n"
	    "    region-name: us-east-1\n"
	    "    max-servers: 9\n"
	    "    max-resources: {L-1216C47A: 10}\n"
	    "    cloud-images: [{name: ci, username: u, image-filters: [{name: n, values: [v]}]}]\n"
	    "    pools:\n"
	    "      - name: p\n"
	    "        max-resources: {L-34B43A08: 5}\n"
	    "        labels:\n"
	    "          - {name: ec2, cloud-image: ci, key-name: k, instance-type: t3.small,\n"
	    "             iam-instance-profile: {arn: x}, imdsv2: required}\n"
	    "  - name: gce\n"
	    "    driver: gce\n"
	    "    region: r\n    project: pr\n    zone: z\n"
	    "    cloud-images: [{name: deb, image-family: debian}]\n"
	    "    pools: [{name: p, labels: [{name: gce, cloud-image: deb, instance-type: f1}]}]\n"
	    "  - name: az\n"
	    "    driver: azure\n"
	    "    location: l\n    resource-group: g\n    resource-group-location: l\n"
	    "    auth-path: /a.json\n"
	    "    network: {resource-group: g, network: n, subnet: s}\n"
	    "    cloud-images: [{name: ub, username: u,\n"
	    "      image-reference: {sku: s, publisher: p, version: v, offer: o}}]\n"
	    "    pools: [{name: p, max-servers: 2, labels: [{name: az, cloud-image: ub,\n"
	    "      hardware-profile: {vm-size: small}}]}]\n"
	    "  - name: k8s\n"
	    "    driver: kubernetes\n"
	    "    context: ctx\n"
	    "    pools:\n"
	    "      - name: p\n"
	    "        labels:\n"
	    "          - {name: ns, type: namespace}\n"
	    "          - {name: pod, type: pod, spec: {containers: []}}\n"
	    "  - name: osh\n"
	    "    driver: openshift\n"
	    "    context: ctx\n"
	    "    max-projects: 4\n"
	    "    pools: [{name: p, labels: [{name: proj, type: project}]}]\n"
	    "  - name: pods\n"
	    "    driver: openshiftpods\n"
	    "    context: ctx\n"
	    "    max-pods: 6\n"
	    "    pools: [{name: p, labels: [{name: pod, image: fedora, gpu: 1}]}]\n"
	    "  - name: meta\n"
	    "    driver: metastatic\n"
	    "    pools: [{name: p, labels: [{name: meta, backing-label: os, max-parallel-jobs: "
	    "2}]}]\n"
	    "  - name: ibm\n"
	    "    driver: ibmvpc\n"
	    "    vpc: v\n    region: r\n    zone: z\n"
	    "    pools: [{name: p, max-servers: 1, subnet: s, labels: [{name: ibm, profile: "
	    "cx2}]}]\n"
	    "  - name: sim\n"
	    "    driver: fake\n"
	    "    boot-delay: 0.5\n"
	    "    failure-rate: 0.25\n"
	    "    quota: {instances: 4}\n"
	    "    pools: [{name: p, labels: [{name: fk, cores: 2, failure-rate: 1}]}]\n");
	const struct np_provider *p;

	cr_assert_eq(cfg->nproviders, 10);
	p = np_cfg_provider(cfg, "os");
	cr_assert_float_eq(p->rate, 0.5, 1e-9); /* v.Coerce(float) of a string */
	cr_assert_eq(p->diskimages[0].connection_port, 5986);
	cr_assert_str_eq(p->diskimages[0].username, "zuul");
	cr_assert_eq(p->boot_timeout, 60);
	cr_assert_eq(p->manage_images, 1);
	cr_assert_null(p->image_format);
	p = np_cfg_provider(cfg, "ec2");
	cr_assert_eq(p->boot_timeout, 180);
	cr_assert_float_eq(p->rate, 2, 1e-9);
	cr_assert_str_eq(p->image_format, "raw");
	cr_assert_eq(p->pools[0].max_servers, 9); /* inherited from the provider */
	cr_assert_eq(json_integer_value(json_object_get(p->pools[0].max_resources, "L-1216C47A")),
		     10);
	cr_assert_eq(json_integer_value(json_object_get(p->pools[0].max_resources, "L-34B43A08")),
		     5);
	cr_assert_eq(np_cfg_provider(cfg, "az")->pools[0].max_servers, 2);
	cr_assert_str_eq(np_cfg_provider(cfg, "az")->image_format, "vhd");
	cr_assert_eq(np_cfg_provider(cfg, "osh")->pools[0].max_servers, 4);
	cr_assert_eq(np_cfg_provider(cfg, "pods")->pools[0].max_servers, 6);
	cr_assert_eq(np_cfg_provider(cfg, "meta")->pools[0].host_key_checking, 0);
	cr_assert_eq(np_cfg_provider(cfg, "meta")->pools[0].labels[0].max_parallel_jobs, 2);
	cr_assert_str_eq(np_cfg_provider(cfg, "ibm")->image_name_format, "npimage{upload_id}");
	p = np_cfg_provider(cfg, "sim");
	cr_assert_float_eq(p->boot_delay, 0.5, 1e-9);
	cr_assert_eq(p->quota_instances, 4);
	cr_assert_eq(p->quota_cores, -1);
	cr_assert_eq(p->host_key_checking, 0);
	cr_assert_float_eq(p->pools[0].labels[0].failure_rate, 1, 1e-9);
	cr_assert_float_eq(p->pools[0].labels[0].boot_delay, 0.5, 1e-9);
	cr_assert_eq(p->pools[0].labels[0].cores, 2);
	cr_assert_eq(p->pools[0].labels[0].ram, 1024);
	np_cfg_free(cfg);
}

Test(config, driver_specific_errors)
{
	char *t = load_fail(
	    "labels: [{name: a}, {name: b}, {name: c}]\n"
	    "providers:\n"
	    "  - name: k8s\n"
	    "    driver: kubernetes\n"
	    "    pools:\n"
	    "      - name: p\n"
	    "        labels:\n"
	    "          - {name: a, type: pod, spec: {k: v}, image: fedora}\n"
	    "  - name: ec2\n"
	    "    driver: aws\n"
	    "    region-name: r\n"
	    "    cloud-images: [{name: ci, username: u}]\n"
	    "    diskimages: [{name: di, imds-support: v1}]\n"
	    "    pools:\n"
	    "      - name: p\n"
	    "        labels:\n"
	    "          - {name: b, cloud-image: ci, key-name: k, dedicated-host: true,\n"
	    "             use-spot: true, fleet: {instance-types: [a], allocation-strategy: x}}\n"
	    "  - name: meta\n"
	    "    driver: metastatic\n"
	    "    pools:\n"
	    "      - name: p\n"
	    "        labels:\n"
	    "          - {name: c, backing-label: a, max-age: 10, min-retention-time: 20}\n"
	    "          - {name: a, backing-label: a, max-parallel-jobs: 3}\n"
	    "  - name: bad_name\n"
	    "    driver: ibmvpc\n"
	    "    vpc: v\n"
	    "    region: r\n"
	    "    pools: [{name: p, max-servers: 1, labels: []}]\n"
	    "  - name: sim\n"
	    "    driver: fake\n"
	    "    failure-rate: 2\n"
	    "    pools: [{name: p, labels: [{name: c, diskimage: nope}]}]\n",
	    NULL);

	/* neither k8s label form fits; the first closest one is reported */
	assert_has(t, "t.yaml:8:34: providers[0].pools[0].labels[0].spec: extra keys not allowed");
	assert_has(t, "providers[1].cloud-images[0]: one of image-id or image-filters is required");
	assert_has(t, "providers[1].diskimages[0].imds-support: expected one of v2.0 (or null)");
	assert_has(t, "providers[1].diskimages[0].name: diskimage di in provider ec2 is not "
		      "defined in the main diskimages list");
	assert_has(t, "providers[1].pools[0].labels[0].fleet.allocation-strategy: expected one of "
		      "prioritized, price-capacity-optimized, capacity-optimized, diversified or "
		      "lowest-price");
	assert_has(t, "providers[1].pools[0].labels[0].dedicated-host: Spot instances can not be "
		      "used on dedicated hosts");
	assert_has(t, "providers[1].pools[0].labels[0].dedicated-host: Availability-zone is "
		      "required for dedicated hosts");
	assert_has(t, "providers[2].pools[0].labels[0].max-age: The max-age must be greater than "
		      "or equal to the min-retention-time");
	assert_has(t, "providers[2].pools[0].labels[1].backing-label: Multiple label definitions "
		      "for the same backing label must be identical (a, see line 24)");
	assert_has(t, "t.yaml:25:38: providers[2].pools[0].labels[1].backing-label");
	assert_has(t, "providers[3].name: must be non-empty and contain no '_' (ibmvpc)");
	assert_has(t, "providers[3].pools[0]: Zone is required in provider or pool config");
	assert_has(t, "providers[4].failure-rate: must be between 0 and 1");
	assert_has(t, "providers[4].pools[0].labels[0].diskimage: diskimage nope does not exist in "
		      "provider sim but is referenced in label c");
	free(t);
}

Test(config, unique_names)
{
	char *t = load_fail("labels: [{name: a}, {name: a}]\n"
			    "diskimages: [{name: d}, {name: d}]\n"
			    "providers:\n"
			    "  - name: p\n"
			    "    driver: fake\n"
			    "    pools:\n"
			    "      - {name: x, labels: [{name: a}, {name: a}]}\n"
			    "      - {name: x, labels: []}\n"
			    "  - name: p\n"
			    "    driver: fake\n"
			    "    pools: []\n",
			    NULL);

	assert_has(t, "t.yaml:1:28: labels[1].name: label a already defined (line 1)");
	assert_has(t, "t.yaml:2:32: diskimages[1].name: diskimage d already defined (line 2)");
	assert_has(t, "providers[0].pools[0].labels[1].name: label a already defined (line 7)");
	assert_has(t, "providers[0].pools[1].name: pool x already defined (line 7)");
	assert_has(t, "t.yaml:9:11: providers[1].name: provider p already defined (line 4)");
	free(t);
}

/* ---- diskimages ---------------------------------------------------------------------------- */

Test(config, diskimage_inheritance)
{
	struct np_config *cfg = load_ok("diskimages:\n"
					"  - name: base\n"
					"    abstract: true\n"
					"    elements: [vm, simple-init]\n"
					"    env-vars: {A: base, B: base}\n"
					"    release: 21\n"
					"    rebuild-age: 100\n"
					"    metadata: {owner: base}\n"
					"    formats: [qcow2]\n"
					"  - name: ubuntu\n"
					"    abstract: true\n"
					"    parent: base\n"
					"    elements: [ubuntu-minimal]\n"
					"    env-vars: {B: ubuntu}\n"
					"    username: ubuntu\n"
					"    formats: [raw, qcow2, raw]\n"
					"  - name: focal\n"
					"    parent: ubuntu\n"
					"    elements: [growroot]\n"
					"    release: focal\n"
					"    rebuild-age: 0\n"
					"    shell-type: sh\n"
					"    pause: true\n"
					"  - name: plain\n");
	const struct np_diskimage *d = np_cfg_diskimage(cfg, "focal");

	cr_assert_eq(cfg->ndiskimages, 2); /* abstract ones are not built */
	cr_assert_null(np_cfg_diskimage(cfg, "base"));
	cr_assert_eq(d->elements.n, 4);
	cr_assert_str_eq(d->elements.v[0], "vm");
	cr_assert_str_eq(d->elements.v[2], "ubuntu-minimal");
	cr_assert_str_eq(d->elements.v[3], "growroot");
	cr_assert_str_eq(json_string_value(json_object_get(d->env_vars, "A")), "base");
	cr_assert_str_eq(json_string_value(json_object_get(d->env_vars, "B")), "ubuntu");
	cr_assert_str_eq(d->release, "focal");
	cr_assert_eq(d->rebuild_age, 100); /* 0 does not override, as upstream */
	cr_assert_str_eq(d->username, "ubuntu");
	cr_assert_eq(d->formats.n, 2);
	cr_assert_str_eq(d->formats.v[0], "qcow2");
	cr_assert_str_eq(d->formats.v[1], "raw");
	cr_assert_str_eq(d->shell_type, "sh");
	cr_assert_eq(d->pause, 1);
	cr_assert_eq(json_object_size(d->metadata), 0); /* not inherited, as upstream */
	cr_assert_str_eq(d->parent, "ubuntu");
	d = np_cfg_diskimage(cfg, "plain");
	cr_assert_str_eq(d->dib_cmd, "disk-image-create");
	cr_assert_str_eq(d->release, "");
	cr_assert_eq(d->rebuild_age, 86400);
	cr_assert_eq(d->build_timeout, 28800);
	cr_assert_str_eq(d->python_path, "auto");
	np_cfg_free(cfg);
}

Test(config, diskimage_errors)
{
	char *t = load_fail("diskimages:\n"
			    "  - name: a\n"
			    "    parent: b\n"
			    "  - name: b\n"
			    "    parent: a\n"
			    "  - name: c\n"
			    "    abstract: true\n"
			    "    env-vars: {A: 1}\n"
			    "labels: [{name: l}]\n"
			    "providers:\n"
			    "  - name: p\n"
			    "    cloud: x\n"
			    "    diskimages: [{name: c}]\n"
			    "    pools: []\n",
			    NULL);

	assert_has(t, "t.yaml:3:13: diskimages[0].parent: diskimage a has a parent loop");
	assert_has(t, "t.yaml:5:13: diskimages[1].parent: diskimage b has a parent loop");
	assert_has(t, "t.yaml:8:19: diskimages[2].env-vars.A: expected a string, got an integer");
	assert_has(t, "providers[0].diskimages[0].name: diskimage c in provider p is abstract");
	free(t);
	{
		char *y = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&y, &len);
		int i;

		fprintf(f, "diskimages:\n  - name: d0\n");
		for (i = 1; i <= 40; i++)
			fprintf(f, "  - {name: d%d, parent: d%d}\n", i, i - 1);
		fclose(f);
		t = load_fail(y, NULL);
		assert_has(t, "t.yaml:35:25: diskimages[33].parent: diskimage d33 has more than 32 "
			      "levels of parents");
		cr_assert_null(strstr(t, "d32 has more"), "%s", t);
		free(t);
		free(y);
	}
}

Test(config, large_config_loads)
{
	/* long lists must not make any check quadratic (the run has a timeout) */
	enum { N = 60000 };
	char *y = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&y, &len);
	struct np_config *cfg;
	size_t i;

	fprintf(f, "labels:\n");
	for (i = 0; i < N; i++)
		fprintf(f, "  - name: l%zu\n", i);
	fprintf(f, "diskimages:\n");
	for (i = 0; i < N / 10; i++)
		fprintf(f, "  - {name: d%zu%s%zu}\n", i, i % 2 ? ", parent: d" : ", release: r",
			i ? i - 1 : 0);
	fprintf(f, "providers:\n  - name: rack\n    driver: static\n    pools:\n"
		   "      - name: p\n        nodes:\n");
	for (i = 0; i < N; i++)
		fprintf(f, "          - {name: h%zu, labels: [l%zu, l%zu]}\n", i, i, N - 1 - i);
	fprintf(f, "  - name: sim\n    driver: fake\n    pools:\n      - name: p\n"
		   "        labels:\n");
	for (i = 0; i < N; i++)
		fprintf(f, "          - {name: l%zu, diskimage: d%zu}\n", i, i % (N / 10));
	fprintf(f, "    diskimages:\n");
	for (i = 0; i < N / 10; i++)
		fprintf(f, "      - name: d%zu\n", i);
	fclose(f);
	cfg = load_ok(y);
	cr_assert_eq(cfg->nlabels, N);
	cr_assert_eq(cfg->providers[0].pools[0].nnodes, N);
	cr_assert_eq(cfg->providers[0].pools[0].label_names.n, N);
	cr_assert_eq(cfg->providers[1].pools[0].nlabels, N);
	cr_assert_eq(cfg->ndiskimages, N / 10);
	cr_assert_eq(np_cfg_diskimage(cfg, "d3")->elements.n, 0);
	np_cfg_free(cfg);
	free(y);
}

/* ---- nodepoold section and top-level defaults --------------------------------------------- */

Test(config, nodepoold_section_defaults)
{
	struct np_config *cfg = load_ok("labels: []\n");

	cr_assert_float_eq(cfg->nodepoold.cleanup_interval, 60, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.delete_interval, 5, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.stats_interval, 5, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.worker_status_timeout, 30, 1e-9);
	cr_assert_str_eq(cfg->nodepoold.control_socket, "/run/nodepoold/nodepoold.sock");
	cr_assert_str_eq(cfg->nodepoold.pid_file, "/run/nodepoold/nodepoold.pid");
	cr_assert_float_eq(cfg->nodepoold.restart_backoff_max, 60, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.request_lock_cleanup_age, 28800, 1e-9);
	cr_assert(cfg->nodepoold.reload_on_change, "a changed file applies by itself, as upstream");
	/* top-level defaults, as upstream */
	cr_assert_null(cfg->zk_hosts);
	cr_assert_float_eq(cfg->zk_timeout, 10.0, 1e-9);
	cr_assert_eq(cfg->webapp_port, 8005);
	cr_assert_str_eq(cfg->webapp_listen_address, "0.0.0.0");
	cr_assert_str_eq(cfg->build_log_dir, "/var/log/nodepool/builds");
	cr_assert_eq(cfg->build_log_retention, 7);
	cr_assert_eq(cfg->max_hold_age, 0);
	cr_assert_null(cfg->images_dir);
	np_cfg_free(cfg);

	cfg = load_ok("nodepoold:\n"
		      "  cleanup-interval: 2.5\n"
		      "  delete-interval: 1\n"
		      "  control-socket: /tmp/np.sock\n"
		      "  restart-backoff-max: 10\n"
		      "  request-lock-cleanup-age: 2.5\n"
		      "  peer-takeover-delay: 0\n"
		      "  reload-on-change: false\n"
		      "max-hold-age: -5\n"
		      "zookeeper-timeout: 30\n"
		      "tenant-resource-limits:\n"
		      "  - {tenant-name: t1, max-servers: 10, max-cores: 20, L-1216C47A: 3}\n");
	cr_assert_float_eq(cfg->nodepoold.cleanup_interval, 2.5, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.delete_interval, 1, 1e-9);
	cr_assert_str_eq(cfg->nodepoold.control_socket, "/tmp/np.sock");
	cr_assert_float_eq(cfg->nodepoold.restart_backoff_max, 10, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.request_lock_cleanup_age, 2.5, 1e-9);
	cr_assert_float_eq(cfg->nodepoold.peer_takeover_delay, 0, 1e-9, "0: hashing off");
	cr_assert(!cfg->nodepoold.reload_on_change);
	cr_assert_eq(cfg->max_hold_age, 0);
	cr_assert_float_eq(cfg->zk_timeout, 30, 1e-9);
	cr_assert_eq(cfg->ntenant_limits, 1);
	cr_assert_str_eq(cfg->tenant_limits[0].tenant, "t1");
	cr_assert_eq(json_integer_value(json_object_get(cfg->tenant_limits[0].limits, "instances")),
		     10);
	cr_assert_eq(json_integer_value(json_object_get(cfg->tenant_limits[0].limits, "cores")),
		     20);
	cr_assert_eq(
	    json_integer_value(json_object_get(cfg->tenant_limits[0].limits, "L-1216C47A")), 3);
	cr_assert_null(json_object_get(cfg->tenant_limits[0].limits, "ram"));
	np_cfg_free(cfg);
}

Test(config, nodepoold_section_errors)
{
	char *t = load_fail("nodepoold:\n"
			    "  cleanup-interval: 0\n"
			    "  stats-interval: -1\n"
			    "  pid-file: ''\n"
			    "  workers: 3\n"
			    "  request-lock-cleanup-age: 0\n"
			    "  reload-on-change: sometimes\n"
			    "  peer-takeover-delay: -1\n",
			    NULL);

	cr_assert_str_eq(t, "t.yaml:2:21: nodepoold.cleanup-interval: must be greater than 0\n"
			    "t.yaml:3:19: nodepoold.stats-interval: must be greater than 0\n"
			    "t.yaml:4:13: nodepoold.pid-file: must not be empty\n"
			    "t.yaml:5:3: nodepoold.workers: extra keys not allowed\n"
			    "t.yaml:6:29: nodepoold.request-lock-cleanup-age: must be greater "
			    "than 0\n"
			    "t.yaml:7:21: nodepoold.reload-on-change: expected a boolean, got a "
			    "string\n"
			    "t.yaml:8:24: nodepoold.peer-takeover-delay: must not be negative\n");
	free(t);
}

/* ---- ZooKeeper hosts ---------------------------------------------------------------------- */

Test(config, zk_hosts_string)
{
	struct np_zk_server s[3] = {
	    {"zk1", 2281, "/np"}, {"::1", 2182, "/np"}, {"10.0.0.3", 2181, "/np"}};
	char *h = np_cfg_zk_hosts(s, 3);

	cr_assert_str_eq(h, "zk1:2281,[::1]:2182,10.0.0.3:2181/np");
	free(h);
	s[0].chroot = NULL;
	h = np_cfg_zk_hosts(s, 1);
	cr_assert_str_eq(h, "zk1:2281");
	free(h);
	cr_assert_null(np_cfg_zk_hosts(s, 0));
}

Test(config, zk_chroot_rules)
{
	char *t = load_fail("zookeeper-servers:\n"
			    "  - {host: a, chroot: /x}\n"
			    "  - {host: b, chroot: /y}\n"
			    "  - {host: c, chroot: rel}\n",
			    NULL);

	assert_has(t, "t.yaml:3:5: zookeeper-servers[1]: every ZooKeeper server must use the same "
		      "chroot");
	assert_has(t, "t.yaml:4:23: zookeeper-servers[2].chroot: a chroot must start with '/'");
	free(t);
}

/* ---- slices and fingerprints ---------------------------------------------------------------- */

static char *
slice_text(const struct np_config *cfg, const char *provider)
{
	json_t *s = np_cfg_slice(cfg, provider);
	char *t;

	cr_assert_not_null(s);
	t = json_dumps(s, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(s);
	return t;
}

Test(config, slice_round_trip)
{
	const char *const *f;

	for (f = opendev_files; *f; f++) {
		char rel[256], *path;
		struct np_config *cfg = NULL;
		size_t i;

		snprintf(rel, sizeof(rel), "tests/data/configs/opendev/%s", *f);
		path = data_path(rel);
		cr_assert_eq(np_cfg_load(path, NULL, &cfg, NULL), 0);
		for (i = 0; i < cfg->nproviders; i++) {
			const struct np_provider *p = &cfg->providers[i];
			char *text = slice_text(cfg, p->name), *again;
			struct np_config *w = NULL;
			struct np_cfg_errors *errs = NULL;
			const struct np_provider *wp;

			if (np_cfg_load_buffer("slice.json", text, strlen(text), NULL, NULL, 0, &w,
					       &errs) != 0) {
				np_cfg_errors_print(errs, stderr);
				cr_assert_fail("slice of %s in %s does not load", p->name, *f);
			}
			cr_assert_eq(w->nproviders, 1);
			wp = &w->providers[0];
			cr_assert_str_eq(wp->name, p->name);
			cr_assert_str_eq(wp->fingerprint, p->fingerprint, "%s/%s", *f, p->name);
			cr_assert_eq(wp->npools, p->npools);
			cr_assert_str_eq(w->zk_hosts, cfg->zk_hosts);
			again = slice_text(w, p->name);
			cr_assert_str_eq(again, text);
			free(again);
			np_cfg_free(w);
			free(text);
		}
		np_cfg_free(cfg);
		free(path);
	}
}

Test(config, slice_contents)
{
	struct np_config *cfg = load_ok("zookeeper-servers: [{host: zk, chroot: /c}]\n"
					"labels: [{name: a, min-ready: 2}, {name: b}, {name: s}]\n"
					"diskimages:\n"
					"  - {name: base, abstract: true, elements: [e1]}\n"
					"  - {name: img, parent: base, elements: [e2]}\n"
					"  - {name: other}\n"
					"providers:\n"
					"  - name: os\n"
					"    cloud: c\n"
					"    diskimages: [{name: img}]\n"
					"    pools: [{name: p, labels: [{name: a, diskimage: img,\n"
					"             min-ram: 1}]}]\n"
					"  - name: st\n"
					"    driver: static\n"
					"    pools: [{name: p, nodes: [{name: h, labels: s}]}]\n");
	json_t *s = np_cfg_slice(cfg, "os"), *img;

	cr_assert_null(np_cfg_slice(cfg, "nope"));
	cr_assert_eq(json_array_size(json_object_get(s, "providers")), 1);
	cr_assert_eq(json_array_size(json_object_get(s, "labels")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_array_get(json_object_get(s, "labels"), 0), "name")),
			 "a");
	cr_assert_eq(json_array_size(json_object_get(s, "diskimages")), 1);
	img = json_array_get(json_object_get(s, "diskimages"), 0);
	cr_assert_null(json_object_get(img, "parent")); /* flattened */
	cr_assert_eq(json_array_size(json_object_get(img, "elements")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_array_get(json_object_get(s, "zookeeper-servers"), 0), "chroot")),
			 "/c");
	json_decref(s);
	s = np_cfg_slice(cfg, "st");
	cr_assert_eq(json_array_size(json_object_get(s, "labels")), 1);
	cr_assert_eq(json_array_size(json_object_get(s, "diskimages")), 0);
	json_decref(s);
	np_cfg_free(cfg);
}

/* Load a config made of a template with one substitution. */
static struct np_config *
load_variant(const char *label_b_min_ready, const char *os_max_servers, const char *extra)
{
	char *text;
	struct np_config *cfg;

	cr_assert(asprintf(&text,
			   "labels: [{name: a}, {name: b, min-ready: %s}, {name: c}%s]\n"
			   "diskimages: [{name: img}]\n"
			   "providers:\n"
			   "  - name: os\n"
			   "    cloud: c\n"
			   "    diskimages: [{name: img}]\n"
			   "    pools: [{name: p, max-servers: %s,\n"
			   "             labels: [{name: a, diskimage: img, min-ram: 1}]}]\n"
			   "  - name: st\n"
			   "    driver: static\n"
			   "    pools: [{name: p, nodes: [{name: h, labels: [b, c]}]}]\n",
			   label_b_min_ready, extra, os_max_servers) > 0);
	cfg = load_ok(text);
	free(text);
	return cfg;
}

Test(config, fingerprint_changes_only_with_the_provider)
{
	struct np_config *base = load_variant("1", "10", "");
	struct np_config *same = load_variant("1", "10", "");
	struct np_config *os_changed = load_variant("1", "11", "");
	struct np_config *label_changed = load_variant("2", "10", "");
	struct np_config *new_label = load_variant("1", "10", ", {name: unused}");
	const char *os = base->providers[0].fingerprint, *st = base->providers[1].fingerprint;

	cr_assert_eq(strlen(os), 16);
	cr_assert_str_neq(os, st);
	cr_assert_str_eq(same->providers[0].fingerprint, os);
	cr_assert_str_eq(same->providers[1].fingerprint, st);
	/* os's max-servers: only os changes */
	cr_assert_str_neq(os_changed->providers[0].fingerprint, os);
	cr_assert_str_eq(os_changed->providers[1].fingerprint, st);
	/* label b is used by st only */
	cr_assert_str_eq(label_changed->providers[0].fingerprint, os);
	cr_assert_str_neq(label_changed->providers[1].fingerprint, st);
	/* a label nobody uses changes nothing */
	cr_assert_str_eq(new_label->providers[0].fingerprint, os);
	cr_assert_str_eq(new_label->providers[1].fingerprint, st);
	np_cfg_free(base);
	np_cfg_free(same);
	np_cfg_free(os_changed);
	np_cfg_free(label_changed);
	np_cfg_free(new_label);
}

Test(config, fingerprint_follows_used_diskimages_and_shared_settings)
{
	const char *tmpl = "zookeeper-servers: [{host: %s}]\n"
			   "labels: [{name: a}]\n"
			   "diskimages: [{name: img, elements: [%s]}]\n"
			   "providers:\n"
			   "  - {name: os, cloud: c, diskimages: [{name: img}], pools: []}\n"
			   "  - {name: sim, driver: fake, pools: []}\n";
	char *t1, *t2, *t3;
	struct np_config *c1, *c2, *c3;

	cr_assert(asprintf(&t1, tmpl, "zk1", "e1") > 0);
	cr_assert(asprintf(&t2, tmpl, "zk1", "e2") > 0);
	cr_assert(asprintf(&t3, tmpl, "zk2", "e1") > 0);
	c1 = load_ok(t1);
	c2 = load_ok(t2);
	c3 = load_ok(t3);
	{
		/* the supervisor's own settings restart no worker; intervals do */
		char *t4, *t5;
		struct np_config *c4, *c5;

		cr_assert(asprintf(&t4,
				   "%snodepoold: {control-socket: /x, restart-backoff-max: 9}\n",
				   t1) > 0);
		cr_assert(asprintf(&t5, "%snodepoold: {cleanup-interval: 9}\n", t1) > 0);
		c4 = load_ok(t4);
		c5 = load_ok(t5);
		cr_assert_str_eq(c4->providers[0].fingerprint, c1->providers[0].fingerprint);
		cr_assert_str_neq(c5->providers[0].fingerprint, c1->providers[0].fingerprint);
		np_cfg_free(c4);
		np_cfg_free(c5);
		free(t4);
		free(t5);
	}
	cr_assert_str_neq(c1->providers[0].fingerprint, c2->providers[0].fingerprint);
	cr_assert_str_eq(c1->providers[1].fingerprint, c2->providers[1].fingerprint);
	/* ZooKeeper is in every slice */
	cr_assert_str_neq(c1->providers[0].fingerprint, c3->providers[0].fingerprint);
	cr_assert_str_neq(c1->providers[1].fingerprint, c3->providers[1].fingerprint);
	np_cfg_free(c1);
	np_cfg_free(c2);
	np_cfg_free(c3);
	free(t1);
	free(t2);
	free(t3);
}

/* ---- error list -------------------------------------------------------------------------------
 */

Test(config, error_list_format_and_cap)
{
	struct np_cfg_errors *e = np_cfg_errors_new();
	char *t;
	int i;

	np_cfg_errors_add(e, "a.yaml", 3, 7, "x.y", "bad %d", 1);
	np_cfg_errors_add(e, "a.yaml", 0, 0, "", "unreadable");
	np_cfg_errors_add(e, "a.yaml", 1, 1, NULL, "syntax");
	t = errs_text(e);
	cr_assert_str_eq(t, "a.yaml:3:7: x.y: bad 1\na.yaml: unreadable\na.yaml:1:1: syntax\n");
	free(t);
	for (i = 0; i < NP_CONFIG_MAX_ERRORS + 5; i++)
		np_cfg_errors_add(e, "a.yaml", 1, 1, "", "e");
	cr_assert_eq(e->n, NP_CONFIG_MAX_ERRORS);
	cr_assert_eq(np_cfg_errors_count(e), NP_CONFIG_MAX_ERRORS + 8);
	t = errs_text(e);
	cr_assert(strstr(t, "... and 8 more errors\n") != NULL);
	free(t);
	np_cfg_errors_free(e);
	np_cfg_errors_free(NULL);
	np_cfg_free(NULL);
	np_cfg_doc_free(NULL);
	cr_assert_eq(np_cfg_errors_print(NULL, stdout), 0);
}
