// Partitioning: device blocks, explicit cuts, and the exact min-max balance checked against
// every contiguous cut enumerated by brute force.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "layers/model/model_file.h"
#include "pipeline/runtime/partition.h"
#include "tests/pipeline/runtime/runtime_model.h"

namespace brigade::pipeline {
namespace {

double largest_stage(const Partition& p, const std::vector<double>& costs) {
  double worst = 0;
  for (const StageRange& r : p.stages) {
    double c = 0;
    for (size_t i = r.begin; i < r.end; ++i) c += costs[i];
    worst = std::max(worst, c);
  }
  return worst;
}

// Calls visit(cuts) for every way to place k-1 cuts among the n-1 gaps of n layers (cut c
// starts a stage at layer c), in lexicographic order.
void for_each_cut(size_t n, int k, const std::function<void(const std::vector<size_t>&)>& visit) {
  std::vector<size_t> cuts;
  std::function<void(size_t)> go = [&](size_t from) {
    if (cuts.size() == static_cast<size_t>(k - 1)) {
      visit(cuts);
      return;
    }
    for (size_t c = from; c < n; ++c) {
      cuts.push_back(c);
      go(c + 1);
      cuts.pop_back();
    }
  };
  go(1);
}

// The best largest-stage cost over every way to place k-1 cuts among n-1 gaps.
double brute_force(const std::vector<double>& costs, int k) {
  double best = std::numeric_limits<double>::infinity();
  for_each_cut(costs.size(), k, [&](const std::vector<size_t>& cuts) {
    best = std::min(best, largest_stage(at_cuts(costs.size(), cuts), costs));
  });
  return best;
}

TEST_CASE("balance finds the min-max contiguous cut (against brute force)") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = 1 + gen() % 9;
    std::vector<double> costs(n);
    for (double& c : costs) c = std::floor(u(gen));
    for (int k = 1; k <= static_cast<int>(n); ++k) {
      const Partition p = balance(costs, k);
      REQUIRE(p.count() == k);
      for (int s = 0; s < k; ++s) CHECK(p.stages[s].size() >= 1);
      CHECK(p.stages.back().end == n);
      CHECK(largest_stage(p, costs) == brute_force(costs, k));
    }
  }
}

TEST_CASE("balance: a hand-worked cut") {
  // 1 2 3 4 5 in 2 stages: [1 2 3 | 4 5] has largest 9; [1 2 3 4 | 5] has 10.
  const Partition p = balance({1, 2, 3, 4, 5}, 2);
  CHECK(p.stages[0].end == 3);
  CHECK(p.stages[1].begin == 3);
}

// Which device runs each of k stages, written out by walking the devices: looped goes
// 0, 1, .., p-1 again and again; a V goes 0 .. p-1, then back p-1 .. 0, and so on.
std::vector<size_t> walk_devices(int k, int p, Placement placement) {
  std::vector<size_t> out;
  for (int chunk = 0; static_cast<int>(out.size()) < k; ++chunk)
    for (int i = 0; i < p; ++i) {
      const bool back = placement == Placement::v_shape && chunk % 2 == 1;
      out.push_back(static_cast<size_t>(back ? p - 1 - i : i));
    }
  out.resize(static_cast<size_t>(k));
  return out;
}

// The best largest-DEVICE total over every contiguous cut, with the stages placed as walked
// and each layer weighed on its stage's device (costs[d][i]).
double brute_force_devices(const DeviceCosts& costs, int k, Placement placement) {
  const int p = static_cast<int>(costs.size());
  const std::vector<size_t> device_of = walk_devices(k, p, placement);
  double best = std::numeric_limits<double>::infinity();
  for_each_cut(costs[0].size(), k, [&](const std::vector<size_t>& cuts) {
    // Summed here layer by layer, not through largest_device: computed another way.
    std::vector<double> device(static_cast<size_t>(p), 0.0);
    size_t stage = 0;
    for (size_t i = 0; i < costs[0].size(); ++i) {
      while (stage < cuts.size() && i >= cuts[stage]) ++stage;
      device[device_of[stage]] += costs[device_of[stage]][i];
    }
    best = std::min(best, *std::max_element(device.begin(), device.end()));
  });
  return best;
}

