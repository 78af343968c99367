// Emulated copies and memsets: between pageable host memory, pinned memory (cudaMallocHost)
// and the memory of each GPU (memory.cpp hands it out). The rules enforced (README.md quotes
// the CUDA documentation for each):
//   - a copy must stay inside the allocations it names (the tensor an allocator's block is lent
//     to, when it is), and the direction must match them;
//   - a copy or memset of a nonzero count with a null pointer at either end is
//     cudaErrorInvalidValue, naming the side (a zero count is legal and does nothing);
//   - cudaMemcpy from pageable memory to a device returns once the source is staged, but the
//     data lands only when something is next ordered after the legacy stream; until then the
//     destination reads as poison to a non-blocking stream that was not ordered after it;
//   - cudaMemcpyAsync from pageable memory stages the source at the call; to pageable memory
//     it returns only when the copy is done; with pinned memory (cudaMallocHost) it is
//     asynchronous both ways: the destination is poison until the host sees the copy done,
//     the source is read when the copy runs and may not change before (pinned.cpp);
//   - cudaMemcpyPeer is asynchronous to the host (it may not be finished when it returns),
//     and all work later issued to either device, or the current one, is ordered after it;
//   - every copy and memset is an access of the allocations it names, checked for races
//     (hb.h), and every copy the host waits for advances the host's clock.
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

namespace {

// What a pointer of `bytes` bytes is, as the runtime tells under unified addressing. A range
// that starts inside an allocation and runs past it (or past the tensor the engine's allocator
// lent it to: Allocation::lent) is out of bounds; `memory` then names the allocation.
struct Where {
  enum Kind { pageable, pinned, device, out_of_bounds } kind = pageable;
  Gpu* gpu = nullptr;
  std::string memory;  // out_of_bounds only
};

Where where(const void* p, uint64_t bytes) {
  Emulation& e = Emulation::get();
  uintptr_t start = 0;
  const Allocation* a = e.find(p, 0, &start);
  if (a == nullptr) return {};
  if (reinterpret_cast<uintptr_t>(p) - start + bytes > a->usable())
    return {Where::out_of_bounds, nullptr, memory_name(*a, start)};
  return {a->gpu ? Where::device : Where::pinned, a->gpu, {}};
}

// A null pointer with bytes to copy or set is cudaErrorInvalidValue on a GPU, checked before
// anything touches it (a null with a zero count stays legal: there is nothing to touch).
// Returns false after fail(), naming the call and the side.
bool refuse_null(const char* call, const char* side, const void* p, uint64_t bytes) {
  if (p != nullptr || bytes == 0) return true;
  fail(cudaErrorInvalidValue, std::string(call) + ": the " + side + " is null and the count is " +
                                  std::to_string(bytes) + " bytes");
  return false;
}

// Checks a copy's pointers against its kind; returns where each side is, or null after fail().
// A zero-byte copy with a null side is legal and copies nothing: true, both sides pageable.
bool classify(const char* call, void* dst, const void* src, uint64_t bytes, cudaMemcpyKind kind,
              Where* to, Where* from) {
  *to = {};
  *from = {};
  if (!refuse_null(call, "destination", dst, bytes) || !refuse_null(call, "source", src, bytes))
    return false;
  if (dst == nullptr || src == nullptr) return true;  // and bytes == 0
  *to = where(dst, bytes);
  *from = where(src, bytes);
  for (const auto& [side, w, p] : {std::tuple{"destination", *to, static_cast<const void*>(dst)},
                                   std::tuple{"source", *from, src}})
    if (w.kind == Where::out_of_bounds) {
      fail(cudaErrorInvalidValue, std::string(call) + ": the " + side + " " + hex(p) + " + " +
                                      std::to_string(bytes) + " bytes runs past the end of " +
                                      w.memory);
      return false;
    }
  const bool dst_device = to->kind == Where::device, src_device = from->kind == Where::device;
  const bool matches = kind == cudaMemcpyDefault ||
                       (kind == cudaMemcpyHostToDevice && dst_device && !src_device) ||
                       (kind == cudaMemcpyDeviceToHost && !dst_device && src_device) ||
                       (kind == cudaMemcpyDeviceToDevice && dst_device && src_device) ||
                       (kind == cudaMemcpyHostToHost && !dst_device && !src_device);
  if (!matches) {
    fail(cudaErrorInvalidMemcpyDirection,
         std::string(call) + ": the kind says " + std::to_string(kind) + " but the destination is " +
             (dst_device ? name_of(*to->gpu) + " memory" : "host memory") + " and the source " +
             (src_device ? name_of(*from->gpu) + " memory" : "host memory"));
    return false;
  }
  for (const Where* w : {to, from})
    if (w->gpu != nullptr && fault_of(*w->gpu) != cudaSuccess) return false;
  return true;
}

// A copy task. A pageable source is staged now (CUDA copies it to a staging buffer before the
// call returns), so the caller may reuse its buffer at once.
Task copy_task(void* dst, const void* src, uint64_t bytes, bool stage_source) {
  if (stage_source) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    return {[dst, staged] { std::memcpy(dst, staged->data(), staged->size()); }, "a copy"};
  }
  return {[dst, src, bytes] { std::memcpy(dst, src, bytes); }, "a copy"};
}

