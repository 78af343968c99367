// See conv2d.h. For a group of nb samples, col = im2col of each, side by side: (C·R·S, nb·P·Q),
// and dy of the group gathered the same way: (K, nb·P·Q). Then
//   forward:          y     (K, nb·PQ) = w (K, CRS) · col, scattered to (nb, K, PQ) with bias
//   backward-data:    col   (CRS, nb·PQ) = wᵀ · dy,  dx[n] = col2im(col's columns of n)
//   backward-filter:  dw    (K, CRS) += dy · colᵀ
// A 1x1 stride-1 unpadded convolution needs no im2col: x[n] (C, H·W) is its own lowering.
#include "kernels/cpu/conv2d.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace brigade::cpu {
namespace {

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

// How the work is cut: T thread slots, each owning a contiguous range of samples, which it
// lowers nb samples at a time into one col matrix (C·R·S, nb·P·Q). Several samples per SGEMM
// keep its N dimension wide where P·Q is small (the question's conv4 has P·Q = 9).
struct Plan {
  int64_t T;         // thread slots
  int64_t nb;        // samples per SGEMM
  int64_t col;       // floats of one slot's col buffer: (CRS, nb·PQ)
  int64_t ybuf;      // floats of one slot's (K, nb·PQ) gather/scatter buffer
  int64_t partial;   // floats of one slot's (K, CRS) filter-gradient partial sum
  int64_t slot() const { return col + ybuf + partial; }
};

// SGEMM's N: wide enough to run near full speed. On the question's conv3/conv4, 192..384 measured
// alike (within noise) and 768 slower (the col buffer outgrows L2).
constexpr int64_t kTargetColumns = 256;
constexpr int64_t kMaxColFloats = 1 << 20;    // 4 MiB of col per slot at most

Plan make_plan(const Conv2dShape& s, const ThreadPool& pool) {
  const int64_t PQ = s.P * s.Q, CRS = s.C * s.R * s.S;
  Plan p{};
  p.T = std::min<int64_t>(s.N, pool.size());
  const int64_t per_slot = (s.N + p.T - 1) / p.T;
  p.nb = std::min(per_slot, std::max<int64_t>(1, (kTargetColumns + PQ - 1) / PQ));
  p.nb = std::max<int64_t>(1, std::min(p.nb, kMaxColFloats / std::max<int64_t>(1, CRS * PQ)));
  p.col = CRS * p.nb * PQ;
  p.ybuf = p.nb > 1 ? s.K * p.nb * PQ : 0;
  p.partial = s.K * CRS;
  return p;
}

// Runs body(slot, n0, nbk) for every group of nbk <= nb consecutive samples starting at n0,
// slot t handling samples [t·N/T, (t+1)·N/T) in order.
template <class Body>
void for_each_group(const Conv2dShape& s, const Plan& plan, ThreadPool& pool, Body&& body) {
  pool.parallel_for(plan.T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t end = (t + 1) * s.N / plan.T;
      for (int64_t n0 = t * s.N / plan.T; n0 < end; n0 += plan.nb)
        body(t, n0, std::min(plan.nb, end - n0));
    }
  });
}

// The output columns q whose input column q·stride - pad_w + t lies inside [0, W).
void valid_columns(const Conv2dShape& s, int64_t t, int64_t& lo, int64_t& hi) {
  const int64_t a = s.pad_w - t;                      // need q·stride >= a
  lo = a <= 0 ? 0 : (a + s.stride - 1) / s.stride;
  const int64_t b = s.W - 1 + s.pad_w - t;            // need q·stride <= b
  hi = b < 0 ? 0 : std::min<int64_t>(s.Q, b / s.stride + 1);
  lo = std::min(lo, hi);
}

// Calls row_fn(row, pq, inside, xo, q_lo, q_hi) for every (c, r, t, p): the shared index
// walk of im2col and col2im. row = (c·R + r)·S + t is the col row, pq = p·Q the offset of
// output row p inside it; inside: whether input row h exists; output column q in
// [q_lo, q_hi) reads x[xo + q·stride] (xo itself may be negative: left padding).
template <class Fn>
void for_each_col_row(const Conv2dShape& s, Fn&& row_fn) {
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t t = 0; t < s.S; ++t) {
        int64_t lo, hi;
        valid_columns(s, t, lo, hi);
        const int64_t row = (c * s.R + r) * s.S + t;
        for (int64_t p = 0; p < s.P; ++p) {
          const int64_t h = p * s.stride - s.pad_h + r;
          row_fn(row, p * s.Q, h >= 0 && h < s.H, (c * s.H + h) * s.W - s.pad_w + t, lo, hi);
        }
      }
}

// im2col of one sample into columns [0, P·Q) of a col matrix whose rows are ld floats apart.
void im2col_ld(const float* x, float* col, int64_t ld, const Conv2dShape& s) {
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    float* out = col + row * ld + pq;
    if (!inside) {
      std::fill(out, out + s.Q, 0.0f);
      return;
    }
    for (int64_t q = 0; q < lo; ++q) out[q] = 0.0f;
    for (int64_t q = hi; q < s.Q; ++q) out[q] = 0.0f;
    if (hi <= lo) return;
    const float* in = x + xo + lo * stride;  // the first pixel read: inside x
    float* o = out + lo;
    const int64_t n = hi - lo;
    if (stride == 1) {  // short rows: an inline loop the compiler vectorises beats memcpy calls
      for (int64_t q = 0; q < n; ++q) o[q] = in[q];
    } else {
      for (int64_t q = 0; q < n; ++q) o[q] = in[q * stride];
    }
  });
}

