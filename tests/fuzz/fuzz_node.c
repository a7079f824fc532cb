/* libFuzzer target: np_node_decode/encode round trip (see fuzz_roundtrip.h). */
#define REC    np_node
#define DECODE np_node_decode
#define ENCODE np_node_encode
#define FREE   np_node_free
#define ID     "0000000001"
#include "tests/fuzz/fuzz_roundtrip.h"
