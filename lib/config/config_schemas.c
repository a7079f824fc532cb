/*
 * The schemas of nodepool.yaml's top level and of secure.conf, as upstream
 * Nodepool's voluptuous schemas (nodepool/cmd/config_validator.py), with
 * the deliberate differences listed in lib/config/config.h, plus our own
 * `nodepoold:` section; and the building blocks (schema.h) that these and
 * every driver's provider schema (drivers/<name>/traits.c, as upstream's
 * nodepool/driver/<name>/config.py getSchema()) are made of.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"

/* ---- building blocks ---------------------------------------------------- */

const struct np_cfg_schema np_cfg_schema_str = {.type = SC_STR};
const struct np_cfg_schema np_cfg_schema_int = {.type = SC_INT};
const struct np_cfg_schema np_cfg_schema_bool = {.type = SC_BOOL};
const struct np_cfg_schema np_cfg_schema_float = {.type = SC_FLOAT};
const struct np_cfg_schema np_cfg_schema_number = {.type = SC_NUMBER};
const struct np_cfg_schema np_cfg_schema_coerce_float = {.type = SC_COERCE_FLOAT};
const struct np_cfg_schema np_cfg_schema_str_or_int = {.type = SC_STR_OR_INT};
const struct np_cfg_schema np_cfg_schema_str_or_strseq = {.type = SC_STR_OR_STRSEQ};
const struct np_cfg_schema np_cfg_schema_dict = {.type = SC_DICT};
const struct np_cfg_schema np_cfg_schema_list = {.type = SC_LIST};

/* ---- checks on values ------------------------------------------------------- */

static const char *
chk_positive(const struct np_cfg_node *n)
{
	return n->f > 0 ? NULL : "must be greater than 0";
}

static const char *
chk_nonneg(const struct np_cfg_node *n)
{
	return n->f >= 0 ? NULL : "must not be negative";
}

static const char *
chk_rate01(const struct np_cfg_node *n)
{
	return n->f >= 0 && n->f <= 1 ? NULL : "must be between 0 and 1";
}

static const char *
chk_chroot(const struct np_cfg_node *n)
{
	return n->text[0] == '/' ? NULL : "a chroot must start with '/'";
}

static const char *
chk_port(const struct np_cfg_node *n)
{
	return n->i > 0 && n->i < 65536 ? NULL : "must be a port number (1-65535)";
}

static const char *
chk_nonempty(const struct np_cfg_node *n)
{
	return n->text[0] ? NULL : "must not be empty";
}

/* v.Coerce(float) (a number, a bool or a numeric string) that is >= 0 */
static const char *
chk_coerce_nonneg(const struct np_cfg_node *n)
{
	double v = n->kind == NP_CFG_STR    ? strtod(n->text, NULL)
		   : n->kind == NP_CFG_BOOL ? (double)n->i
					    : n->f;

	return v >= 0 ? NULL : "must not be negative";
}

const struct np_cfg_schema np_cfg_schema_positive = {.type = SC_FLOAT, .check = chk_positive};
const struct np_cfg_schema np_cfg_schema_nonneg = {.type = SC_FLOAT, .check = chk_nonneg};
const struct np_cfg_schema np_cfg_schema_rate01 = {.type = SC_FLOAT, .check = chk_rate01};
const struct np_cfg_schema np_cfg_schema_nonempty_str = {.type = SC_STR, .check = chk_nonempty};
const struct np_cfg_schema np_cfg_schema_nonneg_int = {.type = SC_INT, .check = chk_nonneg};
const struct np_cfg_schema np_cfg_schema_port_no = {.type = SC_INT, .check = chk_port};
const struct np_cfg_schema np_cfg_schema_coerce_nonneg = {.type = SC_COERCE_FLOAT,
							  .check = chk_coerce_nonneg};

/* ---- common provider and pool keys (driver/__init__.py) --------------------- */

const struct np_cfg_schema np_cfg_schema_common_provider = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", NONEMPTY_STR), OPT("driver", STR), OPT("max-concurrency", INT),
		 OPT("priority", INT)),
};

