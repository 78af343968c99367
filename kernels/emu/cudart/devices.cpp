// The emulated GPUs: how many, how much memory, the current device of each host thread, peer
// access, and the sticky fault a failed kernel leaves.
//
//   BRIGADE_EMULATED_GPUS        how many GPUs (default 2; 0 is a machine without a GPU)
//   BRIGADE_EMULATED_GPU_MEMORY  each GPU's memory, bytes or with KiB/MiB/GiB (default 4GiB)
//   BRIGADE_EMULATED_GPU_THREADS host threads that run one GPU's blocks (default 1)
//   BRIGADE_EMULATED_GPU_PEER    0: no pair of GPUs can access each other (default 1: all can)
//   BRIGADE_EMULATED_GPU_CC      every GPU's compute capability, "major.minor" (default 9.0)
//   BRIGADE_EMU_CHAOS            a seed: random delays in streams and host calls (chaos.cpp)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

namespace {

// The value of a variable as a whole number with an optional binary suffix, or -1 after
// setting `error`.
long long parse_count(const char* name, const char* fallback, long long max, bool bytes,
                      std::string* error) {
  const char* env = std::getenv(name);
  const std::string text = env != nullptr && *env != '\0' ? env : fallback;
  size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string suffix = text.substr(used);
  long long scale = 1;
  if (bytes && suffix == "KiB") scale = 1LL << 10;
  else if (bytes && suffix == "MiB") scale = 1LL << 20;
  else if (bytes && suffix == "GiB") scale = 1LL << 30;
  else if (!suffix.empty()) used = 0;
  if (used == 0 || value < 0 || value > max / scale) {
    *error = std::string(name) + "=\"" + text + "\": expected a whole number from 0 to " +
             std::to_string(max) + (bytes ? " bytes (or with KiB, MiB, GiB)" : "");
    return -1;
  }
  return value * scale;
}

// BRIGADE_EMULATED_GPU_CC: "major.minor", each a whole number below 100, or `error` set.
void parse_compute_capability(int* major, int* minor, std::string* error) {
  const char* env = std::getenv("BRIGADE_EMULATED_GPU_CC");
  if (env == nullptr || *env == '\0') return;
  const std::string text = env;
  const size_t dot = text.find('.');
  const auto whole = [](const std::string& part, int* value) {
    if (part.empty() || part.size() > 2 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *value = std::stoi(part);
    return true;
  };
  if (dot == std::string::npos || !whole(text.substr(0, dot), major) ||
      !whole(text.substr(dot + 1), minor) || *major == 0) {
    *error = "BRIGADE_EMULATED_GPU_CC=\"" + text +
             "\": expected a compute capability major.minor, such as 9.0 or 7.5";
  }
}

}  // namespace

Emulation::Emulation() {
  const long long count = parse_count("BRIGADE_EMULATED_GPUS", "2", 16, false, &setup_error);
  const long long memory =
      parse_count("BRIGADE_EMULATED_GPU_MEMORY", "4GiB", 1LL << 40, true, &setup_error);
  const long long threads =
      parse_count("BRIGADE_EMULATED_GPU_THREADS", "1", 64, false, &setup_error);
  const long long peer = parse_count("BRIGADE_EMULATED_GPU_PEER", "1", 1, false, &setup_error);
  if (const char* chaos = std::getenv("BRIGADE_EMU_CHAOS"); chaos != nullptr && *chaos != '\0') {
    const long long seed =
        parse_count("BRIGADE_EMU_CHAOS", "", (1LL << 62) - 1, false, &setup_error);
    chaos_seed = seed;  // -1 after an error, which leaves no GPUs anyway
  }
  parse_compute_capability(&compute_major, &compute_minor, &setup_error);
  if (!setup_error.empty()) return;
  for (int i = 0; i < count; ++i) {
    auto gpu = std::make_unique<Gpu>();
    gpu->index = i;
    gpu->capacity = static_cast<uint64_t>(memory);
    gpu->peer_enabled.assign(static_cast<size_t>(count), false);
    gpu->sm = std::make_unique<Multiprocessors>(threads > 0 ? static_cast<int>(threads) : 1);
    gpus.push_back(std::move(gpu));
  }
  peer_supported = peer == 1;
}

Emulation& Emulation::get() {
  static Emulation* emulation = new Emulation();  // never destroyed: see gpu.h
  return *emulation;
}

const Allocation* Emulation::find(const void* p, uint64_t bytes, uintptr_t* start) const {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin()) return nullptr;
  --it;
  // Inside: the first byte, and the last when there are any. Not the address one past the end,
  // where other memory may begin (a host buffer right after an emulated GPU's allocation).
  const uint64_t offset = address - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) return nullptr;
  if (start != nullptr) *start = it->first;
  return &it->second;
}

std::string name_of(const Gpu& gpu) { return "emulated cuda:" + std::to_string(gpu.index); }

Gpu* gpu_at(int index, const char* call) {
  Emulation& e = Emulation::get();
  if (index < 0 || index >= static_cast<int>(e.gpus.size())) {
    fail(e.gpus.empty() ? cudaErrorNoDevice : cudaErrorInvalidDevice,
         std::string(call) + ": device " + std::to_string(index) + " does not exist (" +
             std::to_string(e.gpus.size()) + " emulated GPUs" +
             (e.setup_error.empty() ? "" : "; " + e.setup_error) + ")");
    return nullptr;
  }
  return e.gpus[static_cast<size_t>(index)].get();
}

