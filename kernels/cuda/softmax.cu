// Row-wise softmax, numerically stable, one warp per row; the fused softmax + cross-entropy;
// the accuracy count.
//
// Who computes what: a block of kRowsPerBlock warps; warp w of block b owns row
// n = b·kRowsPerBlock + w, and lane l of it handles columns l, l + 32, l + 64, ... So a row
// of any length is read coalesced (32 neighbouring columns at a time), and the row's max and
// sum are warp reductions (reduce.cuh: butterfly shuffles leave the result in every lane,
// no shared memory, no __syncthreads). A warp whose row is past N skips it as a whole, so
// its shuffles are never divergent.
//
// Stability: every row is shifted by its maximum m first, softmax(z) = exp(z - m) / Σ exp(z - m),
// so exp never overflows and the largest term is exactly 1. The cross-entropy uses the same
// shift: loss = log Σ exp(z_j - m) - (z_label - m). Accurate expf/logf, not __expf: the
// result should match the reference to rounding.
#include <cmath>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kRowsPerBlock = 4;  // 4 warps = 128 threads per block

__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
}

// The maximum of row z (classes), in every lane of the warp.
__device__ __forceinline__ float row_max(const float* z, int64_t classes, int lane) {
  float m = -INFINITY;
  for (int64_t j = lane; j < classes; j += 32) m = fmaxf(m, z[j]);
  return warp_all_max(m);
}

__global__ void softmax_forward_kernel(const float* x /* (N, classes) */,
                                       float* y /* (N, classes) */, int64_t N, int64_t classes) {
  const int64_t n = warp_row();
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (n >= N) return;  // the whole warp leaves together; no barrier follows
  const float* xr = x + n * classes;
  float* yr = y + n * classes;
  const float m = row_max(xr, classes, lane);
  float sum = 0.0f;
  for (int64_t j = lane; j < classes; j += 32) {
    yr[j] = expf(xr[j] - m);  // each lane reads then writes only its own columns: y may be x
    sum += yr[j];
  }
  sum = warp_all_sum(sum);
  for (int64_t j = lane; j < classes; j += 32) yr[j] /= sum;
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx /* (N, classes) */,
                                        int64_t N, int64_t classes) {
  const int64_t n = warp_row();
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (n >= N) return;
  const int64_t row = n * classes;
  float dot = 0.0f;
  for (int64_t j = lane; j < classes; j += 32) dot += dy[row + j] * y[row + j];
  dot = warp_all_sum(dot);
  for (int64_t j = lane; j < classes; j += 32) dx[row + j] = y[row + j] * (dy[row + j] - dot);
}

// Row n's loss into row_loss[n] and its gradient into dlogits. A bad label: NaN for both.
__global__ void cross_entropy_rows_kernel(const float* logits /* (N, classes) */,
                                          const int32_t* labels /* (N) */,
                                          float* dlogits /* (N, classes) */,
                                          float* row_loss /* (N) */, int64_t N, int64_t classes,
                                          float normaliser) {
  const int64_t n = warp_row();
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (n >= N) return;
  const float* z = logits + n * classes;
  float* d = dlogits + n * classes;
  const int32_t label = labels[n];
  const bool good = label >= 0 && label < classes;
  const float m = row_max(z, classes, lane);
  // Every lane reads the label's logit before any lane overwrites the row (dlogits may alias
  // logits). A shuffle orders no memory between lanes: __syncwarp does (CUDA Programming Guide,
  // __syncwarp: "memory accesses made by these threads prior to __syncwarp() are visible to
  // threads in the group after").
  const float label_logit = good ? z[label] : NAN;
  __syncwarp();
  float sum = 0.0f;
  for (int64_t j = lane; j < classes; j += 32) sum += expf(z[j] - m);
  sum = warp_all_sum(sum);
  for (int64_t j = lane; j < classes; j += 32)
    d[j] = good ? (expf(z[j] - m) / sum - (j == label ? 1.0f : 0.0f)) / normaliser : NAN;
  if (lane == 0) row_loss[n] = logf(sum) - (label_logit - m);
}

constexpr int kSumBlock = 256;

// One block: result->loss = Σ row_loss / normaliser; result->bad_row = the first bad label.
__global__ void cross_entropy_total_kernel(const float* row_loss /* (N) */,
                                           const int32_t* labels /* (N) */, int64_t N,
                                           int64_t classes, float normaliser,
                                           CrossEntropyResult* result) {
  __shared__ float scratch[32];
  __shared__ int first_bad;
  if (threadIdx.x == 0) first_bad = INT32_MAX;
  __syncthreads();
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    acc += row_loss[i];
    if (labels[i] < 0 || labels[i] >= classes) atomicMin(&first_bad, static_cast<int>(i));
  }
  acc = block_sum(acc, scratch);  // its barriers also publish first_bad
  if (threadIdx.x == 0) {
    result->loss = acc / normaliser;
    result->bad_row = first_bad == INT32_MAX ? -1 : first_bad;
    result->bad_label = first_bad == INT32_MAX ? 0 : labels[first_bad];
  }
}

