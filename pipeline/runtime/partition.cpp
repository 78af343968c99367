#include "pipeline/runtime/partition.h"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>

#include "engine/error.h"

namespace brigade::pipeline {

Partition from_device_blocks(const model::ModelSpec& spec) {
  BRIGADE_CHECK(!spec.layers.empty(), "partition: the model has no layers");
  Partition p;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const int block = spec.layers[i].device;
    if (i == 0 || block != spec.layers[i - 1].device) {
      // A new block must be the next one: blocks are numbered by first appearance, so a
      // smaller number means the model went back to an earlier device.
      BRIGADE_CHECK(block == p.count(),
                    "partition: " << spec.layers[i].name << " is in device block " << block
                                  << " after block " << spec.layers[i - 1].device
                                  << "; a pipeline stage must be a contiguous range of layers");
      p.stages.push_back({i, i});
    }
    p.stages.back().end = i + 1;
  }
  return p;
}

Partition at_cuts(size_t layers, const std::vector<size_t>& cuts) {
  BRIGADE_CHECK(layers > 0, "partition: the model has no layers");
  Partition p;
  size_t begin = 0;
  for (size_t c : cuts) {
    BRIGADE_CHECK(c >= 1 && c < layers,
                  "partition: cut " << c << " is out of range: a cut is the first layer of a "
                                    << "stage, in [1, " << layers - 1 << "] for " << layers
                                    << " layers");
    BRIGADE_CHECK(c > begin, "partition: cut " << c << " after cut " << begin
                                               << " would leave an empty stage; cuts must "
                                                  "increase strictly");
    p.stages.push_back({begin, c});
    begin = c;
  }
  p.stages.push_back({begin, layers});
  return p;
}

namespace {

// prefix[d][i] = the cost of layers [0, i) on device d. Checks the rows on the way.
std::vector<std::vector<double>> prefix_sums(const DeviceCosts& costs) {
  BRIGADE_CHECK(!costs.empty(), "partition: costs for no device");
  std::vector<std::vector<double>> prefix;
  for (size_t d = 0; d < costs.size(); ++d) {
    const std::vector<double>& row = costs[d];
    BRIGADE_CHECK(row.size() == costs[0].size(),
                  "partition: device " << d << " has costs for " << row.size()
                                       << " layers, device 0 for " << costs[0].size());
    auto& sums = prefix.emplace_back(row.size() + 1, 0.0);
    for (size_t i = 0; i < row.size(); ++i) {
      BRIGADE_CHECK(row[i] >= 0, "partition: layer " << i << " has a negative cost " << row[i]
                                                     << (costs.size() > 1 ? " on device " : "")
                                                     << (costs.size() > 1 ? std::to_string(d) : ""));
      sums[i + 1] = sums[i] + row[i];
    }
  }
  return prefix;
}

// The contiguous cut into `stages` stages minimising the largest STAGE, stage j weighed on the
// device `device_of(j)` (the same device for all: the per-stage balance). Exact, by dynamic
// programming: best[j][i] is the smallest largest-stage cost of layers [0, i) in j stages,
// from[j][i] the start of the last of them; every contiguous cut is considered, and among
// equal ones the earliest cuts win.
template <class DeviceOf>
Partition stage_balance(const std::vector<std::vector<double>>& prefix, size_t n, size_t k,
                        DeviceOf device_of) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t j = 1; j <= k; ++j) {
    const std::vector<double>& sums = prefix[device_of(j - 1)];
    for (size_t i = j; i <= n; ++i)
      for (size_t s = j - 1; s < i; ++s) {  // last stage = [s, i)
        const double worst = std::max(best[j - 1][s], sums[i] - sums[s]);
        if (worst < best[j][i]) {  // strict: the earliest s wins ties
          best[j][i] = worst;
          from[j][i] = s;
        }
      }
  }
  Partition p;
  p.stages.resize(k);
  size_t end = n;
  for (size_t j = k; j >= 1; --j) {
    p.stages[j - 1] = {from[j][end], end};
    end = from[j][end];
  }
  return p;
}

