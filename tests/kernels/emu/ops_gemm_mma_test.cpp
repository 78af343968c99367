// gemm_mma_bf16 and its instruction (kernels/cuda/gemm_mma.cu, mma_bf16.cuh): the emulated
// kernels on a CPU stream, and the native ones on cuda:0 where there is a GPU (real: the
// tensor cores' own fragment layout; or emulated GPUs). The instruction is checked lane by
// lane against the PTX ISA's fragment layout, written out here again; the GEMM against a
// double loop over the same operands rounded to bf16 (ref::round_to_bf16), within a float
// sum's tolerance of K + 1 terms (the products are exact; only the sums' grouping may differ,
// a tensor core's included). Shapes off the 64×64 tile and the 32-deep slice (1, 15, 17, 33,
// 130), every transpose, beta 0 and 1, padded pitches, batches one C each and summed, the
// bias and ReLU epilogue, NaN and Inf, and the same bits on a second launch; split-K
// (gemm_split_k.cuh) on the question's skinny, deep products and odd shapes. Conv2D's bf16
// passes (conv2d.cu), which lower bf16 columns for it, in one pass and in a pass per sample.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/launchers.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"
#include "kernels/reference/bf16.h"
#include "kernels/reference/conv2d.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/kernels/emu/ops_gemm_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

namespace {

// v with each value rounded to bf16 by the reference: what the kernel's bfloat16 operands hold.
std::vector<float> mma_rounded(std::vector<float> v) {
  for (float& x : v) x = ref::round_to_bf16(x);
  return v;
}

// `values` on the stream's device (one spare element: a tensor of K = 0 is never empty).
Tensor mma_upload(std::vector<float> values, const Stream& stream) {
  values.push_back(0.0f);
  return Tensor::from_vector(values, Shape({static_cast<int64_t>(values.size())}), stream);
}

// A bias and ReLU for gemm_mma_bf16's epilogue (bias empty: none).
struct MmaEpilogue {
  std::vector<float> bias;
  bool per_row = false, relu = false;
};

// gemm_mma_bf16 on the stream's device: the emulated kernel on a CPU stream, the native one on
// a CUDA stream. a and b are values already rounded to bf16, narrowed to bfloat16 storage on
// the device (exactly); c is C before (read when beta != 0) and after.
void mma_gemm_on(const Stream& stream, bool ta, bool tb, const GemmCase& s, float alpha,
                 const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                 int64_t ldb, float beta, std::vector<float>& c, int64_t ldc,
                 const GemmBatch& batch, const MmaEpilogue& epi) {
  const Tensor ah = ops::narrow_to_bf16(mma_upload(a, stream), stream);
  const Tensor bh = ops::narrow_to_bf16(mma_upload(b, stream), stream);
  const Tensor ct = mma_upload(c, stream);
  const Tensor bias = mma_upload(epi.bias, stream);
  const GemmEpilogue e{epi.bias.empty() ? nullptr : bias.data<float>(), epi.per_row, epi.relu};
  if (stream.device().is_cpu()) {
    emu::gemm_mma_bf16(ta, tb, s.M, s.N, s.K, alpha, ops::detail::bf16_data(ah), lda,
                       ops::detail::bf16_data(bh), ldb, beta, ct.data<float>(), ldc, batch, e,
                       stream);
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    cuda::gemm_mma_bf16(ta, tb, s.M, s.N, s.K, alpha, ops::detail::bf16_data(ah), lda,
                        ops::detail::bf16_data(bh), ldb, beta, ct.data<float>(), ldc, batch, e,
                        stream);
#endif
  }
  stream.synchronize();
  std::vector<float> out = ct.to_vector();
  out.pop_back();
  c = out;
}

// The lane-by-lane check of one m16n8k16 on the stream's device. A, B and C hold small
// integers (every sum exact, so any grouping gives the same bits) and C's are 256 apart, so
// each element of D is distinct and a lane reporting another lane's element is caught.
void mma_check_one_warp(const Stream& stream) {
  std::vector<float> a(16 * 16), b(16 * 8), c(16 * 8);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) a[r * 16 + k] = static_cast<float>((r * 16 + k) % 7 - 3);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) b[k * 8 + n] = static_cast<float>((k * 8 + n * 3) % 5 - 2);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) c[r * 8 + n] = static_cast<float>(256 * (r * 8 + n));
  const Tensor ah = ops::narrow_to_bf16(mma_upload(a, stream), stream);
  const Tensor bh = ops::narrow_to_bf16(mma_upload(b, stream), stream);
  const Tensor ct = mma_upload(c, stream);
  const Tensor lanes = mma_upload(std::vector<float>(32 * 4, NAN), stream);
  if (stream.device().is_cpu()) {
    emu::mma_bf16_one_warp(ops::detail::bf16_data(ah), ops::detail::bf16_data(bh),
                           ct.data<float>(), lanes.data<float>(), stream);
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    cuda::mma_bf16_one_warp(ops::detail::bf16_data(ah), ops::detail::bf16_data(bh),
                            ct.data<float>(), lanes.data<float>(), stream);
#endif
  }
  stream.synchronize();
  const std::vector<float> got = lanes.to_vector();
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      // PTX ISA, accumulators of m16n8k16: row groupID (+ 8 for c2, c3), column
      // 2·threadID_in_group + (i & 1).
      const int row = lane / 4 + (i >= 2 ? 8 : 0), col = lane % 4 * 2 + (i & 1);
      double want = c[row * 8 + col];
      for (int k = 0; k < 16; ++k) want += double{a[row * 16 + k]} * b[k * 8 + col];
      INFO("lane " << lane << ", c[" << i << "]: D[" << row << "][" << col << "]");
      CHECK(got[lane * 4 + i] == static_cast<float>(want));
    }
}

