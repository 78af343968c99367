// The CUDA calls behind cuda_graph.h.
#include <cuda_runtime_api.h>


#include "engine/allocator.h"
#include "engine/capture_scopes.h"
#include "engine/cuda_graph.h"
#include "engine/error.h"

namespace brigade {

// The instantiated graph, destroyed with the last CudaGraph that holds it (the graph it was
// made from is destroyed once instantiated: the instance keeps what it needs).
struct CudaGraph::Instance {
  cudaGraphExec_t exec = nullptr;
  int device = -1;
  ~Instance() {
    if (exec != nullptr) BRIGADE_CUDA_REPORT(cudaGraphExecDestroy(exec));
  }
};

namespace {
thread_local bool recording_a_capture = false;  // inside capture()'s `record` on this thread
}  // namespace

CudaGraph::Relaxed::Relaxed() {
  if (!recording_a_capture) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  BRIGADE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  thread_mode_ = static_cast<int>(mode);
  exchanged_ = true;
}

CudaGraph::Relaxed::~Relaxed() {
  if (!exchanged_) return;
  auto mode = static_cast<cudaStreamCaptureMode>(thread_mode_);
  BRIGADE_CUDA_REPORT(cudaThreadExchangeStreamCaptureMode(&mode));
}

CudaGraph CudaGraph::capture(const Stream& stream, const std::function<void()>& record) {
  BRIGADE_CHECK(stream.device().is_cuda(), "a CUDA graph is captured from a CUDA stream, not "
                                               << stream.str());
  BRIGADE_CHECK(!recording_a_capture, "a CUDA graph's capture on " << stream.str()
                                          << " inside another capture on the same thread");
  const cudaStream_t handle = stream.cuda_handle();
  // While the stream captures, other threads' frees do not record events on it (allocator.h:
  // they are made again after the capture, release_deferred), and no memory goes back to CUDA
  // (capture_scopes.h: cudaFree waits for the whole GPU, which its capture forbids).
  const int gpu = stream.device().index;
  detail::capture_begins(gpu);
  stream.set_capturing(true);
  const auto capture_ended = [&] {
    stream.set_capturing(false);
    detail::capture_ends(gpu);
    Allocator::release_deferred();
  };
  const cudaError_t began = cudaStreamBeginCapture(handle, cudaStreamCaptureModeThreadLocal);
  if (began != cudaSuccess) capture_ended();
  BRIGADE_CUDA_CHECK(began);
  try {
    recording_a_capture = true;
    record();
    recording_a_capture = false;
  } catch (...) {
    recording_a_capture = false;
    cudaGraph_t partial = nullptr;  // end the capture whatever its state, then report `record`'s
    if (cudaStreamEndCapture(handle, &partial) == cudaSuccess && partial != nullptr)
      BRIGADE_CUDA_REPORT(cudaGraphDestroy(partial));
    (void)cudaGetLastError();  // an invalidated capture's error is not the one to report
    capture_ended();
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(handle, &graph);
  capture_ended();
  BRIGADE_CUDA_CHECK(ended);
  auto instance = std::make_shared<Instance>();
  instance->device = stream.device().index;
  const cudaError_t made = cudaGraphInstantiate(&instance->exec, graph, 0);
  BRIGADE_CUDA_CHECK(cudaGraphDestroy(graph));
  BRIGADE_CUDA_CHECK(made);
  return CudaGraph(std::move(instance));
}

void CudaGraph::launch(const Stream& stream) const {
  BRIGADE_CHECK(stream.device().is_cuda() && stream.device().index == instance_->device,
                "a CUDA graph captured on cuda:" << instance_->device << " launched on "
                                                 << stream.str());
  BRIGADE_CUDA_CHECK(cudaGraphLaunch(instance_->exec, stream.cuda_handle()));
}

}  // namespace brigade
