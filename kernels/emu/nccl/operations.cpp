// Emulated NCCL: ncclSend, ncclRecv, ncclAllReduce and groups. Each call is checked when it is
// made, then runs as a task of its stream (kernels/emu/vendor/library.h's enqueue_call: stream
// order, a fault on failure, its buffers recorded for the happens-before check). The task moves
// the data over MPI, on the communicator's own MPI communicator, and holds its stream until
// the operation is complete, which for a send means until the peer's receive has run.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/nccl/nccl_internal.h"
#include "kernels/emu/vendor/library.h"

namespace brigade::emu::nccl {

namespace {

// A tag says what a message is and which operation of its kind: the n-th send to a peer and
// the peer's n-th receive from this rank share n (CommState's issue counts), as do the n-th
// collectives of all members.
enum Kind { kData = 0, kClearToSend = 1, kContribution = 2, kResult = 3 };
int tag_of(uint64_t number, Kind kind) {
  static const uint64_t period = [] {
    int* upper = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upper, &found);
    return (found ? static_cast<uint64_t>(*upper) + 1 : 32768) / 4;
  }();
  return static_cast<int>((number % period) * 4 + kind);
}

// What a receiver sends to say "my receive is posted". Static: MPI may read it after the send's
// request has been let go.
const int kToken = 1;

void check_mpi(int status, const std::string& call) {
  if (status != MPI_SUCCESS) throw std::runtime_error(call + ": " + mpi_error(status));
}

// Buffers of sends let go at an abort: MPI may still read them, so they are never freed.
std::mutex abandoned_mutex;
std::vector<std::vector<float>>& abandoned() {
  static auto* all = new std::vector<std::vector<float>>();
  return *all;
}

// One NCCL operation as its task runs it: a few MPI requests, advanced by step() until done.
struct Operation {
  enum Type { send, recv, all_reduce } type = send;
  std::shared_ptr<CommState> comm;
  const float* in = nullptr;  // send, all_reduce
  float* out = nullptr;       // recv, all_reduce
  size_t count = 0;
  int peer = 0;               // send, recv
  uint64_t number = 0;        // the issue count its tags carry

  int phase = 0;  // 0: not started; then the type's steps; done when it reaches `kDone`
  static constexpr int kDone = 99;
  bool running = false;  // counted in comm->running
  struct Request {
    MPI_Request request = MPI_REQUEST_NULL;
    bool sending = false;
  };
  std::vector<Request> requests;
  std::vector<std::vector<float>> staged;  // copies sent, or contributions received
  int clear_to_send = 0;

  static Operation make(Type type, const float* in, float* out, size_t count, int peer) {
    Operation op;
    op.type = type;
    op.in = in;
    op.out = out;
    op.count = count;
    op.peer = peer;
    return op;
  }

  std::string what() const {  // "ncclSend to rank 1", "ncclAllReduce over 3 ranks"
    static const char* names[] = {"ncclSend to rank ", "ncclRecv from rank ",
                                  "ncclAllReduce over "};
    std::string text = names[type];
    text += std::to_string(type == all_reduce ? comm->size : peer);
    if (type == all_reduce) text += " ranks";
    return text;
  }

  void post(bool sending, const void* buffer, int n, MPI_Datatype type, int to, int tag) {
    Request r{MPI_REQUEST_NULL, sending};
    check_mpi(sending ? MPI_Isend(buffer, n, type, to, tag, comm->mpi, &r.request)
                      : MPI_Irecv(const_cast<void*>(buffer), n, type, to, tag, comm->mpi, &r.request),
              what() + (sending ? ": MPI_Isend" : ": MPI_Irecv"));
    requests.push_back(r);
  }
  int elements() const { return static_cast<int>(count); }

