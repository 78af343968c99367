// The small model of the runtime tests and the one-device training they compare against.
//   8x8x1 -> Conv2D(4, 3x3, relu) -> Conv2D(4, 3x3, relu) -> MaxPooling2D(2x2) -> Dropout(0.25)
//   -> Flatten -> Dense(16, relu) -> Dropout(0.5) -> Dense(3, softmax)      (8 layers)
// Eight layers, so that interleaved-1f1b on 4 devices (8 stages) has a layer per stage.
//
// The devices come from the environment variable BRIGADE_TEST_DEVICES (test_devices below):
// CPU devices by default, so the same parity, failure and trace tests run on GPUs too; the
// CUDA graphs on GPUs from BRIGADE_TEST_CUDA_GRAPHS (runtime_options below): on by default.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "engine/stream.h"
#include "kernels/ops.h"
#include "layers/grad_clip.h"
#include "layers/model/model_file.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/schedule.h"
#include "tests/pipeline/schedule/accumulation_order.h"  // accumulates_in_order

namespace brigade::pipeline::test {

inline constexpr uint64_t kModelSeed = 5, kDropoutSeed = 77;

inline model::ModelSpec small_spec() {
  return model::parse_model(R"(input 8x8x1
conv2d filters=4 kernel=3x3 activation=relu
conv2d filters=4 kernel=3x3 activation=relu
maxpool2d pool=2x2
dropout rate=0.25
flatten
dense units=16 activation=relu
dropout rate=0.5
dense units=3 activation=softmax
)", "runtime test model");
}

// n samples of (1, 8, 8) uniform in [-1, 1), labels in [0, 3).
inline HostBatch random_batch(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  HostBatch b;
  b.shape = Shape({n, 1, 8, 8});
  for (int64_t i = 0; i < n * 64; ++i) b.x.push_back(u(gen));
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(gen() % 3));
  return b;
}

// `steps` batches of n samples, batch i from seed first_seed + i.
inline std::vector<HostBatch> random_batches(int steps, int64_t n, uint32_t first_seed) {
  std::vector<HostBatch> b;
  for (int i = 0; i < steps; ++i) b.push_back(random_batch(n, first_seed + static_cast<uint32_t>(i)));
  return b;
}

inline std::unique_ptr<layers::Optimizer> sgd(std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::SGD>(std::move(params),
                                       SgdParams{.lr = 0.1, .momentum = 0.9});
}

// BRIGADE_TEST_DEVICES: what the p devices of a runtime test are.
//   unset, "" or "cpu"  cpu:first .. cpu:first+p-1 (virtual CPU devices; each test passes its
//                       own `first`, so that allocator peaks and capacities stay its own)
//   "cuda"              every one is cuda:0: one GPU runs the whole pipeline
//   "cuda:all"          device d is cuda:(d mod the number of GPUs)
// Anything else, or a cuda value on a machine without a GPU, throws naming the variable.
enum class TestDevices { cpu, cuda0, cuda_all };

inline TestDevices test_device_kind() {
  const char* env = std::getenv("BRIGADE_TEST_DEVICES");
  const std::string v = env ? env : "";
  TestDevices kind;
  if (v.empty() || v == "cpu") kind = TestDevices::cpu;
  else if (v == "cuda") kind = TestDevices::cuda0;
  else if (v == "cuda:all") kind = TestDevices::cuda_all;
  else throw Error("BRIGADE_TEST_DEVICES=\"" + v + "\": expected cpu, cuda or cuda:all");
  if (kind != TestDevices::cpu && cuda_device_count() == 0)
    throw Error("BRIGADE_TEST_DEVICES=" + v + " but this machine has no CUDA device");
  return kind;
}

inline bool on_cuda() { return test_device_kind() != TestDevices::cpu; }

inline std::vector<Device> test_devices(int p, int first) {
  std::vector<Device> devices;
  for (int d = 0; d < p; ++d) switch (test_device_kind()) {
      case TestDevices::cpu: devices.push_back(Device::cpu(first + d)); break;
      case TestDevices::cuda0: devices.push_back(Device::cuda(0)); break;
      case TestDevices::cuda_all: devices.push_back(Device::cuda(d % cuda_device_count())); break;
    }
  return devices;
}

// BRIGADE_TEST_CUDA_GRAPHS: whether the runtime tests' GPU steps run as CUDA graphs
// (RuntimeOptions::cuda_graphs: each compute action, device_graphs.h, and each stage's update,
// update_graph.h).
//   unset, "" or "on"   on, the Runtime's default
//   "off"               off: every kernel and library call issued by the host at every step
// Anything else throws naming the variable. CPU devices ignore it, as the Runtime does.
inline bool test_cuda_graphs() {
  const char* env = std::getenv("BRIGADE_TEST_CUDA_GRAPHS");
  const std::string v = env ? env : "";
  if (v.empty() || v == "on") return true;
  if (v == "off") return false;
  throw Error("BRIGADE_TEST_CUDA_GRAPHS=\"" + v + "\": expected on or off");
}

// `options` with cuda_graphs as BRIGADE_TEST_CUDA_GRAPHS says: what every runtime test gives
// its Runtime (a test of graphs themselves sets them itself), so that CI runs each parity and
// failure test with graphs on and off, e.g. test::runtime_options({.seed = test::kDropoutSeed}).
inline RuntimeOptions runtime_options(RuntimeOptions options) {
  options.cuda_graphs = test_cuda_graphs();
  return options;
}

// Where the one-device reference trains: cpu:0, or cuda:0 (the same kernels as the stages).
inline Device reference_device() { return on_cuda() ? Device::cuda(0) : Device::cpu(0); }

