// Emulated NCCL (kernels/emu/nccl) through NVIDIA's API, under mpirun with 2 and 3 ranks
// (tests/kernels/emu/nccl/meson.build): data between the emulated GPUs of different ranks, the
// all-reduce against a sum formed on the host, a send holding its stream until its receive is
// posted, a group that pairs a send with a receive, abort, the errors, and the happens-before
// check seeing a receive's buffer. Each rank is its own process with its own emulated GPUs, and
// uses its cuda:0 (cuda:1 is the wrong device of the errors, and the GPU the race faults).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nccl_emulation.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/deadline.h"

using brigade::testing::Deadline;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Every rank of the job in one communicator on its cuda:0, the id made by rank 0 and broadcast:
// NCCL's own recipe.
ncclComm_t everyone(int device = 0) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  ncclUniqueId id{};
  if (world_rank() == 0) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  REQUIRE(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, world_size(), id, world_rank()) == ncclSuccess);
  return comm;
}

cudaStream_t stream_on(int device) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  return s;
}

// Values no other rank or tensor has, and sums that round differently in another order.
std::vector<float> values(int rank, size_t n, float salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = salt + static_cast<float>(rank + 1) / 3.0f + static_cast<float>(i) / 7.0f;
  return v;
}

bool says(const char* text, const std::string& part) { return std::string(text).find(part) != std::string::npos; }

// The emulation says when a send finds no receive posted and starts to wait (nccl_emulation.h):
// only that makes "the stream is busy" mean "held by the send", rather than "not done yet".
// wait() returns the send's name; a send that never waits ends the case at its Deadline.
class SendWaits {
 public:
  SendWaits() {
    brigade::emu::set_nccl_send_waits_hook([this](const char* what) {
      std::lock_guard lock(mutex_);
      what_ = what;
      said_.notify_all();
    });
  }
  ~SendWaits() { brigade::emu::set_nccl_send_waits_hook({}); }
  std::string wait() {
    std::unique_lock lock(mutex_);
    said_.wait(lock, [&] { return !what_.empty(); });
    return what_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable said_;
  std::string what_;
};

// A case's setup: a deadline, every rank in one communicator on its cuda:0 with a stream
// there, and the device buffers it uploads; finish() frees them and destroys both.
struct Job {
  Deadline deadline;
  ncclComm_t comm = everyone();
  cudaStream_t stream = stream_on(0);
  std::vector<float*> buffers;

  explicit Job(const char* name) : deadline(name, std::chrono::seconds(30)) {}

  // `host` copied into new memory of cuda:0, in the stream's order.
  float* upload(const std::vector<float>& host) {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, host.size() * sizeof(float)) == cudaSuccess);
    buffers.push_back(static_cast<float*>(p));
    REQUIRE(cudaMemcpyAsync(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                            stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);  // the pageable source is copied
    return static_cast<float*>(p);
  }
  std::vector<float> download(const float* p, size_t n) const {
    std::vector<float> host(n);
    REQUIRE(cudaMemcpyAsync(host.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost, stream) ==
            cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    return host;
  }
  // `destroy`: false when the case has aborted the communicator itself.
  void finish(bool destroy = true) {
    for (float* p : buffers) REQUIRE(cudaFree(p) == cudaSuccess);
    if (destroy) REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
    REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  }
};

}  // namespace

TEST_CASE("ncclSend / ncclRecv: a round trip between the GPUs of ranks 0 and 1") {
  Job job("round trip");
  const size_t n = 1000;
  const std::vector<float> sent = values(0, n, 0.5f);
  float* buffer = job.upload(world_rank() == 0 ? sent : std::vector<float>(n, -1.0f));
  if (world_rank() == 0) {
    REQUIRE(ncclSend(buffer, n, ncclFloat, 1, job.comm, job.stream) == ncclSuccess);
    REQUIRE(cudaMemsetAsync(buffer, 0, n * sizeof(float), job.stream) == cudaSuccess);
    REQUIRE(ncclRecv(buffer, n, ncclFloat, 1, job.comm, job.stream) == ncclSuccess);
  } else if (world_rank() == 1) {
    REQUIRE(ncclRecv(buffer, n, ncclFloat, 0, job.comm, job.stream) == ncclSuccess);
    REQUIRE(ncclSend(buffer, n, ncclFloat, 0, job.comm, job.stream) == ncclSuccess);
  }
  const std::vector<float> got = job.download(buffer, n);
  if (world_rank() < 2) CHECK(got == sent);
  job.finish();
}

