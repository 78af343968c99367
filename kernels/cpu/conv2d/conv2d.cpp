// See conv2d.h. For a group of nb samples, col = im2col of each, side by side: (C·R·S, nb·P·Q),
// and dy of the group gathered the same way: (K, nb·P·Q). Then
//   forward:          y     (K, nb·PQ) = w (K, CRS) · col, scattered to (nb, K, PQ) with bias
//   backward-data:    col   (CRS, nb·PQ) = wᵀ · dy,  dx[n] = col2im(col's columns of n)
//   backward-filter:  dw    (K, CRS) += dy · colᵀ
// A 1x1 stride-1 unpadded convolution needs no im2col: x[n] (C, H·W) is its own lowering.
#include "kernels/cpu/conv2d/conv2d.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/chunks.h"
#include "kernels/cpu/conv2d/avx512.h"
#include "kernels/cpu/conv2d/grouping.h"
#include "kernels/cpu/conv2d/lowering.h"
#include "kernels/cpu/conv2d/winograd.h"
#include "kernels/cpu/gemm.h"

namespace brigade::cpu {
namespace {

using conv2d_grouping::Grouping;
using conv2d_grouping::for_each_group;
using conv2d_grouping::group_samples;
using lowering::col2im_ld;
using lowering::im2col_ld;

// Caller's workspace, or an owned one when the caller passed nullptr.
class Scratch {
 public:
  Scratch(float* given, int64_t floats) {
    if (given) {
      ptr_ = given;
    } else {
      owned_.resize(static_cast<size_t>(floats));
      ptr_ = owned_.data();
    }
  }
  float* get() const { return ptr_; }

