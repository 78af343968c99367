// See maxpool2d.h.
#include "kernels/cpu/maxpool2d.h"

#include <algorithm>

namespace brigade::cpu {

void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,
                       ThreadPool& pool) {
  const int64_t HW = s.H * s.W, PQ = s.P * s.Q;
  pool.parallel_for(s.N * s.C, [&](int64_t plane0, int64_t plane1) {
    for (int64_t plane = plane0; plane < plane1; ++plane) {
      const float* xp = x + plane * HW;
      float* yp = y + plane * PQ;
      int32_t* ap = argmax + plane * PQ;
      for (int64_t p = 0; p < s.P; ++p) {
        // The window's rows clipped to the input once per output row.
        const int64_t h0 = std::max<int64_t>(p * s.stride - s.pad_h, 0);
        const int64_t h1 = std::min<int64_t>(p * s.stride - s.pad_h + s.R, s.H);
        for (int64_t q = 0; q < s.Q; ++q) {
          const int64_t w0 = std::max<int64_t>(q * s.stride - s.pad_w, 0);
          const int64_t w1 = std::min<int64_t>(q * s.stride - s.pad_w + s.S, s.W);
          int64_t best = h0 * s.W + w0;
          float m = xp[best];
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w)
              if (xp[h * s.W + w] > m) {  // strict: the first maximum stays
                m = xp[h * s.W + w];
                best = h * s.W + w;
              }
          yp[p * s.Q + q] = m;
          ap[p * s.Q + q] = static_cast<int32_t>(best);
        }
      }
    }
  }, 4);
}

void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s,
                        ThreadPool& pool) {
  const int64_t HW = s.H * s.W, PQ = s.P * s.Q;
  // Planes are independent, so the scatter-add never races.
  pool.parallel_for(s.N * s.C, [&](int64_t plane0, int64_t plane1) {
    for (int64_t plane = plane0; plane < plane1; ++plane) {
      float* dxp = dx + plane * HW;
      std::fill(dxp, dxp + HW, 0.0f);
      const float* dyp = dy + plane * PQ;
      const int32_t* ap = argmax + plane * PQ;
      for (int64_t i = 0; i < PQ; ++i) dxp[ap[i]] += dyp[i];
    }
  }, 4);
}

}  // namespace brigade::cpu