TEST_CASE("a group with a send and a receive completes: to the same peer, and around a ring") {
  Job job("group");
  const int r = world_rank(), n = world_size();
  const size_t count = 300;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  float* mine = job.upload(values(r, count, 2.0f));
  float* theirs = job.upload(std::vector<float>(count, -1.0f));
  // On one stream, a send then a receive without a group would wait for each other on every
  // rank (each send holds the stream until its receive is posted); in a group they are posted
  // together. With 2 ranks right = left: the same peer both ways.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(mine, count, ncclFloat, right, job.comm, job.stream) == ncclSuccess);
  REQUIRE(ncclRecv(theirs, count, ncclFloat, left, job.comm, job.stream) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(job.download(theirs, count) == values(left, count, 2.0f));
  job.finish();
}

TEST_CASE("ncclAllReduce (ncclSum): every rank gets the sum formed on the host, in place or not") {
  Job job("all-reduce");
  const int r = world_rank(), n = world_size();
  const size_t count = 517;
  std::vector<float> sum = values(0, count, 0.25f);  // in rank order: the emulation's order
  for (int q = 1; q < n; ++q) {
    const std::vector<float> v = values(q, count, 0.25f);
    for (size_t i = 0; i < count; ++i) sum[i] += v[i];
  }
  float* in_place = job.upload(values(r, count, 0.25f));
  float* source = job.upload(values(r, count, 0.25f));
  float* result = job.upload(std::vector<float>(count, -1.0f));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(in_place, in_place, count, ncclFloat, ncclSum, job.comm, job.stream) ==
          ncclSuccess);
  REQUIRE(ncclAllReduce(source, result, count, ncclFloat, ncclSum, job.comm, job.stream) ==
          ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(job.download(in_place, count) == sum);
  CHECK(job.download(result, count) == sum);
  CHECK(job.download(source, count) == values(r, count, 0.25f));
  job.finish();
}

TEST_CASE("a send holds its stream until the peer's receive is posted") {
  Job job("a send holds its stream");
  const size_t n = 64;
  float* buffer = job.upload(values(world_rank(), n, 1.0f));
  int go = 0;
  if (world_rank() == 0) {
    SendWaits hook;
    REQUIRE(ncclSend(buffer, n, ncclFloat, 1, job.comm, job.stream) == ncclSuccess);
    CHECK(hook.wait() == "ncclSend to rank 1");
    CHECK(cudaStreamQuery(job.stream) == cudaErrorNotReady);
    CHECK(cudaGetLastError() == cudaErrorNotReady);  // a query's answer is the last error too
    REQUIRE(MPI_Send(&go, 1, MPI_INT, 1, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else if (world_rank() == 1) {
    REQUIRE(MPI_Recv(&go, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    REQUIRE(ncclRecv(buffer, n, ncclFloat, 0, job.comm, job.stream) == ncclSuccess);
  }
  REQUIRE(cudaStreamSynchronize(job.stream) == cudaSuccess);  // rank 0's send is done now
  const std::vector<float> got = job.download(buffer, n);
  if (world_rank() == 1) CHECK(got == values(0, n, 1.0f));
  job.finish();
}

TEST_CASE("two ranks that both send first deadlock, as on GPUs; ncclCommAbort ends the sends") {
  Job job("deadlock and abort");
  const size_t n = 16;
  float* buffer = job.upload(values(world_rank(), n, 3.0f));
  if (world_rank() < 2) {
    // Each rank's send, then its receive, on one stream and not in a group: neither receive is
    // ever posted, because each stream is held by its send.
    SendWaits hook;
    REQUIRE(ncclSend(buffer, n, ncclFloat, 1 - world_rank(), job.comm, job.stream) == ncclSuccess);
    REQUIRE(ncclRecv(buffer, n, ncclFloat, 1 - world_rank(), job.comm, job.stream) == ncclSuccess);
    hook.wait();
  }
  // Both ranks' sends wait for their receives, and neither stream can move.
  REQUIRE(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
  if (world_rank() < 2) {
    CHECK(cudaStreamQuery(job.stream) == cudaErrorNotReady);
    cudaGetLastError();
  }
  REQUIRE(ncclCommAbort(job.comm) == ncclSuccess);
  CHECK(cudaStreamSynchronize(job.stream) == cudaSuccess);  // it runs again, the data unmoved
  CHECK(job.download(buffer, n) == values(world_rank(), n, 3.0f));
  CHECK(ncclSend(buffer, n, ncclFloat, 0, job.comm, job.stream) == ncclInvalidArgument);  // gone
  job.finish(/*destroy=*/false);
  REQUIRE(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
}

TEST_CASE("errors: NCCL's codes, and ncclGetErrorString's text with the emulation's reason") {
  Job job("errors");
  cudaStream_t other_gpu = stream_on(1);
  float* buffer = job.upload(std::vector<float>(8, 1.0f));

  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK(says(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN"));
  CHECK(says(ncclGetErrorString(ncclInvalidUsage), "no ncclGroupStart is open"));
  CHECK(std::string(ncclGetErrorString(ncclSuccess)) == "no error");

  // The communicator belongs to cuda:0, the device current at its init.
  CHECK(ncclSend(buffer, 8, ncclFloat, 0, job.comm, other_gpu) == ncclInvalidUsage);
  CHECK(says(ncclGetErrorString(ncclInvalidUsage), "the stream belongs to emulated cuda:1"));
  CHECK(ncclRecv(buffer, 8, ncclFloat, world_size(), job.comm, job.stream) == ncclInvalidArgument);
  CHECK(says(ncclGetErrorString(ncclInvalidArgument), "peer"));
  CHECK(ncclAllReduce(buffer, buffer, 8, ncclDouble, ncclSum, job.comm, job.stream) ==
        ncclInvalidArgument);
  CHECK(ncclAllReduce(buffer, buffer, 8, ncclFloat, ncclMax, job.comm, job.stream) ==
        ncclInvalidArgument);

  ncclUniqueId forged{};
  ncclComm_t none = nullptr;
  CHECK(ncclCommInitRank(&none, 2, forged, 0) == ncclInvalidArgument);
  CHECK(says(ncclGetErrorString(ncclInvalidArgument), "not made by ncclGetUniqueId"));
  CHECK(ncclCommInitRank(&none, 2, forged, 2) == ncclInvalidArgument);

  // Nothing was enqueued by the refused calls: the communicator is as new, and all-reduces.
  REQUIRE(ncclAllReduce(buffer, buffer, 8, ncclFloat, ncclSum, job.comm, job.stream) == ncclSuccess);
  CHECK(job.download(buffer, 8) == std::vector<float>(8, static_cast<float>(world_size())));
  job.finish();
  CHECK(ncclCommDestroy(job.comm) == ncclInvalidArgument);
  REQUIRE(cudaStreamDestroy(other_gpu) == cudaSuccess);
}

// Last: it faults each rank's cuda:1, and a fault is sticky for the process, as on a GPU.
TEST_CASE("the happens-before check sees NCCL's buffers: an unordered copy of a receive's faults") {
  Deadline deadline("race with ncclRecv", std::chrono::seconds(30));
  ncclComm_t comm = everyone(1);
  cudaStream_t receiving = stream_on(1), copying = stream_on(1);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  void* buffer = nullptr;
  REQUIRE(cudaMalloc(&buffer, 4 * sizeof(float)) == cudaSuccess);
  // A receive (from a peer that never sends) writes the buffer on one stream; another stream
  // reads it with nothing between them: a race, whatever the timing.
  REQUIRE(ncclRecv(buffer, 4, ncclFloat, (world_rank() + 1) % world_size(), comm, receiving) ==
          ncclSuccess);
  float host[4];
  // To pageable memory the copy returns when it is done: here, with the fault it caused.
  CHECK(cudaMemcpyAsync(host, buffer, sizeof host, cudaMemcpyDeviceToHost, copying) ==
        cudaErrorLaunchFailure);
  CHECK(cudaStreamSynchronize(copying) == cudaErrorLaunchFailure);
  const std::string why = cudaGetErrorString(cudaErrorLaunchFailure);
  CHECK_MESSAGE(says(why.c_str(), "a data race"), why);
  CHECK_MESSAGE(says(why.c_str(), "ncclRecv from rank"), why);
  CHECK_MESSAGE(says(why.c_str(), "(recvbuff)"), why);
  REQUIRE(ncclCommAbort(comm) == ncclSuccess);  // the receive, if it started, ends
  REQUIRE(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
}

// Every rank runs every case; the exit status is non-zero on every rank when any rank failed.
int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS ||
      provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI without MPI_THREAD_MULTIPLE\n");
    return 1;
  }
  doctest::Context context(argc, argv);
  if (world_rank() != 0) context.setOption("minimal", true);
  context.setOption("no-colors", true);
  const int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
