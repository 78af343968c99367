// gemm_tiled and Dense (kernels/cuda/gemm_tiled.cu, dense.cu) through the emulator, against
// plain double loops and brigade::ref. Shapes: 1, odd sizes, sizes across the 128×128 tile's
// (and the 64×128 tile's, for a C of at most 64 rows) and the 8-deep slice's edges, the
// question's network's GEMMs, every transpose combination, leading dimensions padded to break
// (+3) and keep (multiple of 4) the float4 loads' alignment; batches of products, summed
// batches and the fused bias/ReLU epilogue.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/launchers.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/kernels/emu/ops_gemm_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("gemm_tiled: C = alpha op(A) op(B) + beta C for every transpose, odd sizes") {
  testing::Deadline deadline("emulated gemm_tiled");
  const Stream stream = emu_stream();
  for (GemmCase c : {GemmCase{1, 1, 1}, GemmCase{3, 7, 1}, GemmCase{7, 3, 33},
                     GemmCase{17, 33, 5}, GemmCase{33, 17, 20}, GemmCase{16, 16, 16},
                     GemmCase{5, 4, 0}, GemmCase{129, 131, 9}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f})
          for (bool aligned : {false, true}) {
            INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), trans_a " << ta
                                 << ", trans_b " << tb << ", beta " << beta << ", aligned "
                                 << aligned);
            // Stored shapes with padding per row (lda > the row length): 3 floats (scalar loads
            // only), or up to the next multiple of 4 floats (float4 loads where they fit).
            const int64_t a_rows = ta ? c.K : c.M, a_cols = ta ? c.M : c.K;
            const int64_t b_rows = tb ? c.N : c.K, b_cols = tb ? c.K : c.N;
            const auto pitch = [&](int64_t cols) {
              return std::max<int64_t>(aligned ? aligned_pitch(cols) : cols + 3, 1);
            };
            const int64_t lda = pitch(a_cols), ldb = pitch(b_cols), ldc = pitch(c.N);
            const std::vector<float> a = to_float(random_vector(a_rows * lda, 1));
            const std::vector<float> b = to_float(random_vector(b_rows * ldb, 2));
            const std::vector<float> c0 = to_float(random_vector(c.M * ldc, 3));
            std::vector<float> got = beta == 0.0f ? nan_vector(c.M * ldc) : c0;  // beta 0: not read
            const float alpha = 0.75f;
            emu::gemm_tiled(ta, tb, c.M, c.N, c.K, alpha, a.data(), lda, b.data(), ldb, beta,
                            got.data(), ldc, stream);
            stream.synchronize();
            std::vector<double> want, mag;
            reference_product(ta, tb, c, a.data(), lda, b.data(), ldb, want, mag);
            std::vector<float> got_packed;
            finish_reference(c, alpha, beta, c0.data(), got.data(), ldc, want, mag, got_packed);
            CHECK(all_close("C", got_packed.data(), want, sum_tolerance(mag, c.K + 1)));
          }
  }
}

