// See bf16.h. By im2col: x and w are rounded to bf16 once per call; for a group of nb samples
// (as in conv2d.cpp), col = im2col of each rounded sample, side by side (CRS, nb·PQ), written
// in bf16 directly; dy of the group gathered into (K, nb·PQ) and rounded on the way. Then one
// gemm_bf16 per group. By the float path: each operand that is not bf16 values already rounded
// into a float buffer, then conv2d.h's function.
#include "kernels/cpu/conv2d/bf16.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/chunks.h"
#include "kernels/cpu/bf16_values.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/conv2d/grouping.h"
#include "kernels/cpu/conv2d/lowering.h"
#include "kernels/cpu/gemm_bf16.h"

namespace brigade::cpu {
namespace {

using conv2d_grouping::Grouping;
using conv2d_grouping::for_each_group;
using conv2d_grouping::group_samples;
using lowering::col2im_ld;

// Floats that hold n bf16 values (two to a float), rounded up to whole cache lines so that
// every buffer carved out of the workspace starts 64-byte aligned.
int64_t floats_for_bf16(int64_t n) { return ((n + 1) / 2 + 15) / 16 * 16; }
int64_t whole_lines(int64_t floats) { return (floats + 15) / 16 * 16; }

// How the work is cut (grouping.h), and where each buffer lies in the workspace:
// first w and x in bf16, then each worker's scratch, then backward-filter's partial sums.
struct Plan : Grouping {
  int64_t workers;  // threads taking part (chunks.h)
  int64_t w16;      // floats holding w in bf16 (K·CRS)
  int64_t x16;      // floats holding x in bf16 (N·CHW)
  int64_t col;      // floats of a worker's float output: forward's (K, nb·PQ), or
                    // backward-data's col (CRS, nb·PQ) before col2im
  int64_t col16;    // floats holding a group's col (CRS, nb·PQ) in bf16
  int64_t dy16;     // floats holding a group's dy (K, nb·PQ) in bf16
  int64_t partial;  // floats of one chunk's (K, CRS) filter-gradient partial
  int64_t worker_floats() const { return col + col16 + dy16; }
  int64_t shared() const { return w16 + x16; }
  int64_t total() const { return shared() + workers * worker_floats() + chunks * partial; }
};

Plan make_plan(const Conv2dShape& s, const ThreadPool& pool) {
  const int64_t PQ = s.P * s.Q, CRS = s.C * s.R * s.S;
  Plan p{};
  static_cast<Grouping&>(p) = group_samples(s);
  p.workers = chunk_workers(pool, std::max(p.groups, p.chunks));
  p.w16 = floats_for_bf16(s.K * CRS);
  p.x16 = floats_for_bf16(s.N * s.C * s.H * s.W);
  p.col = whole_lines(std::max(CRS, s.K) * p.nb * PQ);
  p.col16 = floats_for_bf16(CRS * p.nb * PQ);
  p.dy16 = floats_for_bf16(s.K * p.nb * PQ);
  p.partial = whole_lines(s.K * CRS);
  return p;
}

// Carves the plan's buffers out of the workspace (or an owned one).
class Buffers {
 public:
  Buffers(const Plan& plan, float* given) : plan_(plan) {
    if (!given) {
      owned_.resize(static_cast<size_t>(plan.total()));
      given = owned_.data();
    }
    base_ = given;
  }
  bf16* w16() const { return as_bf16(base_); }
  bf16* x16() const { return as_bf16(base_ + plan_.w16); }
  float* col(int64_t worker) const { return worker_base(worker); }
  bf16* col16(int64_t worker) const { return as_bf16(worker_base(worker) + plan_.col); }
  bf16* dy16(int64_t worker) const {
    return as_bf16(worker_base(worker) + plan_.col + plan_.col16);
  }
  float* partials() const { return base_ + plan_.shared() + plan_.workers * plan_.worker_floats(); }

