// Included by an x86 kernel file just before its vector code (no include guard: one use per
// file): every function defined after it, up to loaders/x86_target_pop.h, is compiled for
// AVX2 + FMA + F16C, and for AVX-VNNI too where the file defines PINFER_AVXVNNI to 1
// (quants_*_avxvnni.cc), whatever the build's -march. The code before the push and after the
// pop stays baseline code, so a CPU without those instructions can include and call it (the
// kernel tables' accessors; the caller checks cpuid before calling a kernel).
#ifndef PINFER_AVXVNNI
#define PINFER_AVXVNNI 0
#endif
#if PINFER_AVXVNNI && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#elif PINFER_AVXVNNI && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