TEST_CASE("gemm_tiled: a C of at most 64 rows (64-row tiles) has the 128-row tile's bits") {
  // gemm_tiled.cu's "Short C": M <= 64 runs on 64×128 tiles, M > 64 on 128×128 ones, each
  // element the same sum in the same order. The same op(A) rows, as the first M of a taller
  // product of 100 rows (one row of 128-row tiles, so the same split-K), give the same C rows.
  testing::Deadline deadline("emulated gemm_tiled short C");
  const Stream stream = emu_stream();
  constexpr int64_t kTall = 100;
  struct ShortCase {
    GemmCase c;
    bool ta, tb, aligned;
  };
  // conv2d_2's forward and filter gradient of one sample (M = 64 output channels), dense_2's
  // forward at batch 64 (split in 23), odd shapes with every transpose and scalar loads.
  std::vector<ShortCase> cases = {{{64, 576, 288}, false, false, true},
                                  {{64, 288, 576}, false, true, true},
                                  {{64, 10, 1500}, false, true, false}};
  for (GemmCase c : {GemmCase{33, 130, 17}, GemmCase{1, 33, 257}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) cases.push_back({c, ta == 1, tb == 1, false});
  for (const ShortCase& s : cases) {
    const GemmCase c = s.c, tall{kTall, c.N, c.K};
    INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), trans_a " << s.ta
                         << ", trans_b " << s.tb << ", aligned " << s.aligned);
    REQUIRE(emu::gemm_split_k(c.M, c.N, c.K, GemmBatch{}) ==
            emu::gemm_split_k(kTall, c.N, c.K, GemmBatch{}));
    const auto pitch = [&](int64_t cols) { return s.aligned ? aligned_pitch(cols) : cols + 3; };
    // A stored for the tall product: (100, K), or (K, 100) when transposed; the short product
    // reads its first M rows of op(A) from the same storage.
    const int64_t a_rows = s.ta ? c.K : kTall, a_cols = s.ta ? kTall : c.K;
    const int64_t b_rows = s.tb ? c.N : c.K, b_cols = s.tb ? c.K : c.N;
    const int64_t lda = pitch(a_cols), ldb = pitch(b_cols), ldc = pitch(c.N);
    const std::vector<float> a = to_float(random_vector(a_rows * lda, 61));
    const std::vector<float> b = to_float(random_vector(b_rows * ldb, 62));
    std::vector<float> short_c = nan_vector(c.M * ldc), tall_c = nan_vector(kTall * ldc);
    emu::gemm_tiled(s.ta, s.tb, c.M, c.N, c.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                    short_c.data(), ldc, stream);
    emu::gemm_tiled(s.ta, s.tb, tall.M, tall.N, tall.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                    tall_c.data(), ldc, stream);
    stream.synchronize();
    CHECK(all_equal("C", short_c.data(), tall_c.data(), (c.M - 1) * ldc + c.N));
    std::vector<double> want, mag;
    reference_product(s.ta, s.tb, c, a.data(), lda, b.data(), ldb, want, mag);
    std::vector<float> packed;
    finish_reference(c, 1.0f, 0.0f, nullptr, short_c.data(), ldc, want, mag, packed);
    CHECK(all_close("C", packed.data(), want, sum_tolerance(mag, c.K + 1)));
  }
}

TEST_CASE("gemm_tiled_batched side by side: products of few columns as one C, the bits of each") {
  // gemm_args.h's side_by_side: count products sharing A, tiled as one C of count·N columns.
  // Each element is the sum it is in its product alone, in the same order (these shapes split
  // K alike either way, or not at all): the same bits as a launch per product, and the gaps
  // between the products' C (NaN) untouched. N = 9 and 130: float4 loads of B never fit (the
  // quads straddle products); N = 8 and 12 with aligned pitches and strides: they do.
  testing::Deadline deadline("emulated gemm_tiled side by side");
  const Stream stream = emu_stream();
  struct SideCase {
    GemmCase c;
    int64_t count;
    bool ta, aligned;
  };
  for (const SideCase& s : {SideCase{{64, 9, 72}, 5, false, false},
                            SideCase{{64, 8, 72}, 5, true, true},
                            SideCase{{33, 130, 40}, 3, true, false},
                            SideCase{{130, 12, 16}, 7, false, true},
                            SideCase{{64, 9, 1152}, 4, false, false}}) {
    const GemmCase c = s.c;
    INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), " << s.count
                         << " products, trans_a " << s.ta << ", aligned " << s.aligned);
    const auto pitch = [&](int64_t cols) { return s.aligned ? aligned_pitch(cols) : cols + 3; };
    const int64_t a_rows = s.ta ? c.K : c.M, a_cols = s.ta ? c.M : c.K;
    const int64_t lda = pitch(a_cols), ldb = pitch(c.N), ldc = pitch(c.N);
    const int64_t stride_b = c.K * ldb + 4, stride_c = c.M * ldc + 8;  // gaps between products
    const GemmBatch side{s.count, 0, stride_b, stride_c, false, true};
    CHECK(emu::gemm_split_k(c.M, c.N, c.K, side) == emu::gemm_split_k(c.M, c.N, c.K, GemmBatch{}));
    const std::vector<float> a = to_float(random_vector(a_rows * lda, 71));
    const std::vector<float> b = to_float(random_vector(s.count * stride_b, 72));
    const std::vector<float> bias = to_float(random_vector(c.M, 73));
    const std::vector<float> c0 = to_float(random_vector(s.count * stride_c, 74));
    for (float beta : {0.0f, 1.0f}) {
      INFO("beta " << beta);
      const GemmEpilogue epilogue{bias.data(), /*bias_per_row=*/true, /*relu=*/beta == 0.0f};
      std::vector<float> got = beta == 0.0f ? nan_vector(s.count * stride_c) : c0;
      std::vector<float> alone = got;
      emu::gemm_tiled_batched(s.ta, false, c.M, c.N, c.K, 0.75f, a.data(), lda, b.data(), ldb,
                              beta, got.data(), ldc, side, epilogue, stream);
      for (int64_t p = 0; p < s.count; ++p)
        emu::gemm_tiled_batched(s.ta, false, c.M, c.N, c.K, 0.75f, a.data(), lda,
                                b.data() + p * stride_b, ldb, beta, alone.data() + p * stride_c,
                                ldc, GemmBatch{}, epilogue, stream);
      stream.synchronize();
      CHECK(all_equal("C", got.data(), alone.data(), s.count * stride_c));
      for (int64_t p = 0; p < s.count; ++p) {  // and each product against the double loop
        std::vector<double> want, mag;
        reference_product(s.ta, false, c, a.data(), lda, b.data() + p * stride_b, ldb, want, mag);
        std::vector<float> packed;
        finish_reference(c, 0.75f, beta, c0.data() + p * stride_c, got.data() + p * stride_c, ldc,
                         want, mag, packed);
        for (int64_t i = 0; i < c.M; ++i)
          for (int64_t j = 0; j < c.N; ++j) {
            double& w = want[i * c.N + j];
            w += bias[i];
            mag[i * c.N + j] += std::fabs(bias[i]);
            if (beta == 0.0f && w < 0.0) w = 0.0;  // ReLU
          }
        CHECK(all_close("C_p", packed.data(), want, sum_tolerance(mag, c.K + 2)));
      }
    }
  }
}

