// NCCL for Brigade (CUDA builds with NCCL only): a communicator made over the ranks of an MPI
// communicator, and the checked call.
//
// ncclCommInitRank needs one ncclUniqueId known to every member: rank 0 of the MPI
// communicator makes it (ncclGetUniqueId) and MPI_Bcast hands it to the others — the NCCL
// documentation's own recipe. One GPU per member: NCCL does not support two ranks of one
// communicator on the same GPU (it refuses or hangs), so neither does Brigade.
//
// Waits on the GPU cannot poll for fault notices (faults.h): if a rank fails while its peers'
// streams wait in NCCL, the failed rank's MPI_Abort (or mpirun, if it died) ends the job, and
// a peer blocked there is killed without saying why. NcclReducer therefore has the replicas
// agree by MPI before each all-reduce (nccl_reducer.h).
#pragma once

#include <nccl.h>

#include "engine/device.h"
#include "pipeline/distributed/mpi_session.h"

namespace brigade::distributed {

namespace detail {
// "ncclSend(...) failed on rank 2: unhandled cuda error (...) (file:line)"
[[noreturn]] void throw_nccl_error(const char* call, const char* file, int line,
                                   ncclResult_t code);
}  // namespace detail

}  // namespace brigade::distributed

// Every NCCL call: the message names the call, this rank and ncclGetErrorString.
#define BRIGADE_NCCL_RANK_CHECK(call)                                                      \
  do {                                                                                     \
    const ncclResult_t brigade_nccl_status_ = (call);                                      \
    if (brigade_nccl_status_ != ncclSuccess)                                               \
      ::brigade::distributed::detail::throw_nccl_error(#call, __FILE__, __LINE__,          \
                                                       brigade_nccl_status_);              \
  } while (0)

namespace brigade::distributed {

class NcclCommunicator {
 public:
  // Collective over `comm`: every member calls it with its own GPU, ranked as in `comm`.
  NcclCommunicator(MPI_Comm comm, Device gpu);
  // The same with the id already shared (e.g. by a point-to-point message): `rank` of `size`.
  NcclCommunicator(const ncclUniqueId& id, int size, int rank, Device gpu);
  // ncclCommDestroy, or ncclCommAbort after abort_pending() (work that will never complete).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }
  const Device& device() const { return gpu_; }
  // Some operation on this communicator may never complete (a peer failed, a link closed
  // with receives posted): the destructor aborts instead of waiting for it.
  void abort_pending() { abort_ = true; }

 private:
  void init(const ncclUniqueId& id, int size, int rank);

  ncclComm_t comm_ = nullptr;
  Device gpu_;
  bool abort_ = false;
};

}  // namespace brigade::distributed
