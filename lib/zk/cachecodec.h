/*
 * ZooKeeper cache codecs (zk.h zk_cache_set_codec) for the records every
 * process caches the same way: node requests and components. The launcher,
 * nodepool-web and their tests share them, so a record is judged alike
 * everywhere. They sit in lib/zk, not protocol/, because they log: the
 * decoders they wrap (model.h) return their errors.
 *
 * Decoding: NULL for an empty znode (no record yet) or a malformed one
 * (logged as a warning with the znode name: the cache keeps the entry
 * without an object and nothing is deleted); a field of an unexpected type
 * is kept verbatim and logged once per decode (model.h). The result is
 * owned by the cache and freed with the matching free function.
 */
#ifndef NP_CACHECODEC_H
#define NP_CACHECODEC_H

void *np_request_cache_decode(const char *name, const char *data, int len);
void np_request_cache_free(void *request);
void *np_component_cache_decode(const char *name, const char *data, int len);
void np_component_cache_free(void *component);

#endif
