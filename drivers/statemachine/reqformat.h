/*
 * Templates of request attributes, as upstream's dynamic label settings
 * (OpenStack dynamic-instance-properties, AWS and Azure dynamic-tags,
 * Kubernetes dynamic-labels) fill them: Python's
 * str.format(request=NodeRequest.getSafeAttributes()).
 */
#ifndef NP_SM_REQFORMAT_H
#define NP_SM_REQFORMAT_H

#include <stddef.h>

#include "protocol/model.h"

/*
 * tmpl with each {request.<attr>} replaced by the request's attribute as
 * Python's str() writes it: id, requestor, event_id, tenant_name (None when
 * unset), relative_priority (an integer), created_time (a float, Python's
 * shortest repr), labels (the node types: ['a', 'b']). "{{" and "}}" are
 * literal braces. Returns a malloc'd string; NULL with a one-line reason
 * in err[0..errlen) when tmpl is malformed, names anything else (format
 * specs and conversions included) or req is NULL: upstream logs that and
 * leaves the property out, and so should the caller.
 */
char *sm_request_format(const char *tmpl, const struct np_request *req, char *err, size_t errlen);

#endif
