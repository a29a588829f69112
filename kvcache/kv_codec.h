// Encoding and decoding one KV row (one token's keys or values of one layer: n values) in a
// KV format (kv_dtype.h). Block formats (q8_0, q4_0) are GGUF's blocks, encoded by the
// loaders' reference quantizers (QuantizeRow); fp8 is e4m3 with its float32 row scale first.
#pragma once

#include <cstdint>

#include "kvcache/kv_dtype.h"

namespace pinfer {

// src[n] -> dst (KvRowBytes(d, n) bytes). n must suit the format (KvRowBytes says so); dst
// needs the alignment of the format's element or block (2 bytes for f16, bf16, q8_0, q4_0).
void KvEncodeRow(KvDtype d, const float* src, uint8_t* dst, int64_t n);
// Values [begin, begin + count) of an encoded row of n values -> dst[count].
void KvDecodeRange(KvDtype d, const uint8_t* row, int64_t n, int64_t begin, int64_t count,
                   float* dst);

}  // namespace pinfer
