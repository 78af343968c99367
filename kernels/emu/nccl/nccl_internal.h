// What the emulated NCCL's two files share: the contents of an id, a communicator's state,
// and how a call fails. Internal to kernels/emu/nccl/ (README.md there is the overview).
#pragma once

#include <mpi.h>  // the C API alone (meson.build: OMPI_SKIP_MPICXX)

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/emu/nccl/include/nccl.h"

namespace brigade::emu::nccl {

// What ncclGetUniqueId writes into ncclUniqueId::internal: enough for the members to find each
// other over MPI. The creator's MPI_COMM_WORLD rank is where every member reports at
// ncclCommInitRank; (serial, creator) numbers the id in the job, and so its MPI tags.
struct IdContents {
  char magic[24];      // kIdMagic: made by this emulation (anything else is refused)
  int32_t creator;     // MPI_COMM_WORLD rank of the process that called ncclGetUniqueId
  int32_t world_size;  // MPI_COMM_WORLD's size there: a member of another job is refused
  uint64_t serial;     // the creator's count of ids made before this one
};
inline constexpr char kIdMagic[24] = "brigade emulated NCCL";
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

// One communicator's state, shared by its handle and every task it has enqueued (a task may
// run after the handle is gone: it then sees `aborted` and moves nothing).
struct CommState {
  int device = 0;  // the current device at ncclCommInitRank: its streams only
  int rank = 0, size = 0;
  MPI_Comm mpi = MPI_COMM_NULL;  // the members, ranked as in NCCL (MPI_Comm_create_group)

  std::mutex mutex;  // all below; taken after Emulation::mutex when both are held
  std::condition_variable changed;  // running or unfinished went down
  bool aborted = false;    // ncclCommAbort: running operations end, later ones do nothing
  int running = 0;         // operations inside their MPI work now
  uint64_t unfinished = 0; // operations enqueued that have not ended (run or been dropped)
  // Issue order: the n-th ncclSend to a peer matches the peer's n-th ncclRecv from this rank,
  // as in NCCL, whatever order the streams run them in; collectives match by their count.
  std::vector<uint64_t> sends, recvs;  // by peer
  uint64_t collectives = 0;
};

// ncclResult_t `code` as this call's result; `detail` is what ncclGetErrorString appends for
// it on this thread, after NVIDIA's text.
ncclResult_t fail(ncclResult_t code, const std::string& detail);
// The state of a live communicator, or null after fail(ncclInvalidArgument, ...).
std::shared_ptr<CommState> live(ncclComm_t comm, const char* call);
// MPI's text for an error code.
std::string mpi_error(int code);
// Why MPI cannot carry the emulation now (not initialised, finalised, or without
// MPI_THREAD_MULTIPLE: streams' workers call MPI), or "".
std::string mpi_unusable();

}  // namespace brigade::emu::nccl

// The API's handle is a pointer to this.
struct ncclComm {
  std::shared_ptr<brigade::emu::nccl::CommState> state;
};