TEST_CASE("gemm_tiled_batched side by side: what it cannot do is refused, naming the call") {
  const Stream stream = emu_stream();
  float v = 0.0f;
  const auto call = [&](bool tb, const GemmBatch& batch, bool bias_per_row) {
    emu::gemm_tiled_batched(false, tb, 4, 4, 4, 1.0f, &v, 4, &v, 4, 0.0f, &v, 4, batch,
                            GemmEpilogue{&v, bias_per_row}, stream);
  };
  const auto refused = doctest::Contains("gemm_tiled: products side by side need one A");
  CHECK_THROWS_WITH(call(true, GemmBatch{2, 0, 16, 16, false, true}, true), refused);
  CHECK_THROWS_WITH(call(false, GemmBatch{2, 16, 16, 16, false, true}, true), refused);
  CHECK_THROWS_WITH(call(false, GemmBatch{2, 0, 16, 16, true, true}, true), refused);
  CHECK_THROWS_WITH(call(false, GemmBatch{2, 0, 16, 16, false, true}, false), refused);
}

TEST_CASE("gemm_tiled_batched: each product of a batch is gemm_tiled's, bit for bit; a summed batch") {
  // The question's network's shapes, at a batch of 2 (what one conv layer's launch does per
  // sample): conv2 forward (64, 576, 288), conv3 backward-data (576, 100, 128), conv4
  // backward-filter (64, 1152, 9), and two odd ones across the tile edges.
  testing::Deadline deadline("emulated gemm_tiled_batched");
  const Stream stream = emu_stream();
  struct BatchCase {
    bool ta, tb;
    GemmCase c;
  };
  for (BatchCase bc : {BatchCase{false, false, {64, 576, 288}}, BatchCase{true, false, {576, 100, 128}},
                       BatchCase{false, true, {64, 1152, 9}}, BatchCase{true, true, {17, 33, 5}},
                       BatchCase{false, false, {1, 1, 1}}}) {
    const GemmCase c = bc.c;
    INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), trans_a " << bc.ta
                         << ", trans_b " << bc.tb);
    const int64_t lda = bc.ta ? c.M : c.K, ldb = bc.tb ? c.K : c.N;
    const int64_t a_size = c.M * c.K, b_size = c.K * c.N, c_size = c.M * c.N;
    constexpr int64_t kBatch = 2;
    const std::vector<float> a = to_float(random_vector(kBatch * a_size, 4));
    const std::vector<float> b = to_float(random_vector(kBatch * b_size, 5));

    // One C per product, A and B advancing by their strides.
    std::vector<float> got = nan_vector(kBatch * c_size), one = nan_vector(kBatch * c_size);
    emu::gemm_tiled_batched(bc.ta, bc.tb, c.M, c.N, c.K, 1.0f, a.data(), lda, b.data(), ldb,
                            0.0f, got.data(), c.N, GemmBatch{kBatch, a_size, b_size, c_size, false},
                            GemmEpilogue{}, stream);
    for (int64_t p = 0; p < kBatch; ++p)
      emu::gemm_tiled(bc.ta, bc.tb, c.M, c.N, c.K, 1.0f, a.data() + p * a_size, lda,
                      b.data() + p * b_size, ldb, 0.0f, one.data() + p * c_size, c.N, stream);
    // Summed: C = C0 + A_0·B_0 + A_1·B_1, against double loops.
    const std::vector<float> c0 = to_float(random_vector(c_size, 6));
    std::vector<float> summed = c0;
    emu::gemm_tiled_batched(bc.ta, bc.tb, c.M, c.N, c.K, 1.0f, a.data(), lda, b.data(), ldb,
                            1.0f, summed.data(), c.N, GemmBatch{kBatch, a_size, b_size, 0, true},
                            GemmEpilogue{}, stream);
    stream.synchronize();
    CHECK(all_equal("C_p", got.data(), one.data(), kBatch * c_size));
    std::vector<double> want(static_cast<size_t>(c_size)), mag(want.size()), sum, sum_mag;
    for (int64_t i = 0; i < c_size; ++i) want[i] = c0[i], mag[i] = std::fabs(c0[i]);
    for (int64_t p = 0; p < kBatch; ++p) {
      reference_product(bc.ta, bc.tb, c, a.data() + p * a_size, lda, b.data() + p * b_size, ldb,
                        sum, sum_mag);
      for (int64_t i = 0; i < c_size; ++i) want[i] += sum[i], mag[i] += sum_mag[i];
    }
    CHECK(all_close("summed C", summed.data(), want, sum_tolerance(mag, kBatch * c.K + 1)));
  }
}

