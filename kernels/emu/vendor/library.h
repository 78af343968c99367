// What emulated cuBLAS and cuDNN share: a library handle, the checks every call makes before
// it enqueues work on the handle's stream, and each host thread's detailed error text.
// Internal to kernels/emu/vendor/ and kernels/emu/nccl/ (emulated NCCL enqueues its calls and
// keeps its error texts with these too).
//
// A call that computes runs as a task on the handle's stream of an emulated GPU, exactly like
// a kernel launch (kernels/emu/cudart/launch.cpp): enqueued under the emulation's lock, run
// by the stream's worker in stream order, and a task that fails faults its GPU (sticky, as on
// a GPU). The arithmetic is the reference kernels' (kernels/reference/).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/emu/cudart/include/cuda_runtime_api.h"

namespace brigade::emu::gpu {
struct StreamState;
}

namespace brigade::emu::vendor {

// A cuBLAS or cuDNN handle: it belongs to the device current at create, and its calls run on
// the stream last set (cublasSetStream / cudnnSetStream).
struct Handle {
  int device = 0;
  cudaStream_t stream = nullptr;
  uint32_t stream_id = 0;  // the number of the stream set (StreamState::id): a later stream
                           // may be given the same address once this one is destroyed
  bool stream_set = false;
  bool destroyed = false;
};

// Why a handle cannot run a call now (Failure::none: it can).
enum class Failure {
  none,
  dead_handle,       // never created, or destroyed
  wrong_device,      // the calling thread's current device is not the handle's
  stream_not_set,    // no cublasSetStream / cudnnSetStream since create
  dead_stream,       // the stream is not live, or its GPU has faulted
  stream_device,     // the stream belongs to another device than the handle
};
struct Refusal {
  Failure failure = Failure::none;
  std::string detail;
};

// A device buffer a call reads or writes: checked against the allocations of the emulated
// runtime when the call is made; one that is not device memory the handle's GPU may touch, or
// that runs past its allocation, faults the GPU when the task runs (cudaErrorIllegalAddress
// at the next synchronising call), as the GPU's memory unit would.
// Each is also an access of its allocation for the happens-before check
// (kernels/emu/cudart/hb.h): `written` when the call writes it.
struct Operand {
  Operand(const void* p, uint64_t b, const char* n, bool w = false)
      : pointer(p), bytes(b), name(n), written(w) {}
  const void* pointer;
  uint64_t bytes;
  const char* name;  // "A", "workspace", "dx"
  bool written;
};

// Checks `handle` for `call` ("cublasSgemm") and, when it may run, enqueues `work` on its
// stream and returns Refusal{}. The test hook (vendor_emulation.h) runs first, on the calling
// thread, with no lock held.
Refusal run_on_stream(const Handle* handle, const std::string& call,
                      const std::vector<Operand>& operands, std::function<void()> work);

// Enqueues `work`, the call `call`, on `stream` with its operands checked (a task that faults
// the GPU instead of running when one may not be touched) and recorded as accesses; with the
// emulation's lock held. run_on_stream ends here, and so does each emulated NCCL call.
void enqueue_call(gpu::StreamState& stream, const std::string& call,
                  const std::vector<Operand>& operands, std::function<void()> work);

// Checks `handle` only (calls that enqueue nothing but need a live handle: the queries), with
// the emulation's lock held (Emulation::mutex, kernels/emu/cudart/gpu.h): a handle is read and
// changed only under it.
Refusal check_handle(const Handle* handle, const std::string& call);

// cublasSetStream's and cudnnSetStream's own check and change, with the emulation's lock held:
// `stream` becomes the handle's. Refused (Failure::dead_stream) while the handle is still set
// to a stream destroyed since: changing a handle's stream may touch the old one (an event
// recorded on it to order the library's internal work after it; rocBLAS documents the hazard
// and asks to set the default stream before destroying a stream), which on a GPU is memory
// freed with the stream — undefined, so refused here, stricter than a GPU. A handle whose
// stream is the default one (0, or never set) may be given any stream.
Refusal set_stream(Handle* handle, cudaStream_t stream, const std::string& call);

// Every handle ever created (with the emulation's lock held). A destroyed handle is kept,
// marked destroyed, so that a call on it is refused by name instead of reading freed memory.
void register_handle(const Handle* handle);

// Each host thread's last failure of one library, for the *GetErrorString / *GetStatusString
// text: NVIDIA's text, then " [emulated GPU: detail]" for the code this thread was last given.
enum class Library { cublas, cudnn, nccl };
int remember(Library library, int code, const char* nvidia_text, const std::string& detail);
const char* text_of(Library library, int code, const char* nvidia_text);

// BRIGADE_EMU_CUDNN_REFUSE_FIRST=1 (read at each call): the first algorithm of each heuristic
// list fails at execution with CUDNN_STATUS_NOT_SUPPORTED, so a caller's fallback runs.
bool refuse_first_algorithm();

// BRIGADE_EMU_CUDNN_FMA_FIRST=1 (read at each call): in CUDNN_TENSOR_OP_MATH the heuristics
// list a tensor-op algorithm's FMA pair before its tensor-op one (cudnn_algorithms.cpp).
bool fma_pairs_first();

}  // namespace brigade::emu::vendor
