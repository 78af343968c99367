// Emulated NCCL: ids, communicators (their members found over MPI), destroy and abort, and the
// error texts. README.md here says what the emulation requires of its caller.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/include/cuda_runtime_api.h"
#include "kernels/emu/nccl/nccl_internal.h"
#include "kernels/emu/vendor/library.h"

namespace brigade::emu::nccl {

namespace {

const char* nvidia_text(ncclResult_t code) {  // NCCL's ncclGetErrorString, word for word
  switch (code) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

std::mutex handles_mutex;
std::set<const ncclComm*>& handles() {  // the live communicators (handles_mutex)
  static auto* all = new std::set<const ncclComm*>();  // never freed: tasks may outlive main
  return *all;
}

// Tags of MPI_COMM_WORLD that carry the members' reports for one id, in the upper half of the
// tag space (Brigade's own point-to-point traffic is on communicators of its own).
int rendezvous_tag(const IdContents& id) {
  int* upper = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upper, &found);
  const uint64_t half = found ? static_cast<uint64_t>(*upper) / 2 : 16383;
  const uint64_t number = id.serial * static_cast<uint64_t>(id.world_size) +
                          static_cast<uint64_t>(id.creator);
  return static_cast<int>(half + 1 + number % half);
}

#define NCCL_EMU_MPI(call)                                                            \
  do {                                                                                \
    const int mpi_status_ = (call);                                                   \
    if (mpi_status_ != MPI_SUCCESS)                                                   \
      return fail(ncclSystemError, std::string(#call) + ": " + mpi_error(mpi_status_)); \
  } while (0)

// Every member's MPI_COMM_WORLD rank, ranked as in NCCL: each member reports (rank, world rank,
// nranks) to the id's creator, which checks them and answers every member with the list (or
// with -1 first and the reason's code, when the reports do not make one communicator).
ncclResult_t find_members(const IdContents& id, int nranks, int rank, std::vector<int>* world) {
  int me = 0;
  NCCL_EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &me));
  const int tag = rendezvous_tag(id);
  if (me != id.creator) {
    const int report[3] = {rank, me, nranks};
    NCCL_EMU_MPI(MPI_Send(report, 3, MPI_INT, id.creator, tag, MPI_COMM_WORLD));
    MPI_Message message;
    MPI_Status status;
    NCCL_EMU_MPI(MPI_Mprobe(id.creator, tag, MPI_COMM_WORLD, &message, &status));
    int count = 0;
    NCCL_EMU_MPI(MPI_Get_count(&status, MPI_INT, &count));
    world->assign(static_cast<size_t>(std::max(count, 1)), -1);
    NCCL_EMU_MPI(MPI_Mrecv(world->data(), count, MPI_INT, &message, MPI_STATUS_IGNORE));
    if ((*world)[0] < 0)
      return fail(ncclInvalidUsage, "ncclCommInitRank: the id's creator (MPI_COMM_WORLD rank " +
                                        std::to_string(id.creator) +
                                        ") refused the members' reports; its own error says why");
    if (count != nranks)
      return fail(ncclInvalidUsage, "ncclCommInitRank: nranks = " + std::to_string(nranks) +
                                        " here, " + std::to_string(count) + " at the id's creator");
    return ncclSuccess;
  }
  world->assign(static_cast<size_t>(nranks), -1);
  (*world)[static_cast<size_t>(rank)] = me;
  std::vector<int> reporters;
  std::string problem;
  for (int i = 1; i < nranks; ++i) {
    int report[3];
    NCCL_EMU_MPI(MPI_Recv(report, 3, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    reporters.push_back(report[1]);
    if (report[2] != nranks)
      problem = "MPI_COMM_WORLD rank " + std::to_string(report[1]) + " gave nranks = " +
                std::to_string(report[2]) + ", this creator " + std::to_string(nranks);
    else if (report[0] < 0 || report[0] >= nranks || (*world)[static_cast<size_t>(report[0])] >= 0)
      problem = "MPI_COMM_WORLD rank " + std::to_string(report[1]) + " joined as rank " +
                std::to_string(report[0]) + ", out of range or taken";
    else
      (*world)[static_cast<size_t>(report[0])] = report[1];
  }
  const std::vector<int> refusal = {-1};
  const std::vector<int>& answer = problem.empty() ? *world : refusal;
  for (int r : reporters)
    NCCL_EMU_MPI(MPI_Send(answer.data(), static_cast<int>(answer.size()), MPI_INT, r, tag,
                          MPI_COMM_WORLD));
  if (!problem.empty()) return fail(ncclInvalidUsage, "ncclCommInitRank: " + problem);
  return ncclSuccess;
}

// Destroy or abort: the handle is gone at once; then, once no operation can touch the members'
// MPI communicator (all ended; after an abort, none running), that is freed too.
ncclResult_t retire(ncclComm_t comm, const char* call, bool abort) {
  auto state = live(comm, call);
  if (!state) return ncclInvalidArgument;
  {
    std::lock_guard lock(handles_mutex);
    handles().erase(comm);
  }
  delete comm;
  std::unique_lock lock(state->mutex);
  state->aborted = state->aborted || abort;
  state->changed.wait(lock, [&] { return abort ? state->running == 0 : state->unfinished == 0; });
  NCCL_EMU_MPI(MPI_Comm_free(&state->mpi));
  return ncclSuccess;
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const std::string& detail) {
  return static_cast<ncclResult_t>(
      vendor::remember(vendor::Library::nccl, code, nvidia_text(code), detail));
}

std::shared_ptr<CommState> live(ncclComm_t comm, const char* call) {
  std::lock_guard lock(handles_mutex);
  if (comm == nullptr || handles().count(comm) == 0) {
    fail(ncclInvalidArgument, std::string(call) +
                                  ": the communicator was never initialised, or was destroyed");
    return nullptr;
  }
  return comm->state;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

std::string mpi_unusable() {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return "MPI is not initialised (the emulation moves the data over MPI between the ranks)";
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return "MPI was initialised without MPI_THREAD_MULTIPLE, and the emulated GPUs' stream "
           "threads call MPI";
  return "";
}

}  // namespace brigade::emu::nccl

using namespace brigade::emu::nccl;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  brigade::emu::gpu::count_call("ncclGetErrorString");
  return brigade::emu::vendor::text_of(brigade::emu::vendor::Library::nccl, result,
                                       nvidia_text(result));
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  brigade::emu::gpu::count_call("ncclGetUniqueId");
  static std::atomic<uint64_t> made{0};
  if (unique_id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  if (const std::string why = mpi_unusable(); !why.empty())
    return fail(ncclSystemError, "ncclGetUniqueId: " + why);
  IdContents id{};
  std::memcpy(id.magic, kIdMagic, sizeof kIdMagic);
  NCCL_EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &id.creator));
  NCCL_EMU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &id.world_size));
  id.serial = made++;
  std::memset(unique_id->internal, 0, sizeof unique_id->internal);
  std::memcpy(unique_id->internal, &id, sizeof id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  brigade::emu::gpu::count_call("ncclCommInitRank");
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                         " of nranks " + std::to_string(nranks));
  if (const std::string why = mpi_unusable(); !why.empty())
    return fail(ncclSystemError, "ncclCommInitRank: " + why);
  IdContents id;
  std::memcpy(&id, comm_id.internal, sizeof id);
  int world_size = 0;
  NCCL_EMU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  if (std::memcmp(id.magic, kIdMagic, sizeof kIdMagic) != 0 || id.world_size != world_size ||
      id.creator < 0 || id.creator >= world_size)
    return fail(ncclInvalidArgument,
                "ncclCommInitRank: the id was not made by ncclGetUniqueId in this MPI job");
  // The communicator belongs to the device current now, as NCCL's does.
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return fail(ncclUnhandledCudaError,
                std::string("ncclCommInitRank: cudaGetDevice: ") + cudaGetErrorString(e));
  std::vector<int> world;
  if (const ncclResult_t r = find_members(id, nranks, rank, &world); r != ncclSuccess) return r;
  for (size_t i = 0; i < world.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (world[i] == world[j])
        return fail(ncclInvalidUsage,
                    "ncclCommInitRank: ranks " + std::to_string(j) + " and " + std::to_string(i) +
                        " are one process (MPI_COMM_WORLD rank " + std::to_string(world[i]) +
                        "); the emulation needs one member per process");
  // The members' own communicator: their traffic cannot meet anyone else's.
  MPI_Group everyone = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  NCCL_EMU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &everyone));
  NCCL_EMU_MPI(MPI_Group_incl(everyone, nranks, world.data(), &members));
  auto state = std::make_shared<CommState>();
  const int created = MPI_Comm_create_group(MPI_COMM_WORLD, members, rendezvous_tag(id), &state->mpi);
  MPI_Group_free(&members);
  MPI_Group_free(&everyone);
  NCCL_EMU_MPI(created);
  state->device = device;
  state->rank = rank;
  state->size = nranks;
  state->sends.assign(static_cast<size_t>(nranks), 0);
  state->recvs.assign(static_cast<size_t>(nranks), 0);
  auto* handle = new ncclComm{std::move(state)};
  {
    std::lock_guard lock(handles_mutex);
    handles().insert(handle);
  }
  *comm = handle;
  return ncclSuccess;
}

// NCCL's ncclCommDestroy finishes the operations issued first (ncclCommFinalize); so does this,
// and waits for them as long as they take: an ncclSend whose receive never comes waits forever,
// as on a GPU. ncclCommAbort is for that case.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  brigade::emu::gpu::count_call("ncclCommDestroy");
  return retire(comm, "ncclCommDestroy", false);
}

// Operations running now end without moving their data (their MPI requests cancelled or let
// go); those not yet started do nothing when their streams reach them.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  brigade::emu::gpu::count_call("ncclCommAbort");
  return retire(comm, "ncclCommAbort", true);
}

}  // extern "C"
