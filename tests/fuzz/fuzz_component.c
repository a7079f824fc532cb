/* libFuzzer target: np_component_decode/encode round trip (see fuzz_roundtrip.h). */
#define REC    np_component
#define DECODE np_component_decode
#define ENCODE np_component_encode
#define FREE   np_component_free
#define ID     "nl01.example.com0000000001"
#include "tests/fuzz/fuzz_roundtrip.h"
