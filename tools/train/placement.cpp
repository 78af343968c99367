#include "tools/train/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <thread>

namespace brigade::train {

std::vector<Device> resolve_devices(const std::string& list, int model_blocks) {
  std::vector<Device> devices;
  if (list == "auto") {
    const int gpus = cuda_device_count();
    if (gpus > 0)
      for (int i = 0; i < gpus; ++i) devices.push_back(Device::cuda(i));
    else
      for (int i = 0; i < model_blocks; ++i) devices.push_back(Device::cpu(i));
    return devices;
  }
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw UsageError("--devices '" + list + "': an empty entry");
    const Device d = Device::parse(item);  // brigade::Error for a missing cuda:N
    if (std::find(devices.begin(), devices.end(), d) != devices.end())
      throw UsageError("--devices '" + list + "': " + d.str() + " is listed twice");
    devices.push_back(d);
  }
  if (devices.empty()) throw UsageError("--devices is empty (expected auto or e.g. cpu:0,cpu:1)");
  return devices;
}

Placement place(const Options& o, const model::ModelSpec& model) {
  const std::vector<Device> devices = resolve_devices(o.devices, model.device_count);
  const int blocks = model.device_count, d = static_cast<int>(devices.size());
  const size_t layers = model.layers.size();
  if (static_cast<size_t>(d) > layers)
    throw UsageError(std::to_string(d) + " devices (" + o.devices + ") but the model has only " +
                     std::to_string(layers) + " layers: a stage needs at least one layer");
  if (d > blocks && o.balance == "blocks")
    throw UsageError(std::to_string(d) + " devices (" + o.devices + ") but the model has " +
                     std::to_string(blocks) + " device block" + (blocks == 1 ? "" : "s") +
                     ": give at most " + std::to_string(blocks) +
                     " devices, add `device K` lines to the model file, or cut it by cost "
                     "with --balance params|memory|time");

  Placement p;
  p.devices = devices;
  for (int b = 0; b < blocks; ++b)
    p.block_devices.push_back(devices[static_cast<size_t>(std::min(int64_t{b} * d / blocks, int64_t{d} - 1))]);
  for (size_t i = 0; i < layers; ++i) {
    const Device dev = p.block_devices[static_cast<size_t>(model.layers[i].device)];
    if (p.stages.empty() || p.stages.back().device != dev) p.stages.push_back({dev, i, i});
    p.stages.back().end = i + 1;
  }

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
    throw UsageError("--device-memory limits CPU devices, and " + o.devices + " has none");
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].is_cpu())
      configure_cpu_device(devices[i].index, {p.threads[i], o.device_memory});
  return p;
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

bool Placement::uniform() const {
  for (size_t i = 1; i < devices.size(); ++i)
    if (devices[i].kind != devices[0].kind || threads[i] != threads[0]) return false;
  return true;
}

