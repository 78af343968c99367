// Stream capture and CUDA graphs on emulated GPUs (kernels/emu/cudart/capture.cpp and graphs.cpp),
// through the CUDA API: what a capturing stream is given is recorded, not run; a replay runs it as
// captured, ordered after the graph's previous launch; and each call CUDA forbids during a
// capture fails with CUDA's code and invalidates the capture, as on a GPU. What a replay is
// checked for is graph_replay_checks_test.cpp. Emulated builds only, on cuda:0 of 5 GPUs of 64 MiB
// (tests/kernels/emu/cudart/meson.build).
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/emulated_gpu.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/kernels/emu/cudart/graph_support.h"

using brigade::testing::device_floats;
using brigade::testing::stream_on;
using namespace brigade::testing::graphs;

TEST_CASE("what a capturing stream is given is recorded, not run; each replay runs it in order") {
  cudaStream_t s = stream_on(0);
  float* a = device_floats(0, 4);
  float* b = device_floats(0, 4);
  REQUIRE(cudaMemsetAsync(b, 0, 4 * sizeof(float), s) == cudaSuccess);
  REQUIRE(launch(s, "fill", fill, a, 1.0f, 4) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(launch(s, "add_into", add_into, static_cast<const float*>(a), b, 4) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(a, b, 4 * sizeof(float), cudaMemcpyDeviceToDevice, s) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(b, 0, sizeof(float), s) == cudaSuccess);  // b[0] only
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);

  // Nothing ran: a is still 1, b still 0.
  CHECK(values_of(a, 4, s) == std::vector<float>{1, 1, 1, 1});
  CHECK(values_of(b, 4, s) == std::vector<float>{0, 0, 0, 0});

  const cudaGraphExec_t exec = instantiate(graph);
  // Replay 1: b += a (1), a = b (1), b[0] = 0. Replay 2: b += a (2 but b[0]: 0 + 1), a = b.
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  CHECK(values_of(a, 4, s) == std::vector<float>{1, 1, 1, 1});
  CHECK(values_of(b, 4, s) == std::vector<float>{0, 1, 1, 1});
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  CHECK(values_of(a, 4, s) == std::vector<float>{1, 2, 2, 2});
  CHECK(values_of(b, 4, s) == std::vector<float>{0, 2, 2, 2});

  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphLaunch(exec, s) == cudaErrorInvalidValue);
  CHECK(cudaGraphDestroy(graph) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  REQUIRE(cudaFree(a) == cudaSuccess);
  REQUIRE(cudaFree(b) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("a replay runs a kernel's arguments as captured, not the host's variables since") {
  cudaStream_t s = stream_on(0);
  float* out = device_floats(0, 2);
  float value = 3.0f;
  int n = 2;
  const Captured graph =
      capture(s, [&] { REQUIRE(launch(s, "fill", fill, out, value, n) == cudaSuccess); });
  value = 5.0f;  // as on a GPU, the graph holds the value 3 the launch was given
  n = 1;
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  CHECK(values_of(out, 2, s) == std::vector<float>{3, 3});
  destroy(graph);
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("launching a graph counts one graph launch and no kernel launch") {
  cudaStream_t s = stream_on(0);
  float* out = device_floats(0, 1);
  const Captured graph = capture(s, [&] {
    for (int i = 0; i < 3; ++i) REQUIRE(launch(s, "fill", fill, out, 1.0f, 1) == cudaSuccess);
  });
  const auto before = brigade::emu::gpu::call_counts();
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  const auto added = brigade::emu::gpu::call_counts().since(before);
  CHECK(added.graph_launches == 2);
  CHECK(added.kernel_launches == 0);
  CHECK(added.by_entry_point.at("cudaGraphLaunch") == 2);
  CHECK(added.by_entry_point.count("cudaLaunchKernel") == 0);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  destroy(graph);
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("each launch of a graph is ordered after its previous launch, on any stream") {
  cudaStream_t s = stream_on(0);
  cudaStream_t other = stream_on(0);
  float* one = device_floats(0, 1);
  float* sum = device_floats(0, 1);
  REQUIRE(launch(s, "fill", fill, one, 1.0f, 1) == cudaSuccess);
  REQUIRE(launch(s, "fill", fill, sum, 0.0f, 1) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  const Captured graph = capture(s, [&] {
    REQUIRE(launch(s, "add_into", add_into, static_cast<const float*>(one), sum, 1) == cudaSuccess);
  });
  // No event orders the two streams: the graph's own launches are (a race otherwise).
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(graph.exec, other) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(other) == cudaSuccess);
  CHECK(values_of(sum, 1, s) == std::vector<float>{2});
  destroy(graph);
  REQUIRE(cudaFree(one) == cudaSuccess);
  REQUIRE(cudaFree(sum) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
}

TEST_CASE("a call that synchronises or queries during a global capture fails and invalidates it") {
  cudaStream_t s = stream_on(0);
  cudaStream_t other = stream_on(0);
  float* out = device_floats(0, 1);
  float host = 0.0f;
  void* fresh = nullptr;
  struct Refused {
    const char* call;
    std::function<cudaError_t()> make;
    cudaError_t code;
  };
  const std::vector<Refused> refused = {
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(s); },
       cudaErrorStreamCaptureUnsupported},
      {"cudaStreamQuery", [&] { return cudaStreamQuery(s); }, cudaErrorStreamCaptureUnsupported},
      {"cudaStreamDestroy", [&] { return cudaStreamDestroy(s); },
       cudaErrorStreamCaptureUnsupported},
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); },
       cudaErrorStreamCaptureUnsupported},
      {"cudaMalloc", [&] { return cudaMalloc(&fresh, 16); }, cudaErrorStreamCaptureUnsupported},
      {"cudaMemcpy", [&] { return cudaMemcpy(&host, out, sizeof(float), cudaMemcpyDeviceToHost); },
       cudaErrorStreamCaptureUnsupported},
      // A pageable copy's staging is a host operation: no node of a graph.
      {"cudaMemcpyAsync", [&] {
         return cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, s);
       }, cudaErrorStreamCaptureUnsupported},
  };
  for (const Refused& r : refused) {
    CAPTURE(r.call);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(launch(s, "fill", fill, out, 1.0f, 1) == cudaSuccess);
    CHECK(r.make() == r.code);
    CHECK(last_error_text().find("invalidated") != std::string::npos);
    // Every later use of the capture's stream says so.
    CHECK(launch(s, "fill", fill, out, 2.0f, 1) == cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();
    expect_invalidated_end(s);
  }
  // From another thread too: a global capture forbids unsafe calls everywhere.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaError_t from_thread = cudaSuccess;
  std::thread([&] { from_thread = cudaMalloc(&fresh, 16); }).join();
  CHECK(from_thread == cudaErrorStreamCaptureUnsupported);
  expect_invalidated_end(s);
  // A stream that does not capture may still be used, and a relaxed capture allows cudaMalloc.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  REQUIRE(launch(other, "fill", fill, out, 4.0f, 1) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(other) == cudaSuccess);
  REQUIRE(cudaMalloc(&fresh, 16) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaFree(fresh) == cudaSuccess);
  CHECK(values_of(out, 1, s) == std::vector<float>{4});  // no refused call ran anything
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
}

