/*
 * Decoding the cloud's answers (os_answer.h).
 */
#include "drivers/openstack/os_answer.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lib/config/jsonget.h"

static const char *
ans_str(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

double
os_parse_iso(const char *s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (s == NULL || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
				&tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double)timegm(&tm);
}

void
os_error_text(int status, const char *error, const json_t *body, const char *raw, char *out,
	      size_t n)
{
	const char *k, *m = NULL;
	json_t *v;

	if (error != NULL) {
		snprintf(out, n, "%s", error);
		return;
	}
	if (json_is_object(body)) {
		m = ans_str(body, "message");
		json_object_foreach((json_t *)body, k, v)
		{
			if (m == NULL && json_is_object(v))
				m = ans_str(v, "message");
		}
	}
	snprintf(out, n, "HTTP %d: %.200s", status, m ? m : raw ? raw : "");
}

static int
contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; hay != NULL && *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return 1;
	return 0;
}

int
os_is_quota_msg(const char *m)
{
	return contains_ci(m, "quota") || contains_ci(m, "number of ports exceeded");
}

int
os_is_private_v4(const char *ip)
{
	unsigned o1, o2;

	if (ip == NULL || sscanf(ip, "%u.%u", &o1, &o2) != 2)
		return 0;
	return o1 == 10 || o1 == 127 || (o1 == 172 && o2 >= 16 && o2 <= 31) ||
	       (o1 == 192 && o2 == 168) || (o1 == 100 && o2 >= 64 && o2 <= 127) ||
	       (o1 == 169 && o2 == 254);
}

void
os_server_addresses(const json_t *server, int (*is_ext)(void *arg, const char *net), void *arg,
		    const char **pub4, const char **priv4, const char **pub6)
{
	const json_t *addrs = json_object_get(server, "addresses"), *list, *e;
	const char *net;
	size_t i;

	*pub4 = *priv4 = *pub6 = NULL;
	json_object_foreach((json_t *)addrs, net, list)
	{
		json_array_foreach(list, i, e)
		{
			const char *ip = ans_str(e, "addr"), *type = ans_str(e, "OS-EXT-IPS:type");
			int ver = (int)np_json_num(e, "version", 4);
			int floating = type != NULL && strcmp(type, "floating") == 0;
			if (ip == NULL)
				continue;
			if (ver == 6) {
				if (*pub6 == NULL && strncasecmp(ip, "fe80", 4) != 0 &&
				    strncasecmp(ip, "fd", 2) != 0 && strncasecmp(ip, "fc", 2) != 0)
					*pub6 = ip;
				continue;
			}
			if (floating || (is_ext != NULL && is_ext(arg, net)) ||
			    !os_is_private_v4(ip)) {
				if (*pub4 == NULL || floating)
					*pub4 = ip;
			} else if (*priv4 == NULL) {
				*priv4 = ip;
			}
		}
	}
}
