// gemm_tiled and Dense (kernels/cuda/gemm_tiled.cu, dense.cu) through the emulator, against
// plain double loops and brigade::ref. Shapes: 1, odd sizes, and sizes that are not multiples
// of the 16×16 tile, every transpose combination, padded leading dimensions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/launchers.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

namespace {

struct GemmCase {
  int64_t M, N, K;
};

}  // namespace

TEST_CASE("gemm_tiled: C = alpha op(A) op(B) + beta C for every transpose, odd sizes") {
  testing::Deadline deadline("emulated gemm_tiled");
  const Stream stream = emu_stream();
  for (GemmCase c : {GemmCase{1, 1, 1}, GemmCase{3, 7, 1}, GemmCase{7, 3, 33},
                     GemmCase{33, 17, 20}, GemmCase{16, 16, 16}, GemmCase{5, 4, 0}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), trans_a " << ta
                               << ", trans_b " << tb << ", beta " << beta);
          // Stored shapes with 3 extra columns of padding per row (lda > the row length).
          const int64_t a_rows = ta ? c.K : c.M, a_cols = ta ? c.M : c.K;
          const int64_t b_rows = tb ? c.N : c.K, b_cols = tb ? c.K : c.N;
          const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = c.N + 3;
          const std::vector<float> a = to_float(random_vector(a_rows * lda, 1));
          const std::vector<float> b = to_float(random_vector(b_rows * ldb, 2));
          const std::vector<float> c0 = to_float(random_vector(c.M * ldc, 3));
          std::vector<float> got = beta == 0.0f ? nan_vector(c.M * ldc) : c0;  // beta 0: not read
          const float alpha = 0.75f;
          emu::gemm_tiled(ta, tb, c.M, c.N, c.K, alpha, a.data(), lda, b.data(), ldb, beta, got.data(),
                     ldc, stream);
          stream.synchronize();
          std::vector<double> want(static_cast<size_t>(c.M * c.N)), mag(want.size());
          std::vector<float> got_packed(want.size());
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N; ++j) {
              double acc = 0.0, m = 0.0;
              for (int64_t p = 0; p < c.K; ++p) {
                const double x = ta ? a[p * lda + i] : a[i * lda + p];
                const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
                acc += x * y;
                m += std::fabs(x * y);
              }
              const double cij = beta == 0.0f ? 0.0 : double{c0[i * ldc + j]};
              want[i * c.N + j] = alpha * acc + beta * cij;
              mag[i * c.N + j] = alpha * m + std::fabs(beta * cij);
              got_packed[i * c.N + j] = got[i * ldc + j];
            }
          CHECK(all_close("C", got_packed.data(), want, sum_tolerance(mag, c.K + 1)));
        }
  }
}

TEST_CASE("gemm_tiled rejects a leading dimension shorter than the row") {
  const Stream stream = emu_stream();
  float x = 0.0f;
  CHECK_THROWS_WITH(emu::gemm_tiled(false, false, 4, 5, 6, 1.0f, &x, 5, &x, 5, 0.0f, &x, 5, stream),
                    doctest::Contains("gemm_tiled: invalid sizes (M, N, K) = (4, 5, 6)"));
}

TEST_CASE("dense forward (with fused relu), backward-data, -weight, -bias match the reference") {
  testing::Deadline deadline("emulated dense");
  const Stream stream = emu_stream();
  struct Shape {
    int64_t N, in, out;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 33, 7}, Shape{3, 7, 10}, Shape{7, 64, 33}}) {
    INFO("dense (N, in, out) = (" << s.N << ", " << s.in << ", " << s.out << ")");
    const std::vector<double> x = random_vector(s.N * s.in, 10), w = random_vector(s.out * s.in, 11),
                              b = random_vector(s.out, 12), dy = random_vector(s.N * s.out, 13);
    const std::vector<float> xf = to_float(x), wf = to_float(w), bf = to_float(b),
                             dyf = to_float(dy);

    std::vector<double> y(s.N * s.out), y_mag(y.size());
    ref::dense_forward(x.data(), w.data(), b.data(), y.data(), s.N, s.in, s.out);
    ref::dense_forward(abs_of(x).data(), abs_of(w).data(), abs_of(b).data(), y_mag.data(), s.N,
                       s.in, s.out);
    std::vector<float> yf = nan_vector(s.N * s.out);
    emu::dense_forward(xf.data(), wf.data(), bf.data(), yf.data(), s.N, s.in, s.out, stream);
    std::vector<float> yr = nan_vector(s.N * s.out);
    emu::dense_forward(xf.data(), wf.data(), bf.data(), yr.data(), s.N, s.in, s.out, stream, true);
    stream.synchronize();
    const std::vector<double> y_tol = sum_tolerance(y_mag, s.in + 1);
    CHECK(all_close("y", yf.data(), y, y_tol));
    std::vector<double> y_relu = y;
    for (double& v : y_relu) v = v > 0 ? v : 0;
    CHECK(all_close("relu(y)", yr.data(), y_relu, y_tol));

    std::vector<double> dx(s.N * s.in), dx_mag(dx.size());
    ref::dense_backward_data(dy.data(), w.data(), dx.data(), s.N, s.in, s.out);
    ref::dense_backward_data(abs_of(dy).data(), abs_of(w).data(), dx_mag.data(), s.N, s.in, s.out);
    std::vector<float> dxf = nan_vector(s.N * s.in);  // overwritten
    emu::dense_backward_data(dyf.data(), wf.data(), dxf.data(), s.N, s.in, s.out, stream);

    // Parameter gradients accumulate: start from a non-zero dw, db and add twice.
    const std::vector<double> dw0 = random_vector(s.out * s.in, 14), db0 = random_vector(s.out, 15);
    std::vector<float> dwf = to_float(dw0), dbf = to_float(db0);
    emu::dense_backward_weight(xf.data(), dyf.data(), dwf.data(), s.N, s.in, s.out, stream);
    emu::dense_backward_weight(xf.data(), dyf.data(), dwf.data(), s.N, s.in, s.out, stream);
    emu::dense_backward_bias(dyf.data(), dbf.data(), s.N, s.out, stream);
    emu::dense_backward_bias(dyf.data(), dbf.data(), s.N, s.out, stream);
    stream.synchronize();
    CHECK(all_close("dx", dxf.data(), dx, sum_tolerance(dx_mag, s.out)));

    std::vector<double> dw = to_double(to_float(dw0)), db = to_double(to_float(db0));
    std::vector<double> dw_mag = abs_of(dw), db_mag = abs_of(db);
    for (int k = 0; k < 2; ++k) {
      ref::dense_backward_weight(x.data(), dy.data(), dw.data(), s.N, s.in, s.out);
      ref::dense_backward_weight(abs_of(x).data(), abs_of(dy).data(), dw_mag.data(), s.N, s.in, s.out);
      ref::dense_backward_bias(dy.data(), db.data(), s.N, s.out);
      ref::dense_backward_bias(abs_of(dy).data(), db_mag.data(), s.N, s.out);
    }
    CHECK(all_close("dw", dwf.data(), dw, sum_tolerance(dw_mag, 2 * s.N + 1)));
    CHECK(all_close("db", dbf.data(), db, sum_tolerance(db_mag, 2 * s.N + 1)));
  }
}

TEST_CASE("dense launchers reject a zero-width layer with the op's name") {
  const Stream stream = emu_stream();
  float x = 0.0f;
  CHECK_THROWS_WITH(emu::dense_forward(&x, &x, nullptr, &x, 2, 0, 3, stream),
                    doctest::Contains("dense_forward: invalid shape: batch 2, in 0, out 3"));
}
