// What the tests of stream capture and graph replay share (graph_capture_test.cpp,
// graph_replay_checks_test.cpp): two kernels, a launch as BRIGADE_LAUNCH makes it on an emulated
// GPU, and a capture with its instantiation, each call checked.
#pragma once

#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/emu/emulated_gpu.h"

namespace brigade::testing::graphs {


// The kernels, with parameter types the happens-before check reads (const: read).
inline void fill(float* out, float value, int n) {
  for (int i = 0; i < n; ++i) out[i] = value;
}
inline void add_into(const float* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] += in[i];
}

// Launches as BRIGADE_LAUNCH does on an emulated GPU: one block of one thread.
template <class... Params, class... Args>
cudaError_t launch(cudaStream_t stream, const char* name, void (*kernel)(Params...), Args... args) {
  return brigade::emu::launch_native(stream, name, brigade::emu::dim3(1), brigade::emu::dim3(1), 0,
                                     kernel, args...);
}

inline std::vector<float> values_of(const float* device, int n, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(n));
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  return host;
}

// The text of the thread's last error (NVIDIA's, then the emulator's), read and reset.
inline std::string last_error_text() { return cudaGetErrorString(cudaGetLastError()); }

// Ends the capture on `stream`, which must have been invalidated: no graph, CUDA's code.
inline void expect_invalidated_end(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(0x1);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);  // the stream is usable again
}

inline cudaGraphExec_t instantiate(cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  return exec;
}

// A graph captured on `stream` from what `issue` gives it, and its instantiation.
struct Captured {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};
inline Captured capture(cudaStream_t stream, const std::function<void()>& issue) {
  Captured c;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  issue();
  REQUIRE(cudaStreamEndCapture(stream, &c.graph) == cudaSuccess);
  c.exec = instantiate(c.graph);
  return c;
}
inline void destroy(const Captured& c) {
  REQUIRE(cudaGraphExecDestroy(c.exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(c.graph) == cudaSuccess);
}


}  // namespace brigade::testing::graphs
