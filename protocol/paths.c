/*
 * Nodepool's ZooKeeper paths and ids (see paths.h).
 */
#include "protocol/paths.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

/* A usable znode name: not NULL, not empty, not "." or "..", no '/'. */
static int
valid_elem(const char *s)
{
	return s != NULL && *s != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0;
}

/* Append s at *off into buf (snprintf-style: counts past size). */
static void
append(char *buf, size_t size, size_t *off, const char *s)
{
	size_t len = strlen(s);

	if (size > 0 && *off < size - 1) {
		size_t room = size - 1 - *off;

		memcpy(buf + *off, s, len < room ? len : room);
	}
	*off += len;
}

/* root, then each of the n elements after a '/'; every element must be
 * valid_elem(). snprintf-style. */
static int
join_v(char *buf, size_t size, const char *root, int n, const char *const *e)
{
	size_t off = 0;
	int i;

	for (i = 0; i < n; i++)
		if (!valid_elem(e[i]))
			return -1;
	append(buf, size, &off, root);
	for (i = 0; i < n; i++) {
		append(buf, size, &off, "/");
		append(buf, size, &off, e[i]);
	}
	if (size > 0)
		buf[off < size ? off : size - 1] = '\0';
	return off > (size_t)INT_MAX ? -1 : (int)off;
}

#define JOIN_MAX 9

static int
join(char *buf, size_t size, const char *root, int n, ...)
{
	const char *e[JOIN_MAX];
	va_list ap;
	int i;

	if (n > JOIN_MAX)
		return -1;
	va_start(ap, n);
	for (i = 0; i < n; i++)
		e[i] = va_arg(ap, const char *);
	va_end(ap);
	return join_v(buf, size, root, n, e);
}

int
np_path_node(char *buf, size_t size, const char *node_id)
{
	return join(buf, size, NP_NODE_ROOT, 1, node_id);
}

int
np_path_node_lock(char *buf, size_t size, const char *node_id)
{
	return join(buf, size, NP_NODE_ROOT, 2, node_id, "lock");
}

int
np_path_request(char *buf, size_t size, const char *request_id)
{
	return join(buf, size, NP_REQUEST_ROOT, 1, request_id);
}

int
np_path_request_lock(char *buf, size_t size, const char *request_id)
{
	return join(buf, size, NP_REQUEST_LOCK_ROOT, 1, request_id);
}

int
np_path_request_prefix(char *buf, size_t size, int priority)
{
	if (priority < 0)
		return -1;
	return snprintf(buf, size, "%s/%03d-", NP_REQUEST_ROOT, priority);
}

int
np_path_image(char *buf, size_t size, const char *image)
{
	return join(buf, size, NP_IMAGE_ROOT, 1, image);
}

int
np_path_image_pause(char *buf, size_t size, const char *image)
{
	return join(buf, size, NP_IMAGE_ROOT, 2, image, "pause");
}

int
np_path_image_request_build(char *buf, size_t size, const char *image)
{
	return join(buf, size, NP_IMAGE_ROOT, 2, image, "request-build");
}

int
np_path_image_builds(char *buf, size_t size, const char *image)
{
	return join(buf, size, NP_IMAGE_ROOT, 2, image, "builds");
}

int
np_path_image_build_lock(char *buf, size_t size, const char *image)
{
	return join(buf, size, NP_IMAGE_ROOT, 3, image, "builds", "lock");
}

int
np_path_build(char *buf, size_t size, const char *image, const char *build_id)
{
	return join(buf, size, NP_IMAGE_ROOT, 3, image, "builds", build_id);
}

int
np_path_build_lock(char *buf, size_t size, const char *image, const char *build_id)
{
	return join(buf, size, NP_IMAGE_ROOT, 4, image, "builds", build_id, "lock");
}

int
np_path_build_providers(char *buf, size_t size, const char *image, const char *build_id)
{
	return join(buf, size, NP_IMAGE_ROOT, 4, image, "builds", build_id, "providers");
}

int
np_path_uploads(char *buf, size_t size, const char *image, const char *build_id,
		const char *provider)
{
	return join(buf, size, NP_IMAGE_ROOT, 6, image, "builds", build_id, "providers", provider,
		    "images");
}

int
np_path_upload_lock(char *buf, size_t size, const char *image, const char *build_id,
		    const char *provider)
{
	return join(buf, size, NP_IMAGE_ROOT, 7, image, "builds", build_id, "providers", provider,
		    "images", "lock");
}