// The adjoint: dx (C, H, W) = the sum of col entries per pixel, over columns [0, P·Q).
void col2im_ld(const float* col, int64_t ld, float* dx, const Conv2dShape& s) {
  std::fill(dx, dx + s.C * s.H * s.W, 0.0f);
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    if (!inside || hi <= lo) return;
    const float* __restrict in = col + row * ld + pq + lo;
    float* __restrict out = dx + xo + lo * stride;  // the first pixel written: inside dx
    const int64_t n = hi - lo;
    if (stride == 1) {  // the common case, spelled out so that it vectorises
      for (int64_t q = 0; q < n; ++q) out[q] += in[q];
    } else {
      for (int64_t q = 0; q < n; ++q) out[q * stride] += in[q];
    }
  });
}

// Lowers samples [n0, n0 + nbk) into col (CRS, nbk·PQ), sample j in columns [j·PQ, (j+1)·PQ),
// and returns it; a single sample of a pointwise convolution is its own lowering.
const float* lower_group(const float* x, float* col, int64_t n0, int64_t nbk, const Conv2dShape& s) {
  const int64_t PQ = s.P * s.Q, CHW = s.C * s.H * s.W, cols = nbk * PQ;
  if (is_pointwise(s) && nbk == 1) return x + n0 * CHW;
  for (int64_t j = 0; j < nbk; ++j) {
    if (is_pointwise(s))  // x[n] (C, HW) is already (CRS, PQ)
      for (int64_t c = 0; c < s.C; ++c)
        std::memcpy(col + c * cols + j * PQ, x + (n0 + j) * CHW + c * PQ, PQ * sizeof(float));
    else
      im2col_ld(x + (n0 + j) * CHW, col + j * PQ, cols, s);
  }
  return col;
}

}  // namespace

int64_t conv2d_workspace_floats(const Conv2dShape& s, const ThreadPool& pool) {
  const Plan plan = make_plan(s, pool);
  return plan.T * plan.slot();
}

void im2col(const float* x, float* col, const Conv2dShape& s) { im2col_ld(x, col, s.P * s.Q, s); }

void col2im(const float* col, float* dx, const Conv2dShape& s) { col2im_ld(col, s.P * s.Q, dx, s); }

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, ThreadPool& pool, float* workspace, bool relu) {
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, plan.T * plan.slot());
  for_each_group(s, plan, pool, [&](int64_t t, int64_t n0, int64_t nbk) {
    float* col = scratch.get() + t * plan.slot();
    float* ybuf = col + plan.col;
    const int64_t cols = nbk * PQ;
    const float* lowered = lower_group(x, col, n0, nbk, s);
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
                          ThreadPool& pool, float* workspace) {
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q, CHW = s.C * s.H * s.W;
  Scratch scratch(workspace, plan.T * plan.slot());
  for_each_group(s, plan, pool, [&](int64_t t, int64_t n0, int64_t nbk) {
    float* col = scratch.get() + t * plan.slot();
    const int64_t cols = nbk * PQ;
    const float* dyc = gather_dy(dy, col + plan.col, n0, nbk, s);
    if (is_pointwise(s) && nbk == 1) {  // dx[n0] (C, HW) = wᵀ · dy[n0]: no lowering at all
      sgemm(true, false, CRS, PQ, s.K, 1.0f, w, CRS, dyc, PQ, 0.0f, dx + n0 * CHW, PQ);
      return;
    }
    sgemm(true, false, CRS, cols, s.K, 1.0f, w, CRS, dyc, cols, 0.0f, col, cols);
    for (int64_t j = 0; j < nbk; ++j) col2im_ld(col + j * PQ, cols, dx + (n0 + j) * CHW, s);
  });
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            ThreadPool& pool, float* workspace) {
  const Plan plan = make_plan(s, pool);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, plan.T * plan.slot());
  auto partial_of = [&](int64_t t) { return scratch.get() + t * plan.slot() + plan.col + plan.ybuf; };
  for (int64_t t = 0; t < plan.T; ++t) std::fill(partial_of(t), partial_of(t) + plan.partial, 0.0f);
  for_each_group(s, plan, pool, [&](int64_t t, int64_t n0, int64_t nbk) {
    float* col = scratch.get() + t * plan.slot();
    const int64_t cols = nbk * PQ;
    const float* dyc = gather_dy(dy, col + plan.col, n0, nbk, s);
    const float* lowered = lower_group(x, col, n0, nbk, s);
    // partial (K, CRS) += dy group (K, cols) · colᵀ (cols, CRS)
    sgemm(false, true, s.K, CRS, cols, 1.0f, dyc, cols, lowered, cols, 1.0f, partial_of(t), CRS);
  });
  // dw += partial_0 + partial_1 + ..., in slot order, split over the weights.
  pool.parallel_for(s.K * CRS, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 0; t < plan.T; ++t) {
      const float* part = partial_of(t);
      for (int64_t i = i0; i < i1; ++i) dw[i] += part[i];
    }
  }, 4096);
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, ThreadPool& pool) {
  const int64_t PQ = s.P * s.Q;
  pool.parallel_for(s.K, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      float acc = 0.0f;
      for (int64_t n = 0; n < s.N; ++n) {
        const float* row = dy + (n * s.K + k) * PQ;
        float part = 0.0f;  // one partial sum per sample: shorter float sums
        for (int64_t i = 0; i < PQ; ++i) part += row[i];
        acc += part;
      }
      db[k] += acc;
    }
  }, 4);
}

}  // namespace brigade::cpu
