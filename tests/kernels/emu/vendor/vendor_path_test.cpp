// Brigade's vendor path (kernels/cuda/vendor_handles.cpp, cudnn_conv*.cpp, cublas_gemm.cpp) on
// emulated cuBLAS and cuDNN: what the library emulation lets a test provoke that a GPU only
// does on its own — an algorithm refused at execution, two host threads inside the library
// on one device at once — and what it keeps: each stream's cuBLAS workspace. Emulated builds
// only (tests/kernels/emu/meson.build).
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cudnn.h>
#include <vendor_emulation.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/cuda_graph.h"
#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/cudnn_conv_algorithms.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"
#include "kernels/reference/conv2d.h"
#include "tests/kernels/cpu/check.h"
#include "tests/support/deadline.h"

using namespace brigade;

namespace {

// A device array on the stream's GPU, through Brigade's own tensors' allocator.
struct Buffer {
  Buffer(const std::vector<float>& host, const Stream& stream)
      : t(Tensor::from_vector(host, Shape({static_cast<int64_t>(host.size())}), stream)) {}
  float* get() const { return t.data<float>(); }
  std::vector<float> to_host() const { return t.to_vector(); }
  Tensor t;
};

}  // namespace

TEST_CASE("cuDNN: an algorithm refused at execution falls back to the next that runs") {
  testing::Deadline deadline("cuDNN fallback");
  const Stream stream = Stream::create(Device::cuda(0));
  // A shape no other case uses: its algorithms are chosen here, with the switch on.
  const Conv2dShape s = make_conv2d_shape(2, 2, 6, 6, 3, 3, 3, 1, Padding::valid);
  const std::vector<float> x = test::to_float(test::random_vector(s.x_size(), 11)),
                           w = test::to_float(test::random_vector(s.w_size(), 12)),
                           dy = test::to_float(test::random_vector(s.y_size(), 13));
  std::vector<float> y_want(s.y_size()), dx_want(s.x_size()), dw_want(s.w_size(), 0.0f);
  ref::conv2d_forward<float>(x.data(), w.data(), nullptr, y_want.data(), s);
  ref::conv2d_backward_data<float>(dy.data(), w.data(), dx_want.data(), s);
  ref::conv2d_backward_filter<float>(x.data(), dy.data(), dw_want.data(), s);

  REQUIRE(setenv("BRIGADE_EMU_CUDNN_REFUSE_FIRST", "1", 1) == 0);
  const emu::vendor::AlgorithmRuns before = emu::vendor::cudnn_algorithm_runs();
  Buffer dx_in(x, stream), dw_in(w, stream), ddy(dy, stream), y(std::vector<float>(s.y_size(), NAN), stream),
      dx(std::vector<float>(s.x_size(), NAN), stream), dw(std::vector<float>(s.w_size(), 0.0f), stream);
  const size_t bytes = cuda::vendor::conv2d_workspace_bytes(s, stream);
  Buffer ws(std::vector<float>(bytes / sizeof(float) + 1), stream);
  cuda::vendor::conv2d_forward(dx_in.get(), dw_in.get(), nullptr, y.get(), s, ws.get(), bytes, stream);
  cuda::vendor::conv2d_backward_data(ddy.get(), dw_in.get(), dx.get(), s, ws.get(), bytes, stream);
  cuda::vendor::conv2d_backward_filter(dx_in.get(), ddy.get(), dw.get(), s, ws.get(), bytes, stream);
  stream.synchronize();
  REQUIRE(unsetenv("BRIGADE_EMU_CUDNN_REFUSE_FIRST") == 0);
  // The same arithmetic (the reference kernels') whichever algorithm ran: the same bits.
  CHECK(y.to_host() == y_want);
  CHECK(dx.to_host() == dx_want);
  CHECK(dw.to_host() == dw_want);
  const emu::vendor::AlgorithmRuns after = emu::vendor::cudnn_algorithm_runs();
  // The emulation's second-ranked algorithms (kernels/emu/vendor/cudnn_algorithms.cpp's lists;
  // the backward lists' second is non-deterministic, so the third runs).
  CHECK(after.forward[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM] ==
        before.forward[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM] + 1);
  CHECK(after.backward_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING] ==
        before.backward_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING] + 1);
  CHECK(after.backward_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT] ==
        before.backward_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT] + 1);
  // The choice is kept: a second pass runs the same algorithm without trying the refused one.
  cuda::vendor::conv2d_forward(dx_in.get(), dw_in.get(), nullptr, y.get(), s, ws.get(), bytes, stream);
  stream.synchronize();
  CHECK(emu::vendor::cudnn_algorithm_runs().forward[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM] ==
        before.forward[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM] + 2);
}

