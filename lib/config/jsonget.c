#include "lib/config/jsonget.h"

#include <stdlib.h>

const char *
np_json_str(const json_t *o, const char *key, const char *def)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

double
np_json_num(const json_t *o, const char *key, double def)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_number(v))
		return json_number_value(v);
	if (json_is_string(v)) {
		char *end;
		double d = strtod(json_string_value(v), &end);
		if (end != json_string_value(v) && *end == '\0')
			return d;
	}
	return def;
}

int
np_json_bool(const json_t *o, const char *key, int def)
{
	const json_t *v = json_object_get(o, key);

	return json_is_boolean(v) ? json_is_true(v) : def;
}
