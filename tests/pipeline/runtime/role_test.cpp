// One process's role in a schedule (pipeline/runtime/process_role.h), without MPI: several Runtime
// objects over the same schedule, each running some of its devices, in threads of this test,
// linked by in-process Channels they share — what MPI links do between the ranks of
// `mpirun -np P` — and, for data parallelism, replicas whose gradients a LocalReducer sums.
//
// Parity, as in parity_test.cpp: bit-exact, every stage accumulating its weight gradients in
// micro-batch order as one device does. With two replicas, each replica
// accumulates its own micro-batches and the reducer adds the two sums: against one device
// accumulating all micro-batches in one running sum that is another order (1e-5), and
// against a reference that adds per-replica sums in replica order it is the same (bit-exact).
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <thread>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/runtime/channel.h"
#include "pipeline/runtime/local_reducer.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"

namespace brigade::pipeline {
namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatchRows = 12;

std::vector<HostBatch> batches() { return test::random_batches(kSteps, kBatchRows, 300); }

// The links of one replica's pipeline, as two processes would see them: the runtimes at the
// two ends of "activations 0->1" share one Channel (one queue), but each holds its own end.
// A close is seen by both; the Channel reopens only once BOTH ends have reset after it. An end
// that reset by itself would reopen the queue under a peer still on its way to a receive of
// the failed step, which would then wait for a pair that never comes (as with MPI, where each
// process resets only its own side).
class SharedLinks {
 public:
  LinkFactory factory() {
    return [this](const LinkEnd& end) -> std::shared_ptr<Link> {
      std::lock_guard<std::mutex> lock(mutex_);
      std::shared_ptr<Shared>& s = shared_[end.name];
      if (!s) s = std::make_shared<Shared>(end.name);
      return std::make_shared<End>(s);
    };
  }