TEST_CASE("gemm_tiled_batched epilogue: bias per row or per column, then ReLU; NaN stays NaN") {
  testing::Deadline deadline("emulated gemm epilogue");
  const Stream stream = emu_stream();
  // C (3, 2) = A (3, 1) · B (1, 2) with A = (1, 2, 3)ᵀ, B = (1, -1): row i is (i+1, -(i+1)).
  const float a[] = {1.0f, 2.0f, 3.0f}, b[] = {1.0f, -1.0f};
  const float row_bias[] = {NAN, -5.0f, 0.5f}, column_bias[] = {-1.5f, 10.0f};
  float per_row[6], per_column[6], no_relu[6];
  emu::gemm_tiled_batched(false, false, 3, 2, 1, 1.0f, a, 1, b, 2, 0.0f, per_row, 2, GemmBatch{},
                          GemmEpilogue{row_bias, true, true}, stream);
  emu::gemm_tiled_batched(false, false, 3, 2, 1, 1.0f, a, 1, b, 2, 0.0f, per_column, 2,
                          GemmBatch{}, GemmEpilogue{column_bias, false, true}, stream);
  emu::gemm_tiled_batched(false, false, 3, 2, 1, 1.0f, a, 1, b, 2, 0.0f, no_relu, 2, GemmBatch{},
                          GemmEpilogue{column_bias, false, false}, stream);
  stream.synchronize();
  CHECK((std::isnan(per_row[0]) && std::isnan(per_row[1])));
  CHECK((per_row[2] == 0.0f && per_row[3] == 0.0f && per_row[4] == 3.5f && per_row[5] == 0.0f));
  CHECK((per_column[0] == 0.0f && per_column[1] == 9.0f && per_column[2] == 0.5f &&
         per_column[3] == 8.0f && per_column[4] == 1.5f && per_column[5] == 7.0f));
  CHECK((no_relu[0] == -0.5f && no_relu[1] == 9.0f));
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
