/* libFuzzer target: np_request_decode/encode round trip (see fuzz_roundtrip.h). */
#define REC    np_request
#define DECODE np_request_decode
#define ENCODE np_request_encode
#define FREE   np_request_free
#define ID     "100-0000000001"
#include "tests/fuzz/fuzz_roundtrip.h"