  // True when every request has completed; a receive that brought another count than this
  // operation's is an error (on a GPU, a mismatched pair is silent corruption).
  bool requests_done() {
    for (Request& r : requests) {
      if (r.request == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Status status;
      check_mpi(MPI_Test(&r.request, &done, &status), what() + ": MPI_Test");
      if (!done) return false;
      if (!r.sending && status.MPI_TAG % 4 != kClearToSend) {
        int got = 0;
        check_mpi(MPI_Get_count(&status, MPI_FLOAT, &got), what() + ": MPI_Get_count");
        if (got != elements())
          throw std::runtime_error(what() + ": " + std::to_string(count) +
                                   " floats here, " + std::to_string(got) + " at rank " +
                                   std::to_string(status.MPI_SOURCE));
      }
    }
    requests.clear();
    return true;
  }

  void step() {
    const int n = elements();
    if (phase == 0 && n == 0 && type != all_reduce) {
      phase = kDone;  // NCCL ignores an empty send or receive
      return;
    }
    if (type == send) {
      if (phase == 0) {  // wait for the receiver: a send holds its stream until then
        post(false, &clear_to_send, 1, MPI_INT, peer, tag_of(number, kClearToSend));
        phase = 1;
      } else if (phase == 1 && requests_done()) {
        staged.emplace_back(in, in + count);  // a copy: an abort may have to let it go
        post(true, staged.back().data(), n, MPI_FLOAT, peer, tag_of(number, kData));
        phase = 2;
      } else if (phase == 2 && requests_done()) {
        phase = kDone;
      }
    } else if (type == recv) {
      if (phase == 0) {
        post(false, out, n, MPI_FLOAT, peer, tag_of(number, kData));
        MPI_Request token = MPI_REQUEST_NULL;
        check_mpi(MPI_Isend(&kToken, 1, MPI_INT, peer, tag_of(number, kClearToSend), comm->mpi,
                            &token),
                  what() + ": MPI_Isend");
        check_mpi(MPI_Request_free(&token), what() + ": MPI_Request_free");
        phase = 1;
      } else if (phase == 1 && requests_done()) {
        phase = kDone;
      }
    } else {
      step_all_reduce();
    }
  }

  // Rank 0 sums the contributions in rank order and sends the sum to every rank: every rank
  // gets the same bits, as NCCL's algorithms give (each element summed once, then copied).
  void step_all_reduce() {
    const int n = elements(), size = comm->size;
    const int contribution = tag_of(number, kContribution), result = tag_of(number, kResult);
    if (phase == 0 && size == 1) {
      std::memmove(out, in, count * sizeof(float));
      phase = kDone;
    } else if (phase == 0 && comm->rank == 0) {
      staged.assign(static_cast<size_t>(size), {});
      for (int q = 1; q < size; ++q) {
        staged[static_cast<size_t>(q)].resize(count);
        post(false, staged[static_cast<size_t>(q)].data(), n, MPI_FLOAT, q, contribution);
      }
      phase = 1;
    } else if (phase == 1 && requests_done()) {
      std::vector<float>& sum = staged[0];
      sum.assign(in, in + count);
      for (int q = 1; q < size; ++q)
        for (size_t i = 0; i < count; ++i) sum[i] += staged[static_cast<size_t>(q)][i];
      std::memcpy(out, sum.data(), count * sizeof(float));
      for (int q = 1; q < size; ++q) post(true, sum.data(), n, MPI_FLOAT, q, result);
      phase = 2;
    } else if (phase == 0) {
      staged.emplace_back(in, in + count);  // `in` may be `out`, which the result overwrites
      post(true, staged.back().data(), n, MPI_FLOAT, 0, contribution);
      post(false, out, n, MPI_FLOAT, 0, result);
      phase = 2;
    } else if (phase == 2 && requests_done()) {
      phase = kDone;
    }
  }

  // At an abort (or a failure): receives are cancelled and completed (MPI_Wait returns for a
  // cancelled request whatever the peer does); sends cannot be cancelled in Open MPI, so they
  // are let go, and what they read is kept for good.
  void abandon() {
    bool let_go = false;
    for (Request& r : requests) {
      if (r.request == MPI_REQUEST_NULL) continue;
      if (r.sending) {
        MPI_Request_free(&r.request);
        let_go = true;
      } else {
        MPI_Cancel(&r.request);
        MPI_Wait(&r.request, MPI_STATUS_IGNORE);
      }
    }
    requests.clear();
    if (let_go) {
      std::lock_guard lock(abandoned_mutex);
      for (auto& s : staged) abandoned().push_back(std::move(s));
    }
    phase = kDone;
  }
};

// Ends an operation's count in its communicator when the task that holds it is destroyed, run
// or not (a faulted GPU drops its tasks unrun).
struct Unfinished {
  std::shared_ptr<CommState> comm;
  ~Unfinished() {
    std::lock_guard lock(comm->mutex);
    --comm->unfinished;
    comm->changed.notify_all();
  }
};

// Starts, advances and ends one running operation's count under its communicator's lock; false
// when its communicator was aborted (the operation then moves nothing more).
bool still_running(Operation& op) {
  std::lock_guard lock(op.comm->mutex);
  if (op.comm->aborted) {
    if (op.running) {
      op.abandon();
      --op.comm->running;
      op.comm->changed.notify_all();
    }
    op.running = false;
    op.phase = Operation::kDone;
    return false;
  }
  if (!op.running && op.phase != Operation::kDone) {
    op.running = true;
    ++op.comm->running;
  }
  return true;
}

void finish(Operation& op) {
  std::lock_guard lock(op.comm->mutex);
  if (op.running) {
    op.abandon();  // nothing is left after success; after a failure, what was in flight
    op.running = false;
    --op.comm->running;
    op.comm->changed.notify_all();
  }
}

// A task's work: all its operations at once (a group's are posted together), polled until
// each is done or aborted. The pause grows to 1 ms: a stream waiting on a peer costs little.
void run(std::vector<Operation>& ops) {
  auto pause = std::chrono::microseconds(0);
  try {
    for (int tries = 0;; ++tries) {
      bool all_done = true;
      for (Operation& op : ops) {
        if (op.phase == Operation::kDone || !still_running(op)) continue;
        op.step();
        if (op.phase == Operation::kDone) finish(op);
        else all_done = false;
      }
      if (all_done) return;
      if (tries < 64) {
        std::this_thread::yield();
      } else {
        pause = std::min(std::chrono::microseconds(1000),
                         std::max(std::chrono::microseconds(20), pause * 2));
        std::this_thread::sleep_for(pause);
      }
    }
  } catch (...) {
    for (Operation& op : ops) finish(op);
    throw;  // the task fails: its GPU faults, naming it (kernels/emu/cudart/streams.cpp)
  }
}

// A call checked and numbered, not yet enqueued (inside a group, until ncclGroupEnd).
struct Issued {
  cudaStream_t stream;
  Operation op;
  std::vector<vendor::Operand> operands;
  const char* call;
};

thread_local int group_depth = 0;
thread_local std::vector<Issued> grouped;

// Enqueues `calls` (one stream's) as one task with the emulation's lock held.
ncclResult_t enqueue(std::vector<Issued> calls) {
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = gpu::stream_of(calls.front().stream, calls.front().call);
  if (!s)
    return fail(ncclUnhandledCudaError, std::string(calls.front().call) + ": its stream: " +
                                            cudaGetErrorString(cudaGetLastError()));
  std::string name;
  std::vector<vendor::Operand> operands;
  auto ops = std::make_shared<std::vector<Operation>>();
  std::vector<std::shared_ptr<Unfinished>> counts;
  for (Issued& c : calls) {
    if (!name.empty()) name += ", ";
    name += c.op.what();
    operands.insert(operands.end(), c.operands.begin(), c.operands.end());
    {
      std::lock_guard comm_lock(c.op.comm->mutex);
      ++c.op.comm->unfinished;
    }
    counts.push_back(std::shared_ptr<Unfinished>(new Unfinished{c.op.comm}));
    ops->push_back(std::move(c.op));
  }
  vendor::enqueue_call(*s, calls.size() == 1 ? name : std::string("a group of ") += name, operands,
                       [ops, counts] { run(*ops); });
  return ncclSuccess;
}

// The checks of every operation at its call, then its number, then its task (or its place in
// the open group).
ncclResult_t issue(const char* call, ncclComm_t comm, cudaStream_t stream, ncclDataType_t type,
                   Operation op, std::vector<vendor::Operand> operands) {
  op.comm = live(comm, call);
  if (!op.comm) return ncclInvalidArgument;
  if (type != ncclFloat)
    return fail(ncclInvalidArgument, std::string(call) + ": datatype " + std::to_string(type) +
                                         " is not emulated (ncclFloat is)");
  if (op.type != Operation::all_reduce && (op.peer < 0 || op.peer >= op.comm->size))
    return fail(ncclInvalidArgument, std::string(call) + ": peer " + std::to_string(op.peer) +
                                         " of a communicator of " +
                                         std::to_string(op.comm->size) + " ranks");
  {
    gpu::Emulation& e = gpu::Emulation::get();
    std::lock_guard lock(e.mutex);
    auto s = gpu::stream_of(stream, call);
    if (!s)
      return fail(ncclUnhandledCudaError,
                  std::string(call) + ": its stream: " + cudaGetErrorString(cudaGetLastError()));
    if (s->gpu->index != op.comm->device)
      return fail(ncclInvalidUsage, std::string(call) + ": the stream belongs to " +
                                        gpu::name_of(*s->gpu) + " and the communicator to cuda:" +
                                        std::to_string(op.comm->device) +
                                        " (the current device at ncclCommInitRank)");
  }
  {
    std::lock_guard lock(op.comm->mutex);
    const auto peer = static_cast<size_t>(op.peer);
    op.number = op.type == Operation::send   ? op.comm->sends[peer]++
                : op.type == Operation::recv ? op.comm->recvs[peer]++
                                             : op.comm->collectives++;
  }
  Issued issued{stream, std::move(op), std::move(operands), call};
  if (group_depth > 0) {
    grouped.push_back(std::move(issued));
    return ncclSuccess;
  }
  std::vector<Issued> one;
  one.push_back(std::move(issued));
  return enqueue(std::move(one));
}

}  // namespace

}  // namespace brigade::emu::nccl

