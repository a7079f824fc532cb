/*
 * libxml2, loaded at run time (lib/core/dynlib.h), for the XML cloud APIs
 * (AWS EC2 and S3 answers): include this instead of <libxml/parser.h>. The
 * binaries do not link libxml2, so a worker whose provider needs no XML
 * never maps it nor what it pulls in (icu, libstdc++, lzma).
 *
 * As curl_dl.h: every libxml2 function (and the xmlFree hook, a variable)
 * used is a field of np_xml typed by libxml2's own headers, and the names
 * below are macros for those fields. xml_dl_load() must have succeeded
 * before any of them is used.
 */
#ifndef NP_XML_DL_H
#define NP_XML_DL_H

#include <stddef.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#define NP_XML_FUNCS(X)                                                                            \
	X(xmlReadMemory)                                                                           \
	X(xmlDocGetRootElement)                                                                    \
	X(xmlFreeDoc)                                                                              \
	X(xmlStrcmp)                                                                               \
	X(xmlNodeGetContent)                                                                       \
	X(xmlFree)

#include "lib/core/dynlib.h"

/* The libxml2 functions, filled by xml_dl_load(); xmlFree is the address
 * of libxml2's xmlFree variable (the deallocator it was built with). */
struct np_xml_api {
	NP_XML_FUNCS(DYNLIB_FIELD)
};
extern struct np_xml_api np_xml;

/*
 * Load libxml2.so.2 (once; later calls return 0 at once). -1 with err
 * "<who> needs libxml2 (Debian package libxml2): ..." when it is missing
 * (who: "driver aws"; NULL: "nodepoold").
 */
int xml_dl_load(const char *who, char *err, size_t errlen);

#ifndef NP_XML_DL_LOADER
#define xmlReadMemory	     (*np_xml.xmlReadMemory)
#define xmlDocGetRootElement (*np_xml.xmlDocGetRootElement)
#define xmlFreeDoc	     (*np_xml.xmlFreeDoc)
#define xmlStrcmp	     (*np_xml.xmlStrcmp)
#define xmlNodeGetContent    (*np_xml.xmlNodeGetContent)
#define xmlFree		     (*np_xml.xmlFree)
#endif

#endif
