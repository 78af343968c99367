#include "engine/device.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/thread_pool.h"

namespace brigade {

namespace detail {
// Defined in device_cuda.cpp (CUDA builds): the number of GPUs, or 0 with `why` set.
int probe_cuda_devices(std::string* why);
// Defined in device_cuda.cpp: cudaDeviceCanAccessPeer, then cudaDeviceEnablePeerAccess.
bool cuda_enable_peer_access(int from, int to);
// Defined in device_cuda.cpp: cudaDeviceGetAttribute's compute capability of GPU `index`.
ComputeCapability cuda_compute_capability(int index);
}  // namespace detail

std::string Device::str() const {
  return (kind == DeviceKind::cpu ? "cpu:" : "cuda:") + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

Device Device::parse(std::string_view text) { return parse(text, -1); }

// cuda_devices < 0: ask the machine, but only if the text names a CUDA device, so that
// parsing "cpu:0" never touches the CUDA driver.
Device Device::parse(std::string_view text, int cuda_devices) {
  const std::string quoted = "invalid device \"" + std::string(text) + "\": ";
  const auto colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  Device device;
  if (kind_text == "cpu") {
    device.kind = DeviceKind::cpu;
  } else if (kind_text == "cuda") {
    device.kind = DeviceKind::cuda;
  } else {
    throw Error(quoted + "expected \"cpu:N\" or \"cuda:N\" with N a non-negative integer");
  }
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    const char* end = digits.data() + digits.size();
    auto [stop, ec] = std::from_chars(digits.data(), end, device.index);
    // The largest index a run may name: a CPU device's is below the runtime's own.
    const std::string most =
        device.is_cpu() ? std::to_string(kFirstInternalCpuDevice - 1) +
                              ": CPU devices from cpu:" +
                              std::to_string(kFirstInternalCpuDevice) + " on are Brigade's own"
                        : std::to_string(std::numeric_limits<int>::max());
    const bool out_of_range = ec == std::errc::result_out_of_range ||
                              (ec == std::errc() && device.is_cpu() &&
                               device.index >= kFirstInternalCpuDevice);
    if (out_of_range && stop == end && digits.find('-') == digits.npos)
      throw Error(quoted + "the index after ':' is too large (at most " + most + ")");
    if (digits.empty() || ec != std::errc() || stop != end || device.index < 0)
      throw Error(quoted + "the index after ':' must be a non-negative integer");
  }
  if (device.is_cuda()) {
    const bool this_machine = cuda_devices < 0;  // not a count given to plan for another
    if (this_machine) cuda_devices = cuda_device_count();
    if (cuda_devices == 0)
      throw Error(quoted + "this machine has no usable CUDA device" +
                  (this_machine ? " (" + no_gpu_reason() + ")" : std::string()));
    if (device.index >= cuda_devices)
      throw Error(quoted + "this machine has " + std::to_string(cuda_devices) + " CUDA device" +
                  (cuda_devices == 1 ? "" : "s") + " (cuda:0 to cuda:" +
                  std::to_string(cuda_devices - 1) + ")");
  }
  return device;
}

std::vector<Device> Device::parse_list(std::string_view list) {
  const std::string quoted = "device list \"" + std::string(list) + "\": ";
  std::vector<Device> devices;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    const std::string_view entry = list.substr(begin, comma - begin);
    if (entry.empty())
      throw Error(quoted + (list.empty() ? "empty (expected e.g. cpu:0,cpu:1)" : "an empty entry"));
    const Device d = parse(entry);
    if (std::find(devices.begin(), devices.end(), d) != devices.end())
      throw Error(quoted + d.str() + " is listed twice");
    devices.push_back(d);
    begin = comma + 1;
  }
  return devices;
}

void check_device_available(const Device& device) {
  if (device.is_cpu()) {
    BRIGADE_CHECK(device.index >= 0, "invalid device " << device << ": negative index");
    return;
  }
  const int count = cuda_device_count();
  BRIGADE_CHECK(device.index >= 0 && device.index < count,
                "device " << device << " is not available: this machine has " << count
                          << " usable CUDA device" << (count == 1 ? "" : "s")
                          << (count == 0 ? " (" + no_gpu_reason() + ")" : ""));
#if defined(BRIGADE_HAVE_CUDA)
  // Every GPU asked once, at the first check of one: a GPU this build has no kernels for is
  // refused here, naming it, before the first launch fails with cudaErrorNoKernelImageForDevice
  // deep inside some layer. Each allocation comes through here: afterwards a lookup, no lock.
  static const std::vector<std::string> refusals = [count] {
    const std::vector<int> built = {BRIGADE_GPU_ARCHS};  // -Dgpu_arch, engine/meson.build
    std::vector<std::string> why;
    for (int gpu = 0; gpu < count; ++gpu)
      why.push_back(
          gpu_arch_refusal(Device::cuda(gpu), detail::cuda_compute_capability(gpu), built));
    return why;
  }();
  const std::string& refusal = refusals[static_cast<size_t>(device.index)];
  BRIGADE_CHECK(refusal.empty(), refusal);
#endif
}

