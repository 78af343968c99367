#include "tools/train/placement.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <thread>

#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"
#include "kernels/precision.h"

namespace brigade::train {

std::vector<Device> resolve_devices(const std::string& list, int model_blocks) {
  std::vector<Device> devices;
  if (list != "auto") {
    try {
      return Device::parse_list(list);
    } catch (const Error& e) {
      throw UsageError(std::string("--devices: ") + e.what());
    }
  }
  const int gpus = cuda_device_count();
  if (gpus > 0) {
    for (int i = 0; i < gpus; ++i) devices.push_back(Device::cuda(i));
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    // auto is the one place a CUDA build goes on without a GPU: it says so, once, and why, in
    // one short line: the reason's first words, the runtime's name for it (a refusal of a GPU
    // asked for by name gives the rest).
    const std::string& why = no_gpu_reason();
    std::fprintf(stderr, "brigade: no GPU here (%s); CPU devices only\n",
                 why.substr(0, why.find(": ")).c_str());
#endif
    for (int i = 0; i < model_blocks; ++i) devices.push_back(Device::cpu(i));
  }
  return devices;
}

RunDevices choose_devices(const Options& o, const model::ModelSpec& model) {
  std::vector<Device> devices = resolve_devices(o.devices, model.device_count);
  const int blocks = model.device_count;
  const size_t layers = model.layers.size();
  // auto on a machine with more GPUs than the cut can use: the first ones it can (a cut by
  // blocks uses one device per block; a cut by cost one per layer), not a refusal.
  const size_t usable = o.balance == "blocks" ? static_cast<size_t>(blocks) : layers;
  if (o.devices == "auto" && devices.size() > usable) devices.resize(usable);
  const int d = static_cast<int>(devices.size());
  if (static_cast<size_t>(d) > layers)
    throw UsageError(std::to_string(d) + " devices (" + o.devices + ") but the model has only " +
                     std::to_string(layers) + " layers: a stage needs at least one layer");
  if (d > blocks && o.balance == "blocks")
    throw UsageError(std::to_string(d) + " devices (" + o.devices + ") but the model has " +
                     std::to_string(blocks) + " device block" + (blocks == 1 ? "" : "s") +
                     ": give at most " + std::to_string(blocks) +
                     " devices, add `device K` lines to the model file, or cut it by cost "
                     "with --balance flops|params|memory|time");

  RunDevices p;
  p.devices = devices;
  int cpu_devices = 0;
  for (const Device& dev : devices) cpu_devices += dev.is_cpu();
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<int> asked =
      per_device(o.threads_per_device, "--threads-per-device", o, devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    const int count = asked[i];
    if (count > 0 && !devices[i].is_cpu())
      throw UsageError("--threads-per-device gives " + devices[i].str() + " " +
                       std::to_string(count) + " threads, but threads are a CPU device's; give 0 "
                       "for a GPU");
    p.threads.push_back(!devices[i].is_cpu() ? 0
                        : count > 0          ? count
                                             : std::max(1, cores / std::max(1, cpu_devices)));
  }
  if (o.device_memory != 0 && cpu_devices == 0)
    throw UsageError("--device-memory limits CPU devices, and " + o.devices +
                     " names none (a GPU's memory is its own)");
  use_math_mode(o.math, devices);
  use_precision(o.precision);
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].is_cpu())
      configure_cpu_device(devices[i].index, {p.threads[i], o.device_memory});
  return p;
}

void use_math_mode(const std::string& math, const std::vector<Device>& devices) {
  const MathMode mode = parse_math_mode(math);  // --math was checked to be fp32 or tf32
  if (mode == MathMode::tf32)  // fp32 runs anywhere (and a CPU run never reads the CUDA path)
    for (const Device& device : devices) {
      const std::string why =
          math_mode_refusal(mode, device.is_cuda(), device.str(), cuda_path_name(cuda_path()));
      if (!why.empty()) throw UsageError("--math " + math + ": " + why);
    }
  set_math_mode(mode);
}

void use_precision(const std::string& precision) {
  set_precision(parse_precision(precision));  // --precision was checked to be fp32 or bf16
}

std::vector<int> per_device(const std::vector<int>& counts, const std::string& flag,
                            const Options& o, size_t devices) {
  if (counts.size() > 1 && counts.size() != devices)
    throw UsageError(flag + " has " + std::to_string(counts.size()) + " counts for " +
                     std::to_string(devices) + " devices (" + o.devices +
                     "): give one count, or one per device");
  if (counts.size() > 1) return counts;
  return std::vector<int>(devices, counts.empty() ? 0 : counts[0]);
}

std::string RunDevices::describe_threads() const {
  std::vector<int> cpu;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].is_cpu()) cpu.push_back(threads[i]);
  if (cpu.empty()) return "GPUs only";
  if (std::all_of(cpu.begin(), cpu.end(), [&](int t) { return t == cpu[0]; }))
    return std::to_string(cpu[0]) + (cpu[0] == 1 ? " thread" : " threads") + " per CPU device";
  std::string out = "threads per CPU device:";
  for (size_t i = 0; i < cpu.size(); ++i) out += (i ? ", " : " ") + std::to_string(cpu[i]);
  return out;
}

