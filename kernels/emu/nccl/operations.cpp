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

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/nccl/nccl_internal.h"
#include "kernels/emu/nccl/operation.h"
#include "kernels/emu/vendor/library.h"

namespace brigade::emu::nccl {

namespace {

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
// each is done or aborted. The pause grows to 1 ms while nothing moves (a stream waiting on a
// peer costs little), and starts again from none when something does.
void run(std::vector<Operation>& ops) {
  auto pause = std::chrono::microseconds(0);
  try {
    for (int tries = 0;; ++tries) {
      bool all_done = true;
      for (Operation& op : ops) {
        if (op.phase == Operation::kDone || !still_running(op)) continue;
        const int before = op.phase;
        op.step();
        if (op.phase != before) {  // it moved: poll again at once
          tries = 0;
          pause = std::chrono::microseconds(0);
        }
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
    if (s->capture)  // its replay would repeat the operations' numbers: refused, never run eagerly
      return fail(ncclInvalidUsage, std::string(call) + ": " + *s->name +
                                        " is capturing, and the emulation does not capture NCCL");
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
  brigade::emu::gpu::count_call("ncclSend");
  return issue("ncclSend", comm, stream, datatype,
               Operation::make(Operation::send, static_cast<const float*>(sendbuff), nullptr, count, peer),
               {Operand(sendbuff, count * sizeof(float), "sendbuff")});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  brigade::emu::gpu::count_call("ncclRecv");
  return issue("ncclRecv", comm, stream, datatype,
               Operation::make(Operation::recv, nullptr, static_cast<float*>(recvbuff), count, peer),
               {Operand(recvbuff, count * sizeof(float), "recvbuff", /*w=*/true)});
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  brigade::emu::gpu::count_call("ncclAllReduce");
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
  brigade::emu::gpu::count_call("ncclGroupStart");
  ++group_depth;
  return ncclSuccess;
}

// The group's operations are enqueued together: one task per stream runs its operations at
// once, so a send and a receive of one group never wait for each other.
ncclResult_t ncclGroupEnd(void) {
  brigade::emu::gpu::count_call("ncclGroupEnd");
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