// The log names each chosen algorithm by cuDNN's enumerator: each name against the value
// cudnn.h gives that enumerator (a table out of order would name another algorithm).
TEST_CASE("cuDNN's algorithms are logged by the names cudnn.h gives their numbers") {
  using cuda::vendor::cudnn_conv::algorithm_name;
// The enumerator, and its name as the log prints it: the part after "_ALGO_", or for the
// backward passes' numbered ones (ALGO_0, ALGO_1, ALGO_3) the part from "ALGO_".
#define BRIGADE_NAMED(enumerator, name)                                    \
  CHECK(std::string(algorithm_name(enumerator)) == name);                  \
  CHECK(std::string(#enumerator).ends_with(std::string("_") + name))
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "IMPLICIT_PRECOMP_GEMM");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "DIRECT");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_FFT, "FFT");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "FFT_TILING");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "WINOGRAD");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "ALGO_0");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "ALGO_1");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "FFT");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "FFT_TILING");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "WINOGRAD");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "ALGO_0");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "ALGO_1");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "FFT");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "ALGO_3");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, "WINOGRAD");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED");
  BRIGADE_NAMED(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "FFT_TILING");
#undef BRIGADE_NAMED
  // Past the list: the count, the one value of the type that names no algorithm (a cast of a
  // number outside the enumerators' range would be undefined behaviour).
  CHECK(std::string(algorithm_name(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)) == "unnamed");
}

// Pipeline stages on one GPU each have their own host thread. With one handle per device
// behind a lock, one stage's library call waits for another's: the hook below holds the first
// thread inside cuBLAS until a second thread arrives, or 30 s pass (then it was locked out).
TEST_CASE("two host threads are inside cuBLAS calls on one device at once") {
  testing::Deadline deadline("two threads in cuBLAS");
  std::mutex mutex;
  std::condition_variable arrived;
  int inside = 0, most = 0;
  emu::vendor::set_library_call_hook([&](const char*) {
    std::unique_lock lock(mutex);
    most = std::max(most, ++inside);
    arrived.notify_all();
    arrived.wait_for(lock, std::chrono::seconds(30), [&] { return most >= 2; });
    --inside;
  });
  auto stage = [](uint64_t seed) {
    const Stream stream = Stream::create(Device::cuda(0));
    const int64_t n = 8;
    const std::vector<float> a = test::to_float(test::random_vector(n * n, seed));
    Buffer da(a, stream), dc(std::vector<float>(n * n, NAN), stream);
    cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f, dc.get(), n, stream);
    stream.synchronize();
  };
  std::thread first(stage, 21), second(stage, 22);
  first.join();
  second.join();
  emu::vendor::set_library_call_hook({});
  CHECK(most == 2);
}

// How many handles the process has made with `create` ("cublasCreate_v2", "cudnnCreate").
uint64_t made(const char* create) {
  const emu::gpu::CallCounts counts = emu::gpu::call_counts();
  const auto it = counts.by_entry_point.find(create);
  return it == counts.by_entry_point.end() ? 0 : it->second;
}

// Streams made, each leasing a handle (which it keeps while it lives), until the device's pool
// had none idle: the last one had to make a new handle.
template <class Lease>
std::vector<Stream> drain_pool(const Device& gpu, const char* create) {
  std::vector<Stream> keeping;
  const uint64_t before = made(create);
  while (made(create) == before) {
    REQUIRE(keeping.size() < 256);
    keeping.push_back(Stream::create(gpu));
    const Lease lease(keeping.back());
  }
  return keeping;
}

// Making a library handle allocates device memory, which CUDA refuses to a thread whose stream
// captures a graph (the emulated cuBLAS and cuDNN refuse it likewise), and a stream's first call
// of a library may come inside a capture when the pool has no idle handle: with the thread's
// capture mode relaxed (vendor_handles.cpp), the capture goes on. Before, cudnnCreate failed
// inside the capture and the step with it. (cuBLAS makes its handle the same way; its stream's
// first call also takes the stream's workspace from the allocator, which a capture does not
// grow: a step before the capture makes both, as the runtime's eager step before its graphs.)
TEST_CASE("a stream whose first cuDNN call is inside a graph capture makes its handle there") {
  testing::Deadline deadline("a handle made inside a capture");
  const Device gpu = Device::cuda(0);
  const std::vector<Stream> keeping = drain_pool<cuda::vendor::CudnnLease>(gpu, "cudnnCreate");
  const Stream capturing = Stream::create(gpu);
  const uint64_t before = made("cudnnCreate");
  CHECK_NOTHROW(
      CudaGraph::capture(capturing, [&] { const cuda::vendor::CudnnLease lease(capturing); }));
  CHECK(made("cudnnCreate") == before + 1);
}

