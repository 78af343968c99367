// SGD (momentum, dampening, Nesterov, weight decay) and Adam/AdamW, one parameter per thread
// of a grid-stride loop, per tensor or for a whole table of tensors at once. The formulas and the order of operations are
// kernels/reference/optimizers.h's (PyTorch's), line for line:
//
//   SGD:   g' = g + wd·p;  buf = first ? g' : μ·buf + keep·g'   (keep = 1 - dampening)
//          d = nesterov ? g' + μ·buf : buf  (d = g' without momentum);  p -= lr·d
//   Adam:  g' = g + wd·p (AdamW instead: p *= decay = 1 - lr·wd, g' = g)
//          m += (1-β1)·(g' - m)   (lerp);   v = β2·v + (1-β2)·g'²
//          p -= step_size · m / (sqrt(v) / bc2_sqrt + eps)
//
// The hyper-parameters arrive in double (as a user writes them); the scalars that are the same
// for all elements are derived once on the host (kernels/optimizer_scalars.h): the kernels see
// only floats. The per-tensor kernels take them by value; the multi-tensor kernels read them
// from device memory, so that a launch captured in a CUDA graph replays with each step's.
//
// The multi-tensor forms (*_all) update every tensor of a table in one launch (a stage's
// parameters, or its gradients to zero), element by element with the same code. The updates
// read a step's verdict first (kernels/step_verdict.h): a failed step changes nothing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/optimizer_scalars.h"
#include "kernels/step_verdict.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// One element's update: the same code for the per-tensor and the multi-tensor kernels, so
// their bits are the same.
__device__ __forceinline__ void sgd_element(float* p, const float* g, float* buf, int64_t i,
                                            const SgdScalars& a) {
  float d = g[i] + a.wd * p[i];
  if (a.momentum) {
    buf[i] = a.first_step ? d : a.mu * buf[i] + a.keep * d;
    d = a.nesterov ? d + a.mu * buf[i] : buf[i];
  }
  p[i] -= a.lr * d;
}

__device__ __forceinline__ void adam_element(float* p, const float* g, float* m, float* v,
                                             int64_t i, const AdamScalars& a) {
  float gi = g[i];
  if (a.decoupled) p[i] *= a.decay;
  else gi += a.wd * p[i];
  m[i] += a.w1 * (gi - m[i]);
  v[i] = a.b2 * v[i] + a.w2 * gi * gi;
  p[i] -= a.step_size * m[i] / (sqrtf(v[i]) / a.bc2_sqrt + a.eps);
}

__global__ void sgd_kernel(float* p /* (n) */, const float* g /* (n) */, float* buf /* (n) */,
                           int64_t n, SgdScalars a) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) sgd_element(p, g, buf, i, a);
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v /* (n) each */,
                            int64_t n, AdamScalars a) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) adam_element(p, g, m, v, i, a);
}

// True when a word of the step's verdict (words[0, n), n = 0 without one) holds a failure
// (kernels/step_verdict.h).
__device__ __forceinline__ bool step_failed(const int32_t* words, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (words[i] != kStepOk) return true;
  return false;
}

// The multi-tensor kernels: a 2-D grid, row y of blocks on slot y of the table, each row a
// grid-stride loop over its tensor as the per-tensor kernel's grid is (blocks beyond a small
// tensor's end do nothing). One launch whatever the number of tensors.
__global__ void sgd_all_kernel(const TensorSlot* table /* (tensors) */,
                               const SgdScalars* scalars /* (1) */,
                               const int32_t* verdict /* (words) */, int64_t words) {
  if (step_failed(verdict, words)) return;
  const TensorSlot t = table[blockIdx.y];
  const SgdScalars a = *scalars;
  for (int64_t i = grid_first(); i < t.n; i += grid_stride()) sgd_element(t.p, t.g, t.s1, i, a);
}

__global__ void adam_all_kernel(const TensorSlot* table /* (tensors) */,
                                const AdamScalars* scalars /* (1) */,
                                const int32_t* verdict /* (words) */, int64_t words) {
  if (step_failed(verdict, words)) return;
  const TensorSlot t = table[blockIdx.y];
  const AdamScalars a = *scalars;
  for (int64_t i = grid_first(); i < t.n; i += grid_stride())
    adam_element(t.p, t.g, t.s1, t.s2, i, a);
}

__global__ void fill_all_kernel(const TensorSlot* table /* (tensors) */, float value) {
  const TensorSlot t = table[blockIdx.y];
  for (int64_t i = grid_first(); i < t.n; i += grid_stride()) t.p[i] = value;
}

