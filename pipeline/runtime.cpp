#include "pipeline/runtime.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <utility>
#include <sstream>
#include <thread>

#include "engine/allocator.h"
#include "engine/event.h"
#include "kernels/ops.h"
#include "pipeline/runtime_internal.h"
#include "pipeline/validate.h"

namespace brigade::pipeline {

namespace {
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

Runtime::Runtime(layers::Sequential& model, Partition partition, Schedule schedule,
                 const OptimizerFactory& make_optimizer, RuntimeOptions options,
                 ProcessShare share)
    : model_(model),
      partition_(std::move(partition)),
      schedule_(std::move(schedule)),
      options_(options),
      share_(std::move(share)),
      failure_(std::make_unique<Failure>()) {
  validate(schedule_);
  const int stages = schedule_.stages();
  BRIGADE_CHECK(stages == partition_.count(),
                "runtime: schedule '" << schedule_.name << "' has " << stages << " stages ("
                                      << schedule_.devices << " devices x " << schedule_.chunks
                                      << " chunks) but the partition has " << partition_.count());
  BRIGADE_CHECK(partition_.stages.back().end == model_.size(),
                "runtime: the partition covers " << partition_.stages.back().end
                                                 << " layers but the model has " << model_.size());
  check_share();
  // The device of each schedule device index: that of its stages' layers, which must agree
  // (on the devices run here; the others' layers may sit anywhere, they are not touched).
  devices_.assign(static_cast<size_t>(schedule_.devices), Device::cpu(0));
  for (int s = 0; s < stages; ++s) {
    const StageRange& r = partition_.stages[static_cast<size_t>(s)];
    const int d = schedule_.device_of(s);
    const Device first = model_.layer(r.begin).device();
    if (s < schedule_.devices) devices_[static_cast<size_t>(d)] = first;
    if (!runs(d)) continue;
    for (size_t i = r.begin; i < r.end; ++i)
      BRIGADE_CHECK(model_.layer(i).device() == devices_[static_cast<size_t>(d)],
                    "runtime: " << model_.layer(i).name() << " (stage " << s << ") lives on "
                                << model_.layer(i).device() << " but the schedule runs stage "
                                << s << " on device " << d << " = "
                                << devices_[static_cast<size_t>(d)]
                                << "; build the model with place(spec, partition, "
                                << schedule_.devices << ")");
  }
  for (int s = 0; s < stages; ++s) {
    const StageRange& r = partition_.stages[static_cast<size_t>(s)];
    optimizers_.push_back(runs(schedule_.device_of(s))
                              ? make_optimizer(model_.parameters(r.begin, r.end))
                              : nullptr);
  }
  make_links();
  enable_peer_access_between_neighbours();
  // Parameters and optimizer state were written on the devices' default streams: let that
  // finish before other streams use them (construction, not a step).
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d]) Stream::default_for(devices_[d]).synchronize();
  recover();  // makes the streams
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
    const bool both = enable_peer_access(Device::cuda(a), Device::cuda(b)) &
                      enable_peer_access(Device::cuda(b), Device::cuda(a));
    std::string& list = both ? direct : staged;
    list += (list.empty() ? "" : ", ") + Device::cuda(a).str() + "<->" + Device::cuda(b).str();
  }
  peer_access_.clear();
  if (!direct.empty()) peer_access_ = "peer access: " + direct;
  if (!staged.empty())
    peer_access_ += (peer_access_.empty() ? "" : "; ") + std::string("no peer access between ") +
                    staged + " (copies staged through host memory)";
}

// The share (process_share.h) against the schedule; fills local_.
void Runtime::check_share() {
  const int p = schedule_.devices, stages = schedule_.stages();
  local_.assign(static_cast<size_t>(p), share_.devices.empty() ? 1 : 0);
  for (int d : share_.devices) {
    BRIGADE_CHECK(d >= 0 && d < p, "runtime: this process is to run device "
                                       << d << " of a schedule of " << p << " devices ("
                                       << schedule_.name << ")");
    BRIGADE_CHECK(!local_[static_cast<size_t>(d)],
                  "runtime: the share names device " << d << " twice");
    local_[static_cast<size_t>(d)] = 1;
  }
  BRIGADE_CHECK(static_cast<int>(share_.devices.size()) == p || share_.devices.empty() ||
                    share_.links,
                "runtime: this process runs " << share_.devices.size() << " of " << p
                                              << " devices but the share has no link factory "
                                                 "for the links to the others");
  BRIGADE_CHECK(share_.reducers.empty() || static_cast<int>(share_.reducers.size()) == stages,
                "runtime: the share has " << share_.reducers.size() << " reducers for " << stages
                                          << " stages (give one per stage, or none)");
  BRIGADE_CHECK(share_.replicas >= 1 && share_.replica >= 0 && share_.replica < share_.replicas,
                "runtime: replica " << share_.replica << " of " << share_.replicas);
}