// One GEMM of shape s against the double loop on rounded operands: padded pitches (+3),
// alpha 0.75, beta as given.
void mma_check_gemm(const Stream& stream, bool ta, bool tb, const GemmCase& s, float beta) {
  const int64_t a_rows = ta ? s.K : s.M, a_cols = ta ? s.M : s.K;
  const int64_t b_rows = tb ? s.N : s.K, b_cols = tb ? s.K : s.N;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = s.N + 3;
  const std::vector<float> a = mma_rounded(to_float(random_vector(a_rows * lda, 11)));
  const std::vector<float> b = mma_rounded(to_float(random_vector(b_rows * ldb, 12)));
  const std::vector<float> c0 = to_float(random_vector(s.M * ldc, 13));
  std::vector<float> got = beta == 0.0f ? nan_vector(s.M * ldc) : c0;  // beta 0: not read
  const float alpha = 0.75f;
  mma_gemm_on(stream, ta, tb, s, alpha, a, lda, b, ldb, beta, got, ldc, GemmBatch{}, {});
  std::vector<double> want, mag;
  reference_product(ta, tb, s, a.data(), lda, b.data(), ldb, want, mag);
  std::vector<float> packed;
  finish_reference(s, alpha, beta, c0.data(), got.data(), ldc, want, mag, packed);
  CHECK(all_close("C", packed.data(), want, sum_tolerance(mag, s.K + 1)));
}

// v rounded to bf16 by the reference, in bfloat16 storage (the top half of the float's bits).
std::vector<cpu::bf16> mma_narrowed(const std::vector<float>& v) {
  std::vector<cpu::bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i].bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(ref::round_to_bf16(v[i])) >> 16);
  return out;
}

}  // namespace

TEST_CASE("mma_bf16_m16n8k16: each lane's four results where the PTX fragment layout puts them") {
  testing::Deadline deadline("emulated mma_bf16_one_warp");
  mma_check_one_warp(emu_stream());
}