// The same with every device alike.
double brute_force_devices(const std::vector<double>& costs, int k, int p,
                           Placement placement = Placement::looped) {
  return brute_force_devices(DeviceCosts(static_cast<size_t>(p), costs), k, placement);
}

TEST_CASE("per-device balance (interleaved) finds the min-max device total (against brute force)") {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t n = 2 + gen() % 10;
    std::vector<double> costs(n);
    // Integers: every sum is exact, so the two searches' totals compare with ==.
    for (double& c : costs) c = static_cast<double>(gen() % 12);
    if (trial % 3 == 0) costs[0] += 20;  // front-heavy, like the question's network
    for (int p = 1; p <= 3; ++p)
      for (int v = 1; v <= 3; ++v) {
        const int k = p * v;
        if (static_cast<size_t>(k) > n) continue;
        CAPTURE(n);
        CAPTURE(p);
        CAPTURE(v);
        const Partition part = balance(costs, k, p);
        REQUIRE(part.count() == k);
        for (int s = 0; s < k; ++s) CHECK(part.stages[s].size() >= 1);
        CHECK(part.stages.back().end == n);
        CHECK(largest_device(part, costs, p) == brute_force_devices(costs, k, p));
        // Never worse for the devices than evening out the stages.
        CHECK(largest_device(part, costs, p) <= largest_device(balance(costs, k), costs, p));
        if (v == 1) CHECK(largest_device(part, costs, p) == largest_stage(part, costs));
        // The V (two chunks): device d holds stages d and 2p-1-d.
        if (v == 2) {
          const Partition vee = balance(costs, k, p, Placement::v_shape);
          CHECK(largest_device(vee, costs, p, Placement::v_shape) ==
                brute_force_devices(costs, k, p, Placement::v_shape));
        }
      }
  }
}

TEST_CASE("devices of different speeds: each stage weighed on its device (against brute force)") {
  std::mt19937 gen(23);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = 2 + gen() % 9;
    for (int p = 1; p <= 3; ++p)
      for (int v = 1; v <= 2; ++v)
        for (const Placement placement : {Placement::looped, Placement::v_shape}) {
          const int k = p * v;
          if (static_cast<size_t>(k) > n) continue;
          // Device d is (d + 1) times slower: integer costs, exact sums.
          DeviceCosts costs(static_cast<size_t>(p), std::vector<double>(n));
          for (size_t i = 0; i < n; ++i) {
            const double base = static_cast<double>(gen() % 9);
            for (int d = 0; d < p; ++d) costs[static_cast<size_t>(d)][i] = base * (d + 1);
          }
          CAPTURE(n);
          CAPTURE(p);
          CAPTURE(v);
          const Partition part = balance(costs, k, placement);
          REQUIRE(part.count() == k);
          CHECK(part.stages.back().end == n);
          CHECK(largest_device(part, costs, placement) ==
                brute_force_devices(costs, k, placement));
        }
  }
}

TEST_CASE("devices of different speeds: the fast device takes the larger share, by hand") {
  // Six layers of cost 1 on the fast device, 2 on the slow one: the fast one takes 4 layers
  // (4) and the slow one 2 (4), where an even cut would leave the slow one 3 layers (6).
  const DeviceCosts costs = {{1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2}};
  const Partition p = balance(costs, 2);
  CHECK(p.stages[0].end == 4);
  CHECK(largest_device(p, costs) == 4);
  CHECK(largest_device(balance(costs[0], 2), costs) == 6);
  CHECK_THROWS_WITH(balance(DeviceCosts{{1, 1}, {1}}, 2),
                    doctest::Contains("device 1 has costs for 1 layers, device 0 for 2"));
}

TEST_CASE("per-device balance: a hand-worked front-heavy model on 2 devices, 2 chunks each") {
  // 5 3 1 1 1 1 (total 12) into 4 stages on 2 devices (stages 0, 2 on d0; 1, 3 on d1).
  // The smallest largest stage is 5 ([5] alone), and [5 | 3 | 1 | 1 1 1] gives d0 = 5 + 1,
  // d1 = 3 + 3: both 6 = 12 / 2, the best any cut can do.
  const std::vector<double> costs = {5, 3, 1, 1, 1, 1};
  const Partition p = balance(costs, 4, 2);
  CHECK(largest_device(p, costs, 2) == 6);
  // The stages of device 0 are stage 0 and 2: [5] and one 1.
  CHECK(p.stages[0].size() == 1);
  CHECK(largest_device(at_cuts(6, {1, 2, 4}), costs, 2) == 7);  // [5|3|1 1|1 1]: d0 = 5 + 2
  CHECK_THROWS_WITH(balance(costs, 3, 2), doctest::Contains("multiple of the devices"));
}

