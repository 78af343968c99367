// GradientReducer: sums gradients across the data-parallel replicas of one pipeline stage.
// The runtime holds one per stage whatever carries the sums, so it lives here beside Link:
// LocalReducer (local_reducer.h, replicas as threads of one process), MpiReducer and
// NcclReducer (pipeline/distributed/, between processes).
#pragma once

#include <string>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace brigade::pipeline {

// Sums gradients across the data-parallel replicas of one pipeline stage, in place.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Every replica calls this with the same tensors (same shapes, same order), enqueued
  // after the work that wrote them on `stream`; on return (CPU) or when `stream` reaches
  // it (CUDA) each tensor holds the sum over replicas. Same order of summation on every
  // replica, so replicas stay bit-identical.
  virtual void sum(const std::vector<Tensor>& tensors, const Stream& stream) = 0;
  // This replica's step failed and it will not call sum() for it: the other replicas must not
  // wait for it. Between processes, the failing process ends the whole job (faults.h), whose
  // notice ends every other replica's MPI wait, so MpiReducer does nothing here; NcclReducer
  // gives its word that the round is off, since a GPU waiting in an all-reduce hears no
  // notice (nccl_reducer.h).
  virtual void abandon(const std::string& why) { (void)why; }
};

}  // namespace brigade::pipeline