// One link per direction between neighbouring stages: an in-process Channel where both ends
// are here, the share's link where one is, none where neither is.
void Runtime::make_links() {
  for (int s = 0; s + 1 < schedule_.stages(); ++s) {
    const int from = schedule_.device_of(s), to = schedule_.device_of(s + 1);
    const auto make = [&](LinkEnd::Kind kind, int a, int b, int da, int db) -> std::shared_ptr<Link> {
      const std::string name = std::string(kind == LinkEnd::Kind::activations ? "activations "
                                                                              : "gradients ") +
                               std::to_string(a) + "->" + std::to_string(b);
      if (!runs(da) && !runs(db)) return nullptr;
      if (runs(da) && runs(db)) return std::make_shared<Channel>(name);
      std::shared_ptr<Link> link = share_.links(
          {kind, name, a, b, da, db, runs(da), devices_[static_cast<size_t>(runs(da) ? da : db)]});
      BRIGADE_CHECK(link != nullptr, "runtime: the share's link factory made no link for " << name);
      return link;
    };
    activations_.push_back(make(LinkEnd::Kind::activations, s, s + 1, from, to));
    gradients_.push_back(make(LinkEnd::Kind::gradients, s + 1, s, to, from));
  }
}

Runtime::~Runtime() {
  for (std::optional<Streams>& mine : streams_) {
    if (!mine) continue;
    Streams& s = *mine;
    // Drain, ignoring sticky errors: a failed step already reported them.
    try { s.compute.synchronize(); } catch (const std::exception&) {}
    try { s.send.synchronize(); } catch (const std::exception&) {}
    try { s.recv.synchronize(); } catch (const std::exception&) {}
    if (s.check) try { s.check->synchronize(); } catch (const std::exception&) {}
  }
}

// Fresh streams (a failed stream stays failed) and empty per-step state.
void Runtime::recover() {
  slots_.clear();
  inputs_.clear();
  labels_.clear();
  for (auto& c : activations_)
    if (c) c->reset();
  for (auto& c : gradients_)
    if (c) c->reset();
  streams_.clear();
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    streams_.emplace_back();
    if (!local_[i]) continue;  // another process runs it
    streams_.back() = Streams{Stream::create(d), Stream::create(d), Stream::create(d), std::nullopt};
    // Host memory and a host thread for the NaN check of a GPU's outputs: cpu:0's allocator.
    if (d.is_cuda() && options_.check_finite) streams_.back()->check = Stream::create(Device::cpu(0));
  }
}

Runtime::Slot& Runtime::slot(const Action& a) {
  return slots_[static_cast<size_t>(a.stage)][static_cast<size_t>(a.microbatch)];
}

