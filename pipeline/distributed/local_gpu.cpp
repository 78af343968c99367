#include "pipeline/distributed/local_gpu.h"

namespace brigade::distributed {

HostRanks host_ranks() {
  int rank = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_Comm local = MPI_COMM_NULL;
  // A one-off blocking collective at start-up, before any rank has work to wait on.
  BRIGADE_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  const Communicator host(local);
  HostRanks here;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(host.get(), &here.local_rank));
  BRIGADE_MPI_CHECK(MPI_Comm_size(host.get(), &here.local_size));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  BRIGADE_MPI_CHECK(MPI_Get_processor_name(name, &length));
  here.host.assign(name, static_cast<size_t>(length));
  return here;
}

GpuChoice choose_gpu(const HostRanks& here, int gpus) {
  const std::string count = "host " + here.host + " has " + std::to_string(gpus) +
                            " GPU(s) for its " + std::to_string(here.local_size) + " rank(s): ";
  if (gpus < 1)
    return {-1, count + "each rank needs a GPU of its own; run on hosts with GPUs, or leave "
                        "--devices out for a CPU device per rank"};
  if (here.local_size > gpus)
    return {-1, count + "NCCL cannot put two ranks of one communicator on one GPU; start at "
                        "most " + std::to_string(gpus) + " rank(s) per host (mpirun --map-by ppr:" +
                        std::to_string(gpus) + ":node) or use more hosts"};
  return {here.local_rank % gpus, ""};
}

}  // namespace brigade::distributed
