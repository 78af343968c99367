// The transport for a device: what carries a link or a replica all-reduce depends only on
// where the tensors live — CPU tensors over MPI (MpiLink, MpiReducer), CUDA tensors over NCCL
// (NcclLink, NcclReducer; CUDA builds with NCCL). Elsewhere a GPU is refused, by name.
#pragma once

#include <memory>
#include <string>

#include "pipeline/distributed/mpi_link.h"
#include "pipeline/runtime/gradient_reducer.h"

namespace brigade::distributed {

// One end of a link on `device` (the arguments as for MpiLink and NcclLink). An NcclLink's
// construction is collective between its two ends: make a rank's links in the runtime's order.
std::shared_ptr<pipeline::Link> make_link(const std::string& name, const MpiSession& session,
                                          MPI_Comm comm, int peer, int link, int microbatches,
                                          Device device, bool sending);

// The all-reduce of one stage's gradients on `device` across the ranks of `replicas`;
// collective over `replicas`.
std::unique_ptr<pipeline::GradientReducer> make_reducer(const MpiSession& session,
                                                        MPI_Comm replicas, Device device);

}  // namespace brigade::distributed
