// The emulated runtime's error state: each host thread's last error and current device, and
// the names and texts of the error codes.
//
// CUDA's rule (the CUDA Runtime API, "Error Handling"): every runtime call may return an
// error, and the error is also kept as the calling host thread's "last error" until
// cudaGetLastError returns it and resets it. That includes cudaErrorNotReady from
// cudaStreamQuery and cudaEventQuery, which is what makes an unchecked poll poison the next
// checked cudaGetLastError() after a healthy launch. A sticky error (a faulted GPU) is not
// reset: the GPU stays faulted.
#include <cstdio>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

namespace {
struct ThreadErrors {
  cudaError_t last = cudaSuccess;
  cudaError_t detailed = cudaSuccess;  // the code `detail` explains
  std::string detail;
  int device = 0;
};
thread_local ThreadErrors this_thread;

const char* base_string(cudaError_t code) {
  switch (code) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined:
      return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent:
      return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unrecognized error code";
}
}  // namespace

cudaError_t fail(cudaError_t code, std::string detail) {
  this_thread.last = code;
  this_thread.detailed = code;
  this_thread.detail = std::string(base_string(code)) +
                       (detail.empty() ? "" : " [emulated GPU: " + std::move(detail) + "]");
  return code;
}

int& current_device() { return this_thread.device; }

cudaError_t last_error() { return this_thread.last; }

}  // namespace brigade::emu::gpu

using brigade::emu::gpu::count_call;
using brigade::emu::gpu::this_thread;

extern "C" {

cudaError_t cudaGetLastError(void) {
  count_call("cudaGetLastError");
  const cudaError_t last = this_thread.last;
  this_thread.last = cudaSuccess;
  // A faulted GPU stays faulted: its error is returned again by the next call that touches it.
  return last;
}

cudaError_t cudaPeekAtLastError(void) {
  count_call("cudaPeekAtLastError");
  return this_thread.last;
}

const char* cudaGetErrorName(cudaError_t error) {
  count_call("cudaGetErrorName");
  switch (error) {
#define BRIGADE_NAME(code) \
  case code: return #code;
    BRIGADE_NAME(cudaSuccess)
    BRIGADE_NAME(cudaErrorInvalidValue)
    BRIGADE_NAME(cudaErrorMemoryAllocation)
    BRIGADE_NAME(cudaErrorInitializationError)
    BRIGADE_NAME(cudaErrorInvalidConfiguration)
    BRIGADE_NAME(cudaErrorInvalidMemcpyDirection)
    BRIGADE_NAME(cudaErrorInsufficientDriver)
    BRIGADE_NAME(cudaErrorNoDevice)
    BRIGADE_NAME(cudaErrorInvalidDevice)
    BRIGADE_NAME(cudaErrorInvalidResourceHandle)
    BRIGADE_NAME(cudaErrorIllegalState)
    BRIGADE_NAME(cudaErrorNotReady)
    BRIGADE_NAME(cudaErrorIllegalAddress)
    BRIGADE_NAME(cudaErrorPeerAccessAlreadyEnabled)
    BRIGADE_NAME(cudaErrorPeerAccessNotEnabled)
    BRIGADE_NAME(cudaErrorLaunchFailure)
    BRIGADE_NAME(cudaErrorNotSupported)
    BRIGADE_NAME(cudaErrorStreamCaptureUnsupported)
    BRIGADE_NAME(cudaErrorStreamCaptureInvalidated)
    BRIGADE_NAME(cudaErrorStreamCaptureMerge)
    BRIGADE_NAME(cudaErrorStreamCaptureUnmatched)
    BRIGADE_NAME(cudaErrorStreamCaptureUnjoined)
    BRIGADE_NAME(cudaErrorStreamCaptureIsolation)
    BRIGADE_NAME(cudaErrorStreamCaptureImplicit)
    BRIGADE_NAME(cudaErrorCapturedEvent)
    BRIGADE_NAME(cudaErrorStreamCaptureWrongThread)
#undef BRIGADE_NAME
  }
  return "cudaErrorUnknown";
}

// NVIDIA's text for the code; for the error this thread was last given, the emulator's
// explanation after it ("invalid resource handle [emulated GPU: kernel k launched on a stream
// of cuda:1 while this thread's current device is cuda:0 ...]").
const char* cudaGetErrorString(cudaError_t error) {
  count_call("cudaGetErrorString");
  if (error != cudaSuccess && error == this_thread.detailed) return this_thread.detail.c_str();
  return brigade::emu::gpu::base_string(error);
}

}  // extern "C"
