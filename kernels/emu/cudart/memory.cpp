// Emulated device memory: allocations, pinned host memory, and the poison.
//
// Device memory is host memory the emulator hands out and remembers (Emulation::allocations),
// so a pointer tells which GPU it belongs to, as unified virtual addressing does; pointers it
// does not know are pageable host memory (copies.cpp moves bytes between them). The rules
// enforced (README.md quotes the CUDA documentation for each):
//   - cudaMalloc allocates on the thread's current device, up to that GPU's capacity, and the
//     memory is poisoned: every byte 0xFF, a NaN in every float, so a read before a write
//     shows; poison_async (cuda_emulation.h) poisons a block again, stream-ordered, when the
//     engine's allocator takes it back into its cache;
//   - an allocation is exactly as long as asked (a real GPU rounds it up, and a read past the
//     end lands in the slack unseen): the copy checks (copies.cpp), and AddressSanitizer in a
//     sanitized build, see the first byte past it; lend (cuda_emulation.h) narrows what may
//     be used of a block to the tensor the engine's allocator lent it to;
//   - cudaFree synchronises the device first, as CUDA does, and refuses pointers it did not
//     hand out;
//   - lend of pinned memory to a tensor (its host code's to write) needs every copy from or
//     into it seen done by the host (pinned.cpp says how copies use pinned memory).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

namespace {

constexpr uint64_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr unsigned char kPoison = 0xFF;

// What an allocation of `size` bytes takes of its GPU's memory: whole 256-byte units, as the
// alignment a real GPU gives costs it.
uint64_t footprint(uint64_t size) {
  return (std::max<uint64_t>(size, 1) + kAlignment - 1) / kAlignment * kAlignment;
}

// `size` bytes (at least 1) aligned to kAlignment, and not one more: posix_memalign, unlike
// aligned_alloc, takes a size that is not a multiple of the alignment.
void* allocate_exactly(uint64_t size) {
  void* p = nullptr;
  return posix_memalign(&p, kAlignment, std::max<uint64_t>(size, 1)) == 0 ? p : nullptr;
}

}  // namespace

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  return text;
}

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  count_call("cudaMalloc");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (unsafe_call_refused("cudaMalloc") != cudaSuccess) return last_error();
  *ptr = nullptr;
  ++e.counts.malloc;
  Gpu* gpu = current_gpu("cudaMalloc");  // memory of the calling thread's current device
  if (gpu == nullptr) return last_error();
  const uint64_t bytes = std::max<uint64_t>(size, 1);
  if (gpu->in_use + footprint(bytes) > gpu->capacity)
    return fail(cudaErrorMemoryAllocation,
                "cudaMalloc(" + std::to_string(size) + ") on " + name_of(*gpu) + ": " +
                    std::to_string(gpu->in_use) + " of " + std::to_string(gpu->capacity) +
                    " bytes in use (BRIGADE_EMULATED_GPU_MEMORY)");
  void* p = allocate_exactly(bytes);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation, "the host has no memory left");
  std::memset(p, kPoison, bytes);  // fresh device memory is garbage: here, NaN
  gpu->in_use += footprint(bytes);
  e.counts.malloc_bytes += bytes;
  e.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, gpu, {}, std::nullopt};
  *ptr = p;
  return ok();
}

cudaError_t cudaFree(void* ptr) {
  count_call("cudaFree");
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  if (unsafe_call_refused("cudaFree") != cudaSuccess) return last_error();
  if (ptr == nullptr) return ok();
  ++e.counts.free;
  const auto it = e.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == e.allocations.end() || it->second.gpu == nullptr)
    return fail(cudaErrorInvalidValue, "cudaFree(" + hex(ptr) + "): not a pointer cudaMalloc returned");
  Gpu& gpu = *it->second.gpu;
  if (device_wide_wait_refused(&gpu, "cudaFree") != cudaSuccess) return last_error();
  count_host_block();
  // The emulation waits for the device, so that no kernel still reads the block it frees; the
  // host's clock does not take the wait in (drain): a GPU's cudaFree need not synchronise.
  drain(lock, gpu, /*observed=*/false);
  const auto again = e.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (again == e.allocations.end())
    return fail(cudaErrorInvalidValue, "cudaFree(" + hex(ptr) + "): freed twice");
  gpu.in_use -= footprint(again->second.bytes);
  e.counts.free_bytes += again->second.bytes;
  e.allocations.erase(again);
  std::free(ptr);
  return fault_of(gpu);
}