int
np_path_upload(char *buf, size_t size, const char *image, const char *build_id,
	       const char *provider, const char *upload_id)
{
	return join(buf, size, NP_IMAGE_ROOT, 7, image, "builds", build_id, "providers", provider,
		    "images", upload_id);
}

int
np_path_upload_id_lock(char *buf, size_t size, const char *image, const char *build_id,
		       const char *provider, const char *upload_id)
{
	return join(buf, size, NP_IMAGE_ROOT, 8, image, "builds", build_id, "providers", provider,
		    "images", upload_id, "lock");
}

int
np_path_component_root(char *buf, size_t size, const char *kind)
{
	return join(buf, size, NP_COMPONENT_ROOT, 1, kind);
}

int
np_path_component_prefix(char *buf, size_t size, const char *kind, const char *hostname)
{
	return join(buf, size, NP_COMPONENT_ROOT, 2, kind, hostname);
}

/* ---- parsing ------------------------------------------------------------------
 *
 * One table of patterns below /nodepool/: literal elements, and captures
 * "{field}" naming a member of struct np_path_info. A capture never matches
 * "lock" (upstream's caches skip anything named lock), so the table has no
 * ambiguity and its order does not matter.
 */

#define MAX_ELEMS 10

static const struct {
	enum np_path_kind kind;
	const char *name;
	const char *pattern;
} path_table[] = {
    {NP_PATH_NODE, "node", "nodes/{id}"},
    {NP_PATH_NODE_LOCK, "node-lock", "nodes/{id}/lock"},
    {NP_PATH_NODE_LOCK_CONTENDER, "node-lock-contender", "nodes/{id}/lock/{contender}"},
    {NP_PATH_REQUEST, "request", "requests/{id}"},
    {NP_PATH_REQUEST_LOCK, "request-lock", "requests-lock/{id}"},
    {NP_PATH_REQUEST_LOCK_CONTENDER, "request-lock-contender", "requests-lock/{id}/{contender}"},
    {NP_PATH_IMAGE, "image", "images/{image}"},
    {NP_PATH_IMAGE_PAUSE, "image-pause", "images/{image}/pause"},
    {NP_PATH_IMAGE_REQUEST_BUILD, "image-request-build", "images/{image}/request-build"},
    {NP_PATH_IMAGE_BUILDS, "image-builds", "images/{image}/builds"},
    {NP_PATH_IMAGE_BUILD_LOCK, "image-build-lock", "images/{image}/builds/lock"},
    {NP_PATH_IMAGE_BUILD_LOCK_CONTENDER, "image-build-lock-contender",
     "images/{image}/builds/lock/{contender}"},
    {NP_PATH_BUILD, "build", "images/{image}/builds/{build}"},
    {NP_PATH_BUILD_LOCK, "build-lock", "images/{image}/builds/{build}/lock"},
    {NP_PATH_BUILD_LOCK_CONTENDER, "build-lock-contender",
     "images/{image}/builds/{build}/lock/{contender}"},
    {NP_PATH_BUILD_PROVIDERS, "build-providers", "images/{image}/builds/{build}/providers"},
    {NP_PATH_BUILD_PROVIDER, "build-provider",
     "images/{image}/builds/{build}/providers/{provider}"},
    {NP_PATH_UPLOADS, "uploads", "images/{image}/builds/{build}/providers/{provider}/images"},
    {NP_PATH_UPLOAD_LOCK, "upload-lock",
     "images/{image}/builds/{build}/providers/{provider}/images/lock"},
    {NP_PATH_UPLOAD_LOCK_CONTENDER, "upload-lock-contender",
     "images/{image}/builds/{build}/providers/{provider}/images/lock/{contender}"},
    {NP_PATH_UPLOAD, "upload",
     "images/{image}/builds/{build}/providers/{provider}/images/{upload}"},
    {NP_PATH_UPLOAD_ID_LOCK, "upload-id-lock",
     "images/{image}/builds/{build}/providers/{provider}/images/{upload}/lock"},
    {NP_PATH_UPLOAD_ID_LOCK_CONTENDER, "upload-id-lock-contender",
     "images/{image}/builds/{build}/providers/{provider}/images/{upload}/lock/"
     "{contender}"},
    {NP_PATH_COMPONENT_KIND, "component-kind", "components/{kind}"},
    {NP_PATH_COMPONENT, "component", "components/{kind}/{name}"},
};
#define PATH_TABLE_LEN (sizeof(path_table) / sizeof(path_table[0]))

