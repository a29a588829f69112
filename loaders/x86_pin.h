// PinRegs: keeps an array of vector values in registers at one point of an x86 kernel (an empty
// asm statement that takes each value in and out of an SSE/AVX register, "+x"). Unpinned, GCC 12
// computes a kernel's many vpmaddubsw products ahead of the adds that consume them and spills
// them to the stack (quants_packed_avx2.cc, quants_packed_k_simd.h measure it). No instruction
// is emitted; only the compiler's schedule changes.
//
// Include only in x86 kernel files, below loaders/x86_target_push.h (in an anonymous namespace,
// so each file, compiled for its own target, has its own copy). Values of at most 256 bits: "x"
// names xmm0-15 / ymm0-15 only.
#pragma once

namespace pinfer::quants {
namespace {

template <typename T, int N>
inline void PinRegs(T (&v)[N]) {
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) asm("" : "+x"(v[i]));
}

}  // namespace
}  // namespace pinfer::quants
