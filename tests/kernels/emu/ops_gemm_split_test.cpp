// gemm_tiled's split-K (kernels/cuda/gemm_split_k.cuh) through the emulator: the
// launcher's choice (gemm_split_k) on hand-worked shapes, split products against double loops
// (the question's two skinny, deep products, odd sizes, every transpose, beta, the bias and
// ReLU epilogue, batches one C each and summed), and the same bits on repeated launches.
// The emulator's stream has two compute threads, so a tile's split blocks really run at once
// and either may be the one that adds the partials.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/launchers.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/kernels/emu/ops_gemm_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

namespace {

// A product of one C (or a summed batch) checked against the double reference:
// C = relu?(alpha · sum_b op(A_b) op(B_b) + beta · C0 + bias), pitches padded by 3 floats
// (scalar loads) or to a multiple of 4 (float4 loads).
struct SplitCase {
  bool ta, tb;
  GemmCase c;
  float beta = 0.0f;
  bool aligned = false;
  GemmBatch batch = {};  // count 1, or summed
  bool bias = false, bias_per_row = false, relu = false;
};

void split_check(const SplitCase& s, const Stream& stream) {
  const GemmCase c = s.c;
  INFO("(M, N, K) = (" << c.M << ", " << c.N << ", " << c.K << "), trans_a " << s.ta
                       << ", trans_b " << s.tb << ", beta " << s.beta << ", aligned " << s.aligned
                       << ", " << s.batch.count << " products summed " << s.batch.summed
                       << ", bias " << s.bias << " per row " << s.bias_per_row << ", relu "
                       << s.relu << "; splits " << emu::gemm_split_k(c.M, c.N, c.K, s.batch));
  const int64_t a_rows = s.ta ? c.K : c.M, a_cols = s.ta ? c.M : c.K;
  const int64_t b_rows = s.tb ? c.N : c.K, b_cols = s.tb ? c.K : c.N;
  const auto pitch = [&](int64_t cols) { return s.aligned ? aligned_pitch(cols) : cols + 3; };
  const int64_t lda = pitch(a_cols), ldb = pitch(b_cols), ldc = pitch(c.N);
  const int64_t count = s.batch.count;
  const int64_t a_size = a_rows * lda, b_size = b_rows * ldb;
  const std::vector<float> a = to_float(random_vector(count * a_size, 11));
  const std::vector<float> b = to_float(random_vector(count * b_size, 12));
  const std::vector<float> c0 = to_float(random_vector(c.M * ldc, 13));
  const std::vector<float> bias = to_float(random_vector(std::max(c.M, c.N), 14));
  std::vector<float> got = s.beta == 0.0f ? nan_vector(c.M * ldc) : c0;
  const float alpha = 0.75f;
  const GemmBatch batch{count, count > 1 ? a_size : 0, count > 1 ? b_size : 0, 0,
                        s.batch.summed};
  emu::gemm_tiled_batched(s.ta, s.tb, c.M, c.N, c.K, alpha, a.data(), lda, b.data(), ldb, s.beta,
                          got.data(), ldc, batch,
                          GemmEpilogue{s.bias ? bias.data() : nullptr, s.bias_per_row, s.relu},
                          stream);
  stream.synchronize();

  std::vector<double> want(static_cast<size_t>(c.M * c.N), 0.0), mag(want.size(), 0.0), sum,
      sum_mag;
  for (int64_t p = 0; p < count; ++p) {
    reference_product(s.ta, s.tb, c, a.data() + p * a_size, lda, b.data() + p * b_size, ldb, sum,
                      sum_mag);
    for (size_t e = 0; e < want.size(); ++e) want[e] += sum[e], mag[e] += sum_mag[e];
  }
  std::vector<float> got_packed(want.size());
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      const int64_t e = i * c.N + j;
      const double cij = s.beta == 0.0f ? 0.0 : double{c0[i * ldc + j]};
      const double bij = s.bias ? double{bias[s.bias_per_row ? i : j]} : 0.0;
      const double v = alpha * want[e] + s.beta * cij + bij;
      want[e] = s.relu ? std::max(v, 0.0) : v;  // ReLU moves no value farther from another
      mag[e] = alpha * mag[e] + std::fabs(s.beta * cij) + std::fabs(bij);
      got_packed[e] = got[i * ldc + j];
    }
  CHECK(all_close("C", got_packed.data(), want, sum_tolerance(mag, count * c.K + 2)));
}

}  // namespace

