#include "pipeline/distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <sstream>

namespace brigade::distributed {

namespace detail {

void throw_nccl_error(const char* call, const char* file, int line, ncclResult_t code) {
  std::ostringstream os;
  os << call << " failed on rank " << MpiSession::world_rank() << ": "
     << ncclGetErrorString(code) << " (NCCL_DEBUG=WARN says more; " << file << ":" << line
     << ")";
  throw Error(os.str());
}

}  // namespace detail

NcclCommunicator::NcclCommunicator(MPI_Comm comm, Device gpu) : gpu_(gpu) {
  int rank = 0, size = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  BRIGADE_MPI_CHECK(MPI_Comm_size(comm, &size));
  ncclUniqueId id{};
  if (rank == 0) BRIGADE_NCCL_RANK_CHECK(ncclGetUniqueId(&id));
  BRIGADE_MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm));
  init(id, size, rank);
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int size, int rank, Device gpu)
    : gpu_(gpu) {
  init(id, size, rank);
}

void NcclCommunicator::init(const ncclUniqueId& id, int size, int rank) {
  BRIGADE_CHECK(gpu_.is_cuda(), "a NCCL communicator needs a GPU; " << gpu_ << " is not one");
  check_device_available(gpu_);
  BRIGADE_CUDA_CHECK(cudaSetDevice(gpu_.index));
  BRIGADE_NCCL_RANK_CHECK(ncclCommInitRank(&comm_, size, id, rank));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (abort_) {
    BRIGADE_NCCL_REPORT(ncclCommAbort(comm_));
  } else {
    BRIGADE_NCCL_REPORT(ncclCommDestroy(comm_));
  }
}

}  // namespace brigade::distributed
