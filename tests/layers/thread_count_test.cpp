// The thread count of a CPU device changes how fast it trains, never what it learns: the
// question's network trained a few Adam steps with 1, 2 and 3 threads per device must end
// with the same parameters, bit for bit (kernels/cpu/chunks.h says how the kernels split).
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/ops.h"
#include "layers/model/model_file.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "tests/support/deadline.h"

namespace brigade::layers {
namespace {

struct Trained {
  std::vector<std::string> names;          // "conv2d_1.weight", ...
  std::vector<std::vector<float>> values;  // each parameter's values, in the same order
};

// The question's network after `steps` Adam steps, its three device blocks on CPU devices of
// `threads` threads each (indices of their own, so that no other test's cpu:0..2 changes).
// Batch 72, so that every split has several chunks: backward-filter's 8 chunks of 9 samples
// (conv2d_1, and Winograd's conv2d_2 and conv2d_3, conv2d_3 in groups of 3), conv2d_4's 2
// chunks of 36 in groups of 9, and the dense layers' rows in 2 chunks of 36.
Trained train(int threads, int steps) {
  std::vector<Device> devices;
  for (int d = 0; d < 3; ++d) {
    const int index = 10 * threads + d;
    configure_cpu_device(index, {threads, 0});
    devices.push_back(Device::cpu(index));
  }
  const model::ModelSpec spec = model::load_model_file(BRIGADE_MODELS_DIR "/seed_cnn.model");
  auto model = Sequential::from_spec(spec, devices, /*seed=*/3);
  AdamParams h;
  h.lr = 1e-3f;
  Adam opt(model->parameters(), h);

  const int batch = 72;
  std::mt19937 gen(11);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  const Stream in = Stream::default_for(devices[0]), out = Stream::default_for(devices[2]);
  for (int step = 0; step < steps; ++step) {
    std::vector<float> x(batch * 28 * 28);
    std::vector<int32_t> labels(batch);
    for (float& v : x) v = pixel(gen);
    for (int32_t& l : labels) l = static_cast<int32_t>(gen() % 10);
    Tape tape;
    ForwardContext ctx;  // training: dropout on, its masks keyed by seed, step and sample
    ctx.seed = 5;
    ctx.step = static_cast<uint32_t>(step);
    ctx.tape = &tape;
    const Tensor logits =
        model->forward(Tensor::from_vector(x, Shape({batch, 1, 28, 28}), in), ctx);
    const ops::LossResult r =
        ops::softmax_cross_entropy(logits, ops::labels_tensor(labels, out), batch, out);
    tape.backward(r.dlogits, false);
    opt.step();
    opt.zero_grad();
  }
  Trained t;
  for (Parameter* p : model->parameters()) {
    t.names.push_back(p->name);
    t.values.push_back(p->value.to_vector());
  }
  return t;
}

// Bit for bit, each parameter named where it differs.
void check_same_bits(const Trained& a, const Trained& b) {
  REQUIRE(a.names == b.names);
  for (size_t i = 0; i < a.names.size(); ++i) {
    INFO(a.names[i]);
    CHECK(std::memcmp(a.values[i].data(), b.values[i].data(),
                      a.values[i].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("training the question's network gives the same bits on 1, 2 and 3 threads per device") {
  testing::Deadline deadline("thread count training");
  std::vector<cpu::Isa> isas = {cpu::Isa::portable};
  if (cpu::detected_isa() != cpu::Isa::portable) isas.push_back(cpu::detected_isa());
  for (cpu::Isa isa : isas) {
    cpu::force_kernel_isa(isa);
    INFO("isa " << std::string(cpu::isa_name(isa)));
    const Trained one = train(1, 3);
    for (int threads : {2, 3}) {
      INFO(threads << " threads against 1");
      check_same_bits(train(threads, 3), one);
    }
  }
  cpu::force_kernel_isa(std::nullopt);
}

}  // namespace
}  // namespace brigade::layers