 private:
  struct Shared {
    explicit Shared(const std::string& name) : channel(name) {}
    Channel channel;
    std::mutex mutex;
    bool closed = false;
    int resets_since_close = 0;
  };
  class End final : public Link {
   public:
    explicit End(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
    const std::string& name() const override { return shared_->channel.name(); }
    void send(int microbatch, Message message) override {
      shared_->channel.send(microbatch, std::move(message));
    }
    Message receive(int microbatch) override { return shared_->channel.receive(microbatch); }
    void close(const std::string& why) override {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      shared_->closed = true;
      shared_->channel.close(why);
    }
    void reset() override {  // a runtime's recover(): at construction, and after a failed step
      std::lock_guard<std::mutex> lock(shared_->mutex);
      if (!shared_->closed || ++shared_->resets_since_close < 2) return;
      shared_->channel.reset();
      shared_->closed = false;
      shared_->resets_since_close = 0;
    }

   private:
    std::shared_ptr<Shared> shared_;
  };

  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Shared>> shared_;
};

// What one rank builds: the whole model from the same seed, its own device block on its
// device and every other block on cpu:0 (the runtime never touches those).
struct Rank {
  std::unique_ptr<layers::Sequential> model;
  std::unique_ptr<Runtime> runtime;
  std::vector<std::vector<float>> initial;  // every parameter before training
};

Rank make_rank(const Partition& partition, const Schedule& schedule, int d, Device local,
               ProcessRole role) {
  std::vector<Device> blocks(static_cast<size_t>(schedule.devices), Device::cpu(0));
  blocks[static_cast<size_t>(d)] = local;
  Rank r;
  r.model = layers::Sequential::placed(test::small_spec(), layer_devices(partition, blocks),
                                       test::kModelSeed);
  r.initial = test::params_of(*r.model);
  role.devices = {d};
  r.runtime = std::make_unique<Runtime>(
      *r.model, blocks, partition, schedule, test::sgd,
      test::runtime_options({.seed = test::kDropoutSeed}), role);
  return r;
}

// Every rank runs step k on its batch at the same time, one thread each (as the processes of
// mpirun would); the first failure is rethrown after all threads ended.
void train_together(std::vector<Rank>& ranks, const std::vector<std::vector<HostBatch>>& data) {
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i)
      threads.emplace_back([&, i] {
        try {
          ranks[i].runtime->step(data[i][static_cast<size_t>(step)], static_cast<uint32_t>(step));
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
}

// The pipeline's parameters, each layer's from the rank whose device runs its stage.
std::vector<std::vector<float>> gathered(std::vector<Rank>& ranks, const Partition& partition,
                                         const Schedule& schedule, size_t first_rank = 0) {
  std::vector<std::vector<float>> out;
  for (int s = 0; s < partition.count(); ++s) {
    const StageRange& r = partition.stages[static_cast<size_t>(s)];
    Rank& owner = ranks[first_rank + static_cast<size_t>(schedule.device_of(s))];
    for (layers::Parameter* p : owner.model->parameters(r.begin, r.end))
      out.push_back(p->value.to_vector());
  }
  return out;
}

Partition cut_for(const Schedule& schedule) {
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  return balance(layer_costs(shapes, CostKind::flops), schedule.stages(), schedule.devices);
}

TEST_CASE("one runtime per schedule device, linked across runtimes, trains like one device") {
  testing::Deadline deadline("one runtime per schedule device", std::chrono::seconds(300));
  const auto data = batches();
  struct Case {
    const char* name;
    int p, m, v;
  };
  for (const Case c : {Case{"1f1b", 2, 3, 1}, Case{"gpipe", 2, 3, 1}, Case{"1f1b", 3, 4, 1},
                       Case{"zb-h1", 3, 5, 1}, Case{"interleaved-1f1b", 2, 4, 2}}) {
    const Schedule schedule = make_schedule(c.name, c.p, c.m, c.v);
    CAPTURE(c.name);
    CAPTURE(c.p);
    REQUIRE(test::accumulates_in_order(schedule));
    const Partition partition = cut_for(schedule);
    const std::vector<Device> devices = test::test_devices(c.p, /*first=*/11);
    SharedLinks links;
    std::vector<Rank> ranks;
    for (int d = 0; d < c.p; ++d)
      ranks.push_back(make_rank(partition, schedule, d, devices[static_cast<size_t>(d)],
                                {.links = links.factory()}));
    train_together(ranks, std::vector<std::vector<HostBatch>>(ranks.size(), data));
    const auto reference = test::train_on_one_device(data, c.m, test::reference_device());
    test::check_close(gathered(ranks, partition, schedule), test::params_of(*reference),
                      /*exact=*/!test::on_cuda());
    // A rank never touches the stages it does not run: they keep their initial values.
    for (int d = 0; d < c.p; ++d) {
      const auto now = test::params_of(*ranks[static_cast<size_t>(d)].model);
      const auto& before = ranks[static_cast<size_t>(d)].initial;
      size_t i = 0;
      for (int s = 0; s < partition.count(); ++s) {
        const StageRange& r = partition.stages[static_cast<size_t>(s)];
        const size_t count = ranks[0].model->parameters(r.begin, r.end).size();
        if (schedule.device_of(s) != d)
          for (size_t k = i; k < i + count; ++k) CHECK(now[k] == before[k]);
        i += count;
      }
    }
  }
}

// Data parallelism on one device, summed as the LocalReducer sums: each replica's
// micro-batches accumulated in order into .grad and read back, the replicas' gradients added
// on the host in replica order, written back, then one optimizer step.
std::unique_ptr<layers::Sequential> train_replicas_on_one_device(
    const std::vector<HostBatch>& batches, int replicas, int m, Device device) {
  auto model = layers::Sequential::from_spec(test::small_spec(), {device}, test::kModelSeed);
  const Stream s = Stream::default_for(device);
  auto opt = test::sgd(model->parameters());
  for (size_t step = 0; step < batches.size(); ++step) {
    const int64_t n = batches[step].shape[0], share = n / replicas;
    std::vector<std::vector<float>> sum;
    for (int r = 0; r < replicas; ++r) {
      opt->zero_grad(s);
      test::accumulate_microbatches(*model, batches[step], r * share, share, m, n,
                                    static_cast<uint32_t>(step), s);
      s.synchronize();
      std::vector<layers::Parameter*> params = model->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<float> g = params[i]->grad.to_vector();
        if (r == 0) sum.push_back(g);
        else
          for (size_t k = 0; k < g.size(); ++k) sum[i][k] += g[k];
      }
    }
    std::vector<layers::Parameter*> params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      copy_async(params[i]->grad, Tensor::from_vector(sum[i], params[i]->grad.shape(), s), s);
    opt->step(s);
    s.synchronize();
  }
  return model;
}

// 2 stages x 2 replicas of 1F1B over 3 micro-batches: a LocalReducer per stage across the
// replicas, each replica's links shared by its two ranks; rank r*P + d runs replica r's device d.
struct Replicated {
  static constexpr int kStages = 2, kReplicas = 2, kMicro = 3;
  const Schedule schedule = make_schedule("1f1b", kStages, kMicro);
  const Partition partition = cut_for(schedule);
  std::vector<std::unique_ptr<LocalReducer>> reducers;  // [stage]: across the replicas
  std::vector<SharedLinks> links = std::vector<SharedLinks>(kReplicas);
  std::vector<Rank> ranks;

  Replicated() {
    const std::vector<Device> devices = test::test_devices(kStages * kReplicas, /*first=*/21);
    for (int s = 0; s < kStages; ++s) reducers.push_back(std::make_unique<LocalReducer>(kReplicas));
    for (int r = 0; r < kReplicas; ++r)
      for (int d = 0; d < kStages; ++d) {
        ProcessRole role{.links = links[static_cast<size_t>(r)].factory(),
                         .replica = r,
                         .replicas = kReplicas};
        for (int s = 0; s < kStages; ++s)
          role.reducers.push_back(&reducers[static_cast<size_t>(s)]->member(r));
        ranks.push_back(make_rank(partition, schedule, d,
                                  devices[static_cast<size_t>(r * kStages + d)], role));
      }
  }
};

TEST_CASE("2 stages x 2 replicas: each replica takes half the batch, a reducer sums") {
  testing::Deadline deadline("2 stages x 2 replicas", std::chrono::seconds(300));
  const auto data = batches();
  Replicated job;
  constexpr int kStages = Replicated::kStages, kReplicas = Replicated::kReplicas,
                kMicro = Replicated::kMicro;
  std::vector<Rank>& ranks = job.ranks;
  // Every rank is given the whole mini-batch; replica r trains on rows [6r, 6r + 6).
  train_together(ranks, std::vector<std::vector<HostBatch>>(ranks.size(), data));

  const auto replica0 = gathered(ranks, job.partition, job.schedule, 0);
  const auto replica1 = gathered(ranks, job.partition, job.schedule, kStages);
  const bool exact = !test::on_cuda();
  SUBCASE("the replicas stay bit-identical") { test::check_close(replica1, replica0, true); }
  SUBCASE("bit-exact against per-replica sums added in replica order") {
    const auto ref = train_replicas_on_one_device(data, kReplicas, kMicro, test::reference_device());
    test::check_close(replica0, test::params_of(*ref), exact);
  }
  SUBCASE("1e-5 against one device accumulating all 6 micro-batches in one sum") {
    const auto ref = test::train_on_one_device(data, kReplicas * kMicro, test::reference_device());
    test::check_close(replica0, test::params_of(*ref), false);
  }
}

// A replica whose step fails must not leave the others waiting in the reducer: here a label
// out of range in replica 1's rows, found by its last stage (rank 3). Before the reducer knew
// of failures, replica 0's last stage (rank 1) waited in their reducer for ever; now its step
// throws naming replica 1, and the deadline is only a hang detector. The failure reaches
// replica 1's first stage (rank 2) too, so it abandons stage 0's reduction and every rank
// fails with no parameter changed: on CPU devices through the events (a failed stream's
// sticky error), on GPUs through the sender's checks that a message between runtimes carries
// (link.h). Once, on GPUs, ranks 0 and 2 summed and updated stage 0 regardless.
TEST_CASE("2 stages x 2 replicas: a replica whose step fails ends its reducer's other steps") {
  testing::Deadline deadline("a failing replica", std::chrono::seconds(120));
  auto data = batches();
  data[0].labels[7] = 99;  // row 7: replica 1's (rows 6..11), past the 10 classes
  Replicated job;
  std::vector<Rank>& ranks = job.ranks;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        ranks[i].runtime->step(data[0], 0);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK_MESSAGE(!errors[3].empty(), "the failing rank's step did not fail");
  CHECK_MESSAGE(errors[1].find("replica 1's step failed") != std::string::npos, errors[1]);
  CHECK_MESSAGE(errors[0].find("replica 1's step failed") != std::string::npos, errors[0]);
  CHECK_MESSAGE(!errors[2].empty(), "replica 1's first stage did not fail");
  for (size_t i = 0; i < ranks.size(); ++i) {
    CAPTURE(i);
    CHECK(test::params_of(*ranks[i].model) == ranks[i].initial);
  }
}

TEST_CASE("a role that cannot be played is refused with what is wrong") {
  const Schedule schedule = make_schedule("1f1b", 2, 2);
  const Partition partition = cut_for(schedule);
  auto model = test::placed_model(partition, 2, /*first_device=*/31);
  const auto refused = [&](ProcessRole role) {
    return testing::error_text<Error>([&] {
      Runtime(*model, test::test_devices(2, 31), partition, schedule, test::sgd, {},
              std::move(role));
    });
  };
  CHECK(refused({.devices = {2}}).find("device 2 of a schedule of 2 devices") != std::string::npos);
  CHECK(refused({.devices = {0, 0}}).find("device 0 twice") != std::string::npos);
  CHECK(refused({.devices = {1}}).find("no link factory") != std::string::npos);
  CHECK(refused({.reducers = {nullptr}}).find("1 reducers for 2 stages") != std::string::npos);
  CHECK(refused({.replica = 2, .replicas = 2}).find("replica 2 of 2") != std::string::npos);
}

}  // namespace
}  // namespace brigade::pipeline
