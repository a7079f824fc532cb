/* libFuzzer target: np_image_upload_decode/encode round trip (see fuzz_roundtrip.h). */
#define REC    np_image_upload
#define DECODE np_image_upload_decode
#define ENCODE np_image_upload_encode
#define FREE   np_image_upload_free
#define ID     "0000000001"
#include "tests/fuzz/fuzz_roundtrip.h"