TEST_CASE("gemm_split_k: the launcher's choice, worked by hand") {
  const GemmBatch one{};
  // The question's skinny, deep products: one tile, 188 slices of 8: min(128 / 1, 188 / 8).
  CHECK(emu::gemm_split_k(128, 64, 1500, one) == 23);  // dense_1 backward-data, batch 128
  CHECK(emu::gemm_split_k(128, 10, 1500, one) == 23);  // dense_2 forward, batch 128
  CHECK(emu::gemm_split_k(32, 64, 1500, one) == 23);   // the same at batch 32
  // The weight gradients, K = batch 128: 12 tiles, 16 slices: two splits (none at batch 32).
  CHECK(emu::gemm_split_k(1500, 64, 128, one) == 2);  // dense_1
  CHECK(emu::gemm_split_k(10, 1500, 128, one) == 2);  // dense_2
  CHECK(emu::gemm_split_k(10, 1500, 32, one) == 1);
  // Depth: 15 slices cannot give two splits of 8; 16 can; K = 129 is 17 slices.
  CHECK(emu::gemm_split_k(128, 128, 120, one) == 1);
  CHECK(emu::gemm_split_k(128, 128, 128, one) == 2);
  CHECK(emu::gemm_split_k(1, 1, 129, one) == 2);
  // Tiles: 64 tiles (1024 × 1024) split in two, 81 (1152 × 1152) do not; 9 tiles: 128 / 9 = 14.
  CHECK(emu::gemm_split_k(1024, 1024, 4096, one) == 2);
  CHECK(emu::gemm_split_k(1152, 1152, 4096, one) == 1);
  CHECK(emu::gemm_split_k(300, 300, 4096, one) == 14);
  // A batch of products, one C each, counts its tiles; a summed one, its slices.
  CHECK(emu::gemm_split_k(128, 10, 1500, GemmBatch{2, 0, 0, 0, false}) == 23);
  CHECK(emu::gemm_split_k(128, 10, 1500, GemmBatch{100, 0, 0, 0, false}) == 1);
  CHECK(emu::gemm_split_k(64, 64, 64, GemmBatch{4, 0, 0, 0, true}) == 4);
  CHECK(emu::gemm_split_k(64, 64, 64, GemmBatch{4, 0, 0, 0, false}) == 1);
  // The network's convolutions at batch 128: conv2d_2's forward, its samples' 64 × 576
  // products side by side (576 tiles, K 288), runs unsplit, as would a product per sample;
  // conv2d_4's, 64 × 9 a sample, is 9 tiles over K = 1,152 (144 slices): min(128 / 9, 18).
  CHECK(emu::gemm_split_k(64, 576, 288, GemmBatch{128, 0, 0, 0, false, true}) == 1);
  CHECK(emu::gemm_split_k(64, 576, 288, GemmBatch{128, 0, 0, 0, false}) == 1);
  CHECK(emu::gemm_split_k(64, 9, 1152, GemmBatch{128, 0, 0, 0, false, true}) == 14);
  CHECK(emu::gemm_split_k(64, 9, 1152, GemmBatch{128, 0, 0, 0, false}) == 1);
  // An empty C launches nothing.
  CHECK(emu::gemm_split_k(0, 10, 1500, one) == 1);
}

