// The Runtime put together (runtime.h): the devices of the schedule's stages, a Stage per stage
// run here, the links between neighbours, peer access between GPUs, the streams. The step
// itself is executor.cpp; the batch it takes, batch.cpp.
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step.h"  // a pending Step goes with the Runtime

#include <algorithm>
#include <set>
#include <utility>

#include "pipeline/runtime/channel.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

namespace {
LoweredSchedule validated_and_lowered(const Schedule& s) {
  validate(s);  // named errors for the compute-only lists before their lowering
  return lower(s);
}
}  // namespace

Runtime::Runtime(layers::Sequential& model, std::vector<Device> devices, Partition partition,
                 Schedule schedule, const OptimizerFactory& make_optimizer,
                 RuntimeOptions options, ProcessRole role)
    : Runtime(model, std::move(devices), std::move(partition), validated_and_lowered(schedule),
              make_optimizer, options, std::move(role)) {}

Runtime::Runtime(layers::Sequential& model, std::vector<Device> devices, Partition partition,
                 LoweredSchedule lowered, const OptimizerFactory& make_optimizer,
                 RuntimeOptions options, ProcessRole role)
    : model_(model),
      partition_(std::move(partition)),
      schedule_(compute_only(lowered)),
      lowered_(std::move(lowered)),
      options_(options),
      role_(std::move(role)),
      devices_(std::move(devices)) {
  validate(schedule_);
  validate(lowered_);  // every transfer matched; no device can wait on itself
  BRIGADE_CHECK(options_.loss, "runtime: RuntimeOptions::loss is null (the default is "
                               "SoftmaxCrossEntropy)");
  const int stages = schedule_.stages();
  BRIGADE_CHECK(stages == partition_.count(),
                "runtime: schedule '" << schedule_.name << "' has " << stages << " stages ("
                                      << schedule_.devices << " devices x " << schedule_.chunks
                                      << " chunks) but the partition has " << partition_.count());
  BRIGADE_CHECK(partition_.stages.back().end == model_.size(),
                "runtime: the partition covers " << partition_.stages.back().end
                                                 << " layers but the model has " << model_.size());
  check_role();
  check_placement();
  make_stages(make_optimizer);
  make_links();
  enable_peer_access_between_neighbours();
  // Parameters and optimizer state were written on the devices' default streams: let that
  // finish before other streams use them (construction, not a step).
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d]) Stream::default_for(devices_[d]).synchronize();
  recover();  // makes the streams
  std::vector<int> here;
  for (int d = 0; d < schedule_.devices; ++d)
    if (runs(d)) here.push_back(d);
  threads_ = std::make_unique<DeviceThreads>(here);
}

// The model against the devices: every layer of a stage run here on its stage's device (the
// others' layers may sit anywhere, they are not touched).
void Runtime::check_placement() {
  BRIGADE_CHECK(static_cast<int>(devices_.size()) == schedule_.devices,
                "runtime: " << devices_.size() << " devices for schedule '" << schedule_.name
                            << "' of " << schedule_.devices << " devices");
  for (int s = 0; s < schedule_.stages(); ++s) {
    const StageRange& r = partition_.stages[static_cast<size_t>(s)];
    const int d = schedule_.device_of(s);
    if (!runs(d)) continue;
    for (size_t i = r.begin; i < r.end; ++i)
      BRIGADE_CHECK(model_.layer(i).device() == devices_[static_cast<size_t>(d)],
                    "runtime: " << model_.layer(i).name() << " (stage " << s << ") lives on "
                                << model_.layer(i).device() << " but the schedule runs stage "
                                << s << " on device " << d << " = "
                                << devices_[static_cast<size_t>(d)]
                                << "; build the model for the plan (build_model, plan.h)");
  }
}

// One Stage, with its optimizer and reducer, for each stage this process runs.
void Runtime::make_stages(const OptimizerFactory& make_optimizer) {
  const int stages = schedule_.stages();
  for (int s = 0; s < stages; ++s) {
    const StageRange& r = partition_.stages[static_cast<size_t>(s)];
    if (!runs(schedule_.device_of(s))) {
      stages_.push_back(nullptr);
      continue;
    }
    GradientReducer* reducer =
        role_.reducers.empty() ? nullptr : role_.reducers[static_cast<size_t>(s)];
    stages_.push_back(std::make_unique<Stage>(s, stages, model_, r,
                                              make_optimizer(model_.parameters(r.begin, r.end)),
                                              reducer));
  }
}

// Neighbouring stages on two GPUs of this process copy activations and gradients to each
// other every micro-batch: let those copies go peer to peer where the pair can.
void Runtime::enable_peer_access_between_neighbours() {
  std::set<std::pair<int, int>> pairs;  // (GPU, GPU), lower index first
  for (int s = 0; s + 1 < schedule_.stages(); ++s) {
    const int a = schedule_.device_of(s), b = schedule_.device_of(s + 1);
    const Device& da = devices_[static_cast<size_t>(a)];
    const Device& db = devices_[static_cast<size_t>(b)];
    if (runs(a) && runs(b) && da.is_cuda() && db.is_cuda() && da != db)
      pairs.insert(std::minmax(da.index, db.index));
  }
  std::string direct, staged;
  for (const auto& [a, b] : pairs) {
    // Both directions are asked for, whatever the first one answers.
    const bool a_to_b = enable_peer_access(Device::cuda(a), Device::cuda(b));
    const bool b_to_a = enable_peer_access(Device::cuda(b), Device::cuda(a));
    const bool both = a_to_b && b_to_a;
    std::string& list = both ? direct : staged;
    list += (list.empty() ? "" : ", ") + Device::cuda(a).str() + "<->" + Device::cuda(b).str();
  }
  peer_access_.clear();
  if (!direct.empty()) peer_access_ = "peer access: " + direct;
  if (!staged.empty())
    peer_access_ += (peer_access_.empty() ? "" : "; ") + std::string("no peer access between ") +
                    staged + " (copies staged through host memory)";
}

