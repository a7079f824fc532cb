/*
 * libxml2 loaded on first use. See xml_dl.h.
 */
#define NP_XML_DL_LOADER
#include "lib/net/xml_dl.h"

struct np_xml_api np_xml;

#define NP_XML_SYM(f) DYNLIB_SYM(np_xml, f)
static const struct dynlib_sym xml_syms[] = {NP_XML_FUNCS(NP_XML_SYM)};
static struct dynlib xml_lib = DYNLIB_INIT("libxml2.so.2", "libxml2", "libxml2", xml_syms);

int
xml_dl_load(const char *who, char *err, size_t errlen)
{
	/* no xmlInitParser(): libxml2 initialises itself on first use */
	return dynlib_load(&xml_lib, who, err, errlen);
}
