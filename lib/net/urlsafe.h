/*
 * What a cloud client needs to keep the cloud's answers and ZooKeeper's
 * records from steering its requests (issue 23, finding 6):
 *
 *   url_segment      an id (a server's, an image's, a node record's
 *                    external_id) as one URL path segment, percent-encoded,
 *                    so that "../images/x" or "a?b" cannot name another
 *                    resource than the one meant;
 *   url_same_origin  whether a link from an answer (OpenStack's "next")
 *                    points at the endpoint's own scheme, host and port,
 *                    where the client may send its token.
 */
#ifndef NP_URLSAFE_H
#define NP_URLSAFE_H

#include <stddef.h>

/*
 * s percent-encoded as one path segment into buf (size bytes): every byte
 * but RFC 3986's unreserved ones (A-Z a-z 0-9 - . _ ~) as %XX, and a
 * segment of dots only ("", ".", "..") with its dots encoded too, as a
 * client (libcurl) would otherwise remove it. Returns buf, or NULL when
 * it does not fit (buf is then "").
 */
char *url_segment(const char *s, char *buf, size_t size);

/*
 * 1 when url is absolute (scheme://authority...) and its scheme and
 * authority (host and port, user info included) are base's, compared
 * without case; 0 otherwise, a relative url included.
 */
int url_same_origin(const char *url, const char *base);

#endif
