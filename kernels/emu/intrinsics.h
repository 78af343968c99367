// CUDA's device functions that have a plain C++ meaning: atomics and math intrinsics.
//
// Atomics are real atomics (std::atomic_ref), because blocks of one grid may run on
// several OS threads at once. Relaxed order, as CUDA's atomicAdd & co. The value parameters
// are not deduced, so that atomicAdd(&unsigned_counter, 1) converts 1 as CUDA's overloads do.
//
// Math: the C library already provides expf, logf, sqrtf, fmaxf, fminf, fabsf, tanhf, powf,
// fmaf... under the same names, for both compilations. This file adds the CUDA-only ones.
// The fast intrinsics (__expf, __logf, __fdividef) are computed exactly here: a kernel that
// uses them must be tested with a tolerance that covers their GPU error (see the CUDA
// Programming Guide's table of intrinsic function errors), not the emulator's.
#pragma once

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

// ThreadSanitizer builds annotate __threadfence (below).
#if defined(__SANITIZE_THREAD__)
#define BRIGADE_EMU_FENCE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRIGADE_EMU_FENCE_TSAN 1
#endif
#endif
#if defined(BRIGADE_EMU_FENCE_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace brigade::emu {

// ---- atomics ----------------------------------------------------------------------------------

template <class T>
concept AtomicScalar = std::is_same_v<T, int> || std::is_same_v<T, unsigned int> ||
                       std::is_same_v<T, unsigned long long> || std::is_same_v<T, float> ||
                       std::is_same_v<T, double>;

template <AtomicScalar T>
T atomicAdd(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}

template <AtomicScalar T>
  requires std::is_integral_v<T>
T atomicSub(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_sub(value, std::memory_order_relaxed);
}

template <AtomicScalar T>
T atomicExch(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).exchange(value, std::memory_order_relaxed);
}

template <AtomicScalar T>
  requires std::is_integral_v<T>
T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // the old value, whether or not it was replaced
}

template <AtomicScalar T>
  requires std::is_integral_v<T>
T atomicMax(T* address, std::type_identity_t<T> value) {
  std::atomic_ref<T> a(*address);
  T old = a.load(std::memory_order_relaxed);
  while (old < value && !a.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}

template <AtomicScalar T>
  requires std::is_integral_v<T>
T atomicMin(T* address, std::type_identity_t<T> value) {
  std::atomic_ref<T> a(*address);
  T old = a.load(std::memory_order_relaxed);
  while (old > value && !a.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}

// A fence of the whole device (CUDA's fence.sc.gpu): a sequentially consistent fence.
// ThreadSanitizer does not see standalone fences, so under it each fence also releases into,
// then acquires from, one sync object: every fence is ordered after every earlier one, which
// includes what CUDA's fences promise with an atomic between them (a block's writes, its
// fence, its ticket; the last ticket, that block's fence, its reads: gemm_tiled's split-K).
// (The fence itself stays: GCC's -Wtsan, which says TSan does not model it, is silenced
// here, where the annotations do.)
#if defined(BRIGADE_EMU_FENCE_TSAN)
inline char tsan_fence_sync;  // the fences' sync object: its address only
inline void __threadfence() {
  __tsan_release(&tsan_fence_sync);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  __tsan_acquire(&tsan_fence_sync);
}
#else
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif

// ---- math -------------------------------------------------------------------------------------

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// A float's bits and back, as CUDA's reinterpreting intrinsics (no conversion).
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __uint_as_float(unsigned int u) { return std::bit_cast<float>(u); }
template <class T>
T __ldg(const T* p) {
  return *p;  // the read-only cache is a performance hint
}
// A load that bypasses L1 (ld.global.cg), for memory other blocks wrote during the launch: an
// emulated GPU has no L1 to bypass.
template <class T>
T __ldcg(const T* p) {
  return *p;
}

// CUDA's device code has min/max overloads for every pair of arithmetic types, with the
// usual arithmetic conversions (min(int, unsigned) is unsigned).
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return static_cast<T>(b) < static_cast<T>(a) ? static_cast<T>(b) : static_cast<T>(a);
}
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(b) : static_cast<T>(a);
}

}  // namespace brigade::emu
