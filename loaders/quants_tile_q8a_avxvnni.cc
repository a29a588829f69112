// The AVX-VNNI set's Q8A tile kernels (quants_tile.h): quants_tile_q8a_avx2.cc compiled again under
// target("avx2,fma,f16c,avxvnni"), each u8 x s8 dot one vpdpbusd (see DotU8S8 there for why the
// sums, and so the floats, are bit for bit the AVX2 set's). AvxVnni...Kernels() is null where
// the compiler has no AVX-VNNI (GCC < 11, clang < 12) or off x86-64; kernel_set.cc checks the
// CPU (CPUID leaf 7 subleaf 1, EAX bit 4) before the set is used.
#define PINFER_AVXVNNI 1
#if (defined(__clang__) && __clang_major__ >= 12) || \
    (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11)
#define PINFER_AVXVNNI_COMPILES 1
#else
#define PINFER_AVXVNNI_COMPILES 0
#endif
#include "loaders/quants_tile_q8a_avx2.cc"  // NOLINT(bugprone-suspicious-include): one source, two sets
