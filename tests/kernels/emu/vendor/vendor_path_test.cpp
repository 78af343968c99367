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

// Leases held by this thread until every idle handle of the stream's device is taken: the
// last one had to make a new handle.
template <class Lease>
std::vector<std::unique_ptr<Lease>> hold_every_handle(const Stream& stream, const char* create) {
  std::vector<std::unique_ptr<Lease>> held;
  const uint64_t before = made(create);
  while (made(create) == before) {
    REQUIRE(held.size() < 256);
    held.push_back(std::make_unique<Lease>(stream));
  }
  return held;
}

// Making a library handle allocates device memory, which CUDA refuses to a thread whose stream
// captures a graph (the emulated cuBLAS and cuDNN refuse it likewise). Stages sharing a GPU
// capture at once, and a lease inside a capture that finds no idle handle makes one: with the
// thread's capture mode relaxed (vendor_handles.cpp), the capture goes on. Before, cublasCreate
// failed inside the capture and the step with it.
TEST_CASE("a lease inside a graph capture that finds no idle handle makes one; the capture holds") {
  testing::Deadline deadline("a handle made inside a capture");
  const Device gpu = Device::cuda(0);
  const Stream capturing = Stream::create(gpu), other = Stream::create(gpu);
  const int64_t n = 8;
  const std::vector<float> a = test::to_float(test::random_vector(n * n, 41));
  Buffer da(a, capturing), eager(std::vector<float>(n * n, NAN), capturing),
      replayed(std::vector<float>(n * n, NAN), capturing);
  // Eagerly first, as a step before its capture: the stream's cuBLAS workspace exists.
  cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f, eager.get(), n,
                      capturing);
  {
    const auto held = hold_every_handle<cuda::vendor::CublasLease>(other, "cublasCreate_v2");
    const uint64_t before = made("cublasCreate_v2");
    const CudaGraph graph = CudaGraph::capture(capturing, [&] {
      cuda::vendor::sgemm(false, false, n, n, n, 1.0f, da.get(), n, da.get(), n, 0.0f,
                          replayed.get(), n, capturing);
    });
    CHECK(made("cublasCreate_v2") == before + 1);  // made inside the capture
    graph.launch(capturing);
  }
  CHECK(replayed.to_host() == eager.to_host());
  {
    const auto held = hold_every_handle<cuda::vendor::CudnnLease>(other, "cudnnCreate");
    const uint64_t before = made("cudnnCreate");
    CHECK_NOTHROW(
        CudaGraph::capture(capturing, [&] { const cuda::vendor::CudnnLease lease(capturing); }));
    CHECK(made("cudnnCreate") == before + 1);
  }
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
