// MpiReducer: the GradientReducer (pipeline/runtime/gradient_reducer.h) for CPU tensors, over
// MPI_Allreduce (MPI_SUM) on the communicator of one stage's replicas (Topology::stage_replicas).
//
// sum() blocks its caller: it waits for `stream` (the gradients are written), packs every
// tensor into one host buffer (one all-reduce instead of one per parameter: latency, not
// bandwidth, dominates small layers), all-reduces it in place and unpacks. The all-reduce is
// non-blocking (MPI_Iallreduce) and polled (poll.h), so a replica that failed ends the wait
// with RankFailed instead of a hang.
//
// Why every replica gets the same bits: see mpi_reducer.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/poll.h"
#include "pipeline/runtime/gradient_reducer.h"

namespace brigade::distributed {

// Element-wise sums, in place, over every rank of `comm` (every one of them calls alike):
// MPI_Iallreduce with MPI_SUM, polled, so that a rank that failed ends the wait with
// RankFailed; counts above INT_MAX go in slices, the same slices everywhere. `what` names the
// values in a timeout's message. Shared: a wait that throws leaves them to MPI (poll.h).
void all_reduce_sum(FaultLine& faults, MPI_Comm comm,
                    const std::shared_ptr<std::vector<float>>& values,
                    std::chrono::milliseconds timeout, const std::string& what);
void all_reduce_sum(FaultLine& faults, MPI_Comm comm,
                    const std::shared_ptr<std::vector<double>>& values,
                    std::chrono::milliseconds timeout, const std::string& what);

class MpiReducer final : public pipeline::GradientReducer {
 public:
  // `replicas`: the ranks holding the same stage (every one of them calls sum alike).
  MpiReducer(const MpiSession& session, MPI_Comm replicas,
             std::chrono::milliseconds timeout = default_timeout());
  void sum(const std::vector<Tensor>& tensors, const Stream& stream) override;

 private:
  FaultLine& faults_;
  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<std::vector<float>> buffer_;  // (sum of numel): every tensor, back to back
};

}  // namespace brigade::distributed
