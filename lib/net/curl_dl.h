/*
 * libcurl, loaded at run time (lib/core/dynlib.h): include this instead of
 * <curl/curl.h>. The binaries do not link libcurl, so a worker whose
 * provider speaks no HTTP (static, fake) never maps it nor the ~30
 * libraries it needs (gnutls, krb5, ldap, ssh2, nghttp2, idn2...).
 *
 * Every libcurl function nodepoold calls is a field of np_curl, typed by
 * <curl/curl.h>'s own declaration, and the names below are macros for those
 * fields, so the code reads as plain libcurl. curl_dl_load() must have
 * succeeded before any of them is called (http_client_new() does it). A
 * function missing from NP_CURL_FUNCS is a link error.
 *
 * Note: the macros replace curl's gcc type checks of curl_easy_setopt's
 * argument (typecheck-gcc.h); pass longs as long (1L), as libcurl's
 * documentation asks.
 */
#ifndef NP_CURL_DL_H
#define NP_CURL_DL_H

#include <stddef.h>

#include <curl/curl.h>

#define NP_CURL_FUNCS(X)                                                                           \
	X(curl_global_init)                                                                        \
	X(curl_easy_init)                                                                          \
	X(curl_easy_cleanup)                                                                       \
	X(curl_easy_setopt)                                                                        \
	X(curl_easy_getinfo)                                                                       \
	X(curl_easy_strerror)                                                                      \
	X(curl_easy_escape)                                                                        \
	X(curl_free)                                                                               \
	X(curl_getdate)                                                                            \
	X(curl_slist_append)                                                                       \
	X(curl_slist_free_all)                                                                     \
	X(curl_multi_init)                                                                         \
	X(curl_multi_cleanup)                                                                      \
	X(curl_multi_setopt)                                                                       \
	X(curl_multi_assign)                                                                       \
	X(curl_multi_add_handle)                                                                   \
	X(curl_multi_remove_handle)                                                                \
	X(curl_multi_socket_action)                                                                \
	X(curl_multi_info_read)

#include "lib/core/dynlib.h"

/* The libcurl functions, filled by curl_dl_load(). */
struct np_curl_api {
	NP_CURL_FUNCS(DYNLIB_FIELD)
};
extern struct np_curl_api np_curl;

/*
 * Load libcurl.so.4 and call curl_global_init once; later calls return 0
 * at once. -1 with err "<who> needs libcurl (Debian package libcurl4): ..."
 * when the library is missing or lacks a function (who: "driver
 * openstack"; NULL: "nodepoold").
 */
int curl_dl_load(const char *who, char *err, size_t errlen);

#ifndef NP_CURL_DL_LOADER
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init	 (*np_curl.curl_global_init)
#define curl_easy_init		 (*np_curl.curl_easy_init)
#define curl_easy_cleanup	 (*np_curl.curl_easy_cleanup)
#define curl_easy_setopt	 (*np_curl.curl_easy_setopt)
#define curl_easy_getinfo	 (*np_curl.curl_easy_getinfo)
#define curl_easy_strerror	 (*np_curl.curl_easy_strerror)
#define curl_easy_escape	 (*np_curl.curl_easy_escape)
#define curl_free		 (*np_curl.curl_free)
#define curl_getdate		 (*np_curl.curl_getdate)
#define curl_slist_append	 (*np_curl.curl_slist_append)
#define curl_slist_free_all	 (*np_curl.curl_slist_free_all)
#define curl_multi_init		 (*np_curl.curl_multi_init)
#define curl_multi_cleanup	 (*np_curl.curl_multi_cleanup)
#define curl_multi_setopt	 (*np_curl.curl_multi_setopt)
#define curl_multi_assign	 (*np_curl.curl_multi_assign)
#define curl_multi_add_handle	 (*np_curl.curl_multi_add_handle)
#define curl_multi_remove_handle (*np_curl.curl_multi_remove_handle)
#define curl_multi_socket_action (*np_curl.curl_multi_socket_action)
#define curl_multi_info_read	 (*np_curl.curl_multi_info_read)
#endif

#endif
