// NcclReducer: the GradientReducer (pipeline/runtime/gradient_reducer.h) for CUDA tensors, over
// ncclAllReduce (ncclSum) on a NCCL communicator of one stage's replicas (made from
// Topology::stage_replicas; the ncclUniqueId broadcast by MPI). CUDA builds with NCCL only.
//
// sum() enqueues and returns: one ncclAllReduce per tensor, in place, on `stream`, inside one
// ncclGroupStart/End (NCCL fuses them into one launch); the sums are there when `stream`
// reaches that point, so the optimizer step enqueued after it on the same stream sees them.
//
// A replica whose step failed: the replicas agree first. An ncclAllReduce that a replica never
// joins waits on the GPU forever, where no host polls for fault notices (faults.h), and the
// optimizer step behind it would never run either. So before enqueuing anything, sum() takes
// every replica's word for the round by a one-int MPI all-reduce (polled, poll.h), and a
// replica whose step failed gives its word in abandon() instead of summing. If one abandoned,
// no replica enqueues the sum or updates its parameters: sum() waits for that replica's fault
// notice (it is ending the job: faults.h) and throws it as RankFailed, naming its cause.
//
// Same bits on every replica: NCCL's all-reduce algorithms form each element's sum once and
// copy it — ring (reduce-scatter: each segment summed along the ring, ending on one rank; then
// all-gather: copies) and tree (sums up the tree to the root, then a broadcast down) — so
// every replica receives the same bits, whatever order the sum itself took.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pipeline/distributed/nccl_communicator.h"
#include "pipeline/distributed/poll.h"
#include "pipeline/runtime/gradient_reducer.h"

namespace brigade::distributed {

class NcclReducer final : public pipeline::GradientReducer {
 public:
  // Collective over `replicas`: every replica of the stage, each with its own GPU.
  // `faults`: the process's (MpiSession::faults), where the failed replica's notice comes.
  NcclReducer(FaultLine& faults, MPI_Comm replicas, Device gpu,
              std::chrono::milliseconds timeout = default_timeout());
  void sum(const std::vector<Tensor>& tensors, const Stream& stream) override;
  // This replica's step failed: tells the others (its word for the round), so that none sums.
  void abandon(const std::string& why) override;

 private:
  // Every replica's word for this round: the lowest replica that abandons it, or -1 if none.
  int agree(bool abandoning);

  FaultLine& faults_;
  Communicator agreement_;  // the replicas' own duplicate: only the rounds' words go here
  int replica_ = 0, replicas_ = 0;
  std::chrono::milliseconds timeout_;
  NcclCommunicator nccl_;
};

}  // namespace brigade::distributed
