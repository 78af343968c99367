#include "pipeline/runtime/profile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "engine/error.h"
#include "kernels/ops.h"

namespace brigade::pipeline {

namespace {
// CPU devices no run names (step_memory.cpp's probe is the first): this plus a thread count
// is the profiling twin of the CPU devices with that many threads.
constexpr int kProfileTwins = kFirstInternalCpuDevice + 1;
}  // namespace

std::vector<double> profile_layer_times(layers::Sequential& model, const Tensor& x, int repeats) {
  BRIGADE_CHECK(repeats >= 1, "profile_layer_times: repeats " << repeats << " < 1");
  std::vector<std::vector<double>> runs(model.size());
  for (int r = 0; r < repeats; ++r) {
    Tensor h = x;
    for (size_t i = 0; i < model.size(); ++i) {
      const Stream stream = Stream::default_for(model.layer(i).device());
      layers::Tape tape;
      layers::ForwardContext ctx;
      ctx.tape = &tape;
      ctx.step = static_cast<uint32_t>(r);
      const auto t0 = std::chrono::steady_clock::now();
      Tensor y = model.forward(h, ctx, i, i + 1);
      Tensor dy = Tensor::empty(y.shape(), stream);
      ops::fill(dy, 1.0f, stream);
      tape.backward(dy, /*need_input_grad=*/i > 0);
      stream.synchronize();
      const auto t1 = std::chrono::steady_clock::now();
      runs[i].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      h = y;
    }
  }
  model.zero_grad();  // the profile's gradients are not a training step's
  std::vector<double> median;
  for (auto& r : runs) {
    std::sort(r.begin(), r.end());
    median.push_back(r[r.size() / 2]);
  }
  return median;
}

DeviceCosts profile_devices(const model::ModelSpec& spec, const std::vector<Device>& devices,
                            const std::vector<int>& threads, const std::vector<float>& probe,
                            const Shape& shape, uint64_t seed) {
  DeviceCosts times;
  std::map<std::pair<bool, int>, size_t> profiled;  // (is CPU, threads) -> its row
  for (size_t d = 0; d < devices.size(); ++d) {
    const std::pair<bool, int> kind{devices[d].is_cpu(), threads.empty() ? 0 : threads[d]};
    if (const auto it = profiled.find(kind); it != profiled.end()) {
      times.push_back(times[it->second]);
      continue;
    }
    // The whole model on the device profiled, whatever blocks the spec names. A CPU device's
    // speed is its threads': it is profiled on a twin with as many and no memory limit, since
    // a --device-memory sized for a stage's share of a step need not hold the whole model.
    Device on = devices[d];
    if (on.is_cpu()) {
      const int threads = cpu_device_options(on.index).threads;
      const int twin = kProfileTwins + threads;
      if (cpu_device_options(twin).threads != threads)  // else kept: a new pool per call is waste
        configure_cpu_device(twin, {.threads = threads});
      on = Device::cpu(twin);
    }
    try {
      const auto model =
          layers::Sequential::placed(spec, std::vector<Device>(spec.layers.size(), on), seed);
      times.push_back(profile_layer_times(*model, Tensor::from_vector(probe, shape, on)));
    } catch (const OutOfMemoryError& e) {  // a GPU: its own memory
      throw OutOfMemoryError("profiling each layer's time on " + devices[d].str() +
                             " (--balance time, or devices of different speeds), the whole "
                             "model at " + std::to_string(shape[0]) + " rows: " + e.what());
    }
    profiled[kind] = times.size() - 1;
  }
  return times;
}

}  // namespace brigade::pipeline
