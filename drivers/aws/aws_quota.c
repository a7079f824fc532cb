/*
 * The aws driver's quota (aws_int.h): the Service Quotas L- codes by
 * instance family (on-demand, spot, dedicated hosts), read for
 * quota_limits; a label's cost in vCPUs and memory from
 * DescribeInstanceTypes (cached), or one host of its family.
 */
#include "drivers/aws/aws_int.h"
#include "drivers/statemachine/reqformat.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/aws/aws_api.h"
#include "lib/net/curl_dl.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"

/* ---- quota codes (upstream's QUOTA_CODES table, by family prefix) ---- */

static const char *
quota_code(const char *itype, int spot)
{
	static const struct {
		const char *prefix, *od, *spot;
	} t[] = {
	    {"u-", "L-43DA4232", NULL},		{"inf", "L-1945791B", "L-B5D1601B"},
	    {"dl", "L-6E869C2A", "L-85EED4F7"}, {"vt", "L-DB2E81BA", "L-3819A6DF"},
	    {"g", "L-DB2E81BA", "L-3819A6DF"},	{"p", "L-417A185B", "L-7212CCBC"},
	    {"f", "L-74FC7D96", "L-88CF9481"},	{"x", "L-7295265B", "L-E3A00192"},
	};
	char fam[16];
	size_t i = 0;

	if (itype == NULL)
		return NULL;
	while (i < sizeof(fam) - 1 && itype[i] != '\0' && !isdigit((unsigned char)itype[i])) {
		fam[i] = itype[i];
		i++;
	}
	fam[i] = '\0';
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strncmp(fam, t[i].prefix, strlen(t[i].prefix)) == 0)
			return spot ? t[i].spot : t[i].od;
	if (fam[0] != '\0' && strchr("acdhimrtz", fam[0]) != NULL)
		return spot ? "L-34B43A08" : "L-1216C47A";
	return NULL;
}

/*
 * The Service Quotas code counting dedicated hosts of itype's family (the
 * part before the dot: "m5" for m5.large), as upstream's HOST_QUOTA_CODES
 * (AWS's codes for "Running Dedicated <family> Hosts"); NULL if unknown.
 */