TEST_CASE("gemm_mma_bf16: C = alpha op(A) op(B) + beta C on bf16 operands, every transpose") {
  testing::Deadline deadline("emulated gemm_mma_bf16");
  const Stream stream = emu_stream();
  for (GemmCase s : {GemmCase{1, 1, 1}, GemmCase{15, 17, 33}, GemmCase{17, 15, 16},
                     GemmCase{33, 130, 17}, GemmCase{130, 33, 65}, GemmCase{64, 64, 32},
                     GemmCase{5, 4, 0}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          INFO("(M, N, K) = (" << s.M << ", " << s.N << ", " << s.K << "), trans_a " << ta
                               << ", trans_b " << tb << ", beta " << beta);
          mma_check_gemm(stream, ta, tb, s, beta);
        }
}

TEST_CASE("gemm_mma_bf16: batches one C each and summed, the bias and ReLU, the same bits twice") {
  testing::Deadline deadline("emulated gemm_mma_bf16 batches");
  const Stream stream = emu_stream();
  const GemmCase s{33, 70, 40};
  const int64_t count = 3;
  const int64_t sa = s.M * s.K + 5, sb = s.K * s.N + 7, sc = s.M * s.N + 2;  // (M,K), (K,N)
  const std::vector<float> a = mma_rounded(to_float(random_vector(count * sa, 21)));
  const std::vector<float> b = mma_rounded(to_float(random_vector(count * sb, 22)));
  for (bool summed : {false, true})
    for (bool per_row : {false, true}) {
      INFO("summed " << summed << ", bias per row " << per_row);
      MmaEpilogue epi{to_float(random_vector(per_row ? s.M : s.N, 23)), per_row, true};
      const GemmBatch batch{count, sa, sb, sc, summed};
      const int64_t outputs = summed ? 1 : count;
      std::vector<float> got = nan_vector(outputs * sc);
      mma_gemm_on(stream, false, false, s, 1.0f, a, s.K, b, s.N, 0.0f, got, s.N, batch, epi);
      for (int64_t p = 0; p < outputs; ++p) {
        std::vector<double> want(s.M * s.N, 0.0), mag(s.M * s.N, 0.0);
        for (int64_t q = summed ? 0 : p; q < (summed ? count : p + 1); ++q) {
          std::vector<double> one, one_mag;
          reference_product(false, false, s, a.data() + q * sa, s.K, b.data() + q * sb, s.N, one,
                            one_mag);
          for (size_t e = 0; e < want.size(); ++e) {
            want[e] += one[e];
            mag[e] += one_mag[e];
          }
        }
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t j = 0; j < s.N; ++j) {
            double& w = want[i * s.N + j];
            w += epi.bias[per_row ? i : j];
            mag[i * s.N + j] += std::fabs(epi.bias[per_row ? i : j]);
            if (w < 0.0) w = 0.0;  // a tolerance covers a value near 0 that rounds either way
          }
        CHECK(all_close("C", got.data() + p * sc, want,
                        sum_tolerance(mag, (summed ? count : 1) * s.K + 1)));
      }
      std::vector<float> again = nan_vector(outputs * sc);
      mma_gemm_on(stream, false, false, s, 1.0f, a, s.K, b, s.N, 0.0f, again, s.N, batch, epi);
      for (int64_t p = 0; p < outputs; ++p)  // between the products lie unwritten NaNs
        CHECK(all_equal("second launch", again.data() + p * sc, got.data() + p * sc, s.M * s.N));
    }
}

