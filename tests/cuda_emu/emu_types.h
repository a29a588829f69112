// Types of the CUDA runtime subset pagedinfer uses, for the host emulator (see emu_runtime.h):
// qualifiers, vector types, dim3, half and bfloat16, error codes, handles.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loaders/fp16.h"

#define __host__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct uint2 {
  unsigned int x, y;
};
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// Storage-only 16-bit floats, as the kernels use them (conversions below).
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) { return pinfer::Fp16ToFp32(h.bits); }
inline __half __float2half_rn(float f) { return {pinfer::Fp32ToFp16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __ushort_as_half(unsigned short b) { return {b}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline float __bfloat162float(__nv_bfloat16 h) { return pinfer::Bf16ToFp32(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {pinfer::Fp32ToBf16(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return {b}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }

// The runtime's error codes (values as in CUDA's driver_types.h).
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorIllegalAddress = 700,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorUnknown = 999
};
typedef cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;

// cudaLaunchKernelEx's configuration (the emulator runs every launch the same way; the
// programmatic-serialization attribute changes nothing when operations run in order).
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 6 };
union cudaLaunchAttributeValue {
  int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  struct EmuStream* stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int multiProcessorCount;
  int major, minor;
  size_t sharedMemPerBlock;
  int maxThreadsPerBlock;
  int warpSize;
};

// Opaque handles; the emulator owns what they point at.
struct EmuStream;
struct EmuGraph;
struct EmuGraphExec;
struct EmuEvent;
typedef EmuStream* cudaStream_t;
typedef EmuGraph* cudaGraph_t;
typedef EmuGraphExec* cudaGraphExec_t;
typedef EmuEvent* cudaEvent_t;
