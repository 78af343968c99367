// One emulated NCCL operation (a send, a receive, an all-reduce) as the task of its stream runs
// it: a few MPI requests on the communicator's MPI communicator, advanced by step() until done.
// Internal to kernels/emu/nccl/; operations.cpp makes them at the calls and runs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/emu/nccl/nccl_internal.h"

namespace brigade::emu::nccl {

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
  bool said_it_waits = false;  // a send's set_nccl_send_waits_hook call (nccl_emulation.h)

  static Operation make(Type type, const float* in, float* out, size_t count, int peer);
  std::string what() const;  // "ncclSend to rank 1", "ncclAllReduce over 3 ranks"
  // Posts or tests this operation's next MPI messages; `phase` is kDone when it is complete.
  // Throws when MPI fails, or a receive brings another count than this operation's.
  void step();
  // At an abort or a failure: ends what is in flight (operation.cpp says how); `phase` becomes
  // kDone.
  void abandon();

 private:
  void post(bool sending, const void* buffer, int n, MPI_Datatype type, int to, int tag);
  int elements() const { return static_cast<int>(count); }
  bool requests_done();
  void step_all_reduce();
};

}  // namespace brigade::emu::nccl