namespace {

// The grid of a multi-tensor launch: as many blocks across as the largest tensor's
// per-tensor launch has, one row per slot; 0 blocks across when every slot is empty.
// Declares every slot's accesses for an emulated GPU (BRIGADE_INDIRECT, kernels/emu/emu.h).
dim3 grid_of_all(const char* launcher, const std::vector<TensorSlot>& slots, bool reads_g,
                 bool s1_used, bool s2_used) {
  BRIGADE_CHECK(slots.size() <= 65535, launcher << ": " << slots.size()
                                                << " tensors, more than a grid has rows (65535)");
  int64_t longest = 0;
  for (const TensorSlot& t : slots) {
    BRIGADE_CHECK(t.n >= 0, launcher << ": a tensor of " << t.n << " elements");
    longest = std::max(longest, t.n);
    if (t.n == 0) continue;
    BRIGADE_INDIRECT(t.p, t.n, true);
    if (reads_g) BRIGADE_INDIRECT(t.g, t.n, false);
    if (s1_used) BRIGADE_INDIRECT(t.s1, t.n, true);
    if (s2_used) BRIGADE_INDIRECT(t.s2, t.n, true);
  }
  return dim3(longest == 0 ? 0u : elementwise_blocks(longest), static_cast<unsigned>(slots.size()));
}

}  // namespace

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, const Stream& stream) {
  check_sgd_params(h);
  BRIGADE_CHECK(n >= 0, "sgd_update: n = " << n << " is negative");
  BRIGADE_CHECK(h.momentum == 0.0 || buf != nullptr, "sgd_update: momentum " << h.momentum
                                                         << " needs a momentum buffer, got null");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(sgd_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(p, n), BRIGADE_EXTENT(g, n), BRIGADE_EXTENT(buf, n), n,
                 sgd_scalars(h, first_step));
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamParams& h,
                 int64_t step, const Stream& stream) {
  check_adam_params(h, step);
  BRIGADE_CHECK(n >= 0, "adam_update: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(adam_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(p, n), BRIGADE_EXTENT(g, n), BRIGADE_EXTENT(m, n),
                 BRIGADE_EXTENT(v, n), n, adam_scalars(h, step));
}

void sgd_update_all(const TensorSlot* table, const std::vector<TensorSlot>& slots,
                    const SgdParams& h, const SgdScalars* scalars, const int32_t* verdict,
                    int64_t verdict_words, const Stream& stream) {
  check_sgd_params(h);
  BRIGADE_CHECK(scalars != nullptr, "sgd_update_all: no scalars in device memory");
  BRIGADE_CHECK(verdict_words >= 0 && (verdict != nullptr || verdict_words == 0),
                "sgd_update_all: a verdict of " << verdict_words << " words at " << verdict);
  for (const TensorSlot& t : slots)
    BRIGADE_CHECK(h.momentum == 0.0 || t.s1 != nullptr || t.n == 0,
                  "sgd_update_all: momentum " << h.momentum << " needs a momentum buffer per tensor");
  const dim3 grid = grid_of_all("sgd_update_all", slots, true, h.momentum != 0.0, false);
  if (grid.x == 0) return;
  BRIGADE_LAUNCH(sgd_all_kernel, grid, kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(table, slots.size()), BRIGADE_EXTENT(scalars, 1),
                 BRIGADE_EXTENT(verdict, verdict_words), verdict_words);
}

void adam_update_all(const TensorSlot* table, const std::vector<TensorSlot>& slots,
                     const AdamScalars* scalars, const int32_t* verdict, int64_t verdict_words,
                     const Stream& stream) {
  BRIGADE_CHECK(scalars != nullptr, "adam_update_all: no scalars in device memory");
  BRIGADE_CHECK(verdict_words >= 0 && (verdict != nullptr || verdict_words == 0),
                "adam_update_all: a verdict of " << verdict_words << " words at " << verdict);
  const dim3 grid = grid_of_all("adam_update_all", slots, true, true, true);
  if (grid.x == 0) return;
  BRIGADE_LAUNCH(adam_all_kernel, grid, kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(table, slots.size()), BRIGADE_EXTENT(scalars, 1),
                 BRIGADE_EXTENT(verdict, verdict_words), verdict_words);
}

void fill_all(const TensorSlot* table, const std::vector<TensorSlot>& slots, float value,
              const Stream& stream) {
  const dim3 grid = grid_of_all("fill_all", slots, false, false, false);
  if (grid.x == 0) return;
  BRIGADE_LAUNCH(fill_all_kernel, grid, kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(table, slots.size()), value);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE
