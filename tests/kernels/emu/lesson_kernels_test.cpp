// The lesson kernels of kernels/cuda/, run through the emulator on a CPU stream and compared
// with plain loops, on sizes that are not multiples of the block or tile size.
//
// Two kinds of input:
//  - integer values in [-8, 8]: every partial sum or dot product is an integer of magnitude
//    below 2^24, which float represents exactly, so the kernel's result must equal the
//    loop's exactly, whatever the order of additions. A lost or doubled element shows.
//  - real values in [-1, 1]: rounding depends on the order. Any order of summing n floats
//    is within n·u·Σ|x_i| of the exact sum (u = 2^-24, the unit roundoff; Higham, Accuracy
//    and Stability of Numerical Algorithms, §4.2), and a dot product of length K within
//    K·u·Σ|a_i·b_i|; the loop is computed in double, so these bounds are the tolerances.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/error.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/launchers.h"
#include "tests/support/deadline.h"

using brigade::Device;
using brigade::Stream;
using brigade::testing::Deadline;

namespace {

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

std::vector<float> make_input(int64_t n, bool integers, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ints(-8, 8);
  std::uniform_real_distribution<float> reals(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = integers ? static_cast<float>(ints(rng)) : reals(rng);
  return x;
}

// Checks a float sum against the exact (double) sum of x.
void check_sum(const char* kernel, float got, const std::vector<float>& x, bool integers) {
  double exact = 0.0, magnitude = 0.0;
  for (float v : x) {
    exact += v;
    magnitude += std::fabs(v);
  }
  INFO(kernel << ", n = " << x.size() << (integers ? ", integers" : ", reals"));
  if (integers) {
    CHECK(got == static_cast<float>(exact));
  } else {
    const double tolerance = static_cast<double>(x.size()) * kUnitRoundoff * magnitude;
    CHECK(std::fabs(got - exact) <= tolerance);
  }
}

// 20000: more than 64 blocks of 256 threads, so reduce_sum_warp's grid-stride loop strides.
const int64_t kSizes[] = {0, 1, 31, 33, 1000, 4099, 20000};

}  // namespace

TEST_CASE("block reduction with shared memory and __syncthreads matches a loop") {
  Deadline deadline("emulated reduce_sum_shared");
  Stream stream = Stream::create(Device::cpu(0));
  for (int64_t n : kSizes) {
    for (bool integers : {true, false}) {
      const std::vector<float> x = make_input(n, integers, static_cast<uint32_t>(n));
      std::vector<float> workspace(
          static_cast<size_t>(brigade::emu::reduce_sum_shared_workspace(n)));
      float out = NAN;
      brigade::emu::reduce_sum_shared(x.data(), n, workspace.data(), &out, stream);
      stream.synchronize();
      check_sum("reduce_sum_shared", out, x, integers);
    }
  }
}

TEST_CASE("warp-shuffle reduction with atomicAdd across blocks matches a loop") {
  Deadline deadline("emulated reduce_sum_warp");
  brigade::configure_cpu_device(3, {.threads = 3});  // blocks run on three OS threads at once
  Stream stream = Stream::create(Device::cpu(3));
  for (int64_t n : kSizes) {
    for (bool integers : {true, false}) {
      const std::vector<float> x = make_input(n, integers, static_cast<uint32_t>(n) + 7);
      float out = NAN;
      brigade::emu::reduce_sum_warp(x.data(), n, &out, stream);
      stream.synchronize();
      check_sum("reduce_sum_warp", out, x, integers);
    }
  }
}

TEST_CASE("tiled shared-memory matmul matches a loop") {
  Deadline deadline("emulated matmul_tiled");
  brigade::configure_cpu_device(4, {.threads = 2});
  Stream stream = Stream::create(Device::cpu(4));
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 13, 5}, Shape{33, 65, 17}, Shape{64, 64, 64},
                  Shape{5, 3, 0}}) {
    for (bool integers : {true, false}) {
      const std::vector<float> a = make_input(s.m * s.k, integers, 11);  // (m, k)
      const std::vector<float> b = make_input(s.k * s.n, integers, 12);  // (k, n)
      std::vector<float> c(static_cast<size_t>(s.m * s.n), NAN);        // (m, n)
      brigade::emu::matmul_tiled(a.data(), b.data(), c.data(), s.m, s.n, s.k, stream);
      stream.synchronize();
      int mismatches = 0;
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double exact = 0.0, magnitude = 0.0;
          for (int64_t p = 0; p < s.k; ++p) {
            const double prod = double{a[i * s.k + p]} * b[p * s.n + j];
            exact += prod;
            magnitude += std::fabs(prod);
          }
          const float got = c[i * s.n + j];
          const bool ok = integers ? got == static_cast<float>(exact)
                                   : std::fabs(got - exact) <= s.k * kUnitRoundoff * magnitude;
          if (!ok && ++mismatches <= 5)  // the first few, not thousands of lines
            FAIL_CHECK("C[" << i << "][" << j << "] = " << got << ", expected " << exact
                            << " (m, n, k) = (" << s.m << ", " << s.n << ", " << s.k << ")"
                            << (integers ? " integers" : " reals"));
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("lesson kernels reject negative sizes with a message naming the kernel") {
  Stream stream = Stream::create(Device::cpu(0));
  float out = 0.0f;
  CHECK_THROWS_WITH(brigade::emu::reduce_sum_warp(&out, -1, &out, stream),
                    doctest::Contains("reduce_sum_warp: n = -1"));
  CHECK_THROWS_WITH(brigade::emu::matmul_tiled(&out, &out, &out, 2, -3, 1, stream),
                    doctest::Contains("matmul_tiled: negative size"));
}

#if defined(BRIGADE_HAVE_CUDA)
#include <cuda_runtime_api.h>

// The nvcc compilation of the same sources, linked into this same binary.

TEST_CASE("native lesson kernels refuse a CPU stream: no silent fallback") {
  Stream stream = Stream::create(Device::cpu(0));
  float out = 0.0f;
  // The stream is checked before any CUDA call, so this runs on machines without a GPU.
  CHECK_THROWS_WITH_AS(brigade::cuda::reduce_sum_warp(&out, 1, &out, stream),
                       doctest::Contains("a native CUDA launch needs a CUDA stream, got cpu:0"),
                       brigade::Error);
}

namespace {
// A device buffer holding a copy of `host`, freed on scope exit.
struct DeviceBuffer {
  float* ptr = nullptr;
  explicit DeviceBuffer(const std::vector<float>& host, size_t min_floats = 1) {
    const size_t floats = std::max(host.size(), min_floats);
    BRIGADE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), floats * sizeof(float)));
    if (!host.empty())
      BRIGADE_CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(float),
                                    cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy to the device may return before the data lands, and the kernels
    // run on a non-blocking stream, which is not ordered after it: wait for the device.
    BRIGADE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<float> read(size_t floats) const {
    std::vector<float> host(floats);
    BRIGADE_CUDA_CHECK(
        cudaMemcpy(host.data(), ptr, floats * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }
};
}  // namespace

TEST_CASE("native lesson kernels match the loops on a GPU") {
  if (brigade::cuda_device_count() == 0) {
    MESSAGE("no GPU here: the native kernels were compiled and linked, not run");
    return;
  }
  Deadline deadline("native lesson kernels");
  Stream stream = Stream::create(Device::cuda(0));
  for (int64_t n : kSizes) {
    for (bool integers : {true, false}) {
      const std::vector<float> x = make_input(n, integers, static_cast<uint32_t>(n) + 3);
      DeviceBuffer dx(x), out(std::vector<float>(1, NAN));
      DeviceBuffer workspace(std::vector<float>(),
                             static_cast<size_t>(brigade::cuda::reduce_sum_shared_workspace(n)) + 1);
      brigade::cuda::reduce_sum_shared(dx.ptr, n, workspace.ptr, out.ptr, stream);
      stream.synchronize();
      check_sum("cuda reduce_sum_shared", out.read(1)[0], x, integers);
      brigade::cuda::reduce_sum_warp(dx.ptr, n, out.ptr, stream);
      stream.synchronize();
      check_sum("cuda reduce_sum_warp", out.read(1)[0], x, integers);
    }
  }
  // The GPU's result equals the emulator's exactly on integer inputs (both exact).
  const int64_t m = 33, n = 65, k = 17;
  const std::vector<float> a = make_input(m * k, true, 21), b = make_input(k * n, true, 22);
  DeviceBuffer da(a), db(b), dc(std::vector<float>(m * n, NAN));
  brigade::cuda::matmul_tiled(da.ptr, db.ptr, dc.ptr, m, n, k, stream);
  stream.synchronize();
  std::vector<float> emulated(m * n, NAN);
  Stream cpu = Stream::create(Device::cpu(0));
  brigade::emu::matmul_tiled(a.data(), b.data(), emulated.data(), m, n, k, cpu);
  cpu.synchronize();
  CHECK(dc.read(m * n) == emulated);
}

// A launch fails unless its stream's device is the calling thread's current device, and
// allocating, copying or recording on another GPU changes the current device. A pipeline
// stage's thread allocates for its neighbour (a send) and then launches on its own stream.
TEST_CASE("a native launch runs on its stream's GPU whatever this thread made current before") {
  if (brigade::cuda_device_count() < 2) {
    MESSAGE("fewer than 2 GPUs: skipped");
    return;
  }
  Deadline deadline("launch after an allocation on another GPU");
  Stream stream = Stream::create(Device::cuda(0));
  const std::vector<float> x = make_input(1000, true, 5);
  DeviceBuffer dx(x), out(std::vector<float>(1, NAN));
  const brigade::Tensor neighbour = brigade::Tensor::empty({16}, Device::cuda(1));
  brigade::cuda::reduce_sum_warp(dx.ptr, 1000, out.ptr, stream);
  stream.synchronize();
  check_sum("cuda reduce_sum_warp after an allocation on cuda:1", out.read(1)[0], x, true);
}
#endif