StepResult Runtime::run_step(const StagedBatch& batch, const std::vector<int64_t>& rows,
                             int64_t first_sample, int64_t global_n, uint32_t step) {
  const int m = schedule_.microbatches;
  const int first_device = schedule_.device_of(0);
  const int last_device = schedule_.device_of(schedule_.stages() - 1);
  offsets_.clear();
  int64_t offset = first_sample;  // dropout masks: the sample's place in the whole mini-batch
  for (int64_t r : rows) {
    offsets_.push_back(offset);
    offset += r;
  }
  inputs_ = batch.inputs;
  labels_ = batch.labels;
  if (runs(first_device) && batch.inputs_ready.recorded())
    streams_[static_cast<size_t>(first_device)]->compute.wait(batch.inputs_ready);
  if (runs(last_device) && batch.labels_ready.recorded())
    streams_[static_cast<size_t>(last_device)]->compute.wait(batch.labels_ready);
  batch_size_ = global_n;  // every sample of the whole mini-batch weighs 1/global_n
  step_ = step;
  slots_.clear();
  slots_.resize(static_cast<size_t>(schedule_.stages()));
  for (auto& row : slots_) row.resize(static_cast<size_t>(m));
  timings_.assign(devices_.size(), {});
  failure_ = std::make_unique<Failure>();  // no thread runs: a fresh record
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d]) Allocator::of(devices_[d]).reset_peak();
  t0_ = std::chrono::steady_clock::now();
  // CUDA clocks: an event on each idle compute stream (the last step ended with a full
  // synchronisation, staging copies are blocking) completes when it is recorded, so its time
  // on the device's clock is the host time read beside it.
  origins_.clear();  // one timed Event each, not copies: copies of an Event are one event
  for (size_t d = 0; d < devices_.size(); ++d) origins_.push_back(Event::timed());
  origin_ms_.assign(devices_.size(), 0.0);
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d] && devices_[d].is_cuda()) {
      origins_[d].record(streams_[d]->compute);
      origin_ms_[d] = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0_).count();
    }

  std::vector<std::thread> threads;
  for (int d = 0; d < schedule_.devices; ++d)
    if (runs(d)) threads.emplace_back([this, d] { run_device(d); });
  for (std::thread& t : threads) t.join();

  // The NaN checks of CUDA devices, before any parameter changes: they run on host streams
  // behind the GPU, so the update must wait for their verdict (a CPU stream needs no wait: a
  // failed check is its sticky error, and the update task behind it is skipped). A non-finite
  // value spreads only downstream within its micro-batch, so the failing check of the
  // smallest stage is where it first appeared; each check stream stops at its first failure.
  std::exception_ptr stream_error, check_error;
  int stream_error_device = -1, check_device = -1;
  std::optional<Action> check_action;
  for (size_t d = 0; d < streams_.size(); ++d) {
    if (!streams_[d] || !streams_[d]->check) continue;
    try {
      streams_[d]->check->synchronize();
    } catch (const StreamError& e) {
      std::optional<Action> action;
      try {
        std::rethrow_exception(e.cause() ? e.cause() : std::current_exception());
      } catch (const NonFinite& nan) {
        action = nan.action;
      } catch (...) {  // not a NaN (a failed copy): reported as it is, after any NaN found
      }
      if (!check_error || (action && (!check_action || action->stage < check_action->stage))) {
        check_error = e.cause() ? e.cause() : std::current_exception();
        check_device = static_cast<int>(d);
        check_action = action;
      }
    }
  }
  // A failed step changes no parameter: the update is enqueued only when every device ran its
  // list and every check passed. (Stages in order: replicas' reducers meet in the same order.)
  if (!failure_->failed && !check_error)
    for (int d = 0; d < schedule_.devices; ++d)
      if (runs(d)) update_parameters(d);

  // The one host synchronisation of the step. A task that failed on a stream surfaces here.
  for (size_t d = 0; d < streams_.size(); ++d) {
    if (!streams_[d]) continue;
    for (const Stream* s : {&streams_[d]->compute, &streams_[d]->send, &streams_[d]->recv}) {
      try {
        s->synchronize();
      } catch (const std::exception&) {
        if (!stream_error) {
          stream_error = std::current_exception();
          stream_error_device = static_cast<int>(d);
        }
      }
    }
  }
  if (!failure_->failed && check_error) {
    failure_->failed = true;
    failure_->device = check_device;
    failure_->action = check_action;
    failure_->error = check_error;
  }
  if (!failure_->failed && stream_error) {
    // The origin: the one action whose start marker ran and whose end marker was skipped
    // (streams that inherited the failure through a wait skip both).
    failure_->failed = true;
    failure_->device = stream_error_device;
    failure_->error = stream_error;
    for (size_t d = 0; d < timings_.size(); ++d)
      for (const Timing& t : timings_[d])
        if (t.start >= 0 && t.end < 0) {
          failure_->device = static_cast<int>(d);
          failure_->action = t.action;
        }
  }
  if (failure_->failed) {
    std::ostringstream os;
    const int d = failure_->device;
    os << "pipeline step " << step << " (schedule " << schedule_.name << ") failed on "
       << devices_[static_cast<size_t>(d)] << " (device " << d << ")";
    if (failure_->action)
      os << ", stage " << failure_->action->stage << ", action " << to_string(*failure_->action)
         << " (micro-batch " << failure_->action->microbatch << ")";
    os << ": " << what_of(failure_->error);
    const std::optional<Action> action = failure_->action;
    recover();
    throw PipelineError(os.str(), d, action ? action->stage : -1, action);
  }

  read_cuda_markers();
  StepResult result;
  if (runs(last_device)) {
    const Stream& last = streams_[static_cast<size_t>(last_device)]->compute;
    for (int i = 0; i < m; ++i) {
      const Slot& row = slots_.back()[static_cast<size_t>(i)];
      result.loss += row.loss.to_vector().at(0);
      result.correct += ops::accuracy_count(row.logits, labels_[static_cast<size_t>(i)], last);
    }
  }
  result.timeline.title = schedule_.name + " measured";
  result.timeline.devices = schedule_.devices;
  result.timeline.chunks = schedule_.chunks;
  result.timeline.unit = "ms";
  result.timeline.microseconds_per_unit = 1000;
  result.timeline.lanes = {"compute", "send"};
  for (size_t d = 0; d < timings_.size(); ++d)
    for (const Timing& t : timings_[d])
      result.timeline.events.push_back({static_cast<int>(d), t.lane, t.action, t.start, t.end});
  for (size_t d = 0; d < devices_.size(); ++d)  // 0 for the devices run elsewhere
    result.peak_bytes.push_back(local_[d] ? Allocator::of(devices_[d]).stats().peak_in_use : 0);
  slots_.clear();
  inputs_.clear();
  labels_.clear();
  return result;
}