// Waiting for or querying work outside the capture is a potentially unsafe call too (CUDA
// answers it so; HIP copied the rule, and PyTorch's allocator relaxes its thread's mode around
// its event queries during a capture): refused on the capturing thread in a thread-local
// capture, on every thread in a global one, allowed once the thread's mode is relaxed.
TEST_CASE("a query or wait of work outside a capture, during it: refused as CUDA refuses an "
          "unsafe call, allowed relaxed") {
  cudaStream_t s = stream_on(0);
  cudaStream_t other = stream_on(0);
  float* out = device_floats(0, 1);
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(launch(other, "fill", fill, out, 3.0f, 1) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, other) == cudaSuccess);  // recorded outside any capture
  struct Call {
    const char* name;
    std::function<cudaError_t()> make;
  };
  const std::vector<Call> calls = {
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(other); }},
      {"cudaStreamQuery", [&] { return cudaStreamQuery(other); }},
      {"cudaEventSynchronize", [&] { return cudaEventSynchronize(done); }},
      {"cudaEventQuery", [&] { return cudaEventQuery(done); }},
  };
  for (const Call& c : calls) {
    CAPTURE(c.name);
    // The capturing thread, thread-local: refused, and the capture is invalidated.
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK(c.make() == cudaErrorStreamCaptureUnsupported);
    CHECK(last_error_text().find(c.name) != std::string::npos);
    expect_invalidated_end(s);
    // Another thread, during a thread-local capture: allowed.
    cudaError_t elsewhere = cudaErrorInvalidValue;
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    std::thread([&] { elsewhere = c.make(); }).join();
    CHECK(elsewhere == cudaSuccess);
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
    // Another thread, during a global capture: refused there, and the capture is invalidated.
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    std::thread([&] {
      elsewhere = c.make();
      (void)cudaGetLastError();
    }).join();
    CHECK(elsewhere == cudaErrorStreamCaptureUnsupported);
    expect_invalidated_end(s);
    // The capturing thread with its mode relaxed: allowed, and the capture holds.
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
    CHECK(c.make() == cudaSuccess);
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
    REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  }
  CHECK(values_of(out, 1, other) == std::vector<float>{3});
  REQUIRE(cudaEventDestroy(done) == cudaSuccess);
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
}