void check_stages(int stages, size_t layers) {
  BRIGADE_CHECK(stages >= 1, "partition: " << stages << " stages; need at least 1");
  BRIGADE_CHECK(static_cast<size_t>(stages) <= layers,
                "partition: " << stages << " stages for " << layers
                              << " layers; every stage needs at least one layer");
}

}  // namespace

Partition balance(const std::vector<double>& costs, int stages) {
  check_stages(stages, costs.size());
  const auto prefix = prefix_sums({costs});
  return stage_balance(prefix, costs.size(), static_cast<size_t>(stages), [](size_t) { return 0; });
}

std::vector<double> device_totals(const Partition& partition, const DeviceCosts& costs,
                                  Placement placement) {
  BRIGADE_CHECK(!costs.empty(), "partition: costs for no device");
  const int devices = static_cast<int>(costs.size());
  std::vector<double> total(costs.size(), 0.0);
  for (int s = 0; s < partition.count(); ++s) {
    const StageRange& r = partition.stages[static_cast<size_t>(s)];
    const auto d = static_cast<size_t>(stage_device(s, devices, placement));
    for (size_t i = r.begin; i < r.end; ++i) total[d] += costs[d].at(i);
  }
  return total;
}

double largest_device(const Partition& partition, const DeviceCosts& costs, Placement placement) {
  const std::vector<double> total = device_totals(partition, costs, placement);
  return *std::max_element(total.begin(), total.end());
}

double largest_device(const Partition& partition, const std::vector<double>& costs,
                      int devices, Placement placement) {
  BRIGADE_CHECK(devices >= 1, "partition: " << devices << " devices; need at least 1");
  return largest_device(partition, DeviceCosts(static_cast<size_t>(devices), costs), placement);
}

namespace {
// The search behind balance(costs, stages, placement). Stages are cut left to right; `load[d]`
// is what device d carries so far, each stage weighed on its own device. Pruning, and why no
// optimum is lost:
//   * a branch whose current largest load is already >= the best total found cannot
//     improve it strictly: loads only grow as stages are added (costs are >= 0);
//   * extending the current stage by one more layer only grows its device's load, so once
//     that load reaches the best, every longer choice of this stage is pruned too (break);
//   * the search stops when the best equals a lower bound no cut can beat: the largest
//     single layer where it is cheapest, and the cheapest total / devices (some device
//     carries at least the average).
struct DeviceBalanceSearch {
  const std::vector<std::vector<double>>& prefix;  // [device][i] = cost of layers [0, i)
  size_t layers, stages, devices;
  Placement placement;
  double lower_bound;
  std::vector<double> load;  // per device
  std::vector<size_t> cuts, best_cuts;
  double best;

  // Stage `stage` starts at layer `begin`; `worst` = the largest load so far.
  void go(size_t stage, size_t begin, double worst) {
    if (worst >= best || best <= lower_bound) return;
    const auto d = static_cast<size_t>(
        stage_device(static_cast<int>(stage), static_cast<int>(devices), placement));
    const std::vector<double>& sums = prefix[d];
    const double before = load[d];
    if (stage + 1 == stages) {  // the last stage takes every remaining layer
      const double total = std::max(worst, before + sums[layers] - sums[begin]);
      if (total < best) {
        best = total;
        best_cuts = cuts;
      }
      return;
    }
    const size_t later = stages - 1 - stage;  // stages after this one, a layer each at least
    for (size_t end = begin + 1; end + later <= layers; ++end) {
      load[d] = before + (sums[end] - sums[begin]);
      if (load[d] >= best) break;
      cuts.push_back(end);
      go(stage + 1, end, std::max(worst, load[d]));
      cuts.pop_back();
    }
    load[d] = before;  // restored exactly (no subtraction: no rounding drift)
  }
};
}  // namespace