// The model with stage s on test_devices(p, first_device)[d], d its device under `placement`.
inline std::unique_ptr<layers::Sequential> placed_model(const Partition& partition, int p,
                                                        int first_device,
                                                        Placement placement = Placement::looped) {
  return layers::Sequential::placed(
      small_spec(), layer_devices(partition, test_devices(p, first_device), placement),
      kModelSeed);
}

// Accumulates into `model`'s .grad the samples [begin, begin + n) of `b`, cut into m
// micro-batches as the runtime cuts them (sizes n/m, the first n%m one larger), in order
// 0, 1, ..., m-1; every sample weighs 1/global_n, and its dropout mask is keyed by its place
// in `b` (the global mini-batch).
inline void accumulate_microbatches(layers::Sequential& model, const HostBatch& b, int64_t begin,
                                    int64_t n, int m, int64_t global_n, uint32_t step,
                                    const Stream& s) {
  const Device device = s.device();
  int64_t offset = begin;
  for (int i = 0; i < m; ++i) {
    const int64_t size = n / m + (i < n % m ? 1 : 0);
    layers::Tape tape;
    layers::ForwardContext ctx;
    ctx.seed = kDropoutSeed;
    ctx.step = step;
    ctx.sample_offset = offset;
    ctx.tape = &tape;
    ctx.streams = {{device, s}};
    const Tensor x = Tensor::from_vector(
        std::vector<float>(b.x.begin() + offset * 64, b.x.begin() + (offset + size) * 64),
        Shape({size, 1, 8, 8}), s);
    const Tensor logits = model.forward(x, ctx);
    const auto loss = ops::softmax_cross_entropy(
        logits, ops::labels_tensor({b.labels.begin() + offset, b.labels.begin() + offset + size}, s),
        static_cast<float>(global_n), s);
    tape.backward(loss.dlogits, /*need_input_grad=*/false);
    offset += size;
  }
}

// The reference: the whole model on `device`, `steps` steps of the same batches, each cut
// into m micro-batches as the runtime cuts them, accumulated in order, then (max_grad_norm
// > 0) the gradients clipped by their norm, then one optimizer step.
inline std::unique_ptr<layers::Sequential> train_on_one_device(
    const std::vector<HostBatch>& batches, int m, Device device, double max_grad_norm = 0) {
  auto model = layers::Sequential::from_spec(small_spec(), {device}, kModelSeed);
  const Stream s = Stream::default_for(device);
  auto opt = sgd(model->parameters());
  for (size_t step = 0; step < batches.size(); ++step) {
    const int64_t n = batches[step].shape[0];
    opt->zero_grad(s);
    accumulate_microbatches(*model, batches[step], 0, n, m, n, static_cast<uint32_t>(step), s);
    if (max_grad_norm > 0) {
      s.synchronize();
      const double c = layers::clip_coefficient(layers::squared_norms(model->parameters()),
                                                max_grad_norm);
      layers::scale_gradients(model->parameters(), c, s);
    }
    opt->step(s);
    s.synchronize();
  }
  return model;
}

inline std::vector<std::vector<float>> params_of(layers::Sequential& m) {
  std::vector<std::vector<float>> out;
  for (layers::Parameter* p : m.parameters()) out.push_back(p->value.to_vector());
  return out;
}

// Every parameter of `m` has the bits it had in `before` (a NaN equal to itself).
// A step's compute lane: per device, the schedule's list in order, each action after the one
// before it ended (one stream), every time from 0 on.
inline void check_compute_lane(const Timeline& t, const Schedule& schedule) {
  for (int d = 0; d < schedule.devices; ++d) {
    std::vector<TimelineEvent> compute;
    for (const TimelineEvent& e : t.events)
      if (e.device == d && e.lane == 0) compute.push_back(e);
    const auto& list = schedule.lists[static_cast<size_t>(d)];
    REQUIRE(compute.size() == list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      CHECK(compute[i].action == list[i]);
      CHECK(compute[i].start >= 0);
      CHECK(compute[i].end >= compute[i].start);
      if (i > 0) CHECK(compute[i].start >= compute[i - 1].end);  // one stream: in order
    }
  }
}

inline void check_same_bits(layers::Sequential& m, const std::vector<std::vector<float>>& before) {
  const auto now = params_of(m);
  REQUIRE(now.size() == before.size());
  for (size_t t = 0; t < now.size(); ++t) {
    INFO("parameter " << t);
    REQUIRE(now[t].size() == before[t].size());
    CHECK(std::memcmp(now[t].data(), before[t].data(), now[t].size() * sizeof(float)) == 0);
  }
}

// |a - b| <= 1e-5 (1 + |b|): relative, floored at 1 for values near zero.
inline void check_close(const std::vector<std::vector<float>>& got,
                        const std::vector<std::vector<float>>& want, bool exact) {
  REQUIRE(got.size() == want.size());
  for (size_t t = 0; t < got.size(); ++t) {
    REQUIRE(got[t].size() == want[t].size());
    for (size_t i = 0; i < got[t].size(); ++i) {
      if (exact) {
        if (got[t][i] != want[t][i]) {
          FAIL_CHECK("parameter " << t << " element " << i << ": " << got[t][i]
                                  << " != " << want[t][i] << " (expected bit-exact)");
          return;
        }
      } else if (!(std::fabs(got[t][i] - want[t][i]) <= 1e-5 * (1 + std::fabs(want[t][i])))) {
        FAIL_CHECK("parameter " << t << " element " << i << ": " << got[t][i] << " vs "
                                << want[t][i] << " beyond 1e-5 relative");
        return;
      }
    }
  }
}

}  // namespace brigade::pipeline::test