std::string Placement::describe_threads() const {
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

std::string shared_cores_warning(const Placement& p, int hardware_threads) {
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

pipeline::Partition cut_by_cost(const pipeline::DeviceCosts& costs, int chunks,
                                pipeline::Placement placement) {
  return pipeline::balance(costs, static_cast<int>(costs.size()) * chunks, placement);
}

pipeline::Partition cut_by_cost(const std::vector<double>& layer_costs, int devices, int chunks,
                                pipeline::Placement placement) {
  if (chunks == 1) return pipeline::balance(layer_costs, devices);
  return pipeline::balance(layer_costs, devices * chunks, devices, placement);
}

namespace {

// 278974 -> "278,974"
std::string grouped(double v) {
  const std::string digits = std::to_string(std::llabs(std::llround(v)));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string percent(double part, double total) {
  return fixed(total > 0 ? 100 * part / total : 0.0, 1) + " %";
}

pipeline::DeviceCosts alike(const std::vector<double>& costs, size_t devices) {
  return pipeline::DeviceCosts(devices, costs);
}

std::string shares(const std::vector<double>& sums) {
  const double total = std::accumulate(sums.begin(), sums.end(), 0.0);
  std::string out;
  for (double v : sums) out += (out.empty() ? "" : " / ") + percent(v, total);
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    const bool plain = !w.empty() && w.find_first_of(" \t'\"$\\") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? w : "'" + w + "'");
  }
  return out;
}

}  // namespace

std::string format_cost(const std::string& balance, double cost) {
  if (balance == "params") return grouped(cost) + " parameters";
  if (balance == "memory") return format_size(static_cast<uint64_t>(cost)) + "/sample of activations";
  if (balance == "time") return fixed(cost, 2) + " ms measured";
  return fixed(cost / 1e6, 1) + " MFLOP/sample forward";  // blocks, flops
}

std::string describe_stages(const pipeline::Partition& partition, const model::ModelSpec& model,
                            const std::vector<Device>& devices, const std::string& balance,
                            const pipeline::DeviceCosts& costs, pipeline::Placement placement) {
  const std::vector<double> sums = pipeline::device_totals(partition, costs, placement);
  const double total = std::accumulate(sums.begin(), sums.end(), 0.0);
  std::ostringstream os;
  for (size_t s = 0; s < partition.stages.size(); ++s) {
    const pipeline::StageRange& r = partition.stages[s];
    const int d = pipeline::stage_device(static_cast<int>(s), static_cast<int>(devices.size()),
                                         placement);
    double cost = 0;  // weighed on its own device
    for (size_t i = r.begin; i < r.end; ++i) cost += costs[static_cast<size_t>(d)][i];
    os << "\n  stage " << s << " on " << devices[static_cast<size_t>(d)] << ": "
       << model.layers[r.begin].name;
    if (r.end - r.begin > 1) os << " .. " << model.layers[r.end - 1].name;
    os << " (" << r.end - r.begin << (r.end - r.begin == 1 ? " layer), " : " layers), ")
       << format_cost(balance, cost) << " (" << percent(cost, total) << ")";
  }
  return os.str();
}

std::string describe_stages(const pipeline::Partition& partition, const model::ModelSpec& model,
                            const std::vector<Device>& devices, const std::string& balance,
                            const std::vector<double>& costs, pipeline::Placement placement) {
  return describe_stages(partition, model, devices, balance, alike(costs, devices.size()),
                         placement);
}

std::string imbalance_warning(const pipeline::Partition& partition, const model::ModelSpec& model,
                              const std::vector<Device>& devices, int chunks,
                              const pipeline::DeviceCosts& work, const std::string& work_name,
                              const std::vector<std::string>& command,
                              pipeline::Placement placement) {
  const size_t d = devices.size();
  if (d < 2) return "";
  const std::vector<double> sums = pipeline::device_totals(partition, work, placement);
  const double total = std::accumulate(sums.begin(), sums.end(), 0.0);
  if (total <= 0) return "";
  size_t lightest = 0, heaviest = 0;
  for (size_t i = 1; i < d; ++i) {
    if (sums[i] < sums[lightest]) lightest = i;
    if (sums[i] > sums[heaviest]) heaviest = i;
  }
  if (sums[lightest] >= kMinDeviceShare * total) return "";

  std::string out = "warning: " + devices[lightest].str() + " has " +
                    percent(sums[lightest], total) + " of the work (" + work_name +
                    "; per device " + shares(sums) + "): it idles, and a step takes as long as " +
                    devices[heaviest].str() + "'s share.";
  // The FLOP-balanced cut over these devices, or over fewer: the first with every share.
  for (size_t fewer = d; fewer >= 1; --fewer) {
    const size_t stages = fewer * static_cast<size_t>(chunks);
    if (stages > model.layers.size()) continue;
    const pipeline::DeviceCosts first(work.begin(), work.begin() + static_cast<std::ptrdiff_t>(fewer));
    const pipeline::Partition cut = cut_by_cost(first, chunks, placement);
    const std::vector<double> balanced = pipeline::device_totals(cut, first, placement);
    const double least = *std::min_element(balanced.begin(), balanced.end());
    if (fewer > 1 && least < kMinDeviceShare * total) continue;
    std::vector<std::string> fix = command;
    if (fewer < d) {
      std::string list;
      for (size_t i = 0; i < fewer; ++i) {
        if (i) list += ',';
        list += devices[i].str();
      }
      fix = with_option(fix, "--devices", list);
      out += " No cut over " + std::to_string(d) + " devices gives each " +
             percent(kMinDeviceShare, 1.0) + "; over " + std::to_string(fewer) + ":";
    } else {
      out += " Cut by " + work_name + " it is " + shares(balanced) + ":";
    }
    if (fewer > 1) fix = with_option(fix, "--balance", work_name == "measured time" ? "time" : "flops");
    return out + "\n  " + joined(fix);
  }
  return out;
}

std::string imbalance_warning(const pipeline::Partition& partition, const model::ModelSpec& model,
                              const std::vector<Device>& devices, int chunks,
                              const std::vector<double>& work, const std::string& work_name,
                              const std::vector<std::string>& command,
                              pipeline::Placement placement) {
  return imbalance_warning(partition, model, devices, chunks, alike(work, devices.size()),
                           work_name, command, placement);
}

std::vector<std::string> with_option(std::vector<std::string> command, const std::string& flag,
                                     const std::string& value) {
  for (size_t i = 1; i < command.size(); ++i) {
    if (command[i] == flag && i + 1 < command.size()) {
      command[i + 1] = value;
      return command;
    }
    if (command[i].starts_with(flag + "=")) {
      command[i] = flag + "=" + value;
      return command;
    }
  }
  command.push_back(flag);
  command.push_back(value);
  return command;
}

}  // namespace brigade::train
