/*
 * libcurl loaded on first use. See curl_dl.h.
 */
#define NP_CURL_DL_LOADER
#include "lib/net/curl_dl.h"

#include <pthread.h>
#include <stdio.h>

struct np_curl_api np_curl;

#define NP_CURL_SYM(f) DYNLIB_SYM(np_curl, f)
static const struct dynlib_sym curl_syms[] = {NP_CURL_FUNCS(NP_CURL_SYM)};
static struct dynlib curl_lib = DYNLIB_INIT("libcurl.so.4", "libcurl", "libcurl4", curl_syms);

static pthread_mutex_t curl_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int curl_inited;

int
curl_dl_load(const char *who, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&curl_init_mu);
	if (curl_inited)
		goto out;
	if (dynlib_load(&curl_lib, who, err, errlen) != 0) {
		rc = -1;
		goto out;
	}
	if (np_curl.curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s: libcurl initialisation failed",
				 who != NULL ? who : "nodepoold");
		rc = -1;
		goto out;
	}
	curl_inited = 1;
out:
	pthread_mutex_unlock(&curl_init_mu);
	return rc;
}