using namespace brigade::emu::nccl;
using brigade::emu::vendor::Operand;

extern "C" {

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue("ncclSend", comm, stream, datatype,
               Operation::make(Operation::send, static_cast<const float*>(sendbuff), nullptr, count, peer),
               {Operand(sendbuff, count * sizeof(float), "sendbuff")});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue("ncclRecv", comm, stream, datatype,
               Operation::make(Operation::recv, nullptr, static_cast<float*>(recvbuff), count, peer),
               {Operand(recvbuff, count * sizeof(float), "recvbuff", /*w=*/true)});
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (op != ncclSum)
    return fail(ncclInvalidArgument,
                "ncclAllReduce: reduction " + std::to_string(op) + " is not emulated (ncclSum is)");
  return issue("ncclAllReduce", comm, stream, datatype,
               Operation::make(Operation::all_reduce, static_cast<const float*>(sendbuff),
                               static_cast<float*>(recvbuff), count, 0),
               {Operand(sendbuff, count * sizeof(float), "sendbuff"),
                Operand(recvbuff, count * sizeof(float), "recvbuff", /*w=*/true)});
}

ncclResult_t ncclGroupStart(void) {
  ++group_depth;
  return ncclSuccess;
}

// The group's operations are enqueued together: one task per stream runs its operations at
// once, so a send and a receive of one group never wait for each other.
ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart is open on this thread");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<Issued> calls = std::move(grouped);
  grouped.clear();
  ncclResult_t result = ncclSuccess;
  while (!calls.empty()) {
    const cudaStream_t stream = calls.front().stream;
    std::vector<Issued> same, rest;
    for (Issued& c : calls) (c.stream == stream ? same : rest).push_back(std::move(c));
    if (const ncclResult_t r = enqueue(std::move(same)); r != ncclSuccess) result = r;
    calls = std::move(rest);
  }
  return result;
}

}  // extern "C"