TEST_CASE("partition errors name the problem") {
  CHECK_THROWS_WITH(balance({1, 2}, 3), doctest::Contains("3 stages for 2 layers"));
  CHECK_THROWS_WITH(at_cuts(5, {0}), doctest::Contains("cut 0 is out of range"));
  CHECK_THROWS_WITH(at_cuts(5, {5}), doctest::Contains("cut 5 is out of range"));
  CHECK_THROWS_WITH(at_cuts(5, {2, 2}), doctest::Contains("empty stage"));
  model::ModelSpec spec = test::small_spec();
  spec.layers[0].device = 0;
  spec.layers[1].device = 1;
  spec.layers[2].device = 0;
  CHECK_THROWS_WITH(from_device_blocks(spec), doctest::Contains("contiguous"));
}

TEST_CASE("the question's device blocks are its three stages") {
  const model::ModelSpec spec = model::load_model_file(BRIGADE_SOURCE_ROOT "/tools/models/seed_cnn.model");
  const Partition p = from_device_blocks(spec);
  REQUIRE(p.count() == 3);
  CHECK(p.stages[0].begin == 0);
  CHECK(p.stages[0].end == 3);   // conv2d_1 conv2d_2 maxpool2d_1
  CHECK(p.stages[1].end == 7);   // conv2d_3 maxpool2d_2 conv2d_4 maxpool2d_3
  CHECK(p.stages[2].end == 12);  // dropout flatten dense dropout dense
  const auto shapes = model::infer_shapes(spec.input, spec.layers);
  const std::string text = format_partition(p, spec, layer_costs(shapes, CostKind::params), 3);
  CHECK(text.find("stage 1 (device 1): conv2d_3 maxpool2d_2 conv2d_4 maxpool2d_3") !=
        std::string::npos);
  // Parameters: the question's 278,974 in total; block 2 holds dense_1 (64*1500 + 1500) and
  // dense_2 (1500*10 + 10).
  CAPTURE(text);
  CHECK(text.find("cost 112510 ") != std::string::npos);
}

TEST_CASE("layer_devices puts stage s on device s mod p") {
  const model::ModelSpec spec = test::small_spec();
  const std::vector<Device> devices = {Device::cpu(0), Device::cpu(1)};
  const std::vector<Device> got = layer_devices(at_cuts(spec.layers.size(), {2, 4, 6}), devices);
  const std::vector<int> want = {0, 0, 1, 1, 0, 0, 1, 1};
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == devices[want[i]]);
}

TEST_CASE("layer_devices puts a V's stages on their devices: 0 1 1 0") {
  const model::ModelSpec spec = test::small_spec();
  const std::vector<Device> devices = {Device::cpu(0), Device::cpu(1)};
  const std::vector<Device> got =
      layer_devices(at_cuts(spec.layers.size(), {2, 4, 6}), devices, Placement::v_shape);
  const std::vector<int> want = {0, 0, 1, 1, 1, 1, 0, 0};
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == devices[want[i]]);
}

TEST_CASE("a placed model leaves the spec it was built from as it was") {
  // The cut reaches the model as devices; the spec's own blocks are the user's and stay.
  const model::ModelSpec spec = test::small_spec();
  const std::vector<Device> devices = {Device::cpu(0), Device::cpu(1)};
  const model::ModelSpec before = spec;
  auto model = layers::Sequential::placed(
      spec, layer_devices(at_cuts(spec.layers.size(), {2, 4, 6}), devices), 1);
  CHECK(spec == before);
  CHECK(model->layer(2).device() == Device::cpu(1));
  CHECK(model->layer(4).device() == Device::cpu(0));
  CHECK_THROWS_WITH_AS(layers::Sequential::placed(spec, devices, 1),
                       "2 layer devices for a model of 8 layers", Error);
}

}  // namespace
}  // namespace brigade::pipeline
