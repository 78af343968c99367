// Device: where memory lives and work runs. `cpu:N` or `cuda:N`.
//
// CPU devices are virtual: cpu:0, cpu:1, ... are independent sets of worker threads, each
// with its own streams and its own memory accounting (an optional capacity), so that one
// machine without a GPU runs the very same multi-device code a GPU box runs. Any
// non-negative index names a CPU device; it comes into being on first use.
//
// Configuration (configure_cpu_device) is per index. An unconfigured CPU device has ONE
// compute thread and no memory limit: a pipeline of k stages then uses k compute threads,
// never oversubscribing a small machine; a single-device program asks for more threads.
// Reconfiguring is allowed at any time: work already running keeps the pool it started
// with (old pools are retired, not destroyed), later work uses the new one.
#pragma once

#include <compare>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

class ThreadPool;

enum class DeviceKind : uint8_t { cpu, cuda };

// CPU devices from this index on are the runtime's own scratch devices, for its measurements
// (the memory probe of pipeline/runtime/step_memory.cpp, the profiling twins of profile.cpp):
// a measurement configures its device as it needs, and must never reconfigure one a run
// names. Device::parse refuses them.
inline constexpr int kFirstInternalCpuDevice = 1 << 20;

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceKind::cpu, index}; }
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }

  // "cpu:1", "cuda:0"; "cpu" and "cuda" mean index 0. A cuda index is checked against the
  // GPUs of this machine (cuda_device_count()). Errors are brigade::Error, e.g.
  //   invalid device "gpu0": expected "cpu:N" or "cuda:N" with N a non-negative integer
  //   invalid device "cuda:7": this machine has 2 CUDA devices (cuda:0 to cuda:1)
  static Device parse(std::string_view text);
  // The same, against a given number of GPUs (for tests and for tools that plan ahead).
  static Device parse(std::string_view text, int cuda_devices);
  // A comma-separated list, "cpu:0,cpu:1" or "cuda:0,cuda:1": each entry parsed as above, in
  // order. An empty list or entry, or a device named twice, is a brigade::Error naming the
  // list.
  static std::vector<Device> parse_list(std::string_view list);

  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;  // "cpu:1"

  friend auto operator<=>(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& device);

struct CpuDeviceOptions {
  int threads = 1;              // compute threads of the device's ThreadPool (>= 1)
  uint64_t capacity_bytes = 0;  // memory limit of its allocator; 0 = unlimited
};

void configure_cpu_device(int index, CpuDeviceOptions options);
CpuDeviceOptions cpu_device_options(int index);

// The compute threads of a CPU device (created on first use). Kernels split their loops
// over it with parallel_for. Throws for a CUDA device.
ThreadPool& cpu_thread_pool(const Device& device);

// Number of usable GPUs, asked of the CUDA runtime once: 0 in a CPU-only build, and in a CUDA
// build on a machine without GPU or driver (never a crash). Nothing is printed: whoever asked
// for a GPU is refused with no_gpu_reason() in its message, and a program that chooses its
// devices itself (brigade-train --devices auto) says what it chose.
int cuda_device_count();

// Why cuda_device_count() is 0, in a few words: the CUDA runtime's error name and its words
// ("cudaErrorNoDevice: no CUDA-capable device is detected", ...), or that the build has no
// CUDA.
// Empty where there are GPUs.
const std::string& no_gpu_reason();

// Throws unless `device` can run work here: a CUDA device index below cuda_device_count(),
// whose compute capability runs this build's kernels (gpu_arch_refusal).
void check_device_available(const Device& device);

// A GPU's compute capability (cudaDevAttrComputeCapabilityMajor, Minor): 9.0 for an H100.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

// Why GPU `device`, of compute capability `gpu`, cannot run CUDA kernels compiled as machine
// code (SASS) for each architecture of `archs` (80: sm_80, compute capability 8.0) and as PTX
// for the highest, in one line; empty when it can. Machine code for X.Y runs on X.Z for any
// Z >= Y (binary compatibility holds within a major version), PTX for X.Y on any capability
// from X.Y up (the driver compiles it when the program loads): with the default 80 and 90, an
// 8.6 or 8.9 GPU runs sm_80's code, a 12.0 one the PTX, a 7.5 one nothing.
std::string gpu_arch_refusal(const Device& device, ComputeCapability gpu,
                             const std::vector<int>& archs);

// Lets kernels and copies of GPU `from` reach GPU `to`'s memory directly (peer-to-peer over
// NVLink or PCIe) when the pair can (cudaDeviceCanAccessPeer), once per ordered pair and
// process. Returns whether `from` now has peer access to `to`; false means copies between
// them are staged through host memory by the driver (slower, still correct). A CPU device,
// or the same GPU twice, is false.
bool enable_peer_access(const Device& from, const Device& to);

}  // namespace brigade
