// One emulated NCCL operation's MPI messages, as the task of its stream runs it (operation.h).
#include "kernels/emu/nccl/operation.h"

#include "kernels/emu/nccl/include/nccl_emulation.h"

#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>

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

std::mutex hook_mutex;
std::function<void(const char*)>& send_waits_hook() {  // under hook_mutex
  static auto* hook = new std::function<void(const char*)>();  // never freed: workers outlive main
  return *hook;
}

}  // namespace

Operation Operation::make(Type type, const float* in, float* out, size_t count, int peer) {
  Operation op;
  op.type = type;
  op.in = in;
  op.out = out;
  op.count = count;
  op.peer = peer;
  return op;
}

std::string Operation::what() const {  // "ncclSend to rank 1", "ncclAllReduce over 3 ranks"
  static const char* names[] = {"ncclSend to rank ", "ncclRecv from rank ",
                                "ncclAllReduce over "};
  std::string text = names[type];
  text += std::to_string(type == all_reduce ? comm->size : peer);
  if (type == all_reduce) text += " ranks";
  return text;
}

void Operation::post(bool sending, const void* buffer, int n, MPI_Datatype type, int to, int tag) {
  Request r{MPI_REQUEST_NULL, sending};
  check_mpi(sending ? MPI_Isend(buffer, n, type, to, tag, comm->mpi, &r.request)
                    : MPI_Irecv(const_cast<void*>(buffer), n, type, to, tag, comm->mpi, &r.request),
            what() + (sending ? ": MPI_Isend" : ": MPI_Irecv"));
  requests.push_back(r);
}

// True when every request has completed; a receive that brought another count than this
// operation's is an error (on a GPU, a mismatched pair is silent corruption).
bool Operation::requests_done() {
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

void Operation::step() {
  const int n = elements();
  if (phase == 0 && n == 0 && type != all_reduce) {
    phase = kDone;  // NCCL ignores an empty send or receive
    return;
  }
  if (type == send) {
    if (phase == 0) {  // wait for the receiver: a send holds its stream until then
      post(false, &clear_to_send, 1, MPI_INT, peer, tag_of(number, kClearToSend));
      phase = 1;
    } else if (phase == 1 && !requests_done()) {
      if (!said_it_waits) {  // the receiver has not posted its receive: tell a test
        said_it_waits = true;
        std::function<void(const char*)> hook;
        {
          std::lock_guard lock(hook_mutex);
          hook = send_waits_hook();
        }
        if (hook) hook(what().c_str());
      }
    } else if (phase == 1) {
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
void Operation::step_all_reduce() {
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
void Operation::abandon() {
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

}  // namespace brigade::emu::nccl

void brigade::emu::set_nccl_send_waits_hook(std::function<void(const char* what)> hook) {
  std::lock_guard lock(brigade::emu::nccl::hook_mutex);
  brigade::emu::nccl::send_waits_hook() = std::move(hook);
}