Partition balance(const DeviceCosts& costs, int stages, Placement placement) {
  const auto prefix = prefix_sums(costs);
  const size_t n = costs[0].size(), p = costs.size();
  const int devices = static_cast<int>(p);
  check_stages(stages, n);
  BRIGADE_CHECK(stages % devices == 0,
                "partition: " << stages << " stages on " << devices
                              << " devices; interleaving needs a multiple of the devices");
  // Each stage weighed on its own device: with one stage per device, this is the answer.
  const Partition per_stage = stage_balance(prefix, n, static_cast<size_t>(stages), [&](size_t j) {
    return static_cast<size_t>(stage_device(static_cast<int>(j), devices, placement));
  });
  if (devices == stages) return per_stage;
  double largest_layer = 0, cheapest_total = 0;  // each layer where it is cheapest
  for (size_t i = 0; i < n; ++i) {
    double cheapest = costs[0][i];
    for (size_t d = 1; d < p; ++d) cheapest = std::min(cheapest, costs[d][i]);
    largest_layer = std::max(largest_layer, cheapest);
    cheapest_total += cheapest;
  }
  DeviceBalanceSearch search{prefix, n, static_cast<size_t>(stages), p, placement,
                             std::max(largest_layer, cheapest_total / devices),
                             std::vector<double>(p, 0.0), {}, {},
                             largest_device(per_stage, costs, placement)};
  // The per-stage balance is the first incumbent: only a strictly better cut replaces it.
  for (size_t s = 1; s < per_stage.stages.size(); ++s)
    search.best_cuts.push_back(per_stage.stages[s].begin);
  search.go(0, 0, 0.0);
  return at_cuts(n, search.best_cuts);
}

Partition balance(const std::vector<double>& costs, int stages, int devices,
                  Placement placement) {
  BRIGADE_CHECK(devices >= 1, "partition: " << devices << " devices; need at least 1");
  return balance(DeviceCosts(static_cast<size_t>(devices), costs), stages, placement);
}

std::vector<double> layer_costs(const model::ModelShapes& shapes, CostKind kind) {
  std::vector<double> out;
  for (const model::LayerShape& l : shapes.layers) {
    switch (kind) {
      case CostKind::params: out.push_back(static_cast<double>(l.params)); break;
      case CostKind::activations: {
        // The output a layer leaves for the next one (what a tape holds per sample), float32.
        double elements = 1;
        for (int64_t d : l.output) elements *= static_cast<double>(d);
        out.push_back(4.0 * elements);
        break;
      }
      case CostKind::flops: out.push_back(static_cast<double>(l.flops)); break;
    }
  }
  return out;
}

std::vector<Device> layer_devices(const Partition& partition, const std::vector<Device>& devices,
                                  Placement placement) {
  BRIGADE_CHECK(!devices.empty(), "layer_devices: no devices");
  std::vector<Device> out;
  out.reserve(partition.stages.empty() ? 0 : partition.stages.back().end);
  for (int s = 0; s < partition.count(); ++s) {
    const int d = stage_device(s, static_cast<int>(devices.size()), placement);
    out.insert(out.end(), partition.stages[static_cast<size_t>(s)].size(),
               devices[static_cast<size_t>(d)]);
  }
  return out;
}

std::string format_partition(const Partition& partition, const model::ModelSpec& spec,
                             const std::vector<double>& costs, int devices,
                             Placement placement) {
  const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
  std::ostringstream os;
  for (int s = 0; s < partition.count(); ++s) {
    const StageRange& r = partition.stages[s];
    double cost = 0;
    os << "stage " << s << " (device " << stage_device(s, devices, placement) << "):";
    for (size_t i = r.begin; i < r.end; ++i) {
      os << " " << spec.layers.at(i).name;
      cost += costs.at(i);
    }
    os << "  cost " << std::setprecision(6) << cost << " (" << std::fixed << std::setprecision(1)
       << (total > 0 ? 100 * cost / total : 0.0) << " %)" << std::defaultfloat << "\n";
  }
  return os.str();
}

}  // namespace brigade::pipeline