void Runtime::run_device(int d) {
  std::optional<Action> current;
  try {
    const Stream& compute = streams_[static_cast<size_t>(d)]->compute;
    for (int s : schedule_.stages_on(d)) optimizers_[static_cast<size_t>(s)]->zero_grad(compute);
    for (const Action& a : schedule_.lists[static_cast<size_t>(d)]) {
      current = a;
      run_action(d, a);
      if (options_.lockstep) {
        streams_[static_cast<size_t>(d)]->compute.synchronize();
        streams_[static_cast<size_t>(d)]->send.synchronize();
      }
    }
  } catch (const ChannelClosed&) {
    // Another device failed first and closed the channels: not an error of this one.
  } catch (...) {
    fail(d, current, std::current_exception());
  }
}

// Every W of these stages was enqueued on `compute` before: the sum across replicas and the
// update see them all.
void Runtime::update_parameters(int d) {
  try {
    const Stream& compute = streams_[static_cast<size_t>(d)]->compute;
    for (int s : schedule_.stages_on(d)) {
      if (!share_.reducers.empty() && share_.reducers[static_cast<size_t>(s)]) {
        const StageRange& r = partition_.stages[static_cast<size_t>(s)];
        std::vector<Tensor> grads;
        for (layers::Parameter* p : model_.parameters(r.begin, r.end)) grads.push_back(p->grad);
        share_.reducers[static_cast<size_t>(s)]->sum(grads, compute);
      }
      optimizers_[static_cast<size_t>(s)]->step(compute);
    }
  } catch (...) {
    fail(d, std::nullopt, std::current_exception());
  }
}

void Runtime::fail(int d, const std::optional<Action>& a, std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(failure_->mutex);
    if (failure_->failed) return;
    failure_->failed = true;
    failure_->device = d;
    failure_->action = a;
    failure_->error = e;
  }
  const std::string why = "device " + std::to_string(d) + " failed" +
                          (a ? " at " + to_string(*a) : std::string());
  for (auto& c : activations_)
    if (c) c->close(why);
  for (auto& c : gradients_)
    if (c) c->close(why);
}

void Runtime::trace(int d, int lane, const Action& a, const Stream& s, bool start) {
  std::deque<Timing>& list = timings_[static_cast<size_t>(d)];
  if (start) {
    list.emplace_back();
    list.back().action = a;
    list.back().lane = lane;
  }
  Timing* t = &list.back();  // deque: earlier elements never move
  if (s.device().is_cuda()) {  // no host tasks on a CUDA stream: an event, timed after the step
    (start ? t->start_event : t->end_event).record(s);
    return;
  }
  const auto t0 = t0_;
  s.enqueue([t, t0, start] {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    (start ? t->start : t->end) = ms;
  });
}

// After the step's final synchronisation: every CUDA marker is complete. Its time is the
// device's origin event's host time plus the GPU's elapsed time since that event (both on
// the same device: CUDA times events of one device against each other only).
void Runtime::read_cuda_markers() {
  for (size_t d = 0; d < timings_.size(); ++d) {
    if (!devices_[d].is_cuda()) continue;
    for (Timing& t : timings_[d]) {
      t.start = origin_ms_[d] + elapsed_ms(origins_[d], t.start_event);
      t.end = origin_ms_[d] + elapsed_ms(origins_[d], t.end_event);
    }
  }
}

}  // namespace brigade::pipeline
