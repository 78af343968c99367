// --distributed: brigade-train under `mpirun -np P·D`, one rank per pipeline device (one
// stage, or the v stages of that device in an interleaved schedule), D replicas of the
// pipeline (--data-parallel D), ranks laid out as pipeline/distributed/mpi_session.h says: replica
// r's pipeline is ranks r·P .. r·P+P-1, and rank r·P+d runs schedule device d.
//
// Every rank runs the same trainer on the same data (the batch order is a pure function of
// the seed) and builds the whole model from the same seed; its Runtime plays only its role
// (pipeline/runtime/process_role.h): replica r takes rows [r·n/D, (r+1)·n/D) of each mini-batch
// (the first n mod D replicas one more), its links go to the neighbouring ranks (MPI on
// CPU devices, NCCL with --devices cuda), and with D > 1 each of its stages all-reduces its
// gradients (MPI_Allreduce / ncclAllReduce) before the step.
// With one replica, the ranks of the first and last stages hand the runtime the staged
// micro-batches themselves; the others stage on the host and hand over a host batch.
//
// Rank 0 is the reporter, the one that prints and writes: progress, metrics, traces,
// evaluation, checkpoints, --save. Before any of those, gather_model() brings every stage's
// parameters and optimizer state from the rank that trains it in replica 0 to rank 0 (point
// to point, on a communicator of this file's own), so rank 0 holds the whole trained model
// and writes ONE checkpoint file exactly as a single-process run does; --resume and
// --init-from are read by rank 0 and broadcast_model() to every rank. The replicas are
// bit-identical (the reducer sums in the same order everywhere), so replica 0 stands for all.
//
// Agreement: after every step all ranks all-reduce (loss, correct, bytes sent, stop): the
// global loss for rank 0's progress, and a SIGINT/SIGTERM seen by any rank stops every rank
// after the same step; with --metrics, every rank's peak memory rides in the same sum, and with
// --trace, at the end, rank 0 gathers the last step's events (rank_reports.h). Errors: a
// mistake every rank makes alike (a usage error, a refused checkpoint) is an AllRanksError, or
// a refusal every rank meets and agrees on (agree_on_refusal): rank 0 prints it, every rank
// exits non-zero; anything else, a refusal of one rank alone included, ends the job through
// pipeline/distributed/faults.h (the failed rank is named, every rank aborts).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/schedule/schedule.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"
#include "tools/train/runners.h"
#include "tools/train/training_processes.h"

namespace brigade::train {

// The longest a rank that refused to start waits for the others to refuse too (when half
// BRIGADE_MPI_TIMEOUT_S is not shorter): ranks that refuse alike do so at the same point of
// the same work, seconds apart at most even on a loaded machine; past it the refusal is this
// rank's alone, and it ends the job naming itself.
inline constexpr std::chrono::seconds kRefusalAgreement{30};

// True when argv asks for --distributed (checked before MPI is started).
bool wants_distributed(int argc, const char* const* argv);

// This process as one rank of the mpirun job (training_processes.h says what the trainer
// asks of it).
class MpiRanks final : public TrainingProcesses {
 public:
  // Starts MPI. Throws UsageError when the process was not launched by mpirun.
  static std::unique_ptr<MpiRanks> start(int* argc, char*** argv);
  ~MpiRanks() override;

  bool distributed() const override { return true; }
  bool is_reporter() const override { return rank() == 0; }

  // Lays the ranks out as pipelines of P = size / --data-parallel devices and returns the
  // options of one pipeline: P devices cpu:0..cpu:P-1, except that with --devices cuda this
  // rank's own schedule device is its GPU (local_gpu.h: the host's GPUs one per rank); the
  // cores of this host shared by the ranks on it. Throws AllRanksError or UsageError (on every
  // rank alike) for an -np that is not P·D, more ranks than the model has blocks or layers,
  // --devices other than auto|cpu|cuda, cuda in a build without NCCL or on a host with fewer
  // GPUs than ranks, --balance time; and, naming the lowest rank that has one, a bad
  // BRIGADE_MPI_TIMEOUT_S (a rank's environment may differ from the others').
  Options pipeline_options(const Options& options, const model::ModelSpec& spec) override;

  // The runner of this rank's role: a Runtime over the whole schedule that runs
  // schedule_device() only, links to its neighbours and reducers across replicas: MpiLink
  // and MpiReducer on a CPU device, NcclLink and NcclReducer on a GPU.
  std::unique_ptr<StepRunner> make_runner(layers::Sequential& model, const pipeline::Plan& plan,
                                          const Options& options) override;

  // Rank 0 receives every stage's parameters and optimizer state from replica 0's owners.
  void gather_model(layers::Sequential& model, const StepRunner& runner) override;
  // Every rank receives rank 0's parameters, optimizer state and `resume_point`.
  void broadcast_model(layers::Sequential& model, const StepRunner& runner,
                       ResumePoint& resume_point) override;
  // Rank 0 runs `fn` (which may throw); every rank then throws its message: as a UsageError
  // where fn threw one, else as an AllRanksError (status 1).
  void on_reporter(const std::function<void()>& fn, const std::string& what) override;
  int64_t from_reporter(int64_t value, const std::string& what) override;

  // The ranks add up the step's loss, correct count and bytes sent, with `peak_memory` every
  // rank's peaks in the same sum (rank_reports.h: peak_words), each device named by its rank
  // ("rank 1 cpu:1"), and agree on the largest stop signal any of them caught (agree_on_stop):
  // stop_requested() returns it until the next agreement. Two collectives, metrics or not.
  void agree_on_step(pipeline::StepResult& result, bool peak_memory) override;
  void agree_on_stop() override;
  int stop_requested() const override { return agreed_stop_; }

  // Each rank's busy time per device (its own device's) summed over the ranks and averaged
  // over the replicas; the steps' time, the longest of the ranks'.
  void combine_busy_times(std::vector<double>& busy_ms, double& makespan_ms) override;
  // Rank 0's --trace: the events of replica 0's ranks, on rank 0's clock (rank_reports.h).
  void gather_timeline(pipeline::Timeline& timeline,
                       std::chrono::steady_clock::time_point zero) override;
  // By rank (rank 0 knows only its own device; the others' may be GPUs of other hosts), or
  // by the ranks of every replica, whose mean the line shows: "rank 1", "ranks 1+2k".
  std::string device_label(size_t d, const Device& placed) const override;

  // Every rank that refused joins a barrier of its own communicator; true once all have, false
  // after min(BRIGADE_MPI_TIMEOUT_S / 2, kRefusalAgreement) without them or when another rank's
  // failure is heard (the ranks that did not refuse wait elsewhere, in a collective of theirs).
  bool agree_on_refusal() override;
  // Ends the job (faults.h); never returns.
  [[noreturn]] void end_job_for_own_error(const std::string& what) override;

 private:
  struct State;
  explicit MpiRanks(std::unique_ptr<State> state);

  int rank() const;
  int size() const;
  int pipeline_devices() const;  // P
  int replicas() const;          // D
  int schedule_device() const;   // this rank's device of the schedule: 0 .. P-1

  std::unique_ptr<State> state_;
  int agreed_stop_ = 0;  // the stop signal agreed after the last step or evaluation
};

}  // namespace brigade::train
