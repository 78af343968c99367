// A GPU of its own for each rank. NCCL does not support two ranks of one communicator on one
// GPU (it refuses or hangs), so the ranks mpirun starts on one host take that host's GPUs one
// each, in local-rank order: rank i of the host gets cuda:(i mod G) of the G GPUs it sees —
// which is cuda:i whenever the host has enough, and otherwise is refused, by choose_gpu().
//
// "The ranks on one host" are those that share memory with this one (MPI_Comm_split_type,
// MPI_COMM_TYPE_SHARED): no launcher-specific variables, and the same on every MPI.
#pragma once

#include <string>

#include "pipeline/distributed/mpi_session.h"

namespace brigade::distributed {

struct HostRanks {
  std::string host;    // MPI_Get_processor_name
  int local_rank = 0;  // this rank among the ranks on its host
  int local_size = 1;  // the ranks on its host
};

// Collective over MPI_COMM_WORLD: every rank calls it.
HostRanks host_ranks();

struct GpuChoice {
  int gpu = -1;         // this rank runs on cuda:gpu, when `refusal` is empty
  std::string refusal;  // else why not: "host vm has 1 GPU(s) for its 2 ranks: ..."
};

// This rank's GPU on a host where it sees `gpus` of them. A pure function, tested without GPUs.
GpuChoice choose_gpu(const HostRanks& here, int gpus);

}  // namespace brigade::distributed