// A handle's stream is changed only while its old stream exists: a stream's handles are set
// back to the default stream when it is destroyed, and serve the next stream from the pool.
// Before, a handle went back to its pool still set to the stream of its last call, and the
// next lease changed the stream of a handle whose stream had been destroyed since (refused by
// the emulated libraries; undefined on a GPU, where the last GPU run's library path crashed
// with glibc's "malloc(): unaligned tcache chunk detected" after several runtimes' streams had
// come and gone).
TEST_CASE("a destroyed stream's handles serve the next stream, never set to a dead stream") {
  testing::Deadline deadline("handles of a destroyed stream");
  const Device gpu = Device::cuda(1);
  const int64_t n = 8;
  const std::vector<float> a = test::to_float(test::random_vector(n * n, 51));
  std::vector<float> first_product;
  {
    const Stream first = Stream::create(gpu);
    Buffer da(a, first), dc(std::vector<float>(n * n, NAN), first);
    cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f, dc.get(), n,
                        first);
    { const cuda::vendor::CudnnLease lease(first); }
    first_product = dc.to_host();
  }  // destroyed: its handles are set to the default stream and pooled
  const uint64_t blas = made("cublasCreate_v2"), dnn = made("cudnnCreate");
  const Stream second = Stream::create(gpu);
  Buffer da(a, second), dc(std::vector<float>(n * n, NAN), second);
  CHECK_NOTHROW(cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f,
                                    dc.get(), n, second));
  CHECK_NOTHROW(cuda::vendor::CudnnLease{second});
  CHECK(dc.to_host() == first_product);
  CHECK(made("cublasCreate_v2") == blas);  // the first stream's, from the pool
  CHECK(made("cudnnCreate") == dnn);
}

// cuBLAS's workspace is the stream's (vendor_handles.h). (On cuda:1: the last case of
// vendor_libraries_test.cpp leaves cuda:2 faulted.)
TEST_CASE("a stream's cuBLAS calls reuse its one workspace; destroying the stream gives it back") {
  testing::Deadline deadline("the stream's cuBLAS workspace");
  using cuda::vendor::CublasLease, cuda::vendor::kCublasWorkspaceBytes;
  const Device gpu = Device::cuda(1);
  Allocator& allocator = Allocator::of(gpu);
  const uint64_t base = allocator.stats().in_use;
  {
    const Stream stream = Stream::create(gpu);
    void* first = nullptr;
    {
      const CublasLease lease(stream);
      first = lease.workspace();
    }
    // Kept after the call: the stream's next call finds it.
    CHECK(allocator.stats().in_use == base + kCublasWorkspaceBytes);
    const emu::gpu::ApiCounts before = emu::gpu::api_counts();
    {
      const CublasLease lease(stream);
      CHECK(lease.workspace() == first);
    }
    const emu::gpu::ApiCounts after = emu::gpu::api_counts();
    CHECK(after.malloc == before.malloc);  // with the cache or without it
    CHECK(after.free == before.free);
    {
      // Two GEMMs on it (the emulation forms a product this size in the workspace): still one.
      const int64_t n = 64;
      const std::vector<float> a = test::to_float(test::random_vector(n * n, 31));
      Buffer da(a, stream), dc(std::vector<float>(n * n, NAN), stream);
      for (int i = 0; i < 2; ++i)
        cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f, dc.get(),
                            n, stream);
      std::vector<double> want(n * n, 0.0), magnitude(n * n, 0.0);  // A·A (any major order)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t k = 0; k < n; ++k) {
            want[i * n + j] += double{a[i * n + k]} * a[k * n + j];
            magnitude[i * n + j] += std::fabs(double{a[i * n + k]} * a[k * n + j]);
          }
      CHECK(test::all_close("C", dc.to_host().data(), want, test::sum_tolerance(magnitude, n)));
      const uint64_t buffers = 2 * Allocator::block_size(n * n * sizeof(float));
      CHECK(allocator.stats().in_use == base + kCublasWorkspaceBytes + buffers);
    }
  }
  // The stream and the buffers it owned are gone, and the workspace with them.
  CHECK(allocator.stats().in_use == base);
}

// Given back after each call, one stream's workspace would be free for the next stream once the
// first stream's work is done: the two would then share memory, each racing the other as soon
// as their calls overlap.
TEST_CASE("two streams never share a cuBLAS workspace, even one after the other") {
  testing::Deadline deadline("workspaces of two streams");
  using cuda::vendor::CublasLease;
  const Stream one = Stream::create(Device::cuda(1)), two = Stream::create(Device::cuda(1));
  void* of_one = nullptr;
  void* of_two = nullptr;
  {
    const CublasLease lease(one);
    of_one = lease.workspace();
  }
  one.synchronize();  // nothing of `one` is pending
  {
    const CublasLease lease(two);
    of_two = lease.workspace();
  }
  CHECK(of_one != of_two);
  const CublasLease again(one);
  CHECK(again.workspace() == of_one);
}
