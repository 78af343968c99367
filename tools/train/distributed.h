// --distributed: brigade-train under `mpirun -np P·D`, one rank per pipeline device (one
// stage, or the v stages of that device in an interleaved schedule), D replicas of the
// pipeline (--data-parallel D), ranks laid out as pipeline/distributed/mpi_session.h says: replica
// r's pipeline is ranks r·P .. r·P+P-1, and rank r·P+d runs schedule device d.
//
// Every rank runs the same trainer on the same data (the batch order is a pure function of
// the seed) and builds the whole model from the same seed; its Runtime runs only its share
// (pipeline/runtime/process_share.h): replica r takes rows [r·n/D, (r+1)·n/D) of each mini-batch
// (the first n mod D replicas one more), its links go to the neighbouring ranks (MPI on
// CPU devices, NCCL with --devices cuda), and with D > 1 each of its stages all-reduces its
// gradients (MPI_Allreduce / ncclAllReduce) before the step.
// With one replica, the ranks of the first and last stages hand the runtime the staged
// micro-batches themselves; the others stage on the host and hand over a host batch.
//
// Rank 0 is the one that speaks and writes: progress, metrics, traces, evaluation,
// checkpoints, --save. Before any of those, gather() brings every stage's parameters and
// optimizer state from the rank that trains it in replica 0 to rank 0 (point to point, on a
// communicator of this file's own), so rank 0 holds the whole trained model and writes ONE
// checkpoint file exactly as a single-process run does; --resume and --init-from are read
// by rank 0 and broadcast() to every rank. The replicas are bit-identical (the reducer sums
// in the same order everywhere), so replica 0 speaks for all.
//
// Agreement: after every step all ranks all-reduce (loss, correct, stop): the global loss
// for rank 0's progress, and a SIGINT/SIGTERM seen by any rank stops every rank after the
// same step. Errors: a mistake every rank makes alike (a usage error, a refused checkpoint)
// is an AllRanksError: rank 0 prints it, every rank exits non-zero; anything else ends the
// job through pipeline/distributed/faults.h (the failed rank is named, every rank aborts).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/schedule/schedule.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"
#include "tools/train/runners.h"

namespace brigade::train {

// An error every rank of the job raises alike, at the same point: rank 0 prints it, every
// rank exits with `status` (2 for usage errors, 1 otherwise).
class AllRanksError : public std::runtime_error {
 public:
  AllRanksError(const std::string& what, int status)
      : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// True when argv asks for --distributed (checked before MPI is started).
bool wants_distributed(int argc, const char* const* argv);

class Cluster {
 public:
  // Starts MPI. Throws UsageError when the process was not launched by mpirun.
  static std::unique_ptr<Cluster> start(int* argc, char*** argv);
  ~Cluster();

  int rank() const;
  int size() const;
  bool root() const { return rank() == 0; }

  // Lays the ranks out as pipelines of P = size / --data-parallel devices and returns the
  // options of one pipeline: P devices cpu:0..cpu:P-1, except that with --devices cuda this
  // rank's own position is its GPU (local_gpu.h: the host's GPUs one per rank); the cores of
  // this host shared by the ranks on it. Throws AllRanksError or UsageError (on every rank
  // alike) for an -np that is not P·D, more ranks than the model has blocks or layers,
  // --devices other than auto|cpu|cuda, cuda in a build without NCCL or on a host with fewer
  // GPUs than ranks, --balance time.
  Options pipeline_options(const Options& options, const model::ModelSpec& spec);
  int pipeline_devices() const;  // P
  int replicas() const;          // D
  int replica() const;
  int position() const;          // this rank's schedule device

  // The runner of this rank's share: a Runtime over the whole schedule that runs device
  // position() only, links to its neighbours and reducers across replicas: MpiLink and
  // MpiReducer on a CPU device, NcclLink and NcclReducer on a GPU.
  std::unique_ptr<StepRunner> make_runner(layers::Sequential& model, pipeline::Partition partition,
                                          pipeline::LoweredSchedule lowered, const Options& options);

  // Rank 0 receives every stage's parameters and optimizer state from replica 0's owners.
  void gather(layers::Sequential& model, const StepRunner& runner);
  // Every rank receives rank 0's parameters, optimizer state and `position`.
  void broadcast(layers::Sequential& model, const StepRunner& runner, Position& position);
  // Rank 0 runs `fn` (which may throw); every rank then throws AllRanksError with its message.
  void on_root(const std::function<void()>& fn, const std::string& what);

  // After a step: the global loss and correct count, and whether any rank saw a stop signal.
  struct Agreement {
    double loss = 0;
    int64_t correct = 0;
    int stop_signal = 0;
  };
  Agreement agree(double local_loss, int64_t local_correct, int local_stop);
  // At the end: each rank's busy time per device (its own device's) summed over the ranks
  // and averaged over the replicas; the steps' time, the longest of the ranks'.
  void combine(std::vector<double>& busy_ms, double& makespan_ms);

  // Ends the job for an error this rank alone hit (faults.h); never returns.
  [[noreturn]] void abort_job(const std::string& what);

 private:
  struct State;
  explicit Cluster(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace brigade::train