const struct np_cfg_schema np_cfg_schema_common_pool = {
    .type = SC_MAP,
    .keys = KEYS(OPT("max-servers", INT), OPT("node-attributes", DICT), OPT("priority", INT)),
};

/* ---- top level ------------------------------------------------------------------------ */

static const struct np_cfg_schema s_chroot = {.type = SC_STR, .check = chk_chroot};
static const struct np_cfg_schema s_port = {.type = SC_INT, .check = chk_port};
static const struct np_cfg_schema s_pos_int = {.type = SC_INT, .check = chk_positive};

static const struct np_cfg_schema zk_servers = {
    .type = SC_SEQ,
    .item = MAP(REQ("host", NONEMPTY_STR), OPT("port", INT), OPT("chroot", &s_chroot)),
};

static const struct np_cfg_schema zk_tls = {
    .type = SC_MAP,
    .keys = KEYS(REQ("cert", STR), REQ("key", STR), REQ("ca", STR)),
};

static const struct np_cfg_schema diskimage = {
    .type = SC_MAP,
    .keys =
	KEYS(REQ("name", NONEMPTY_STR), OPT("abstract", BOOL), OPT("dib-cmd", STR),
	     OPT("pause", BOOL), OPT("elements", SEQ(STR)), OPT("formats", SEQ(STR)),
	     OPT("keep-formats", SEQ(STR)), OPT("delete-after-upload", BOOL), OPT("parent", STR),
	     OPT("release", STR_OR_INT), OPT("rebuild-age", INT), OPT("env-vars", STRMAP(STR)),
	     OPT("username", STR), OPT("python-path", STR), OPT("shell-type", STR),
	     OPT("build-timeout", INT), OPT("metadata", DICT), OPT("validate", BOOL)),
};

const struct np_cfg_schema np_cfg_schema_top = {
    .type = SC_MAP,
    .keys = KEYS(
	OPT("webapp",
	    MAP(OPT("port", &s_port), OPT("listen_address", STR),
		OPT("max_connections", &s_pos_int), OPT("max_connections_per_client", &s_pos_int),
		OPT("request_timeout", POSITIVE), OPT("max_response_size", &s_pos_int),
		OPT("view_idle_timeout", NONNEG))),
	OPT("elements-dir", STR), OPT("images-dir", STR), OPT("build-log-dir", STR),
	OPT("build-log-retention", INT), OPT("zookeeper-servers", &zk_servers),
	OPT("zookeeper-tls", &zk_tls), OPT("zookeeper-timeout", POSITIVE),
	OPT("providers", SEQ((&(const struct np_cfg_schema){.type = SC_PROVIDER}))),
	OPT("labels",
	    SEQ(MAP(REQ("name", NONEMPTY_STR), OPT("min-ready", INT), OPT("max-ready-age", INT)))),
	OPT("diskimages", SEQ(&diskimage)), OPT("max-hold-age", INT),
	OPT("tenant-resource-limits",
	    SEQ((&(const struct np_cfg_schema){
		.type = SC_MAP,
		.keys = KEYS(REQ("tenant-name", STR), OPT("max-cores", INT), OPT("max-ram", INT),
			     OPT("max-servers", INT)),
		.item = INT,
	    }))),
	OPT("nodepoold",
	    MAP(OPT("cleanup-interval", POSITIVE), OPT("delete-interval", POSITIVE),
		OPT("stats-interval", POSITIVE), OPT("worker-status-timeout", POSITIVE),
		OPT("control-socket", NONEMPTY_STR), OPT("pid-file", NONEMPTY_STR),
		OPT("restart-backoff-max", POSITIVE), OPT("request-lock-cleanup-age", POSITIVE),
		OPT("peer-takeover-delay", NONNEG), OPT("reload-on-change", BOOL)))),
};

const struct np_cfg_schema np_cfg_schema_secure = {
    .type = SC_MAP,
    .flags = SCF_NULL,
    .keys = KEYS(OPT("zookeeper-servers", &zk_servers), OPT("zookeeper-tls", &zk_tls),
		 OPT("diskimages", SEQ(MAP(REQ("name", STR), REQ("env-vars", STRMAP(STR)))))),
};