// Whether a copy goes between device memory and pinned host memory, on a stream that runs it
// (pinned.cpp): a capture's copies are replayed as plain copies.
bool pinned_dma(const StreamState& stream, const Where& to, const Where& from) {
  return !stream.capture && ((to.kind == Where::pinned && from.kind == Where::device) ||
                             (to.kind == Where::device && from.kind == Where::pinned));
}

// A copy's two accesses for the happens-before check (hb.h), on the stream it was enqueued on.
void record_copy(StreamState& stream, void* dst, const void* src, uint64_t bytes,
                 const char* call, uint64_t position = 0) {
  record_access(stream, src, bytes, /*write=*/false, std::string(call) + " (its source)", position);
  record_access(stream, dst, bytes, /*write=*/true, std::string(call) + " (its destination)",
                position);
}

}  // namespace

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  count_call("cudaMemcpyAsync");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  auto s = stream_of(stream, "cudaMemcpyAsync");
  Where to, from;
  if (!s || !classify("cudaMemcpyAsync", dst, src, count, kind, &to, &from))
    return last_error();
  if (count == 0) return ok();
  if (s->capture && (to.kind == Where::pageable || from.kind == Where::pageable))
    return capturing_stream_refused(*s, "cudaMemcpyAsync with pageable host memory at one end");
  const uint64_t position =
      pinned_dma(*s, to, from)
          ? enqueue_pinned_copy(*s, dst, src, count, to.kind == Where::pinned, "cudaMemcpyAsync")
          : enqueue(*s, copy_task(dst, src, count, from.kind == Where::pageable));
  record_copy(*s, dst, src, count, "cudaMemcpyAsync");
  // To pageable memory the call returns only when the copy is done.
  if (to.kind == Where::pageable) {
    const VectorClock done = s->clock;
    count_host_block();
    wait_for(lock, *s, position);
    host_observes(done);
    return fault_of(*s->gpu);
  }
  return ok();
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  count_call("cudaMemcpy");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  if (unsafe_call_refused("cudaMemcpy") != cudaSuccess) return last_error();
  ++e.counts.legacy_memcpy;
  auto legacy = stream_of(nullptr, "cudaMemcpy");  // the current device's legacy stream
  Where to, from;
  if (!legacy || !classify("cudaMemcpy", dst, src, count, kind, &to, &from))
    return last_error();
  if (count == 0) return ok();
  if (to.kind == Where::device && from.kind == Where::pageable) {
    // "For transfers from pageable host memory to device memory, a stream sync is performed
    // before the copy is initiated. The function will return once the pageable buffer has
    // been copied to the staging memory for DMA transfer to device memory, but the DMA to
    // final destination may not have completed." The destination is poisoned now, the data
    // lands when the legacy stream is next used or synchronised.
    const uint64_t before = enqueue(*legacy, Task{[] {}, "cudaMemcpy (stream sync)"});
    // The host waits for the work before the copy, not for the copy: it lands as the legacy
    // stream's next task (land_unlanded runs before anything else is appended there), so it
    // is that position's write, and only what is ordered after it may read the destination.
    const VectorClock synced = legacy->clock;
    record_copy(*legacy, dst, src, count, "cudaMemcpy", before + 1);
    count_host_block();
    wait_for(lock, *legacy, before);
    host_observes(synced);
    std::memset(dst, 0xFF, count);
    to.gpu->unlanded.push_back(copy_task(dst, src, count, /*stage_source=*/true));
    return fault_of(*legacy->gpu);
  }
  const uint64_t position =
      pinned_dma(*legacy, to, from)
          ? enqueue_pinned_copy(*legacy, dst, src, count, to.kind == Where::pinned, "cudaMemcpy")
          : enqueue(*legacy, copy_task(dst, src, count, false));
  record_copy(*legacy, dst, src, count, "cudaMemcpy");
  // "For transfers from device to device, no host-side synchronization is performed."
  if (to.kind == Where::device && from.kind == Where::device) return ok();
  const VectorClock done = legacy->clock;
  count_host_block();
  wait_for(lock, *legacy, position);
  host_observes(done);
  return fault_of(*legacy->gpu);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                size_t count, cudaStream_t stream) {
  count_call("cudaMemcpyPeerAsync");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  auto s = stream_of(stream, "cudaMemcpyPeerAsync");
  Where to, from;
  if (!s || !classify("cudaMemcpyPeerAsync", dst, src, count, cudaMemcpyDeviceToDevice, &to, &from))
    return last_error();
  if (count == 0) return ok();  // nothing to copy (and a side may be null)
  if (to.gpu->index != dst_device || from.gpu->index != src_device)
    return fail(cudaErrorInvalidValue,
                "cudaMemcpyPeerAsync: the pointers belong to " + name_of(*to.gpu) + " and " +
                    name_of(*from.gpu) + ", not to the devices named");
  if (count > 0) {
    enqueue(*s, copy_task(dst, src, count, false));
    record_copy(*s, dst, src, count, "cudaMemcpyPeerAsync");
  }
  return ok();
}

