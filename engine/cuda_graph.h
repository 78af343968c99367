// CudaGraph: a CUDA stream's work captured once as a graph, instantiated, and launched as one
// call as often as it is wanted (cudaStreamBeginCapture .. cudaStreamEndCapture,
// cudaGraphInstantiate, cudaGraphLaunch). CUDA builds only (cuda_graph_cuda.cpp).
//
// A launch replays exactly what was captured: the same kernels, grids and arguments, the
// same pointers. Whatever changes between launches must therefore live in device memory
// that the captured work reads at a fixed address, written in stream order before the
// launch (pipeline/runtime/update_graph.h is the example).
#pragma once

#include <functional>
#include <memory>

#include "engine/stream.h"

namespace brigade {

class CudaGraph {
 public:
  // Runs `record`, which enqueues work on `stream` (a CUDA stream) and on nothing else, with
  // `stream` capturing: nothing runs; the work becomes the graph. The capture is this host
  // thread's (cudaStreamCaptureModeThreadLocal): other threads go on using their streams.
  // If `record` throws, the capture is ended and dropped, and the exception passes on.
  static CudaGraph capture(const Stream& stream, const std::function<void()>& record);

  // Enqueues the whole graph on `stream` (a stream of the device it was captured on): one
  // call, ordered after earlier work on `stream` like any other.
  void launch(const Stream& stream) const;

  // While a thread records a capture, CUDA refuses it every call that may synchronise
  // implicitly or that waits for or asks about work outside the capture (cudaEventQuery,
  // cudaEventSynchronize, cudaStreamQuery and cudaStreamSynchronize of other streams,
  // cudaMalloc, cublasCreate, ...), and the capture is lost. Host code that must still make
  // one there (the allocator asking whether a block's earlier work is done; a library's handle
  // made at a stream's first call) makes it in a Relaxed scope: on a thread that records a
  // capture, the thread's capture interaction mode is relaxed for the scope
  // (cudaThreadExchangeStreamCaptureMode), as PyTorch's allocator queries its events during a
  // capture; such a call takes no part in the graph. Elsewhere the scope does nothing.
  class Relaxed {
   public:
    Relaxed();
    ~Relaxed();
    Relaxed(const Relaxed&) = delete;
    Relaxed& operator=(const Relaxed&) = delete;

   private:
    bool exchanged_ = false;
    int thread_mode_ = 0;  // the thread's cudaStreamCaptureMode, given back at the end
  };

 private:
  struct Instance;
  explicit CudaGraph(std::shared_ptr<Instance> instance) : instance_(std::move(instance)) {}
  std::shared_ptr<Instance> instance_;
};

}  // namespace brigade