// One block: each thread takes rows threadIdx.x, + blockDim.x, ...: the first largest logit
// (strict >) compared with the label, counted in a register, then summed in shared memory.
// Every thread returns the block's count. A row is classes reads: even a large batch is a
// small kernel.
__device__ unsigned long long block_correct(const float* logits /* (N, classes) */,
                                            const int32_t* labels /* (N) */, int64_t N,
                                            int64_t classes) {
  __shared__ unsigned long long block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const float* z = logits + n * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (z[j] > z[best]) best = j;
    if (best == labels[n]) ++mine;
  }
  if (mine > 0) atomicAdd(&block_count, mine);
  __syncthreads();
  return block_count;
}

// Thread 0 writes the count. One launch, no zeroing launch before it (the count is written,
// not accumulated).
__global__ void accuracy_kernel(const float* logits /* (N, classes) */,
                                const int32_t* labels /* (N) */, int64_t N, int64_t classes,
                                unsigned long long* correct) {
  const unsigned long long count = block_correct(logits, labels, N, classes);
  if (threadIdx.x == 0) *correct = count;
}

// The accuracy count, written with the loss's result into one row of a step's tally: the
// whole of what the host learns of a micro-batch, in the launch the count needed anyway. The
// label check of the step's verdict (kernels/step_verdict.h) joins the same launch: with a
// `word`, a bad label also writes `failed` into it.
__global__ void tally_kernel(const float* logits /* (N, classes) */,
                             const int32_t* labels /* (N) */, int64_t N, int64_t classes,
                             const CrossEntropyResult* result, MicroBatchTally* row,
                             int32_t* word /* (1) or null */, int32_t failed) {
  const unsigned long long count = block_correct(logits, labels, N, classes);
  if (threadIdx.x != 0) return;
  *row = MicroBatchTally{result->loss, static_cast<int32_t>(count), result->bad_row,
                         result->bad_label};
  if (word != nullptr && result->bad_row >= 0) atomicMax(word, failed);
}

namespace {
void check_rows(const char* op, int64_t N, int64_t classes) {
  BRIGADE_CHECK(N >= 0 && classes >= 1 && N <= INT32_MAX,
                op << ": invalid shape (N, classes) = (" << N << ", " << classes << ")");
}
unsigned row_blocks(int64_t N) { return static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock); }
}  // namespace

void softmax_forward(const float* x, float* y, int64_t N, int64_t classes, const Stream& stream) {
  check_rows("softmax_forward", N, classes);
  if (N == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(softmax_forward_kernel, row_blocks(N), kRowsPerBlock * 32, 0, stream,
                 BRIGADE_EXTENT(x, N * classes), BRIGADE_EXTENT(y, N * classes), N, classes);
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t N, int64_t classes,
                      const Stream& stream) {
  check_rows("softmax_backward", N, classes);
  if (N == 0) return;
  BRIGADE_LAUNCH(softmax_backward_kernel, row_blocks(N), kRowsPerBlock * 32, 0, stream,
                 BRIGADE_EXTENT(y, N * classes), BRIGADE_EXTENT(dy, N * classes),
                 BRIGADE_EXTENT(dx, N * classes), N, classes);
}

int64_t softmax_cross_entropy_workspace_floats(int64_t N) { return N; }

void softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t N,
                           int64_t classes, float normaliser, float* workspace,
                           CrossEntropyResult* result, const Stream& stream) {
  check_rows("softmax_cross_entropy", N, classes);
  BRIGADE_CHECK(N == 0 || workspace != nullptr,
                "softmax_cross_entropy: workspace is null; pass " << N << " floats");
  BRIGADE_CHECK(normaliser > 0.0f, "softmax_cross_entropy: normaliser " << normaliser
                                                                        << " must be positive");
  if (N > 0)
    BRIGADE_LAUNCH(cross_entropy_rows_kernel, row_blocks(N), kRowsPerBlock * 32, 0, stream,
                   BRIGADE_EXTENT(logits, N * classes), BRIGADE_EXTENT(labels, N),
                   BRIGADE_EXTENT(dlogits, N * classes), BRIGADE_EXTENT(workspace, N), N, classes,
                   normaliser);
  BRIGADE_LAUNCH(cross_entropy_total_kernel, 1, kSumBlock, 0, stream,
                 BRIGADE_EXTENT(workspace, N), BRIGADE_EXTENT(labels, N), N, classes, normaliser,
                 BRIGADE_EXTENT(result, 1));
}

void accuracy_count(const float* logits, const int32_t* labels, int64_t N, int64_t classes,
                    unsigned long long* correct, const Stream& stream) {
  check_rows("accuracy_count", N, classes);
  BRIGADE_LAUNCH(accuracy_kernel, 1, kSumBlock, 0, stream, BRIGADE_EXTENT(logits, N * classes),
                 BRIGADE_EXTENT(labels, N), N, classes, BRIGADE_EXTENT(correct, 1));
}

void tally_cross_entropy(const float* logits, const int32_t* labels, int64_t N, int64_t classes,
                         const CrossEntropyResult* result, MicroBatchTally* row,
                         int32_t* word, int32_t failed, const Stream& stream) {
  check_rows("tally_cross_entropy", N, classes);
  BRIGADE_LAUNCH(tally_kernel, 1, kSumBlock, 0, stream, BRIGADE_EXTENT(logits, N * classes),
                 BRIGADE_EXTENT(labels, N), N, classes, BRIGADE_EXTENT(result, 1),
                 BRIGADE_EXTENT(row, 1), BRIGADE_EXTENT(word, 1), failed);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE
