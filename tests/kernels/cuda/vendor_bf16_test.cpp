// Precision bf16 on the vendor path (kernels/precision.h), on a real GPU or emulated ones:
// cuBLAS's bf16 GEMM (cuda::vendor::gemm_bf16, cublasGemmEx with A and B in bfloat16, C in
// float) against a double loop over the same operands rounded to bf16, every transpose and
// beta = 1; and Dense's three passes through kernels/ops.h on the question's 64 -> 1500 layer,
// against the reference on rounded operands. The tolerance is a float sum's of K terms
// (tests/kernels/cpu/check.h): the products of bf16 values are exact, so only the sums may
// differ from the double loop — a tensor core's FP32 accumulation included. Operands left in
// float (a GEMM that skipped the narrowing) miss it by orders of magnitude: checked too.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "kernels/reference/bf16.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

namespace {

// A bfloat16 tensor's elements.
const cpu::bf16* vendor_bf16_data(const Tensor& t) {
  return static_cast<const cpu::bf16*>(t.storage()->data());
}

// Precision bf16 on the vendor path for one scope; the process's settings again after it.
struct VendorBf16 {
  CudaPath before = cuda_path();
  VendorBf16() {
    set_cuda_path(CudaPath::vendor);
    set_precision(Precision::bf16);
  }
  ~VendorBf16() {
    set_precision(Precision::fp32);
    set_cuda_path(before);
  }
};

}  // namespace

TEST_CASE("bf16 GEMM: cuBLAS on bfloat16 operands against a double loop, every transpose") {
  const Stream stream = Stream::create(Device::cuda(0));
  const int64_t M = 67, N = 33, K = 129;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      INFO("trans_a " << ta << ", trans_b " << tb);
      const std::vector<float> a = to_float(random_vector(M * K, 21)),
                               b = to_float(random_vector(K * N, 22)),
                               c0 = to_float(random_vector(M * N, 23));
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      const Tensor ha = ops::narrow_to_bf16(Tensor::from_vector(a, Shape({M * K}), stream), stream);
      const Tensor hb = ops::narrow_to_bf16(Tensor::from_vector(b, Shape({K * N}), stream), stream);
      const Tensor c = Tensor::from_vector(c0, Shape({M * N}), stream);
      // C = op(A) · op(B) + C
      cuda::vendor::gemm_bf16(ta, tb, M, N, K, 1.0f, vendor_bf16_data(ha), lda,
                              vendor_bf16_data(hb), ldb, 1.0f, c.data<float>(), N, stream);
      std::vector<double> want(c0.begin(), c0.end()), unrounded(c0.begin(), c0.end()),
          mag(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t p = 0; p < K; ++p) {
            const float ea = ta ? a[p * M + i] : a[i * K + p];
            const float eb = tb ? b[j * K + p] : b[p * N + j];
            const double prod = double{ref::round_to_bf16(ea)} * ref::round_to_bf16(eb);
            want[i * N + j] += prod;
            unrounded[i * N + j] += double{ea} * eb;
            mag[i * N + j] += std::fabs(prod);
          }
      for (int64_t i = 0; i < M * N; ++i) mag[i] += std::fabs(c0[i]);
      const std::vector<double> tol = sum_tolerance(mag, K + 1);
      const std::vector<float> got = c.to_vector();
      CHECK(all_close("C cuBLAS bf16", got.data(), want, tol));
      // The operands were bf16 ones: fp32 operands' result lies far outside that tolerance.
      int64_t far = 0;
      for (int64_t i = 0; i < M * N; ++i) far += std::fabs(got[i] - unrounded[i]) > tol[i];
      CHECK(far > M * N / 2);
    }
}

TEST_CASE("Dense in bf16 on the vendor path: the question's 64 -> 1500 against the reference") {
  const Stream stream = Stream::create(Device::cuda(0));
  const int64_t N = 33, in = 64, out = 1500;
  const std::vector<float> xv = to_float(random_vector(N * in, 30)),
                           wv = to_float(random_vector(out * in, 31)),
                           dyv = to_float(random_vector(N * out, 33));
  const std::vector<double> x = ref::bf16_operands(xv), w = ref::bf16_operands(wv),
                            dy = ref::bf16_operands(dyv);
  std::vector<double> y(N * out), y_mag(N * out), dx(N * in), dx_mag(N * in), dw(out * in, 0.0),
      dw_mag(out * in, 0.0);
  ref::dense_forward<double>(x.data(), w.data(), nullptr, y.data(), N, in, out);
  ref::dense_forward<double>(abs_of(x).data(), abs_of(w).data(), nullptr, y_mag.data(), N, in,
                             out);
  ref::dense_backward_data(dy.data(), w.data(), dx.data(), N, in, out);
  ref::dense_backward_data(abs_of(dy).data(), abs_of(w).data(), dx_mag.data(), N, in, out);
  ref::dense_backward_weight(x.data(), dy.data(), dw.data(), N, in, out);
  ref::dense_backward_weight(abs_of(x).data(), abs_of(dy).data(), dw_mag.data(), N, in, out);
  const Tensor tx = Tensor::from_vector(xv, Shape({N, in}), stream);
  const Tensor tw = Tensor::from_vector(wv, Shape({out, in}), stream);
  const Tensor tb = Tensor::zeros(Shape({out}), stream);
  const Tensor tdy = Tensor::from_vector(dyv, Shape({N, out}), stream);
  const Tensor tdw = Tensor::zeros(Shape({out, in}), stream);
  const Tensor tdb = Tensor::zeros(Shape({out}), stream);
  const VendorBf16 bf16;
  const std::vector<float> got_y = ops::dense_forward(tx, tw, tb, false, stream).to_vector();
  const std::vector<float> got_dx = ops::dense_backward_data(tdy, tw, stream).to_vector();
  ops::dense_backward_params(tx, tdy, tdw, tdb, stream);
  CHECK(all_close("y", got_y.data(), y, sum_tolerance(y_mag, in)));
  CHECK(all_close("dx", got_dx.data(), dx, sum_tolerance(dx_mag, out)));
  CHECK(all_close("dw", tdw.to_vector().data(), dw, sum_tolerance(dw_mag, N)));
}