 private:
  // The workspace is raw device memory (an allocator block), typed by its use here.
  static bf16* as_bf16(float* p) { return reinterpret_cast<bf16*>(p); }
  float* worker_base(int64_t worker) const {
    return base_ + plan_.shared() + worker * plan_.worker_floats();
  }
  Plan plan_;
  std::vector<float> owned_;
  float* base_ = nullptr;
};

// src (n floats) rounded into dst, split over the pool (bf16_operands.h).
const bf16* round_into(const float* src, bf16* dst, int64_t n, ThreadPool& pool) {
  float_to_bf16(pool, src, dst, n);
  return dst;
}

// Samples [n0, n0 + nbk) of the rounded x lowered into col16 (CRS, nbk·PQ).
const bf16* lower_group_bf16(const bf16* x16, bf16* col16, int64_t n0, int64_t nbk,
                             const Conv2dShape& s) {
  const int64_t PQ = s.P * s.Q, CHW = s.C * s.H * s.W, cols = nbk * PQ;
  for (int64_t j = 0; j < nbk; ++j)
    lowering::im2col_ld_bf16(x16 + (n0 + j) * CHW, col16 + j * PQ, cols, s);
  return col16;
}

// dy of samples [n0, n0 + nbk) gathered into (K, nbk·PQ), rounded on the way.
const bf16* gather_dy_bf16(const float* dy, bf16* dy16, int64_t n0, int64_t nbk,
                           const Conv2dShape& s) {
  const int64_t PQ = s.P * s.Q, cols = nbk * PQ;
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t j = 0; j < nbk; ++j)
      float_to_bf16(dy + ((n0 + j) * s.K + k) * PQ, dy16 + k * cols + j * PQ, PQ);
  return dy16;
}

// The passes the float path computes otherwise than by im2col (conv2d.h's ConvAlgorithm) run
// there, on operands rounded to bf16 values and kept in float: x first, then w (forward) or dy
// (backward-filter), then the float path's own workspace.
bool by_float_path(const Conv2dShape& s) {
  return conv2d_forward_algorithm(s) != ConvAlgorithm::im2col_sgemm ||
         conv2d_backward_filter_algorithm(s) != ConvAlgorithm::im2col_sgemm;
}

// src (n floats) as bf16 values: src itself when it holds them already — every layer's input and
// input gradient in a bf16 run but the model's first input (layers/bf16_boundary.h) — else
// rounded into `buffer`.
const float* as_bf16_values(const float* src, float* buffer, int64_t n, ThreadPool& pool) {
  if (holds_bf16_values(src, n, pool)) return src;
  round_to_bf16_values(src, buffer, n, pool);
  return buffer;
}

class RoundedOperands {
 public:
  RoundedOperands(const Conv2dShape& s, const ThreadPool& pool, float* given)
      : x_floats_(x_floats(s)), second_floats_(second_floats(s)) {
    if (!given) {
      owned_.resize(static_cast<size_t>(total_floats(s, pool)));
      given = owned_.data();
    }
    base_ = given;
  }
  static int64_t total_floats(const Conv2dShape& s, const ThreadPool& pool) {
    return x_floats(s) + second_floats(s) + conv2d_workspace_floats(s, pool);
  }
  float* x() const { return base_; }                     // (N, C, H, W)
  float* second() const { return base_ + x_floats_; }  // w (K, C, R, S) or dy (N, K, P, Q)
  float* rest() const { return base_ + x_floats_ + second_floats_; }

 private:
  static int64_t x_floats(const Conv2dShape& s) { return whole_lines(s.N * s.C * s.H * s.W); }
  static int64_t second_floats(const Conv2dShape& s) {
    return whole_lines(std::max(s.K * s.C * s.R * s.S, s.N * s.K * s.P * s.Q));
  }
  int64_t x_floats_, second_floats_;
  std::vector<float> owned_;
  float* base_ = nullptr;
};

}  // namespace