 private:
  std::vector<float> owned_;
  float* ptr_ = nullptr;
};

bool is_pointwise(const Conv2dShape& s) {
  return s.R == 1 && s.S == 1 && s.stride == 1 && s.pad_h == 0 && s.pad_w == 0;
}

// The forward of a single input channel at stride 1 is computed directly (avx512.h)
// where the CPU has AVX-512: im2col would hand SGEMM a product only R·S deep. Elsewhere, and
// for every backward pass, im2col + SGEMM.
bool is_direct(const Conv2dShape& s, Isa isa) {
  return isa == Isa::avx512 && s.C == 1 && s.stride == 1 && !is_pointwise(s);
}

// The direct kernels read one sample with its padding in place: (P + R - 1, Q + S - 1).
int64_t padded_rows(const Conv2dShape& s) { return s.P + s.R - 1; }
int64_t padded_cols(const Conv2dShape& s) { return s.Q + s.S - 1; }

// How the work is cut (grouping.h), and each worker's scratch (col and ybuf).
struct Plan : Grouping {
  int64_t workers;   // threads taking part (chunks.h): at most one per sample
  int64_t col;       // floats of one worker's col buffer: (CRS, nb·PQ), or a padded sample
  int64_t ybuf;      // floats of one worker's (K, nb·PQ) gather/scatter buffer
  int64_t partial;   // floats of one chunk's (K, CRS) filter-gradient partial sum
  int64_t worker_floats() const { return col + ybuf; }  // one worker's scratch
  int64_t total() const { return workers * worker_floats() + chunks * partial; }
};

Plan make_plan(const Conv2dShape& s, const ThreadPool& pool) {
  const int64_t PQ = s.P * s.Q, CRS = s.C * s.R * s.S;
  Plan p{};
  static_cast<Grouping&>(p) = group_samples(s);
  p.workers = chunk_workers(pool, s.N);
  p.col = CRS * p.nb * PQ;
  if (s.C == 1 && s.stride == 1) p.col = std::max(p.col, padded_rows(s) * padded_cols(s));
  p.ybuf = p.nb > 1 ? s.K * p.nb * PQ : 0;
  p.partial = s.K * CRS;
  return p;
}

// Lowers samples [n0, n0 + nbk) into col (CRS, nbk·PQ), sample j in columns [j·PQ, (j+1)·PQ),
// and returns it; a single sample of a pointwise convolution is its own lowering.
const float* lower_group(const float* x, float* col, int64_t n0, int64_t nbk, const Conv2dShape& s,
                         Isa isa) {
  const int64_t PQ = s.P * s.Q, CHW = s.C * s.H * s.W, cols = nbk * PQ;
  if (is_pointwise(s) && nbk == 1) return x + n0 * CHW;
  for (int64_t j = 0; j < nbk; ++j) {
    if (is_pointwise(s))  // x[n] (C, HW) is already (CRS, PQ)
      for (int64_t c = 0; c < s.C; ++c)
        std::memcpy(col + c * cols + j * PQ, x + (n0 + j) * CHW + c * PQ, PQ * sizeof(float));
    else
      im2col_ld(x + (n0 + j) * CHW, col + j * PQ, cols, s, isa);
  }
  return col;
}

// The direct kernels' view of sample n of a single-channel x: x itself when unpadded, else a
// copy with the padding in place, in `buf` (padded_rows · padded_cols floats). Returns its
// rows' stride through ld.
const float* padded_sample(const float* x, float* buf, int64_t n, const Conv2dShape& s,
                           int64_t& ld) {
  const float* xn = x + n * s.H * s.W;
  if (s.pad_h == 0 && s.pad_w == 0 && padded_rows(s) == s.H && padded_cols(s) == s.W) {
    ld = s.W;
    return xn;
  }
  ld = padded_cols(s);
  std::fill(buf, buf + padded_rows(s) * ld, 0.0f);
  const int64_t rows = std::min(s.H, padded_rows(s) - s.pad_h);
  const int64_t cols = std::min(s.W, ld - s.pad_w);
  for (int64_t h = 0; h < rows; ++h)
    std::copy(xn + h * s.W, xn + h * s.W + cols, buf + (h + s.pad_h) * ld + s.pad_w);
  return buf;
}

}  // namespace

int64_t conv2d_workspace_floats(const Conv2dShape& s, const ThreadPool& pool) {
  return std::max(make_plan(s, pool).total(), winograd::workspace_floats(s, pool));
}

ConvAlgorithm conv2d_forward_algorithm(const Conv2dShape& s) {
  if (winograd::applies(s)) return ConvAlgorithm::winograd;
  return is_direct(s, kernel_isa()) ? ConvAlgorithm::direct : ConvAlgorithm::im2col_sgemm;
}

ConvAlgorithm conv2d_backward_filter_algorithm(const Conv2dShape& s) {
  return winograd::applies(s) ? ConvAlgorithm::winograd : ConvAlgorithm::im2col_sgemm;
}

void im2col(const float* x, float* col, const Conv2dShape& s) {
  im2col_ld(x, col, s.P * s.Q, s, kernel_isa());
}

void col2im(const float* col, float* dx, const Conv2dShape& s) {
  col2im_ld(col, s.P * s.Q, dx, s);
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, ThreadPool& pool, float* workspace, bool relu) {
  const ConvAlgorithm algorithm = conv2d_forward_algorithm(s);
  if (algorithm == ConvAlgorithm::winograd) {
    Scratch scratch(workspace, winograd::workspace_floats(s, pool));
    winograd::forward(x, w, b, y, s, pool, scratch.get(), relu);
    return;
  }
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  const Isa isa = kernel_isa();
  Scratch scratch(workspace, plan.total());
  if (algorithm == ConvAlgorithm::direct) {  // one sample at a time, to whichever thread is free
    for_each_chunk(pool, s.N, [&](int64_t worker, int64_t n) {
      int64_t ld;
      const float* xs = padded_sample(x, scratch.get() + worker * plan.worker_floats(), n, s, ld);
      avx512::conv1ch_forward(xs, ld, w, b, y + n * s.K * PQ, s, relu);
    });
    return;
  }
  for_each_group(s, plan, pool, [&](int64_t worker, int64_t n0, int64_t nbk) {
    float* col = scratch.get() + worker * plan.worker_floats();
    float* ybuf = col + plan.col;
    const int64_t cols = nbk * PQ;
    const float* lowered = lower_group(x, col, n0, nbk, s, isa);
    // One sample: straight into y[n0]. Several: into ybuf (K, nbk·PQ), then scattered.
    float* out = nbk == 1 ? y + n0 * s.K * PQ : ybuf;
    sgemm(false, false, s.K, cols, CRS, 1.0f, w, CRS, lowered, cols, 0.0f, out, cols);
    // Bias and activation in the same pass that moves each row to its place in y.
    for (int64_t j = 0; j < nbk; ++j)
      for (int64_t k = 0; k < s.K; ++k) {
        const float* src = out + k * cols + j * PQ;
        float* dst = y + ((n0 + j) * s.K + k) * PQ;
        const float bias = b ? b[k] : 0.0f;
        if (relu)
          for (int64_t i = 0; i < PQ; ++i) dst[i] = std::max(src[i] + bias, 0.0f);
        else
          for (int64_t i = 0; i < PQ; ++i) dst[i] = src[i] + bias;
      }
  });
}

namespace {
// Gathers dy of samples [n0, n0 + nbk) into (K, nbk·PQ); a single sample needs no copy.
const float* gather_dy(const float* dy, float* ybuf, int64_t n0, int64_t nbk, const Conv2dShape& s) {
  const int64_t PQ = s.P * s.Q;
  if (nbk == 1) return dy + n0 * s.K * PQ;
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t j = 0; j < nbk; ++j)
      std::memcpy(ybuf + k * nbk * PQ + j * PQ, dy + ((n0 + j) * s.K + k) * PQ, PQ * sizeof(float));
  return ybuf;
}
}  // namespace

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          ThreadPool& pool, float* workspace, const float* relu_x) {
  if (s.stride == 1 && winograd::applies(winograd::data_shape(s))) {
    Scratch scratch(workspace, winograd::workspace_floats(s, pool));
    winograd::backward_data(dy, w, dx, s, pool, scratch.get(), relu_x);
    return;
  }
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q, CHW = s.C * s.H * s.W;
  Scratch scratch(workspace, plan.total());
  // relu_backward's test, on one sample's dx (C, H, W) while it is in cache.
  auto mask = [&](int64_t n) {
    if (!relu_x) return;
    float* d = dx + n * CHW;
    const float* y = relu_x + n * CHW;
    for (int64_t i = 0; i < CHW; ++i) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
  };
  for_each_group(s, plan, pool, [&](int64_t worker, int64_t n0, int64_t nbk) {
    float* col = scratch.get() + worker * plan.worker_floats();
    const int64_t cols = nbk * PQ;
    const float* dyc = gather_dy(dy, col + plan.col, n0, nbk, s);
    if (is_pointwise(s) && nbk == 1) {  // dx[n0] (C, HW) = wᵀ · dy[n0]: no lowering at all
      sgemm(true, false, CRS, PQ, s.K, 1.0f, w, CRS, dyc, PQ, 0.0f, dx + n0 * CHW, PQ);
      mask(n0);
      return;
    }
    sgemm(true, false, CRS, cols, s.K, 1.0f, w, CRS, dyc, cols, 0.0f, col, cols);
    for (int64_t j = 0; j < nbk; ++j) {
      col2im_ld(col + j * PQ, cols, dx + (n0 + j) * CHW, s);
      mask(n0 + j);
    }
  });
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            ThreadPool& pool, float* workspace) {
  if (conv2d_backward_filter_algorithm(s) == ConvAlgorithm::winograd) {
    Scratch scratch(workspace, winograd::workspace_floats(s, pool));
    winograd::backward_filter(x, dy, dw, s, pool, scratch.get());
    return;
  }
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, plan.total());
  // After every worker's scratch, chunk c's partial at c·partial.
  float* partials = scratch.get() + plan.workers * plan.worker_floats();
  const Isa isa = kernel_isa();
  for_each_chunk(pool, plan.chunks, [&](int64_t worker, int64_t ch) {
    // chunk ch: samples [first, end), nb at a time, into its own partial (K, CRS)
    float* col = scratch.get() + worker * plan.worker_floats();
    float* partial = partials + ch * plan.partial;
    const int64_t first = chunk_begin(s.N, plan.chunks, ch);
    const int64_t end = chunk_begin(s.N, plan.chunks, ch + 1);
    for (int64_t n0 = first; n0 < end; n0 += plan.nb) {
      const int64_t nbk = std::min(plan.nb, end - n0), cols = nbk * PQ;
      const float* dyc = gather_dy(dy, col + plan.col, n0, nbk, s);
      const float* lowered = lower_group(x, col, n0, nbk, s, isa);
      // partial (K, CRS) (+)= dy group (K, cols) · colᵀ (cols, CRS); the first overwrites
      sgemm(false, true, s.K, CRS, cols, 1.0f, dyc, cols, lowered, cols,
            n0 == first ? 0.0f : 1.0f, partial, CRS);
    }
  });
  add_in_chunk_order(dw, partials, plan.partial, plan.chunks, plan.partial, pool);
}