// cudaHostAlloc and cudaMallocHost, each counted as itself (call_counts.h).
static cudaError_t host_alloc(void** ptr, size_t size, unsigned int flags) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  *ptr = nullptr;
  ++e.counts.host_alloc;
  if (unsafe_call_refused(flags == cudaHostAllocDefault ? "cudaMallocHost" : "cudaHostAlloc") !=
      cudaSuccess)
    return last_error();
  if (flags != cudaHostAllocDefault)
    return fail(cudaErrorInvalidValue, "cudaHostAlloc: only cudaHostAllocDefault is emulated");
  // A call of the current device's context: after a sticky error there, it fails with it.
  if (current_gpu(flags == cudaHostAllocDefault ? "cudaMallocHost" : "cudaHostAlloc") == nullptr)
    return last_error();
  const uint64_t bytes = std::max<uint64_t>(size, 1);
  void* p = allocate_exactly(bytes);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc: the host has no memory left");
  e.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, nullptr, {}, std::nullopt};
  *ptr = p;
  return ok();
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  count_call("cudaHostAlloc");
  return host_alloc(ptr, size, flags);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  count_call("cudaMallocHost");
  return host_alloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void* ptr) {
  count_call("cudaFreeHost");
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  if (ptr == nullptr) return ok();
  ++e.counts.host_free;
  if (unsafe_call_refused("cudaFreeHost") != cudaSuccess) return last_error();
  if (current_gpu("cudaFreeHost") == nullptr) return last_error();  // as cudaHostAlloc
  const auto it = e.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == e.allocations.end() || it->second.gpu != nullptr)
    return fail(cudaErrorInvalidValue,
                "cudaFreeHost(" + hex(ptr) + "): not a pointer cudaMallocHost returned");
  if (device_wide_wait_refused(nullptr, "cudaFreeHost") != cudaSuccess) return last_error();
  const uint64_t bytes = it->second.bytes;
  // Like cudaFree, it waits for the device work that may still use the buffer.
  count_host_block();
  for (auto& gpu : e.gpus) drain(lock, *gpu, /*observed=*/false);
  forget_pinned_copies(ptr, bytes);  // those that will never run or land (pinned.cpp)
  e.allocations.erase(reinterpret_cast<uintptr_t>(ptr));
  std::free(ptr);
  return ok();
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  count_call("cudaMemGetInfo");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  Gpu* gpu = current_gpu("cudaMemGetInfo");
  if (gpu == nullptr) return last_error();
  *free_bytes = gpu->capacity - gpu->in_use;
  *total_bytes = gpu->capacity;
  return ok();
}

}  // extern "C"

// ---- cuda_emulation.h -----------------------------------------------------------------------

namespace brigade::emu::gpu {

cudaError_t poison_async(void* memory, size_t bytes, cudaStream_t stream) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = stream_of(stream, "poison_async");
  if (!s) return last_error();
  const Allocation* a = e.find(memory, bytes);  // the whole block, lent or not
  if (a == nullptr || a->gpu == nullptr)
    return fail(cudaErrorInvalidValue, "poison_async(" + hex(memory) + ", " +
                                           std::to_string(bytes) +
                                           " bytes): not inside one device allocation");
  if (bytes > 0)
    enqueue(*s, Task{[memory, bytes] { std::memset(memory, kPoison, bytes); },
                     "the poisoning of a block returned to the allocator's cache"});
  return ok();
}

cudaError_t lend(void* block, size_t bytes) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  const auto it = e.allocations.find(reinterpret_cast<uintptr_t>(block));
  if (it == e.allocations.end() || bytes > it->second.bytes)
    return fail(cudaErrorInvalidValue, "lend(" + hex(block) + ", " + std::to_string(bytes) +
                                           " bytes): not the start of an allocation that long");
  // Pinned memory lent to a tensor is its host code's to write from now on: on a GPU, a copy
  // from it still in flight would send the host's new bytes, one into it would overwrite
  // them, depending on timing. "For all other transfers, the function should be fully
  // asynchronous" (API synchronization behavior): only the host seeing the copies done (an
  // event or stream synchronised, a query that answered done) makes the block the host's.
  if (it->second.gpu == nullptr && bytes > 0)
    if (const Access* pending = first_unordered(it->second.history, e.host_clock))
      return fail(cudaErrorInvalidValue,
                  "lend(" + hex(block) + ", " + std::to_string(bytes) + " bytes): " +
                      memory_name(it->second, it->first) + " is lent to a tensor whose host "
                      "code may write it, but " + pending->what + " on " +
                      (pending->stream_name ? *pending->stream_name : std::string("a stream")) +
                      " touches it and the host has not seen that done (no stream or event "
                      "synchronisation, and no query that answered done, since it was issued)");
  it->second.lent = bytes;
  ++it->second.lendings;
  return ok();
}

}  // namespace brigade::emu::gpu
