// The AVX-VNNI set of quants_packed.h's kernels: quants_packed_avx2.cc compiled again under
// target("avx2,fma,f16c,avxvnni"), each u8 x s8 dot one vpdpbusd (exact int32 block sums, so
// the floats are the AVX2 and scalar sets' bit for bit). Null where the compiler has no
// AVX-VNNI (GCC < 11, clang < 12) or off x86-64; kernel_set.cc checks the CPU.
#define PINFER_AVXVNNI 1
#if (defined(__clang__) && __clang_major__ >= 12) || \
    (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11)
#define PINFER_AVXVNNI_COMPILES 1
#else
#define PINFER_AVXVNNI_COMPILES 0
#endif
#include "loaders/quants_packed_avx2.cc"  // NOLINT(bugprone-suspicious-include)
