// NcclReducer: the GradientReducer (pipeline/runtime/gradient_reducer.h) for CUDA tensors, over
// ncclAllReduce (ncclSum) on a NCCL communicator of one stage's replicas (made from
// Topology::stage_replicas; the ncclUniqueId broadcast by MPI). CUDA builds with NCCL only.
//
// sum() enqueues and returns: one ncclAllReduce per tensor, in place, on `stream`, inside one
// ncclGroupStart/End (NCCL fuses them into one launch); the sums are there when `stream`
// reaches that point, so the optimizer step enqueued after it on the same stream sees them.
//
// Same bits on every replica: NCCL's all-reduce algorithms form each element's sum once and
// copy it — ring (reduce-scatter: each segment summed along the ring, ending on one rank; then
// all-gather: copies) and tree (sums up the tree to the root, then a broadcast down) — so
// every replica receives the same bits, whatever order the sum itself took.
#pragma once

#include <memory>

#include "pipeline/distributed/nccl_communicator.h"
#include "pipeline/runtime/gradient_reducer.h"

namespace brigade::distributed {

class NcclReducer final : public pipeline::GradientReducer {
 public:
  // Collective over `replicas`: every replica of the stage, each with its own GPU.
  NcclReducer(MPI_Comm replicas, Device gpu);
  void sum(const std::vector<Tensor>& tensors, const Stream& stream) override;

 private:
  NcclCommunicator nccl_;
};

}  // namespace brigade::distributed