TEST_CASE("gemm_mma_bf16 split-K: the launcher's choice, worked by hand") {
  const GemmBatch one{};
  // The question's skinny, deep products at batch 128: 2 tiles of 64 × 64 over 47 slices of
  // 32: min(128 / 2, 47 · 32 / 64) = 23 splits; at batch 32, 1 tile, the same 23.
  CHECK(emu::gemm_mma_split_k(128, 64, 1500, one) == 23);  // dense_1 backward-data
  CHECK(emu::gemm_mma_split_k(128, 10, 1500, one) == 23);  // dense_2 forward
  CHECK(emu::gemm_mma_split_k(32, 64, 1500, one) == 23);
  // The weight gradients, K = batch 128 (4 slices): 24 tiles, 2 splits; dense_2's 24 too.
  CHECK(emu::gemm_mma_split_k(1500, 64, 128, one) == 2);
  CHECK(emu::gemm_mma_split_k(10, 1500, 128, one) == 2);
  // Depth: 96 of K (3 slices) cannot give two splits of 64; 128 can.
  CHECK(emu::gemm_mma_split_k(64, 64, 96, one) == 1);
  CHECK(emu::gemm_mma_split_k(64, 64, 128, one) == 2);
  // conv2d_2's filter gradient at batch 128, summed over the samples: dw (64, 288) is 5 tiles,
  // K = 576 is 18 slices a sample, 2,304 in all: min(128 / 5, 1,152) = 25.
  CHECK(emu::gemm_mma_split_k(64, 288, 576, GemmBatch{128, 0, 0, 0, true}) == 25);
  CHECK(emu::gemm_mma_split_k(64, 288, 576, GemmBatch{128, 0, 0, 0, false}) == 1);
  CHECK(emu::gemm_mma_split_k(0, 10, 1500, one) == 1);  // an empty C launches nothing
}

TEST_CASE("gemm_mma_bf16 split-K: skinny, deep products and odd shapes, the same bits twice") {
  testing::Deadline deadline("emulated gemm_mma_bf16 split-K");
  const Stream stream = emu_stream();
  // dense_1 backward-data (NN) and dense_2 forward (NT) at batch 128, beta 0 and 1; K off the
  // slice and off a multiple of S (1 × 33 over 257: 9 slices, 4 splits), C across tile edges
  // (130 × 70 over 300: 6 tiles, 10 slices, 5 splits), every transpose.
  CHECK(emu::gemm_mma_split_k(1, 33, 257, GemmBatch{}) == 4);
  CHECK(emu::gemm_mma_split_k(130, 70, 300, GemmBatch{}) == 5);
  for (float beta : {0.0f, 1.0f}) {
    mma_check_gemm(stream, false, false, GemmCase{128, 64, 1500}, beta);
    mma_check_gemm(stream, false, true, GemmCase{128, 10, 1500}, beta);
  }
  for (GemmCase s : {GemmCase{1, 33, 257}, GemmCase{130, 70, 300}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        INFO("(M, N, K) = (" << s.M << ", " << s.N << ", " << s.K << "), trans_a " << ta
                             << ", trans_b " << tb);
        mma_check_gemm(stream, ta, tb, s, tb == 1 ? 1.0f : 0.0f);
      }
  // Two launches on one stream (the first's last blocks reset the tickets for the second), one
  // on another stream (a scratch of its own): the same bits, whichever block adds the partials.
  const GemmCase s{128, 64, 1500};
  const std::vector<float> a = mma_rounded(to_float(random_vector(s.M * s.K, 51)));
  const std::vector<float> b = mma_rounded(to_float(random_vector(s.K * s.N, 52)));
  const std::vector<float> c0 = to_float(random_vector(s.M * s.N, 53));
  const Stream other = emu_stream();
  std::vector<std::vector<float>> runs(3, c0);
  for (int r = 0; r < 3; ++r)
    mma_gemm_on(r < 2 ? stream : other, false, false, s, 1.0f, a, s.K, b, s.N, 1.0f, runs[r],
                s.N, GemmBatch{}, {});
  for (int r = 1; r < 3; ++r) {
    INFO("launch " << r << " against launch 0");
    CHECK(all_equal("C", runs[r].data(), runs[0].data(), s.M * s.N));
  }
}

TEST_CASE("gemm_mma_bf16 side by side: products of few columns as one C, each product's bits") {
  // gemm_args.h's side_by_side on the tensor-core GEMM: count products sharing A as one C of
  // count·N columns; each element the sum it is in its product alone (these shapes split K
  // alike either way, or not at all), and the gaps between the products' C untouched.
  testing::Deadline deadline("emulated gemm_mma_bf16 side by side");
  const Stream stream = emu_stream();
  struct SideCase {
    GemmCase c;
    int64_t count;
    bool ta;
  };
  for (const SideCase& s : {SideCase{{64, 9, 72}, 5, false}, SideCase{{33, 130, 40}, 3, true},
                            SideCase{{70, 8, 640}, 4, false}}) {
    const GemmCase c = s.c;
    INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), " << s.count
                         << " products, trans_a " << s.ta);
    const int64_t a_rows = s.ta ? c.K : c.M, lda = (s.ta ? c.M : c.K) + 3, ldb = c.N + 1;
    const int64_t ldc = c.N + 2, stride_b = c.K * ldb + 5, stride_c = c.M * ldc + 3;
    const GemmBatch side{s.count, 0, stride_b, stride_c, false, true};
    CHECK(emu::gemm_mma_split_k(c.M, c.N, c.K, side) ==
          emu::gemm_mma_split_k(c.M, c.N, c.K, GemmBatch{}));
    const std::vector<float> a = mma_rounded(to_float(random_vector(a_rows * lda, 81)));
    const std::vector<float> b = mma_rounded(to_float(random_vector(s.count * stride_b, 82)));
    const MmaEpilogue epi{to_float(random_vector(c.M, 83)), /*per_row=*/true, /*relu=*/false};
    std::vector<float> got = nan_vector(s.count * stride_c);
    mma_gemm_on(stream, s.ta, false, c, 1.0f, a, lda, b, ldb, 0.0f, got, ldc, side, epi);
    for (int64_t p = 0; p < s.count; ++p) {
      const std::vector<float> b_p(b.begin() + p * stride_b, b.begin() + (p + 1) * stride_b);
      std::vector<float> alone = nan_vector(stride_c);
      mma_gemm_on(stream, s.ta, false, c, 1.0f, a, lda, b_p, ldb, 0.0f, alone, ldc, GemmBatch{},
                  epi);
      CHECK(all_equal("C_p", got.data() + p * stride_c, alone.data(), stride_c));
      std::vector<double> want, mag;
      reference_product(s.ta, false, c, a.data(), lda, b_p.data(), ldb, want, mag);
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) {
          want[i * c.N + j] += epi.bias[i];
          mag[i * c.N + j] += std::fabs(epi.bias[i]);
        }
      std::vector<float> packed(want.size());
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) packed[i * c.N + j] = alone[i * ldc + j];
      CHECK(all_close("C_p", packed.data(), want, sum_tolerance(mag, c.K + 1)));
    }
  }
}