namespace {
// db[k] += Σ dy[n][k][·] for k in [k0, k1): the portable form of avx512::bias_sums (see there).
void bias_sums(const float* dy, float* db, const Conv2dShape& s, int64_t k0, int64_t k1) {
  constexpr int64_t L = 16;
  const int64_t PQ = s.P * s.Q;
  for (int64_t k = k0; k < k1; ++k) {
    float lanes[L] = {};
    for (int64_t n = 0; n < s.N; ++n) {
      const float* row = dy + (n * s.K + k) * PQ;
      int64_t i = 0;
      for (; i + L <= PQ; i += L)
        for (int64_t l = 0; l < L; ++l) lanes[l] += row[i + l];
      for (int64_t l = 0; i + l < PQ; ++l) lanes[l] += row[i + l];
    }
    for (int64_t width = L / 2; width >= 1; width /= 2)
      for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    db[k] += lanes[0];
  }
}
}  // namespace

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, ThreadPool& pool) {
  // Sixteen running sums per filter, lane l taking the entries i ≡ l (mod 16) of every
  // sample's row: independent sums that vectorise (one float sum in order does not), short
  // (N·PQ/16 terms each), and the same bits on every ISA and thread count. Then a fixed
  // pairwise reduction of the lanes.
  const bool avx512 = kernel_isa() == Isa::avx512;
  pool.parallel_for(s.K, [&](int64_t k0, int64_t k1) {
    if (avx512) avx512::bias_sums(dy, db, s, k0, k1);
    else bias_sums(dy, db, s, k0, k1);
  }, 4);
}

}  // namespace brigade::cpu
