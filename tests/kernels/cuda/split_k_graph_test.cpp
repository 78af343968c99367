// A split-K GEMM captured in a CUDA graph replays into the scratch its stream kept at the
// capture (kernels/cuda/gemm_split_k.cuh), even after a launch that needs more partials ran
// eagerly on the stream in between, as a pipeline's graphs outlive a last, shorter batch's
// eager step (pipeline/runtime/device_graphs.h). The scratch was once grown by replacing it,
// and the graph then wrote its partials into a block the allocator had taken back, which the
// emulated GPU refuses. Part of test_cuda_vendor, whose main (vendor_test.cpp) skips without
// a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cuda_graph.h"
#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/launchers.h"
#include "tests/support/deadline.h"

using namespace brigade;

namespace {

// C (M, N) = A (M, K) · B (K, N), row-major and packed, by the hand-written GEMM on `s`.
void product(const Tensor& a, const Tensor& b, const Tensor& c, int64_t M, int64_t N, int64_t K,
             const Stream& s) {
  cuda::gemm_tiled(false, false, M, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f,
                   c.data<float>(), N, s);
}

std::vector<float> values(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed)) % 13) - 6) /
           8.0f;
  return v;
}

// The product (M, N) of row-major packed a (M, K) and b (K, N), summed in double.
std::vector<double> reference_product(const std::vector<float>& a, const std::vector<float>& b,
                                      int64_t M, int64_t N, int64_t K) {
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        c[static_cast<size_t>(i * N + j)] += static_cast<double>(a[static_cast<size_t>(i * K + k)]) *
                                             b[static_cast<size_t>(k * N + j)];
  return c;
}

}  // namespace

// A stream's scratch is made at its first split launch; when that launch is captured, the
// tickets must still start at zero for an eager launch on the stream before any replay (they
// were cleared by a kernel captured into the graph, so only its replays cleared them; and the
// scratch's allocation is a cudaMalloc, refused inside a capture unless relaxed).
TEST_CASE("a stream's first split-K GEMM captured: an eager one before any replay is right") {
  testing::Deadline deadline("a split-K GEMM captured first");
  const Stream s = Stream::create(Device::cuda(0));
  constexpr int64_t kSmall = 16, kSmallK = 1024;
  REQUIRE(cuda::gemm_split_k(kSmall, kSmall, kSmallK, GemmBatch{}) == 16);
  const std::vector<float> a_host = values(kSmall * kSmallK, 4);
  const std::vector<float> b_host = values(kSmallK * kSmall, 9);
  const std::vector<double> expected = reference_product(a_host, b_host, kSmall, kSmall, kSmallK);
  // Made on another stream: `s`'s first work is the capture.
  const Stream maker = Stream::create(Device::cuda(0));
  const Tensor a = Tensor::from_vector(a_host, Shape({kSmall, kSmallK}), maker);
  const Tensor b = Tensor::from_vector(b_host, Shape({kSmallK, kSmall}), maker);
  const Tensor captured_c = Tensor::zeros(Shape({kSmall, kSmall}), maker);
  const Tensor eager_c = Tensor::zeros(Shape({kSmall, kSmall}), maker);
  maker.synchronize();
  const CudaGraph graph =
      CudaGraph::capture(s, [&] { product(a, b, captured_c, kSmall, kSmall, kSmallK, s); });
  product(a, b, eager_c, kSmall, kSmall, kSmallK, s);  // before any replay
  s.synchronize();  // the tensors are `maker`'s: their reads below come after `s`'s work
  const std::vector<float> eager = eager_c.to_vector();
  graph.launch(s);
  s.synchronize();
  const std::vector<float> replayed = captured_c.to_vector();
  CHECK(replayed == eager);
  for (size_t i = 0; i < expected.size(); ++i)
    CHECK(eager[i] == doctest::Approx(expected[i]).epsilon(1e-5));
}

TEST_CASE("a captured split-K GEMM replays after a launch with more partials ran eagerly") {
  const Stream s = Stream::create(Device::cuda(0));
  // Small: one tile over K = 1024, 16 splits, 16 · 16 · 16 partial floats. Large: one tile
  // over K = 4096, 64 splits, 64 · 64 · 64 partial floats.
  constexpr int64_t kSmall = 16, kSmallK = 1024, kLarge = 64, kLargeK = 4096;
  REQUIRE(cuda::gemm_split_k(kSmall, kSmall, kSmallK, GemmBatch{}) == 16);
  REQUIRE(cuda::gemm_split_k(kLarge, kLarge, kLargeK, GemmBatch{}) == 64);
  const std::vector<float> a_host = values(kSmall * kSmallK, 1);
  const std::vector<float> b_host = values(kSmallK * kSmall, 5);
  const Tensor a = Tensor::from_vector(a_host, Shape({kSmall, kSmallK}), s);
  const Tensor b = Tensor::from_vector(b_host, Shape({kSmallK, kSmall}), s);
  const Tensor c = Tensor::empty(Shape({kSmall, kSmall}), s);
  product(a, b, c, kSmall, kSmall, kSmallK, s);
  const std::vector<float> eager = c.to_vector();

  const CudaGraph graph =
      CudaGraph::capture(s, [&] { product(a, b, c, kSmall, kSmall, kSmallK, s); });
  {
    const Tensor big_a =
        Tensor::from_vector(values(kLarge * kLargeK, 2), Shape({kLarge, kLargeK}), s);
    const Tensor big_b =
        Tensor::from_vector(values(kLargeK * kLarge, 3), Shape({kLargeK, kLarge}), s);
    const Tensor big_c = Tensor::empty(Shape({kLarge, kLarge}), s);
    product(big_a, big_b, big_c, kLarge, kLarge, kLargeK, s);
    s.synchronize();
  }
  const std::vector<float> nan(static_cast<size_t>(kSmall * kSmall), std::nanf(""));
  copy_async(c, Tensor::from_vector(nan, Shape({kSmall, kSmall}), s), s);
  graph.launch(s);
  const std::vector<float> replayed = c.to_vector();  // a fault of the replay throws here

  // The replay's bits are the eager launch's (the same splits, added in the same order), and
  // both are the product, summed in double here.
  CHECK(replayed == eager);
  for (int64_t i = 0; i < kSmall; ++i)
    for (int64_t j = 0; j < kSmall; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < kSmallK; ++k)
        sum += static_cast<double>(a_host[static_cast<size_t>(i * kSmallK + k)]) *
               b_host[static_cast<size_t>(k * kSmall + j)];
      CHECK(replayed[static_cast<size_t>(i * kSmall + j)] == doctest::Approx(sum).epsilon(1e-5));
    }
}