// The role (process_role.h) against the schedule; fills local_.
void Runtime::check_role() {
  const int p = schedule_.devices, stages = schedule_.stages();
  local_.assign(static_cast<size_t>(p), role_.devices.empty() ? 1 : 0);
  for (int d : role_.devices) {
    BRIGADE_CHECK(d >= 0 && d < p, "runtime: this process is to run device "
                                       << d << " of a schedule of " << p << " devices ("
                                       << schedule_.name << ")");
    BRIGADE_CHECK(!local_[static_cast<size_t>(d)],
                  "runtime: the role names device " << d << " twice");
    local_[static_cast<size_t>(d)] = 1;
  }
  BRIGADE_CHECK(static_cast<int>(role_.devices.size()) == p || role_.devices.empty() ||
                    role_.links,
                "runtime: this process runs " << role_.devices.size() << " of " << p
                                              << " devices but the role has no link factory "
                                                 "for the links to the others");
  BRIGADE_CHECK(role_.reducers.empty() || static_cast<int>(role_.reducers.size()) == stages,
                "runtime: the role has " << role_.reducers.size() << " reducers for " << stages
                                          << " stages (give one per stage, or none)");
  BRIGADE_CHECK(role_.replicas >= 1 && role_.replica >= 0 && role_.replica < role_.replicas,
                "runtime: replica " << role_.replica << " of " << role_.replicas);
  BRIGADE_CHECK(options_.max_grad_norm == 0 || role_.devices.empty() ||
                    static_cast<int>(role_.devices.size()) == p || role_.sum_over_pipeline,
                "runtime: clipping by the global gradient norm needs every stage's part of the "
                "norm: this process runs "
                    << role_.devices.size() << " of " << p
                    << " devices, and its role has no sum_over_pipeline (process_role.h)");
  BRIGADE_CHECK(options_.max_grad_norm >= 0,
                "runtime: the largest gradient norm must be > 0 (0: no clipping), not "
                    << options_.max_grad_norm);
}

// One link per direction between neighbouring stages: an in-process Channel where both ends
// are here, the role's link where one is, none where neither is.
void Runtime::make_links() {
  for (int s = 0; s + 1 < schedule_.stages(); ++s) {
    const int from = schedule_.device_of(s), to = schedule_.device_of(s + 1);
    const auto make = [&](LinkEnd::Kind kind, int a, int b, int da, int db) -> std::shared_ptr<Link> {
      const std::string name = std::string(kind == LinkEnd::Kind::activations ? "activations "
                                                                              : "gradients ") +
                               std::to_string(a) + "->" + std::to_string(b);
      if (!runs(da) && !runs(db)) return nullptr;
      if (runs(da) && runs(db)) return std::make_shared<Channel>(name);
      std::shared_ptr<Link> link = role_.links(
          {kind, name, a, b, da, db, runs(da), devices_[static_cast<size_t>(runs(da) ? da : db)]});
      BRIGADE_CHECK(link != nullptr, "runtime: the role's link factory made no link for " << name);
      return link;
    };
    activations_.push_back(make(LinkEnd::Kind::activations, s, s + 1, from, to));
    gradients_.push_back(make(LinkEnd::Kind::gradients, s + 1, s, to, from));
  }
}

Runtime::~Runtime() {
  threads_.reset();  // joined first: no thread is inside a step now
  for (std::optional<DeviceStreams>& mine : streams_) {
    if (!mine) continue;
    // Drain, ignoring sticky errors: a failed step already reported them.
    for (const Stream* s : {&mine->compute, &mine->send, &mine->recv})
      try { s->synchronize(); } catch (const std::exception&) {}
    if (mine->check) try { mine->check->synchronize(); } catch (const std::exception&) {}
  }
}

// Fresh streams (a failed stream stays failed) and reopened links. All the streams or none:
// where one cannot be made (a GPU with a sticky error makes none), the old ones stay, so a
// later step fails on them with its own diagnosis instead of finding a device without streams.
void Runtime::recover() {
  for (auto& c : activations_)
    if (c) c->reset();
  for (auto& c : gradients_)
    if (c) c->reset();
  std::vector<std::optional<DeviceStreams>> fresh;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    fresh.emplace_back();
    if (!local_[i]) continue;  // another process runs it
    fresh.back() =
        DeviceStreams{Stream::create(d), Stream::create(d), Stream::create(d), std::nullopt};
    // Host memory and a host thread for the checks of a GPU's results (step_checks.h): the
    // labels of its loss always, its outputs' NaN checks with check_finite; cpu:0's allocator.
    if (d.is_cuda()) fresh.back()->check = Stream::create(Device::cpu(0));
  }
  streams_ = std::move(fresh);
  graphs_.clear();  // captured on the old streams, whose blocks they keep (device_graphs.h)
}

}  // namespace brigade::pipeline
