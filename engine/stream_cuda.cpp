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

#include <cstdio>

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

// Destructors must not throw: a failing destroy is reported, not ignored.
void report_if_failed(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    std::fprintf(stderr, "brigade: %s failed: %s\n", call, cudaGetErrorString(status));
}

struct CudaRecord final : EventRecord {
  CudaRecord(uint64_t event_id, Device device, uint64_t stream_id, cudaStream_t stream)
      : EventRecord(event_id, device, stream_id) {
    BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
    BRIGADE_CUDA_CHECK(cudaEventCreate(&event));
    BRIGADE_CUDA_CHECK(cudaEventRecord(event, stream));
  }
  ~CudaRecord() override { report_if_failed(cudaEventDestroy(event), "cudaEventDestroy"); }

  bool query() const override {
    const cudaError_t status = answered_query(cudaEventQuery(event));
    if (status == cudaErrorNotReady) return false;
    BRIGADE_CUDA_CHECK(status);
    return true;
  }
  void synchronize() const override { BRIGADE_CUDA_CHECK(cudaEventSynchronize(event)); }

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
    report_if_failed(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }

  void enqueue(std::function<void()>) override {
    throw Error(name() + ": enqueue(host task) on a CUDA stream; launch CUDA work on "
                         "cuda_handle() instead (there is no CPU fallback)");
  }

  std::shared_ptr<EventRecord> record(uint64_t event_id) override {
    return std::make_shared<CudaRecord>(event_id, device, id, stream_);
  }

  void wait(std::shared_ptr<EventRecord> record) override {
    if (auto* cuda = dynamic_cast<CudaRecord*>(record.get())) {
      BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda->event, 0));
      return;
    }
    record->synchronize();  // a CPU record: block this host thread (see the top of file)
  }

  void synchronize() override {
    const cudaError_t status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess)
      throw StreamError(name() + ": " + cudaGetErrorString(status), nullptr);
  }

  bool query() override {
    const cudaError_t status = answered_query(cudaStreamQuery(stream_));
    if (status == cudaErrorNotReady) return false;
    BRIGADE_CUDA_CHECK(status);
    return true;
  }

  std::string describe() override {
    const cudaError_t status = answered_query(cudaStreamQuery(stream_));
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