static const char *
host_quota_code(const char *itype)
{
	static const struct {
		const char *family, *code;
	} t[] = {
	    {"a1", "L-949445B0"},	  {"c3", "L-8D142A2E"},	       {"c4", "L-E4BF28E0"},
	    {"c5", "L-81657574"},	  {"c5a", "L-03F01FD8"},       {"c5d", "L-C93F66A2"},
	    {"c5n", "L-20F13EBD"},	  {"c6a", "L-D75D2E84"},       {"c6g", "L-A749B537"},
	    {"c6gd", "L-545AED39"},	  {"c6gn", "L-5E3A299D"},      {"c6i", "L-5FA3355A"},
	    {"c6id", "L-1BBC5241"},	  {"c6in", "L-6C2C40CC"},      {"c7a", "L-698B67E5"},
	    {"c7g", "L-13B8FCE8"},	  {"c7gd", "L-EF58B059"},      {"c7gn", "L-97677CE3"},
	    {"c7i", "L-587AA6E3"},	  {"d2", "L-8B27377A"},	       {"dl1", "L-AD667A3D"},
	    {"f1", "L-5C4CD236"},	  {"g3", "L-DE82EABA"},	       {"g3s", "L-9675FDCD"},
	    {"g4ad", "L-FD8E9B9A"},	  {"g4dn", "L-CAE24619"},      {"g5", "L-A6E7FE5E"},
	    {"g5g", "L-4714FFEA"},	  {"g6", "L-B88B9D6B"},	       {"gr6", "L-E68C3AFF"},
	    {"h1", "L-84391ECC"},	  {"i2", "L-6222C1B6"},	       {"i3", "L-8E60B0B1"},
	    {"i3en", "L-77EE2B11"},	  {"i4g", "L-F62CBADB"},       {"i4i", "L-0300530D"},
	    {"im4gn", "L-93155D6F"},	  {"inf", "L-5480EFD2"},       {"inf2", "L-E5BCF7B5"},
	    {"is4gen", "L-CB4F5825"},	  {"m3", "L-3C82F907"},	       {"m4", "L-EF30B25E"},
	    {"m5", "L-8B7BF662"},	  {"m5a", "L-B10F70D6"},       {"m5ad", "L-74F41837"},
	    {"m5d", "L-8CCBD91B"},	  {"m5dn", "L-DA07429F"},      {"m5n", "L-24D7D4AD"},
	    {"m5zn", "L-BD9BD803"},	  {"m6a", "L-80F2B67F"},       {"m6g", "L-D50A37FA"},
	    {"m6gd", "L-84FB37AA"},	  {"m6i", "L-D269BEFD"},       {"m6id", "L-FDB0A352"},
	    {"m6idn", "L-9721EDD9"},	  {"m6in", "L-D037CF10"},      {"m7a", "L-4740F819"},
	    {"m7g", "L-9126620E"},	  {"m7gd", "L-F8516154"},      {"m7i", "L-30E31217"},
	    {"mac1", "L-A8448DC5"},	  {"mac2", "L-5D8DADF5"},      {"mac2-m2", "L-B90B5B66"},
	    {"mac2-m2pro", "L-14F120D1"}, {"p2", "L-2753CF59"},	       {"p3", "L-A0A19F79"},
	    {"p3dn", "L-B601B3B6"},	  {"p4d", "L-86A789C3"},       {"p5", "L-5136197D"},
	    {"r3", "L-B7208018"},	  {"r4", "L-313524BA"},	       {"r5", "L-EA4FD6CF"},
	    {"r5a", "L-8FE30D52"},	  {"r5ad", "L-EC7178B6"},      {"r5b", "L-A2D59C67"},
	    {"r5d", "L-8814B54F"},	  {"r5dn", "L-4AB14223"},      {"r5n", "L-52EF324A"},
	    {"r6a", "L-BC1589C5"},	  {"r6g", "L-B6D6065D"},       {"r6gd", "L-EF284EFB"},
	    {"r6i", "L-F13A970A"},	  {"r6id", "L-B89271A9"},      {"r6idn", "L-C4EABC2C"},
	    {"r6in", "L-EA99608B"},	  {"r7a", "L-4D15192B"},       {"r7g", "L-67B8B4C7"},
	    {"r7gd", "L-01137DCE"},	  {"r7i", "L-55E05032"},       {"r7iz", "L-BC9FCC71"},
	    {"t3", "L-1586174D"},	  {"trn1", "L-5E4FB836"},      {"trn1n", "L-39926A58"},
	    {"u-12tb1", "L-D6994875"},	  {"u-18tb1", "L-5F7FD336"},   {"u-24tb1", "L-FACBE655"},
	    {"u-3tb1", "L-7F5506AB"},	  {"u-6tb1", "L-89870E8E"},    {"u-9tb1", "L-98E1FFAC"},
	    {"u7in-16tb", "L-75B9BECB"},  {"u7in-24tb", "L-CA51381E"}, {"u7in-32tb", "L-9D28191F"},
	    {"vt1", "L-A68CFBF7"},	  {"x1", "L-DE3D9563"},	       {"x1e", "L-DEF8E115"},
	    {"x2gd", "L-5CC9EA82"},	  {"x2idn", "L-A84ABF80"},     {"x2iedn", "L-D0AA08B1"},
	    {"x2iezn", "L-888B4496"},	  {"z1d", "L-F035E935"},
	};
	char fam[32];
	size_t i;

	if (itype == NULL)
		return NULL;
	for (i = 0; i < sizeof(fam) - 1 && itype[i] != '\0' && itype[i] != '.'; i++)
		fam[i] = itype[i];
	fam[i] = '\0';
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(fam, t[i].family) == 0)
			return t[i].code;
	return NULL;
}

