/* libFuzzer target: np_image_build_decode/encode round trip (see fuzz_roundtrip.h). */
#define REC    np_image_build
#define DECODE np_image_build_decode
#define ENCODE np_image_build_encode
#define FREE   np_image_build_free
#define ID     "3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6e"
#include "tests/fuzz/fuzz_roundtrip.h"