// The calling thread's own interaction mode (cudaThreadExchangeStreamCaptureMode) decides too:
// Relaxed may make unsafe calls during its own thread-local capture (what a library handle's
// making needs inside a capture, kernels/cuda/vendor_handles.cpp); ThreadLocal heeds its own
// captures only, not another thread's global one; the old mode comes back out.
TEST_CASE("a thread's capture interaction mode: relaxed may allocate in its capture") {
  cudaStream_t s = stream_on(0);
  void* fresh = nullptr;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeGlobal);  // every thread's to begin with
  CHECK(cudaMalloc(&fresh, 16) == cudaSuccess);
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeRelaxed);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);  // the capture held
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaFree(fresh) == cudaSuccess);
  // Back in Global mode, the same call in the same capture is refused.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaMalloc(&fresh, 16) == cudaErrorStreamCaptureUnsupported);
  expect_invalidated_end(s);
  // Another thread's global capture: a ThreadLocal thread may allocate, a Global one may not.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaError_t exchanged = cudaErrorInvalidValue, thread_local_mode = cudaErrorInvalidValue;
  std::thread([&] {  // no doctest assertion off the main thread: results come back
    cudaStreamCaptureMode own = cudaStreamCaptureModeThreadLocal;
    exchanged = cudaThreadExchangeStreamCaptureMode(&own);
    thread_local_mode = cudaMalloc(&fresh, 16);
  }).join();
  CHECK(exchanged == cudaSuccess);
  CHECK(thread_local_mode == cudaSuccess);
  cudaGraph_t global = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &global) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(global) == cudaSuccess);
  REQUIRE(cudaFree(fresh) == cudaSuccess);  // not during the capture: a device-wide wait
  CHECK(cudaThreadExchangeStreamCaptureMode(nullptr) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("capture begins off the legacy stream and ends on the stream and thread that began it") {
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) ==
        cudaErrorStreamCaptureUnsupported);
  cudaStream_t s = stream_on(0);
  cudaStream_t other = stream_on(0);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(other, &graph) == cudaErrorIllegalState);  // not capturing
  cudaError_t from_thread = cudaSuccess;
  std::thread([&] { from_thread = cudaStreamEndCapture(s, &graph); }).join();
  CHECK(from_thread == cudaErrorStreamCaptureWrongThread);
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);

  // Ending on a stream forked into the capture is not ending it where it began.
  cudaEvent_t fork = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(other, fork, 0) == cudaSuccess);
  CHECK(cudaStreamEndCapture(other, &graph) == cudaErrorStreamCaptureUnmatched);
  (void)cudaGetLastError();
  expect_invalidated_end(s);
  REQUIRE(cudaEventDestroy(fork) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(other) == cudaSuccess);
}