/* The struct member a capture name stands for, or NULL. */
static char *
capture_field(struct np_path_info *pi, const char *name, size_t len)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
	    {"id", offsetof(struct np_path_info, id)},
	    {"image", offsetof(struct np_path_info, image)},
	    {"build", offsetof(struct np_path_info, build)},
	    {"provider", offsetof(struct np_path_info, provider)},
	    {"upload", offsetof(struct np_path_info, upload)},
	    {"kind", offsetof(struct np_path_info, comp_kind)},
	    {"name", offsetof(struct np_path_info, name)},
	    {"contender", offsetof(struct np_path_info, contender)},
	};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strlen(fields[i].name) == len && memcmp(fields[i].name, name, len) == 0)
			return (char *)pi + fields[i].off;
	return NULL;
}

/* Split s (no leading '/') at '/' into at most max elements (pointer and
 * length). Returns the count, or -1 for an empty element or too many. */
static int
split(const char *s, const char **elem, size_t *len, int max)
{
	int n = 0;
	const char *slash;

	for (;;) {
		if (n == max)
			return -1;
		slash = strchr(s, '/');
		elem[n] = s;
		len[n] = slash != NULL ? (size_t)(slash - s) : strlen(s);
		if (len[n] == 0)
			return -1;
		n++;
		if (slash == NULL)
			return n;
		s = slash + 1;
	}
}

enum np_path_kind
np_path_parse(const char *path, struct np_path_info *pi)
{
	const char *pe[MAX_ELEMS], *te[MAX_ELEMS];
	size_t pl[MAX_ELEMS], tl[MAX_ELEMS], t;
	int np, nt, i;
	const char *prefix = NP_ROOT "/";

	memset(pi, 0, sizeof(*pi));
	if (path == NULL || strncmp(path, prefix, strlen(prefix)) != 0)
		return NP_PATH_UNKNOWN;
	np = split(path + strlen(prefix), pe, pl, MAX_ELEMS);
	if (np < 0)
		return NP_PATH_UNKNOWN;
	for (t = 0; t < PATH_TABLE_LEN; t++) {
		nt = split(path_table[t].pattern, te, tl, MAX_ELEMS);
		if (nt != np)
			continue;
		for (i = 0; i < np; i++) {
			int capture = te[i][0] == '{';

			if (!capture) {
				if (tl[i] != pl[i] || memcmp(te[i], pe[i], pl[i]) != 0)
					break;
			} else if ((pl[i] == 4 && memcmp(pe[i], "lock", 4) == 0) ||
				   pl[i] >= NP_NAME_MAX || (pl[i] == 1 && pe[i][0] == '.') ||
				   (pl[i] == 2 && memcmp(pe[i], "..", 2) == 0)) {
				break;
			}
		}
		if (i < np)
			continue;
		/* A match: copy the captures. */
		for (i = 0; i < np; i++) {
			char *f;

			if (te[i][0] != '{')
				continue;
			f = capture_field(pi, te[i] + 1, tl[i] - 2);
			if (f == NULL) /* a table typo; never reached */
				return NP_PATH_UNKNOWN;
			memcpy(f, pe[i], pl[i]);
			f[pl[i]] = '\0';
		}
		pi->kind = path_table[t].kind;
		return pi->kind;
	}
	memset(pi, 0, sizeof(*pi));
	return NP_PATH_UNKNOWN;
}

int
np_path_format(char *buf, size_t size, const struct np_path_info *pi)
{
	/* Literal elements of the patterns, as NUL-terminated strings. */
	static const char *const lits[] = {"lock",   "pause",	  "request-build",
					   "builds", "providers", "images"};
	const char *te[MAX_ELEMS], *e[MAX_ELEMS];
	size_t tl[MAX_ELEMS], t, k;
	char root[64];
	int nt, i;

	for (t = 0; t < PATH_TABLE_LEN; t++)
		if (path_table[t].kind == pi->kind)
			break;
	if (t == PATH_TABLE_LEN)
		return -1;
	nt = split(path_table[t].pattern, te, tl, MAX_ELEMS);
	if (nt < 2)
		return -1;
	/* The first element ("nodes", "images"...) joins the root; the rest
	 * are literals or captured fields. */
	for (i = 1; i < nt; i++) {
		e[i - 1] = NULL;
		if (te[i][0] == '{') {
			const char *f =
			    capture_field((struct np_path_info *)pi, te[i] + 1, tl[i] - 2);

			if (f == NULL || strnlen(f, NP_NAME_MAX) == NP_NAME_MAX ||
			    strcmp(f, "lock") == 0)
				return -1;
			e[i - 1] = f;
			continue;
		}
		for (k = 0; k < sizeof(lits) / sizeof(lits[0]); k++)
			if (strlen(lits[k]) == tl[i] && memcmp(lits[k], te[i], tl[i]) == 0)
				e[i - 1] = lits[k];
		if (e[i - 1] == NULL)
			return -1;
	}
	snprintf(root, sizeof(root), "%s/%.*s", NP_ROOT, (int)tl[0], te[0]);
	return join_v(buf, size, root, nt - 1, e);
}