std::string shared_cores_warning(const RunDevices& p, int hardware_threads) {
  if (p.uniform()) return {};
  const int threads = std::accumulate(p.threads.begin(), p.threads.end(), 0);  // GPUs: 0
  if (threads <= hardware_threads) return {};
  return "warning: the CPU devices' " + std::to_string(threads) + " compute threads (" +
         p.describe_threads() + ") are more than this machine's " +
         std::to_string(hardware_threads) +
         " hardware threads: the devices take turns on the same cores, so each one's speed, "
         "profiled while the others rest, is not what it runs at beside them, and the cut made "
         "for their speeds may be slower than an even one";
}

std::string shared_cores_command(const RunDevices& p, int hardware_threads,
                                 const Options& options, int microbatches) {
  const int total = std::accumulate(p.threads.begin(), p.threads.end(), 0);  // GPUs: 0
  std::vector<int> threads = p.threads;
  for (size_t i = 0; i < threads.size(); ++i)
    if (p.devices[i].is_cpu()) threads[i] = std::max(1, threads[i] * hardware_threads / total);
  for (;;) {  // whole threads round up at 1: the most threaded give up theirs first
    const auto most = std::max_element(threads.begin(), threads.end());
    if (std::accumulate(threads.begin(), threads.end(), 0) <= hardware_threads || *most <= 1)
      break;
    --*most;
  }
  // A GPU keeps the count it was given (it runs no CPU threads of its own).
  const std::vector<int>& given = options.threads_per_device;
  std::string list;
  for (size_t i = 0; i < threads.size(); ++i) {
    const bool keep = !p.devices[i].is_cpu() && i < given.size();
    list += (i ? "," : "") + std::to_string(keep ? given[i] : threads[i]);
  }
  Suggestion fix;
  fix.flags.emplace_back("--threads-per-device", list);
  fix.pipeline_devices = static_cast<int>(p.devices.size());
  fix.microbatches = microbatches;
  return suggested_command(options, fix);
}

namespace {

std::string shares(const std::vector<double>& sums) {
  const double total = std::accumulate(sums.begin(), sums.end(), 0.0);
  std::string out;
  for (double v : sums) out += (out.empty() ? "" : " / ") + pipeline::format_percent(v, total);
  return out;
}

}  // namespace

std::string imbalance_warning(const pipeline::Plan& plan, const model::ModelSpec& model,
                              const Options& options, int microbatches,
                              const std::vector<std::string>& names,
                              const SuggestionRefusal& refusal) {
  const std::optional<pipeline::Imbalance> found =
      pipeline::find_imbalance(plan, model.layers.size(), kMinDeviceShare);
  if (!found) return "";
  const pipeline::Imbalance& i = *found;
  const std::vector<Device>& devices = plan.devices;
  const auto name = [&](size_t d) { return pipeline::device_name(plan, names, d); };
  const double total = std::accumulate(i.totals.begin(), i.totals.end(), 0.0);
  std::string out = "warning: " + name(i.lightest) + " has " +
                    pipeline::format_percent(i.totals[i.lightest], total) + " of the work (" +
                    plan.work_name + "; per device " + shares(i.totals) +
                    "): it idles, and a step takes as long as " + name(i.heaviest) +
                    "'s share.";
  if (i.devices == 0) return out;  // no cut at all: more stages than layers on every count
  Suggestion fix;
  fix.pipeline_devices = static_cast<int>(devices.size());
  fix.microbatches = microbatches;
  const bool fewer = i.devices < devices.size();
  const std::string over_fewer = "over " + std::to_string(i.devices);
  if (fewer) {
    fix.fewer_devices = std::vector<Device>(devices.begin(), devices.begin() + i.devices);
    out += " No cut over " + std::to_string(devices.size()) + " devices gives each " +
           pipeline::format_percent(kMinDeviceShare, 1.0) + "; ";
  } else {
    out += " Cut by " + plan.work_name + " it is " + shares(i.balanced);
  }
  if (i.devices > 1)
    fix.flags.emplace_back("--balance", plan.balance == pipeline::Balance::time ? "time" : "flops");
  // Every command printed runs as written: one that would be refused is replaced by why.
  if (const std::optional<std::string> why = refusal ? refusal(fix) : std::nullopt)
    return out + (fewer ? "one " + over_fewer + " would" : "") + ", but " + *why + ".";
  // The micro-batches the refusal's memory check gave the command, if any (this adds none).
  const bool finer = std::any_of(fix.flags.begin(), fix.flags.end(),
                                 [](const auto& flag) { return flag.first == "--microbatches"; });
  const std::string why_finer = ", with " + std::to_string(fix.microbatches) +
                                " micro-batches for a step to fit the devices' memory";
  return out + (fewer ? over_fewer : "") + (finer ? why_finer : "") + ":\n  " +
         suggested_command(options, fix);
}

}  // namespace brigade::train