cudaError_t fault_of(const Gpu& gpu) {
  if (gpu.fault == cudaSuccess) return cudaSuccess;
  return fail(gpu.fault, name_of(gpu) + " faulted earlier and stays faulted (a sticky error, as "
                                        "on a GPU): " + gpu.fault_detail);
}

Gpu* current_gpu(const char* call) {
  Gpu* gpu = gpu_at(current_device(), call);
  if (gpu == nullptr || fault_of(*gpu) != cudaSuccess) return nullptr;
  return gpu;
}

void set_fault(Gpu& gpu, cudaError_t code, const std::string& detail) {
  if (gpu.fault != cudaSuccess) return;
  gpu.fault = code;
  gpu.fault_detail = detail;
  std::fprintf(stderr, "brigade: %s faulted: %s\n", name_of(gpu).c_str(), detail.c_str());
  // Its queued work will never run, so it races nothing: the host's clock takes in its streams'
  // (hb.h), so a later report does not bury this one under races with work that never ran.
  for (const auto& weak : gpu.streams)
    if (auto s = weak.lock()) host_observes(s->clock);
  Emulation::get().changed.notify_all();  // host threads waiting on its streams give up
}

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  count_call("cudaGetDeviceCount");
  Emulation& e = Emulation::get();
  *count = static_cast<int>(e.gpus.size());
  if (!e.setup_error.empty()) return fail(cudaErrorInitializationError, e.setup_error);
  if (e.gpus.empty()) return fail(cudaErrorNoDevice, "BRIGADE_EMULATED_GPUS=0");
  return ok();
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  count_call("cudaDeviceGetAttribute");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (gpu_at(device, "cudaDeviceGetAttribute") == nullptr) return last_error();
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = e.compute_major; return ok();
    case cudaDevAttrComputeCapabilityMinor: *value = e.compute_minor; return ok();
  }
  return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute " +
                                         std::to_string(static_cast<int>(attr)) +
                                         " is not emulated");
}

// The current device belongs to the calling host thread (CUDA Programming Guide, "Device
// Selection"): setting it on one thread changes nothing for another.
cudaError_t cudaSetDevice(int device) {
  count_call("cudaSetDevice");
  std::lock_guard lock(Emulation::get().mutex);
  if (gpu_at(device, "cudaSetDevice") == nullptr) return last_error();
  current_device() = device;
  return ok();
}

cudaError_t cudaGetDevice(int* device) {
  count_call("cudaGetDevice");
  *device = current_device();
  return ok();
}

cudaError_t cudaDeviceSynchronize(void) {
  count_call("cudaDeviceSynchronize");
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  ++e.counts.device_synchronize;
  if (unsafe_call_refused("cudaDeviceSynchronize") != cudaSuccess) return last_error();
  Gpu* gpu = gpu_at(current_device(), "cudaDeviceSynchronize");
  if (gpu == nullptr) return last_error();
  if (device_wide_wait_refused(gpu, "cudaDeviceSynchronize") != cudaSuccess) return last_error();
  count_host_block();
  drain(lock, *gpu, /*observed=*/true);
  return fault_of(*gpu);
}

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer_device) {
  count_call("cudaDeviceCanAccessPeer");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (gpu_at(device, "cudaDeviceCanAccessPeer") == nullptr ||
      gpu_at(peer_device, "cudaDeviceCanAccessPeer") == nullptr)
    return last_error();
  *can_access = e.peer_supported && device != peer_device ? 1 : 0;
  return ok();
}

// "Enables direct access to memory allocations on a peer device" for kernels of the CURRENT
// device; one direction only (CUDA Runtime API, cudaDeviceEnablePeerAccess).
cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned int flags) {
  count_call("cudaDeviceEnablePeerAccess");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  Gpu* gpu = current_gpu("cudaDeviceEnablePeerAccess");
  if (gpu == nullptr || gpu_at(peer_device, "cudaDeviceEnablePeerAccess") == nullptr)
    return last_error();
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
  if (!e.peer_supported || peer_device == gpu->index)
    return fail(cudaErrorInvalidDevice,
                "cudaDeviceEnablePeerAccess: " + name_of(*gpu) + " cannot access cuda:" +
                    std::to_string(peer_device) + " (cudaDeviceCanAccessPeer says 0)");
  char& slot = gpu->peer_enabled[static_cast<size_t>(peer_device)];
  if (slot) return fail(cudaErrorPeerAccessAlreadyEnabled, "");
  slot = true;
  return ok();
}

cudaError_t cudaDeviceDisablePeerAccess(int peer_device) {
  count_call("cudaDeviceDisablePeerAccess");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  Gpu* gpu = current_gpu("cudaDeviceDisablePeerAccess");
  if (gpu == nullptr || gpu_at(peer_device, "cudaDeviceDisablePeerAccess") == nullptr)
    return last_error();
  char& slot = gpu->peer_enabled[static_cast<size_t>(peer_device)];
  if (!slot) return fail(cudaErrorPeerAccessNotEnabled, "");
  slot = false;
  return ok();
}

// What an emulated GPU reports as its versions: CUDA 13.0's.
cudaError_t cudaDriverGetVersion(int* version) {
  count_call("cudaDriverGetVersion");
  *version = 13000;
  return ok();
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  count_call("cudaRuntimeGetVersion");
  *version = 13000;
  return ok();
}

}  // extern "C"