// "This function is asynchronous with respect to the host, but serialized with respect all
// pending and future asynchronous work in to the current device, srcDevice, and dstDevice."
cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                           size_t count) {
  count_call("cudaMemcpyPeer");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  if (unsafe_call_refused("cudaMemcpyPeer") != cudaSuccess) return last_error();
  ++e.counts.legacy_memcpy;
  Gpu* gpu = current_gpu("cudaMemcpyPeer");
  Where to, from;
  if (gpu == nullptr ||
      !classify("cudaMemcpyPeer", dst, src, count, cudaMemcpyDeviceToDevice, &to, &from))
    return last_error();
  if (count == 0) return ok();  // nothing to copy (and a side may be null)
  if (to.gpu->index != dst_device || from.gpu->index != src_device)
    return fail(cudaErrorInvalidValue, "cudaMemcpyPeer: the pointers belong to other devices");
  // On the destination's legacy stream, after all work of the three devices; all their later
  // work waits for it. It is not finished when the call returns.
  auto legacy = legacy_stream(*to.gpu);
  for (Gpu* g : {to.gpu, from.gpu, gpu})
    for (const auto& weak : g->streams)
      if (auto other = weak.lock(); other && other != legacy) {
        const uint64_t p = other->enqueued;
        legacy->clock.join(other->clock);
        enqueue(*legacy, Task{[other, p] {
                                Emulation& em = Emulation::get();
                                std::unique_lock l(em.mutex);
                                wait_for(l, *other, p);
                              },
                              "cudaMemcpyPeer (serialised)"});
      }
  const uint64_t position = enqueue(*legacy, copy_task(dst, src, count, false));
  record_copy(*legacy, dst, src, count, "cudaMemcpyPeer");
  for (Gpu* g : {to.gpu, from.gpu, gpu}) {
    g->barrier_stream = legacy;
    g->barrier_position = position;
    g->barrier_clock = legacy->clock;
  }
  return ok();
}

// cudaMemsetAsync and cudaMemset (the legacy stream), each counted as itself (call_counts.h).
static cudaError_t memset_on(void* ptr, int value, size_t count, cudaStream_t stream,
                             const char* call) {
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = stream_of(stream, call);
  if (!s || !refuse_null(call, "destination", ptr, count)) return last_error();
  if (ptr == nullptr) return ok();  // and count == 0: nothing to set
  const Where w = where(ptr, count);
  if (w.kind != Where::device)
    return fail(cudaErrorInvalidValue,
                std::string(call) + "(" + hex(ptr) + ", " + std::to_string(count) + " bytes): " +
                    (w.kind == Where::out_of_bounds ? "runs past the end of " + w.memory
                                                    : "not inside one device allocation"));
  if (count > 0) {
    enqueue(*s, Task{[ptr, value, count] { std::memset(ptr, value, count); }, "cudaMemsetAsync"});
    record_access(*s, ptr, count, /*write=*/true, "cudaMemsetAsync");
  }
  return ok();
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  count_call("cudaMemsetAsync");
  return memset_on(ptr, value, count, stream, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  count_call("cudaMemset");
  return memset_on(ptr, value, count, nullptr, "cudaMemset");
}

}  // extern "C"
