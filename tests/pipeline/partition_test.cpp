// Partitioning: device blocks, explicit cuts, and the exact min-max balance checked against
// every contiguous cut enumerated by brute force.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "layers/model_file.h"
#include "pipeline/partition.h"
#include "tests/pipeline/runtime_model.h"

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

// The best largest-stage cost over every way to place k-1 cuts among n-1 gaps.
double brute_force(const std::vector<double>& costs, int k) {
  const size_t n = costs.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> cuts;
  std::function<void(size_t)> go = [&](size_t from) {
    if (cuts.size() == static_cast<size_t>(k - 1)) {
      best = std::min(best, largest_stage(at_cuts(n, cuts), costs));
      return;
    }
    for (size_t c = from; c < n; ++c) {
      cuts.push_back(c);
      go(c + 1);
      cuts.pop_back();
    }
  };
  go(1);
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

TEST_CASE("place puts stage s in block s mod p") {
  const model::ModelSpec spec = test::small_spec();
  const model::ModelSpec placed = place(spec, at_cuts(spec.layers.size(), {2, 4, 6}), 2);
  const std::vector<int> want = {0, 0, 1, 1, 0, 0, 1, 1};
  for (size_t i = 0; i < want.size(); ++i) CHECK(placed.layers[i].device == want[i]);
}

}  // namespace
}  // namespace brigade::pipeline
