// The CUDA backend of Stream and Event: a cudaStream_t, and one cudaEvent_t per record.
//
// A fresh cudaEvent_t per Event::record keeps records immutable (stream_impl.h), so a
// CPU stream waiting on a CUDA record is not fooled by a later re-record of the event.
//
// Cross-backend waits, said plainly:
//   CPU stream waits on a CUDA record: the CPU stream's worker blocks in
//     cudaEventSynchronize when it reaches the wait; the caller is not blocked.
//   CUDA stream waits on a CPU record: the CALLING HOST THREAD blocks until the CPU
//     record has run, then returns; nothing is enqueued. (A host callback that blocks inside
//     the CUDA driver's thread would stall every stream of the device.)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cuda_graph.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "engine/stream_impl.h"

namespace brigade::detail {

namespace {

// A query's cudaErrorNotReady is an answer, not a failure, but CUDA also keeps it as the
// thread's last error: clear it, or the next checked cudaGetLastError() (after a healthy
// kernel launch) reports it. The allocator polls events, so this happens in every step.
cudaError_t answered_query(cudaError_t status) {
  if (status == cudaErrorNotReady) (void)cudaGetLastError();
  return status;
}

// cudaEvent_t objects are made once and reused, per device and kind: a pipeline step records
// thousands of events, and creating and destroying each is a driver call. Events that only
// order work are created with cudaEventDisableTiming (cheaper to record and wait on); timed
// ones only for Event::timed(). A record gives its event back when the last holder drops it:
// a wait issued before keeps the record it captured (CUDA's rule), so reuse is safe.
class EventPool {
 public:
  static cudaEvent_t take(int device, bool timed) {
    {
      std::lock_guard<std::mutex> lock(mutex());
      std::vector<cudaEvent_t>& free = list(device, timed);
      if (!free.empty()) {
        const cudaEvent_t e = free.back();
        free.pop_back();
        return e;
      }
    }
    BRIGADE_CUDA_CHECK(cudaSetDevice(device));  // an event belongs to the current device
    cudaEvent_t e = nullptr;
    BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&e, timed ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  static void give_back(int device, bool timed, cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex());
    list(device, timed).push_back(e);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  // Never freed: records may be dropped during static destruction.
  static std::vector<cudaEvent_t>& list(int device, bool timed) {
    static auto* lists = new std::map<std::pair<int, bool>, std::vector<cudaEvent_t>>();
    return (*lists)[{device, timed}];
  }
};

struct CudaRecord final : EventRecord {
  CudaRecord(uint64_t event_id, Device device, uint64_t stream_id, cudaStream_t stream, bool timed)
      : EventRecord(event_id, device, stream_id), timed(timed) {
    event = EventPool::take(device.index, timed);
    BRIGADE_CUDA_CHECK(cudaEventRecord(event, stream));
  }
  ~CudaRecord() override { EventPool::give_back(device.index, timed, event); }

  // Relaxed: a thread recording a graph may still ask about work before it (cuda_graph.h).
  bool query() const override {
    const CudaGraph::Relaxed relaxed;
    const cudaError_t status = answered_query(cudaEventQuery(event));
    if (status == cudaErrorNotReady) return false;
    BRIGADE_CUDA_CHECK(status);
    return true;
  }
  void synchronize() const override {
    const CudaGraph::Relaxed relaxed;
    BRIGADE_CUDA_CHECK(cudaEventSynchronize(event));
  }

  // CUDA has no event wait with a deadline: the event is queried until it completes or the
  // deadline passes, yielding the core between queries, then backing off to 1 ms once the
  // work has taken longer than that (a wait that is meant to be rare:
  // allocator_out_of_memory.cpp).
  bool wait_until(std::chrono::steady_clock::time_point deadline) const override {
    const auto start = std::chrono::steady_clock::now();
    while (!query()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      if (now - start < std::chrono::milliseconds(1))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(1), deadline - now));
    }
    return true;
  }

  double elapsed_ms_since(const EventRecord& start) const override {
    auto* s = dynamic_cast<const CudaRecord*>(&start);
    BRIGADE_CHECK(s, "elapsed_ms: records of different backends");
    float ms = 0;
    BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, s->event, event));
    return ms;
  }

  std::string where() const override {
    return device.str() + " stream#" + std::to_string(stream_id) + ", a CUDA event (" +
           (query() ? "complete" : "pending") + ")";
  }

  const bool timed;
  cudaEvent_t event = nullptr;
};

class CudaStream final : public StreamImpl {
 public:
  explicit CudaStream(Device device) : StreamImpl(device) {
    BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
    BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    register_stream(this);
  }
  ~CudaStream() override {
    unregister_stream(this);
    // Gone means done (Stream::Weak): the allocator no longer waits for a destroyed stream's
    // work on its blocks. A failure here is the stream's own, reported to whoever
    // synchronised it; a faulted GPU would only repeat it for every stream.
    const CudaGraph::Relaxed relaxed;  // a stream dropped while its thread records a graph
    if (cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
    drop_kept();  // before the stream goes: a cuBLAS/cuDNN handle set to it lets go of it
    BRIGADE_CUDA_REPORT(cudaStreamDestroy(stream_));
  }

  void enqueue(std::function<void()>) override {
    throw Error(name() + ": enqueue(host task) on a CUDA stream; launch CUDA work on "
                         "cuda_handle() instead (there is no CPU fallback)");
  }

  std::shared_ptr<EventRecord> record(uint64_t event_id, bool timed) override {
    return std::make_shared<CudaRecord>(event_id, device, id, stream_, timed);
  }

  void wait(std::shared_ptr<EventRecord> record) override {
    if (auto* cuda = dynamic_cast<CudaRecord*>(record.get())) {
      BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda->event, 0));
      return;
    }
    record->synchronize();  // a CPU record: block this host thread (see the top of file)
  }

  void synchronize() override {
    const CudaGraph::Relaxed relaxed;
    const cudaError_t status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess) {
      const std::string what = name() + ": " + cudaGetErrorString(status);
      (void)cudaGetLastError();  // reported by the throw: not again by the next launch
      throw StreamError(what, nullptr);
    }
  }

  bool query() override {
    const CudaGraph::Relaxed relaxed;
    const cudaError_t status = answered_query(cudaStreamQuery(stream_));
    if (status == cudaErrorNotReady) return false;
    BRIGADE_CUDA_CHECK(status);
    return true;
  }

  std::string describe() override {
    const CudaGraph::Relaxed relaxed;
    const cudaError_t status = answered_query(cudaStreamQuery(stream_));
    if (status != cudaSuccess && status != cudaErrorNotReady)
      (void)cudaGetLastError();  // the description reports it: not the next launch too
    return name() + ": " +
           (status == cudaSuccess      ? "idle"
            : status == cudaErrorNotReady ? "busy (CUDA work pending)"
                                          : std::string("error: ") + cudaGetErrorString(status));
  }

  void* native_handle() const override { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<StreamImpl> make_cuda_stream(Device device) {
  return std::make_shared<CudaStream>(device);
}

}  // namespace brigade::detail