/* The quota one node on a dedicated host of itype uses: one instance and
 * one host of its family; as upstream, its vCPUs are not counted against
 * the instance quotas. */
void
aws_host_quota(const char *itype, struct drv_quota *q)
{
	const char *code = host_quota_code(itype);

	q->instances = 1;
	if (code != NULL) {
		if (q->extra == NULL)
			q->extra = json_object();
		json_object_set_new(q->extra, code, json_real(1));
	}
}

/* The quota one instance of itype uses. */
void
aws_type_quota(struct sm_adapter *a, const char *itype, int spot, struct drv_quota *q)
{
	const json_t *t = json_object_get(a->itypes, itype != NULL ? itype : "");
	const char *code = quota_code(itype, spot);
	double vcpus = t != NULL ? np_json_num(t, "vcpus", 0) : 0;

	q->instances = 1;
	q->cores = vcpus;
	q->ram = t != NULL ? np_json_num(t, "ram", 0) : 0;
	if (code != NULL && vcpus > 0) {
		if (q->extra == NULL)
			q->extra = json_object();
		json_object_set_new(q->extra, code, json_real(vcpus));
	}
}

/* ---- quota ---- */

struct quota_ctx {
	struct pend p;
	struct sm_adapter *a;
	sm_quota_cb cb;
	void *arg;
	int pending;
	char error[512];
	struct drv_quota limits;
};

struct quota_one {
	struct pend p;
	struct quota_ctx *q;
	char code[32];
};

static void
quota_one_done(const struct aws_result *r, void *arg)
{
	struct quota_one *one = arg;
	struct quota_ctx *q = one->q;
	const char *code = one->code;

	LIST_REMOVE(&one->p, entry);
	if (r->code == NULL) {
		json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
		const json_t *v = json_object_get(json_object_get(j, "Quota"), "Value");
		if (json_is_number(v))
			json_object_set_new(q->limits.extra, code, json_real(json_number_value(v)));
		json_decref(j);
	} else if (strcmp(r->code, "NoSuchResourceException") != 0 && q->error[0] == '\0') {
		snprintf(q->error, sizeof(q->error), "GetServiceQuota %s: %s: %s", code, r->code,
			 r->message);
	}
	if (--q->pending > 0) {
		free(one);
		return;
	}
	free(one);
	LIST_REMOVE(&q->p, entry);
	if (q->error[0] != '\0')
		q->cb(NULL, q->error, q->arg);
	else
		q->cb(&q->limits, NULL, q->arg);
	drv_quota_clear(&q->limits);
	free(q);
}

static void
quota_ctx_free(struct pend *p)
{
	struct quota_ctx *q = (struct quota_ctx *)p;

	drv_quota_clear(&q->limits);
	free(q);
}

static void
add_label_codes(const struct sm_label *l, json_t *codes)
{
	const json_t *fleet = aws_fleet_of(l), *t;
	size_t i;
	int spot = aws_label_spot(l);

	if (aws_label_dedicated(l)) {
		const char *c = host_quota_code(aws_lstr(l, "instance-type"));
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
		return;
	}
	if (fleet == NULL) {
		const char *c = quota_code(aws_lstr(l, "instance-type"), spot);
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
		return;
	}
	json_array_foreach(json_object_get(fleet, "instance-types"), i, t)
	{
		const char *c = quota_code(json_string_value(t), spot);
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
	}
}

