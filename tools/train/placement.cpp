#include "tools/train/placement.h"

#include <algorithm>
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
  p.threads_per_device = o.threads_per_device > 0 ? o.threads_per_device
                                                   : std::max(1, cores / std::max(1, cpu_devices));
  if (o.device_memory != 0 && cpu_devices == 0)
    throw UsageError("--device-memory limits CPU devices, and " + o.devices + " has none");
  for (const Device& dev : devices)
    if (dev.is_cpu())
      configure_cpu_device(dev.index, {p.threads_per_device, o.device_memory});
  return p;
}

pipeline::Partition cut_by_cost(const std::vector<double>& layer_costs, int devices, int chunks) {
  if (chunks == 1) return pipeline::balance(layer_costs, devices);
  return pipeline::balance(layer_costs, devices * chunks, devices);
}

std::string describe(const Placement& p, const model::ModelSpec& model) {
  std::ostringstream os;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    os << (s ? ", " : "") << st.device << " [" << model.layers[st.begin].name;
    if (st.end - st.begin > 1) os << " .. " << model.layers[st.end - 1].name;
    os << "]";
  }
  return os.str();
}

}  // namespace brigade::train
