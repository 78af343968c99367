// See conv2d.h. Per sample n, with col = im2col(x[n]) of shape (C·R·S, P·Q):
//   forward:          y[n]  (K, PQ)   = w (K, CRS) · col
//   backward-data:    col   (CRS, PQ) = wᵀ · dy[n],  dx[n] = col2im(col)
//   backward-filter:  dw    (K, CRS) += dy[n] · colᵀ
// A 1x1 stride-1 unpadded convolution needs no lowering: col is x[n] itself.
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

int64_t chunks(const Conv2dShape& s, const ThreadPool& pool) {
  return std::min<int64_t>(s.N, pool.size());
}

int64_t col_floats(const Conv2dShape& s) { return s.C * s.R * s.S * s.P * s.Q; }

// The output columns q whose input column q·stride - pad_w + t lies inside [0, W).
void valid_columns(const Conv2dShape& s, int64_t t, int64_t& lo, int64_t& hi) {
  const int64_t a = s.pad_w - t;                      // need q·stride >= a
  lo = a <= 0 ? 0 : (a + s.stride - 1) / s.stride;
  const int64_t b = s.W - 1 + s.pad_w - t;            // need q·stride <= b
  hi = b < 0 ? 0 : std::min<int64_t>(s.Q, b / s.stride + 1);
  lo = std::min(lo, hi);
}

// Calls row_fn(o, inside, xo, q_lo, q_hi) for every (c, r, t, p): the shared index walk of
// im2col and col2im. o: offset of the col row; inside: whether input row h exists; then output
// column q in [q_lo, q_hi) reads x[xo + q·stride] (xo itself may be negative: left padding).
template <class Fn>
void for_each_col_row(const Conv2dShape& s, Fn&& row_fn) {
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t t = 0; t < s.S; ++t) {
        int64_t lo, hi;
        valid_columns(s, t, lo, hi);
        const int64_t col_row = ((c * s.R + r) * s.S + t) * s.P;  // in units of Q
        for (int64_t p = 0; p < s.P; ++p) {
          const int64_t h = p * s.stride - s.pad_h + r;
          const bool inside = h >= 0 && h < s.H;
          // x offset of output column q: (c·H + h)·W + q·stride - pad_w + t
          row_fn((col_row + p) * s.Q, inside, (c * s.H + h) * s.W - s.pad_w + t, lo, hi);
        }
      }
}

}  // namespace

int64_t conv2d_workspace_floats(const Conv2dShape& s, const ThreadPool& pool) {
  // per chunk: one col buffer, and a (K, CRS) partial filter gradient
  return chunks(s, pool) * (col_floats(s) + s.K * s.C * s.R * s.S);
}

void im2col(const float* x, float* col, const Conv2dShape& s) {
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t o, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    float* out = col + o;
    if (!inside) {
      std::fill(out, out + s.Q, 0.0f);
      return;
    }
    std::fill(out, out + lo, 0.0f);
    std::fill(out + hi, out + s.Q, 0.0f);
    if (stride == 1) {
      if (hi > lo) std::memcpy(out + lo, x + xo + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    } else {
      for (int64_t q = lo; q < hi; ++q) out[q] = x[xo + q * stride];
    }
  });
}

void col2im(const float* col, float* dx, const Conv2dShape& s) {
  std::fill(dx, dx + s.C * s.H * s.W, 0.0f);
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t o, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    if (!inside) return;
    for (int64_t q = lo; q < hi; ++q) dx[xo + q * stride] += col[o + q];
  });
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, ThreadPool& pool, float* workspace, bool relu) {
  const int64_t T = chunks(s, pool), CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, conv2d_workspace_floats(s, pool));
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* col = scratch.get() + t * col_floats(s);
      for (int64_t n = t * s.N / T; n < (t + 1) * s.N / T; ++n) {
        const float* xn = x + n * s.C * s.H * s.W;
        float* yn = y + n * s.K * PQ;
        const float* lowered = xn;
        if (!is_pointwise(s)) {
          im2col(xn, col, s);
          lowered = col;
        }
        sgemm(false, false, s.K, PQ, CRS, 1.0f, w, CRS, lowered, PQ, 0.0f, yn, PQ);
        // Bias and activation in one pass over y[n], while it is still in cache.
        for (int64_t k = 0; k < s.K; ++k) {
          float* row = yn + k * PQ;
          const float bias = b ? b[k] : 0.0f;
          if (relu) {
            for (int64_t i = 0; i < PQ; ++i) row[i] = std::max(row[i] + bias, 0.0f);
          } else if (b) {
            for (int64_t i = 0; i < PQ; ++i) row[i] += bias;
          }
        }
      }
    }
  });
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          ThreadPool& pool, float* workspace) {
  const int64_t T = chunks(s, pool), CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, conv2d_workspace_floats(s, pool));
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* col = scratch.get() + t * col_floats(s);
      for (int64_t n = t * s.N / T; n < (t + 1) * s.N / T; ++n) {
        float* dxn = dx + n * s.C * s.H * s.W;
        const float* dyn = dy + n * s.K * PQ;
        if (is_pointwise(s)) {
          sgemm(true, false, CRS, PQ, s.K, 1.0f, w, CRS, dyn, PQ, 0.0f, dxn, PQ);
        } else {
          sgemm(true, false, CRS, PQ, s.K, 1.0f, w, CRS, dyn, PQ, 0.0f, col, PQ);
          col2im(col, dxn, s);
        }
      }
    }
  });
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            ThreadPool& pool, float* workspace) {
  const int64_t T = chunks(s, pool), CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  Scratch scratch(workspace, conv2d_workspace_floats(s, pool));
  float* partials = scratch.get() + T * col_floats(s);  // T x (K, CRS)
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* col = scratch.get() + t * col_floats(s);
      float* part = partials + t * s.K * CRS;
      std::fill(part, part + s.K * CRS, 0.0f);
      for (int64_t n = t * s.N / T; n < (t + 1) * s.N / T; ++n) {
        const float* xn = x + n * s.C * s.H * s.W;
        const float* lowered = xn;
        if (!is_pointwise(s)) {
          im2col(xn, col, s);
          lowered = col;
        }
        sgemm(false, true, s.K, CRS, PQ, 1.0f, dy + n * s.K * PQ, PQ, lowered, PQ, 1.0f, part,
              CRS);
      }
    }
  });
  // dw += partial_0 + partial_1 + ..., in thread order, split over the weights.
  pool.parallel_for(s.K * CRS, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 0; t < T; ++t) {
      const float* part = partials + t * s.K * CRS;
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
        float part = 0.0f;  // per-sample partial sums keep the float error ~ sqrt(N)·PQ·eps
        for (int64_t i = 0; i < PQ; ++i) part += row[i];
        acc += part;
      }
      db[k] += acc;
    }
  }, 4);
}

}  // namespace brigade::cpu