void
aws_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	const struct sm_config *cfg = a->env->cfg;
	struct quota_ctx *q = calloc(1, sizeof(*q));
	json_t *codes = json_object();
	const char *code;
	const json_t *v;
	size_t p, l;

	q->a = a;
	q->cb = cb;
	q->arg = arg;
	q->limits.cores = q->limits.ram = q->limits.instances = INFINITY;
	q->limits.extra = json_object();
	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++)
			add_label_codes(&cfg->pools[p].labels[l], codes);
	q->p.dtor = quota_ctx_free;
	LIST_INSERT_HEAD(&a->pend, &q->p, entry);
	if (json_object_size(codes) == 0) /* ask one anyway: the answer comes later */
		json_object_set_new(codes, "L-1216C47A", json_true());
	q->pending = (int)json_object_size(codes);
	json_object_foreach(codes, code, v)
	{
		char body[256];
		struct quota_one *one = calloc(1, sizeof(*one));
		one->q = q;
		snprintf(one->code, sizeof(one->code), "%s", code);
		LIST_INSERT_HEAD(&a->pend, &one->p, entry);
		snprintf(body, sizeof(body), "{\"ServiceCode\":\"ec2\",\"QuotaCode\":\"%s\"}",
			 code);
		aws_quotas(a->api, "GetServiceQuota", body, quota_one_done, one);
	}
	json_decref(codes);
}

int
aws_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		char *err, size_t errlen)
{
	const json_t *fleet = aws_fleet_of(label), *t;
	size_t i;

	(void)err;
	(void)errlen;
	if (aws_label_dedicated(label)) {
		aws_host_quota(aws_lstr(label, "instance-type"), out);
		return 0;
	}
	if (fleet == NULL) {
		aws_type_quota(a, aws_lstr(label, "instance-type"), aws_label_spot(label), out);
		return 0;
	}
	/* a fleet may get any of its types: count the largest */
	json_array_foreach(json_object_get(fleet, "instance-types"), i, t)
	{
		struct drv_quota q;
		drv_quota_init(&q, 0, 0, 0);
		aws_type_quota(a, json_string_value(t), aws_label_spot(label), &q);
		if (q.cores >= out->cores) {
			drv_quota_clear(out);
			*out = q;
		} else {
			drv_quota_clear(&q);
		}
	}
	if (out->instances < 1)
		out->instances = 1;
	return 0;
}

/* instance types: vCPUs and memory (DescribeInstanceTypes, at start) */
static void
itypes_done(const struct aws_result *r, void *arg)
{
	struct sm_adapter *a = arg;
	const xmlNode *it;
	char t[64], v[32], m[32];

	a->itypes_call = NULL;
	if (r->code != NULL) {
		log_warn("aws %s: DescribeInstanceTypes: %s: %s (label quota: instances only)",
			 a->provider, r->code, r->message);
		return;
	}
	for (it = aws_xpath(r->root, "instanceTypeSet/item"); it != NULL; it = aws_xnext(it))
		json_object_set_new(
		    a->itypes, aws_xtext(it, "instanceType", t, sizeof(t)),
		    json_pack("{s:i, s:f}", "vcpus",
			      atoi(aws_xtext(it, "vCpuInfo/defaultVCpus", v, sizeof(v))), "ram",
			      atof(aws_xtext(it, "memoryInfo/sizeInMiB", m, sizeof(m)))));
}

void
aws_itypes_fetch(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	json_t *types = json_object();
	const char *k;
	const json_t *v;
	char *form = NULL;
	size_t p, l, i, n = 0;

	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++) {
			const struct sm_label *lb = &cfg->pools[p].labels[l];
			const json_t *t;
			if (aws_lstr(lb, "instance-type") != NULL)
				json_object_set_new(types, aws_lstr(lb, "instance-type"),
						    json_true());
			json_array_foreach(json_object_get(aws_fleet_of(lb), "instance-types"), i,
					   t)
			    json_object_set_new(types, json_string_value(t), json_true());
		}
	json_object_foreach(types, k, v) aws_form_addf(&form, k, "InstanceType.%zu", ++n);
	json_decref(types);
	if (n > 0)
		a->itypes_call = aws_ec2(a->api, "DescribeInstanceTypes", form, 0, itypes_done, a);
	free(form);
}