const char *
np_path_kind_name(enum np_path_kind kind)
{
	size_t t;

	if (kind == NP_PATH_UNKNOWN)
		return "unknown";
	for (t = 0; t < PATH_TABLE_LEN; t++)
		if (path_table[t].kind == kind)
			return path_table[t].name;
	return NULL;
}

/* ---- ids ------------------------------------------------------------------------ */

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int
is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* n ASCII digits at s (not beyond a NUL) as a number. */
static int
digits(const char *s, size_t n, long long *out)
{
	long long v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (out != NULL)
		*out = v;
	return 0;
}

int
np_seq_parse(const char *s, long long *seq)
{
	if (s == NULL || strlen(s) != 10)
		return -1;
	return digits(s, 10, seq);
}

int
np_node_id_parse(const char *id, long long *seq)
{
	return np_seq_parse(id, seq);
}

int
np_upload_id_parse(const char *id, long long *seq)
{
	return np_seq_parse(id, seq);
}

int
np_request_id_parse(const char *id, int *prio, long long *seq)
{
	const char *dash;
	long long p;
	size_t plen;

	if (id == NULL || (dash = strchr(id, '-')) == NULL)
		return -1;
	plen = (size_t)(dash - id);
	if (plen < 1 || plen > 9 || digits(id, plen, &p) != 0)
		return -1;
	if (np_seq_parse(dash + 1, seq) != 0)
		return -1;
	if (prio != NULL)
		*prio = (int)p;
	return 0;
}

int
np_build_id_valid(const char *id)
{
	size_t i, n;

	if (id == NULL)
		return 0;
	n = strlen(id);
	if (n == 10)
		return digits(id, 10, NULL) == 0;
	if (n != 32)
		return 0;
	for (i = 0; i < n; i++)
		if (!is_hex(id[i]))
			return 0;
	return 1;
}

int
np_lock_contender_seq(const char *name, long long *seq)
{
	static const char marker[] = "__lock__";
	const size_t ml = sizeof(marker) - 1;
	size_t n;
	long long v;

	if (name == NULL)
		return -1;
	n = strlen(name);
	/* __lock__ then 10 digits at the end ... */
	if (n >= ml + 10 && memcmp(name + n - 10 - ml, marker, ml) == 0 &&
	    digits(name + n - 10, 10, &v) == 0) {
		if (seq != NULL)
			*seq = v;
		return 0;
	}
	/* ... or __lock__ then '-' and 10 digits (a wrapped counter). */
	if (n >= ml + 11 && memcmp(name + n - 11 - ml, marker, ml) == 0 && name[n - 11] == '-' &&
	    digits(name + n - 10, 10, &v) == 0) {
		if (seq != NULL)
			*seq = -v;
		return 0;
	}
	return -1;
}

int
np_seq_suffix(const char *name, long long *seq)
{
	size_t n;

	if (name == NULL || (n = strlen(name)) < 10)
		return -1;
	if (digits(name + n - 10, 10, seq) != 0)
		return -1;
	return (int)(n - 10);
}

/* ---- generators ------------------------------------------------------------------ */

int
np_uuid4_hex(char out[33])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];
	int i;

	if (RAND_bytes(b, sizeof(b)) != 1) {
		out[0] = '\0';
		return -1;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	for (i = 0; i < 16; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 0x0f];
	}
	out[32] = '\0';
	return 0;
}

int
np_launcher_id(char *buf, size_t size, const char *fqdn, const char *provider, const char *pool)
{
	char u[33];

	if (fqdn == NULL || provider == NULL || pool == NULL || np_uuid4_hex(u) != 0)
		return -1;
	return snprintf(buf, size, "%s-PoolWorker.%s-%s-%s", fqdn, provider, pool, u);
}