int64_t conv2d_bf16_workspace_floats(const Conv2dShape& s, const ThreadPool& pool) {
  const int64_t im2col = make_plan(s, pool).total();
  return by_float_path(s) ? std::max(im2col, RoundedOperands::total_floats(s, pool)) : im2col;
}

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s, ThreadPool& pool, float* workspace, bool relu) {
  if (conv2d_forward_algorithm(s) != ConvAlgorithm::im2col_sgemm) {
    const RoundedOperands r(s, pool, workspace);
    const float* xr = as_bf16_values(x, r.x(), s.N * s.C * s.H * s.W, pool);
    const float* wr = as_bf16_values(w, r.second(), s.K * s.C * s.R * s.S, pool);
    conv2d_forward(xr, wr, b, y, s, pool, r.rest(), relu);
    return;
  }
  const Plan plan = make_plan(s, pool);
  const Buffers buf(plan, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  const bf16* w16 = round_into(w, buf.w16(), s.K * CRS, pool);               // (K, CRS)
  const bf16* x16 = round_into(x, buf.x16(), s.N * s.C * s.H * s.W, pool);  // (N, C, H, W)
  for_each_group(s, plan, pool, [&](int64_t worker, int64_t n0, int64_t nbk) {
    const int64_t cols = nbk * PQ;
    float* out = buf.col(worker);  // (K, cols)
    const bf16* col16 = lower_group_bf16(x16, buf.col16(worker), n0, nbk, s);
    gemm_bf16(false, false, s.K, cols, CRS, 1.0f, w16, CRS, col16, cols, 0.0f, out, cols);
    for (int64_t j = 0; j < nbk; ++j)
      for (int64_t k = 0; k < s.K; ++k) {
        const float* src = out + k * cols + j * PQ;
        float* dst = y + ((n0 + j) * s.K + k) * PQ;
        const float bias = b ? b[k] : 0.0f;
        for (int64_t i = 0; i < PQ; ++i)
          dst[i] = relu ? std::max(src[i] + bias, 0.0f) : src[i] + bias;
      }
  });
}

void conv2d_backward_data_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                               ThreadPool& pool, float* workspace, const float* relu_x) {
  const Plan plan = make_plan(s, pool);
  const Buffers buf(plan, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q, CHW = s.C * s.H * s.W;
  const bf16* w16 = round_into(w, buf.w16(), s.K * CRS, pool);  // (K, CRS)
  for_each_group(s, plan, pool, [&](int64_t worker, int64_t n0, int64_t nbk) {
    const int64_t cols = nbk * PQ;
    float* col = buf.col(worker);  // (CRS, cols)
    const bf16* dy16 = gather_dy_bf16(dy, buf.dy16(worker), n0, nbk, s);
    gemm_bf16(true, false, CRS, cols, s.K, 1.0f, w16, CRS, dy16, cols, 0.0f, col, cols);
    for (int64_t j = 0; j < nbk; ++j) {
      float* d = dx + (n0 + j) * CHW;  // (C, H, W)
      col2im_ld(col + j * PQ, cols, d, s);
      if (relu_x) {  // relu_backward's test, while this sample's dx is in cache
        const float* r = relu_x + (n0 + j) * CHW;
        for (int64_t i = 0; i < CHW; ++i) d[i] = r[i] > 0.0f ? d[i] : 0.0f;
      }
    }
  });
}

void conv2d_backward_filter_bf16(const float* x, const float* dy, float* dw,
                                 const Conv2dShape& s, ThreadPool& pool, float* workspace) {
  if (conv2d_backward_filter_algorithm(s) != ConvAlgorithm::im2col_sgemm) {
    const RoundedOperands r(s, pool, workspace);
    const float* xr = as_bf16_values(x, r.x(), s.N * s.C * s.H * s.W, pool);
    const float* dyr = as_bf16_values(dy, r.second(), s.N * s.K * s.P * s.Q, pool);
    conv2d_backward_filter(xr, dyr, dw, s, pool, r.rest());
    return;
  }
  const Plan plan = make_plan(s, pool);
  const Buffers buf(plan, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  const bf16* x16 = round_into(x, buf.x16(), s.N * s.C * s.H * s.W, pool);  // (N, C, H, W)
  for_each_chunk(pool, plan.chunks, [&](int64_t worker, int64_t ch) {
    float* partial = buf.partials() + ch * plan.partial;  // (K, CRS)
    const int64_t first = chunk_begin(s.N, plan.chunks, ch);
    const int64_t end = chunk_begin(s.N, plan.chunks, ch + 1);
    for (int64_t n0 = first; n0 < end; n0 += plan.nb) {
      const int64_t nbk = std::min(plan.nb, end - n0), cols = nbk * PQ;
      const bf16* dy16 = gather_dy_bf16(dy, buf.dy16(worker), n0, nbk, s);
      const bf16* col16 = lower_group_bf16(x16, buf.col16(worker), n0, nbk, s);
      // partial (K, CRS) (+)= dy group (K, cols) · colᵀ (cols, CRS); the first overwrites
      gemm_bf16(false, true, s.K, CRS, cols, 1.0f, dy16, cols, col16, cols,
                n0 == first ? 0.0f : 1.0f, partial, CRS);
    }
  });
  add_in_chunk_order(dw, buf.partials(), plan.partial, plan.chunks, s.K * CRS, pool);
}

}  // namespace brigade::cpu