TEST_CASE("gemm_mma_bf16: a NaN or an infinity in A reaches its row of C, and only it") {
  testing::Deadline deadline("emulated gemm_mma_bf16 NaN");
  const Stream stream = emu_stream();
  const GemmCase s{20, 9, 24};
  std::vector<float> a = mma_rounded(to_float(random_vector(s.M * s.K, 31)));
  const std::vector<float> b = mma_rounded(to_float(random_vector(s.K * s.N, 32, 0.5, 1.0)));
  a[2 * s.K + 5] = NAN;
  a[7 * s.K + 6] = INFINITY;  // B > 0: every product of row 7 with it is +Inf
  std::vector<float> got = nan_vector(s.M * s.N);
  mma_gemm_on(stream, false, false, s, 1.0f, a, s.K, b, s.N, 0.0f, got, s.N, GemmBatch{}, {});
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      INFO("C[" << i << "][" << j << "] = " << got[i * s.N + j]);
      const float v = got[i * s.N + j];
      if (i == 2) CHECK(std::isnan(v));
      else if (i == 7) CHECK(v == INFINITY);
      else CHECK(std::isfinite(v));
    }
}

TEST_CASE("native gemm_mma_bf16 and its instruction on a GPU: the tensor cores' own layout") {
  if (cuda_device_count() == 0) {
    MESSAGE("no GPU here: the native kernel was compiled and linked, not run");
    return;
  }
  testing::Deadline deadline("native gemm_mma_bf16");
  const Stream stream = Stream::create(Device::cuda(0));
  mma_check_one_warp(stream);
  // The last: dense_1's backward-data at batch 128, split-K's 23 blocks a tile.
  for (GemmCase s : {GemmCase{15, 17, 33}, GemmCase{130, 33, 65}, GemmCase{128, 1500, 64},
                     GemmCase{128, 64, 1500}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        INFO("(M, N, K) = (" << s.M << ", " << s.N << ", " << s.K << "), trans_a " << ta
                             << ", trans_b " << tb);
        mma_check_gemm(stream, ta, tb, s, 1.0f);
      }
}

TEST_CASE("conv2d *_bf16 (bf16 columns, tensor cores): one pass and a pass per sample") {
  testing::Deadline deadline("emulated conv2d bf16");
  const Stream stream = emu_stream();
  // A sample's columns (C·R·S, P·Q) = (9, 25): an odd count of bf16 in the share's floats; and
  // a shape whose filter gradient, summed over 4 samples of 64 pixels, splits K in 4.
  for (const Conv2dShape& s : {make_conv2d_shape(3, 1, 5, 5, 4, 3, 3, 1, Padding::same),
                               make_conv2d_shape(4, 3, 10, 10, 5, 3, 3, 1, Padding::valid)}) {
    INFO("input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W << "), " << s.K
                   << " filters");
    const std::vector<float> x = to_float(random_vector(s.x_size(), 41));
    const std::vector<float> w = to_float(random_vector(s.K * s.C * s.R * s.S, 42));
    const std::vector<float> dy = to_float(random_vector(s.y_size(), 43));
    const std::vector<float> bias = to_float(random_vector(s.K, 44));
    const std::vector<cpu::bf16> xh = mma_narrowed(x), wh = mma_narrowed(w),
                                 dyh = mma_narrowed(dy);
    const std::vector<double> xr = ref::bf16_operands(x), wr = ref::bf16_operands(w),
                              dyr = ref::bf16_operands(dy), br(bias.begin(), bias.end());
    const std::vector<double> xm = abs_of(xr), wm = abs_of(wr), dym = abs_of(dyr),
                              bm = abs_of(br);
    std::vector<double> y_want(s.y_size()), y_mag(s.y_size()), dx_want(s.x_size()),
        dx_mag(s.x_size()), dw_want(w.size(), 0.0), dw_mag(w.size(), 0.0);
    ref::conv2d_forward<double>(xr.data(), wr.data(), br.data(), y_want.data(), s);
    ref::conv2d_forward<double>(xm.data(), wm.data(), bm.data(), y_mag.data(), s);
    ref::conv2d_backward_data<double>(dyr.data(), wr.data(), dx_want.data(), s);
    ref::conv2d_backward_data<double>(dym.data(), wm.data(), dx_mag.data(), s);
    ref::conv2d_backward_filter<double>(xr.data(), dyr.data(), dw_want.data(), s);
    ref::conv2d_backward_filter<double>(xm.data(), dym.data(), dw_mag.data(), s);
    const int64_t share = s.C * s.R * s.S * s.P * s.Q;  // one sample's: its columns
    for (int64_t floats : {emu::conv2d_workspace_floats(s), share}) {
      INFO("workspace " << floats << " floats (" << floats / share << " samples a pass)");
      std::vector<float> ws(static_cast<size_t>(floats), NAN);
      std::vector<float> y = nan_vector(s.y_size()), dx = nan_vector(s.x_size());
      std::vector<float> dw(w.size(), 0.0f);
      emu::conv2d_forward_bf16(xh.data(), wh.data(), bias.data(), y.data(), s, ws.data(),
                               floats, stream);
      emu::conv2d_backward_data_bf16(dyh.data(), wh.data(), dx.data(), s, ws.data(), floats,
                                     stream);
      emu::conv2d_backward_filter_bf16(xh.data(), dyh.data(), dw.data(), s, ws.data(), floats,
                                       stream);
      stream.synchronize();
      CHECK(all_close("y", y.data(), y_want, sum_tolerance(y_mag, s.C * s.R * s.S + 1)));
      CHECK(all_close("dx", dx.data(), dx_want, sum_tolerance(dx_mag, s.K * s.R * s.S)));
      CHECK(all_close("dw", dw.data(), dw_want, sum_tolerance(dw_mag, s.N * s.P * s.Q)));
    }
  }
}