std::string gpu_arch_refusal(const Device& device, ComputeCapability gpu,
                             const std::vector<int>& archs) {
  const int capability = gpu.major * 10 + gpu.minor;  // 86 for 8.6, as gpu_arch writes it
  std::ostringstream why;
  why << "device " << device << " has compute capability " << gpu.major << "." << gpu.minor;
  if (capability < 80) {
    why << "; Brigade's CUDA kernels need 8.0 or later (bf16 tensor-core instructions)";
    return why.str();
  }
  int highest = 0;
  for (const int arch : archs) {
    if (arch / 10 == gpu.major && arch % 10 <= gpu.minor) return {};  // its SASS runs there
    highest = std::max(highest, arch);
  }
  if (highest > 0 && capability >= highest) return {};  // the driver compiles the PTX for it
  why << ", which this build's CUDA kernels do not run on (machine code for ";
  for (size_t i = 0; i < archs.size(); ++i)
    why << (i == 0 ? "" : ", ") << archs[i] / 10 << "." << archs[i] % 10;
  why << ", PTX for " << highest / 10 << "." << highest % 10 << " and later): add " << capability
      << " to the meson option gpu_arch and rebuild, for a build in ./build: meson configure "
      << "build -Dgpu_arch=" << capability;
  for (const int arch : archs) why << "," << arch;
  why << " && meson compile -C build";
  return why.str();
}

namespace {

struct GpuCount {
  int count = 0;
  std::string why_none;  // no_gpu_reason()
};

// Probed once: the answer cannot change while the process runs.
const GpuCount& gpu_count() {
  static const GpuCount probed = [] {
    GpuCount found;
#if defined(BRIGADE_HAVE_CUDA)
    found.count = detail::probe_cuda_devices(&found.why_none);
#else
    found.why_none = "this build has no CUDA: configure it with -Dcuda=enabled";
#endif
    return found;
  }();
  return probed;
}

}  // namespace

int cuda_device_count() { return gpu_count().count; }

const std::string& no_gpu_reason() { return gpu_count().why_none; }

bool enable_peer_access(const Device& from, const Device& to) {
  if (!from.is_cuda() || !to.is_cuda() || from == to) return false;
#if defined(BRIGADE_HAVE_CUDA)
  static std::mutex mutex;
  static std::map<std::pair<int, int>, bool> done;  // per ordered pair, for the process
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(from.index, to.index);
  if (auto it = done.find(key); it != done.end()) return it->second;
  return done[key] = detail::cuda_enable_peer_access(from.index, to.index);
#else
  return false;
#endif
}

// --- The CPU device registry ------------------------------------------------------------

namespace {

struct CpuDeviceState {
  CpuDeviceOptions options;
  std::unique_ptr<ThreadPool> pool;                  // created on first use
  std::vector<std::unique_ptr<ThreadPool>> retired;  // pools replaced by reconfiguration
};

struct CpuRegistry {
  std::mutex mutex;
  std::map<int, CpuDeviceState> devices;
};

// Never destroyed: streams and pools may still be running while static destructors run.
CpuRegistry& registry() {
  static CpuRegistry* r = new CpuRegistry;
  return *r;
}

}  // namespace

void configure_cpu_device(int index, CpuDeviceOptions options) {
  BRIGADE_CHECK(index >= 0, "configure_cpu_device: invalid device cpu:" << index);
  BRIGADE_CHECK(options.threads >= 1, "configure_cpu_device(cpu:" << index
                                          << "): threads must be at least 1, got "
                                          << options.threads);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& state = r.devices[index];
  if (state.pool && state.pool->size() != options.threads)
    state.retired.push_back(std::move(state.pool));
  state.options = options;
}

CpuDeviceOptions cpu_device_options(int index) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.devices.find(index);
  return it == r.devices.end() ? CpuDeviceOptions{} : it->second.options;
}

ThreadPool& cpu_thread_pool(const Device& device) {
  BRIGADE_CHECK(device.is_cpu(), "cpu_thread_pool: " << device << " is not a CPU device");
  BRIGADE_CHECK(device.index >= 0, "cpu_thread_pool: invalid device " << device);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& state = r.devices[device.index];
  if (!state.pool) state.pool = std::make_unique<ThreadPool>(state.options.threads);
  return *state.pool;
}

}  // namespace brigade
