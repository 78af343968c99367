// The emulated kernel launch: checks made at the launch, then the grid as a stream task that
// runs its blocks on the GPU's threads (kernels/emu/grid.cpp's run_grid), beside the grids of
// its other streams (kernels/emu/multiprocessors.h).
#include "kernels/emu/cudart/launch.h"

#include <functional>
#include <sstream>
#include <string>

#include "engine/error.h"
#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu {

namespace {

// Why a pointer argument's declared extent (BRIGADE_EXTENT) leaves its allocation, or "".
std::string extent_overrun(const gpu::Allocation& a, uintptr_t start, const PointerArgument& p,
                           const std::string& kernel, const gpu::Gpu& gpu) {
  if (p.elements < 0) return "";  // not declared
  const uint64_t offset = reinterpret_cast<uintptr_t>(p.pointer) - start;
  const uint64_t bytes = static_cast<uint64_t>(p.elements) * p.element_bytes;
  if (offset + bytes <= a.usable()) return "";
  const uint64_t past = offset + bytes - a.usable();
  std::ostringstream os;
  os << "kernel " << kernel << " on " << gpu::name_of(gpu) << ": ";
  if (p.position > 0)
    os << "argument " << p.position << " (" << p.written_as << ")";
  else  // BRIGADE_INDIRECT: found in a table in device memory, not among the arguments
    os << "memory reached through its table (" << p.written_as << ")";
  os << " is declared to touch " << p.elements << " elements of "
     << p.element_bytes << " bytes from byte " << offset << " of " << gpu::memory_name(a, start)
     << ", which runs " << past << " bytes";
  if (const uint64_t whole = past / p.element_bytes; past % p.element_bytes == 0)
    os << " (" << whole << (whole == 1 ? " element)" : " elements)");
  os << (a.lent ? " past the end of the tensor in it" : " past its end");
  return os.str();
}

// Why the kernel would touch memory it may not, or "".
std::string illegal_access(const gpu::Gpu& gpu, const std::vector<PointerArgument>& pointers,
                           const std::string& kernel) {
  const gpu::Emulation& e = gpu::Emulation::get();
  for (size_t i = 0; i < pointers.size(); ++i) {
    if (pointers[i].pointer == nullptr) continue;
    uintptr_t start = 0;
    const gpu::Allocation* a = e.find(pointers[i].pointer, 0, &start);
    const std::string arg = "kernel " + kernel + " on " + gpu::name_of(gpu) + ": pointer argument " +
                            std::to_string(i + 1) + " ";
    if (a == nullptr) return arg + "is not device or pinned memory (pageable host memory?)";
    if (a->gpu != nullptr && a->gpu != &gpu &&
        !gpu.peer_enabled[static_cast<size_t>(a->gpu->index)])
      return arg + "points into " + gpu::name_of(*a->gpu) +
             " memory, and peer access to it was not enabled (cudaDeviceEnablePeerAccess)";
    if (std::string overrun = extent_overrun(*a, start, pointers[i], kernel, gpu); !overrun.empty())
      return overrun;
  }
  return "";
}
}  // namespace

cudaError_t launch_on_gpu(cudaStream_t stream, LaunchConfig config, ThreadBody body,
                          std::vector<PointerArgument> pointers) {
  gpu::count_kernel_launch();
  gpu::ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the launch
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  const std::string call = "kernel " + config.kernel;
  auto s = gpu::stream_of(stream, call.c_str());
  if (!s) return gpu::last_error();
  if (s->gpu->index != gpu::current_device())
    return gpu::fail(cudaErrorInvalidResourceHandle,
                     call + " launched on a stream of " + gpu::name_of(*s->gpu) +
                         " while the calling thread's current device is cuda:" +
                         std::to_string(gpu::current_device()) + " (cudaSetDevice)");
  try {
    check_launch(config);
  } catch (const Error& ex) {
    return gpu::fail(cudaErrorInvalidConfiguration, ex.what());
  }
  gpu::Gpu* g = s->gpu;
  std::string what = "kernel " + config.kernel;
  std::string illegal = illegal_access(*g, pointers, config.kernel);
  const std::string access = what;
  // In a capture the memory is checked here and again at each replay: by then it may have
  // been freed and allocated again smaller, or lent to a smaller tensor (graphs.cpp).
  std::function<std::string()> recheck;
  if (s->capture)
    recheck = [g, pointers, kernel = config.kernel] { return illegal_access(*g, pointers, kernel); };
  gpu::enqueue(*s, gpu::Task{[config = std::move(config), body = std::move(body), g,
                              illegal = std::move(illegal)] {
                               if (!illegal.empty()) {
                                 std::lock_guard l(gpu::Emulation::get().mutex);
                                 gpu::set_fault(*g, cudaErrorIllegalAddress, illegal);
                                 return;
                               }
                               run_grid(config, body, *g->sm);
                             },
                             std::move(what)});
  if (recheck) gpu::capture_recheck(*s, std::move(recheck));
  // An argument without a declared extent may touch any byte of its allocation.
  for (const PointerArgument& p : pointers)
    gpu::record_access(*s, p.pointer,
                       p.elements >= 0 ? static_cast<uint64_t>(p.elements) * p.element_bytes
                                       : gpu::kWholeAllocation,
                       p.written, access);
  return cudaSuccess;
}

}  // namespace brigade::emu
