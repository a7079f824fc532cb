/*
 * lib/net/urlsafe: ids from a cloud or ZooKeeper go into URL paths encoded,
 * and links are followed only to the endpoint's own origin (issue 23,
 * finding 6).
 */
#include <criterion/criterion.h>

#include <string.h>

#include "lib/net/urlsafe.h"

Test(urlsafe, ids_are_one_encoded_segment)
{
	char buf[64];

	cr_assert_str_eq(url_segment("6f0c1a2b-9d3e-4a5b-8c7d-0e1f2a3b4c5d", buf, sizeof(buf)),
			 "6f0c1a2b-9d3e-4a5b-8c7d-0e1f2a3b4c5d");
	cr_assert_str_eq(url_segment("i-0abc.x_y~z", buf, sizeof(buf)), "i-0abc.x_y~z");
	cr_assert_str_eq(url_segment("../images/x", buf, sizeof(buf)), "..%2Fimages%2Fx");
	cr_assert_str_eq(url_segment("a?b#c d", buf, sizeof(buf)), "a%3Fb%23c%20d");
	cr_assert_str_eq(url_segment("..", buf, sizeof(buf)), "%2E%2E");
	cr_assert_str_eq(url_segment(".", buf, sizeof(buf)), "%2E");
	cr_assert_str_eq(url_segment("\xc3\xa9", buf, sizeof(buf)), "%C3%A9");
	/* too long for the buffer: NULL, never a cut id */
	cr_assert_null(url_segment("abcdefgh", buf, 8));
	cr_assert_str_eq(buf, "");
	cr_assert_null(url_segment("////", buf, 12));
	cr_assert_not_null(url_segment("////", buf, 13));
}

Test(urlsafe, same_origin_is_scheme_host_and_port)
{
	const char *ep = "https://nova.example.org:8774/v2.1";

	cr_assert(
	    url_same_origin("https://nova.example.org:8774/v2.1/servers/detail?marker=x", ep));
	cr_assert(url_same_origin("HTTPS://Nova.Example.org:8774/v2.1/servers", ep));
	cr_assert_not(url_same_origin("http://nova.example.org:8774/v2.1/servers", ep),
		      "another scheme");
	cr_assert_not(url_same_origin("https://evil.example.net/v2.1/servers", ep));
	cr_assert_not(url_same_origin("https://nova.example.org:9999/v2.1/servers", ep));
	cr_assert_not(url_same_origin("https://nova.example.org:8774.evil.net/x", ep));
	cr_assert_not(url_same_origin("https://nova.example.org:8774@evil.net/x", ep));
	cr_assert_not(url_same_origin("/v2.1/servers?marker=x", ep), "relative");
	cr_assert_not(url_same_origin("file:///etc/passwd", ep));
	cr_assert_not(url_same_origin(NULL, ep));
}