TEST_CASE("gemm_tiled split-K: the question's skinny, deep products and odd shapes, against double loops") {
  testing::Deadline deadline("emulated split-K gemm_tiled");
  const Stream stream = emu_stream();
  // dense_1 backward-data (NN) and dense_2 forward (NT) of the question's network at batch 128.
  for (float beta : {0.0f, 0.5f})
    for (bool aligned : {false, true}) {
      split_check(SplitCase{false, false, {128, 64, 1500}, beta, aligned}, stream);
      split_check(SplitCase{false, true, {128, 10, 1500}, beta, aligned}, stream);
    }
  // K off the slice and off a multiple of S (K 257: 33 slices in 4 splits; 999: 125 in 15),
  // M = 1, N = 1, C across tile edges (130 × 130: 4 tiles, 25 slices in 3 splits), every
  // transpose; and two shallow shapes that do not split, beside them.
  for (GemmCase c : {GemmCase{1, 1, 1000}, GemmCase{1, 33, 257}, GemmCase{200, 1, 999},
                     GemmCase{130, 130, 200}, GemmCase{7, 5, 120}, GemmCase{33, 17, 64}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        split_check(SplitCase{ta == 1, tb == 1, c, tb == 1 ? 1.0f : 0.0f, ta == tb}, stream);
  CHECK(emu::gemm_split_k(1, 33, 257, GemmBatch{}) == 4);
  CHECK(emu::gemm_split_k(200, 1, 999, GemmBatch{}) == 15);
  CHECK(emu::gemm_split_k(130, 130, 200, GemmBatch{}) == 3);
  CHECK(emu::gemm_split_k(7, 5, 120, GemmBatch{}) == 1);
}

TEST_CASE("gemm_tiled split-K: bias per row or per column and ReLU, applied once, after the sum") {
  testing::Deadline deadline("emulated split-K epilogue");
  const Stream stream = emu_stream();
  for (bool per_row : {false, true})
    for (bool relu : {false, true})
      split_check(SplitCase{false, true, {128, 10, 1500}, 0.25f, true, {}, true, per_row, relu},
                  stream);
  // ReLU alone (dense_2's forward has a bias; a hidden layer's may not).
  split_check(SplitCase{false, false, {3, 70, 640}, 0.0f, false, {}, false, false, true}, stream);
}

TEST_CASE("gemm_tiled split-K over batches: summed into one C, and one C per product") {
  testing::Deadline deadline("emulated split-K batches");
  const Stream stream = emu_stream();
  // Summed: 3 products of 25 slices, 75 in 9 splits: ranges that cross from one product's K
  // into the next.
  CHECK(emu::gemm_split_k(64, 64, 200, GemmBatch{3, 0, 0, 0, true}) == 9);
  for (int t = 0; t < 2; ++t)
    split_check(SplitCase{t == 1, false, {64, 64, 200}, 1.0f, false, GemmBatch{3, 0, 0, 0, true}},
                stream);

  // One C per product: each product's C is the single call's, bit for bit (both split in 23).
  const GemmCase c{128, 10, 1500};
  constexpr int64_t kProducts = 2;
  const int64_t a_size = c.M * c.K, b_size = c.N * c.K, c_size = c.M * c.N;
  REQUIRE(emu::gemm_split_k(c.M, c.N, c.K, GemmBatch{kProducts, 0, 0, 0, false}) == 23);
  const std::vector<float> a = to_float(random_vector(kProducts * a_size, 21));
  const std::vector<float> b = to_float(random_vector(kProducts * b_size, 22));
  std::vector<float> got = nan_vector(kProducts * c_size), one = nan_vector(kProducts * c_size);
  emu::gemm_tiled_batched(false, true, c.M, c.N, c.K, 1.0f, a.data(), c.K, b.data(), c.K, 0.0f,
                          got.data(), c.N, GemmBatch{kProducts, a_size, b_size, c_size, false},
                          GemmEpilogue{}, stream);
  for (int64_t p = 0; p < kProducts; ++p)
    emu::gemm_tiled(false, true, c.M, c.N, c.K, 1.0f, a.data() + p * a_size, c.K,
                    b.data() + p * b_size, c.K, 0.0f, one.data() + p * c_size, c.N, stream);
  stream.synchronize();
  CHECK(all_equal("C_p", got.data(), one.data(), kProducts * c_size));
  std::vector<double> want, mag;
  for (int64_t p = 0; p < kProducts; ++p) {
    reference_product(false, true, c, a.data() + p * a_size, c.K, b.data() + p * b_size, c.K, want,
                      mag);
    CHECK(all_close("C_p", got.data() + p * c_size, want, sum_tolerance(mag, c.K + 1)));
  }
}

TEST_CASE("gemm_tiled split-K: the same bits on every launch, on every stream") {
  testing::Deadline deadline("emulated split-K determinism");
  const GemmCase c{128, 64, 1500};
  const std::vector<float> dy = to_float(random_vector(c.M * c.K, 31));
  const std::vector<float> w = to_float(random_vector(c.K * c.N, 32));
  const std::vector<float> c0 = to_float(random_vector(c.M * c.N, 33));
  // Three launches on one stream (its tickets reset by each launch for the next), one on a
  // stream of its own (a scratch of its own); beta 1, so each starts from the same C0.
  const Stream stream = emu_stream(), other = emu_stream();
  std::vector<std::vector<float>> runs(4, c0);
  for (int r = 0; r < 4; ++r)
    emu::gemm_tiled(false, false, c.M, c.N, c.K, 1.0f, dy.data(), c.K, w.data(), c.N, 1.0f,
                    runs[r].data(), c.N, r < 3 ? stream : other);
  stream.synchronize();
  other.synchronize();
  for (int r = 1; r < 4; ++r) {
    INFO("launch " << r << " against launch 0");
    CHECK(all_equal("C", runs[r].data(), runs[0].data(), c.M * c.N));
  }
}
