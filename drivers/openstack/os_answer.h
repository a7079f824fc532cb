/*
 * What the openstack driver reads from the cloud's answers, pure (no
 * adapter, no I/O), so that it is fuzzed (tests/fuzz/fuzz_os_answer.c):
 * times, error messages, a server's addresses. The Keystone catalog is
 * os_catalog_url (os_cloud.h). As openstacksdk reads them.
 */
#ifndef NP_OS_ANSWER_H
#define NP_OS_ANSWER_H

#include <stddef.h>
#include <jansson.h>

/* "2026-11-24T16:30:00.000000Z" (or +00:00) as epoch seconds; 0 if bad
 * or NULL. */
double os_parse_iso(const char *s);

/*
 * The message of an OpenStack error into out (n bytes, always
 * terminated): error when not NULL (a transport error), else "HTTP
 * <status>: " and the body's message ({"badRequest": {"message": ...}},
 * {"NeutronError": {"message": ...}}, {"error": {"message": ...}},
 * {"message": ...}) or the raw body's start (at most 200 bytes of either).
 */
void os_error_text(int status, const char *error, const json_t *body, const char *raw, char *out,
		   size_t n);

/* Does an error message say a quota was exceeded (Nova's, Neutron's
 * ports)? Case-insensitive; NULL is no. */
int os_is_quota_msg(const char *m);

/* Is ip (dotted IPv4) in a private, loopback, CGNAT or link-local range? */
int os_is_private_v4(const char *ip);

/*
 * A server's addresses as openstacksdk's meta.get_server_*: public IPv4 =
 * floating, or fixed on an external network (is_ext(arg, network name)),
 * or fixed and not private; private IPv4 = fixed private; public IPv6 = a
 * global one. The strings are borrowed from server; NULL when none.
 */
void os_server_addresses(const json_t *server, int (*is_ext)(void *arg, const char *net), void *arg,
			 const char **pub4, const char **priv4, const char **pub6);

#endif