TEST_CASE("events fork a capture onto another stream and join it back; an unjoined fork fails") {
  cudaStream_t s = stream_on(0);
  cudaStream_t side = stream_on(0);
  float* a = device_floats(0, 1);
  float* b = device_floats(0, 1);
  cudaEvent_t fork = nullptr, join = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(launch(s, "fill", fill, a, 2.0f, 1) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);  // side joins the capture
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  CHECK(cudaEventQuery(fork) == cudaErrorCapturedEvent);  // a captured event is no GPU work
  (void)cudaGetLastError();
  expect_invalidated_end(s);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(launch(s, "fill", fill, a, 2.0f, 1) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  REQUIRE(launch(side, "fill", fill, b, 3.0f, 1) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s, join, 0) == cudaSuccess);
  REQUIRE(launch(s, "add_into", add_into, static_cast<const float*>(b), a, 1) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  const cudaGraphExec_t exec = instantiate(graph);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  CHECK(values_of(a, 1, s) == std::vector<float>{5});
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);

  // Work on the fork after its join is unjoined again.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s, join, 0) == cudaSuccess);
  REQUIRE(launch(side, "fill", fill, b, 3.0f, 1) == cudaSuccess);
  graph = reinterpret_cast<cudaGraph_t>(0x1);
  CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureUnjoined);
  CHECK(graph == nullptr);
  CHECK(last_error_text().find("never joined back") != std::string::npos);

  // A capturing stream may not wait on work recorded outside the capture.
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);  // side no longer captures
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s, join, 0) == cudaErrorStreamCaptureIsolation);
  (void)cudaGetLastError();
  expect_invalidated_end(s);

  REQUIRE(cudaStreamSynchronize(side) == cudaSuccess);
  REQUIRE(cudaEventDestroy(fork) == cudaSuccess);
  REQUIRE(cudaEventDestroy(join) == cudaSuccess);
  REQUIRE(cudaFree(a) == cudaSuccess);
  REQUIRE(cudaFree(b) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(side) == cudaSuccess);
}

TEST_CASE("the legacy stream may not be used while a blocking stream of its device captures") {
  cudaStream_t blocking = stream_on(0, cudaStreamDefault);
  float* out = device_floats(0, 1);
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaMemsetAsync(out, 0, sizeof(float), nullptr) == cudaErrorStreamCaptureImplicit);
  (void)cudaGetLastError();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaErrorStreamCaptureImplicit);
  (void)cudaGetLastError();
  expect_invalidated_end(blocking);
  // Asking the legacy stream whether it captures is answered so too, but leaves the blocking
  // stream's capture as it was; with no capture on the device, it answers none.
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaErrorStreamCaptureImplicit);
  (void)cudaGetLastError();
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(blocking, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  status = cudaStreamCaptureStatusActive;
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(blocking) == cudaSuccess);
}

// A wait for the whole of a GPU during a capture on it is refused whatever the thread and its
// mode, unlike the unsafe calls above: the Programming Guide forbids synchronising "a broader
// handle which encompasses an active stream capture, such as a device", and on NVIDIA GPUs
// another thread's cudaDeviceSynchronize invalidates a thread-local capture on the same GPU.
// cudaFree waits for its GPU, cudaFreeHost for every GPU; the emulation counts both as such a
// wait (CUDA does not say), and another GPU's waits leave the capture alone.
TEST_CASE("a device-wide wait during a capture on the device: refused on any thread, any mode") {
  cudaStream_t s = stream_on(0);
  float* here = device_floats(0, 1);
  float* elsewhere = device_floats(1, 1);
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 64) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);  // this thread's cudaDeviceSynchronize: cuda:0's
  struct Wait {
    const char* call;
    std::function<cudaError_t()> make;
  };
  const std::vector<Wait> waits = {
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
      {"cudaFree", [&] { return cudaFree(here); }},
      {"cudaFreeHost", [&] { return cudaFreeHost(pinned); }},
  };
  for (const Wait& w : waits) {
    CAPTURE(w.call);
    // Another thread, in its own (global) mode, during a thread-local capture.
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    cudaError_t from_thread = cudaSuccess;
    std::string why;
    std::thread([&] {  // no doctest assertion off the main thread: results come back
      from_thread = w.make();
      why = last_error_text();
      (void)cudaGetLastError();
    }).join();
    CHECK(from_thread == cudaErrorStreamCaptureUnsupported);
    CHECK(why.find(w.call) != std::string::npos);
    CHECK(why.find("while emulated cuda:0 non-blocking stream") != std::string::npos);
    expect_invalidated_end(s);
    // The capturing thread itself, its mode relaxed.
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
    CHECK(w.make() == cudaErrorStreamCaptureUnsupported);
    (void)cudaGetLastError();
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
    expect_invalidated_end(s);
  }
  // Another GPU's waits, from another thread: the capture on cuda:0 holds.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t synchronized = cudaErrorInvalidValue, freed = cudaErrorInvalidValue;
  std::thread([&] {
    if (cudaSetDevice(1) != cudaSuccess) return;
    synchronized = cudaDeviceSynchronize();
    freed = cudaFree(elsewhere);
  }).join();
  CHECK(synchronized == cudaSuccess);
  CHECK(freed == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  // Refused, nothing was freed: after the captures, each goes.
  CHECK(cudaFree(here) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}
