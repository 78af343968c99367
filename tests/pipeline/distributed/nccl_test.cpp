// NcclLink and NcclReducer between ranks with one GPU each (CUDA builds with NCCL; run by
// tools/gpu-check.sh under `mpirun -np 2`). NCCL does not support two ranks of a communicator
// on one GPU, so with fewer GPUs than ranks the program is skipped (mpi_main.cpp, built with
// BRIGADE_MPI_TEST_NEEDS_A_GPU_PER_RANK for this test).
#include <doctest/doctest.h>

#include <functional>
#include <vector>

#include "pipeline/distributed/nccl_link.h"
#include "pipeline/distributed/nccl_reducer.h"
#include "tests/pipeline/distributed/mpi_test.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::distributed;
using brigade::pipeline::Message;

namespace {

Shape shape_of(int mb, int m) { return Shape{mb == m - 1 ? 2 : 3, 1000}; }
std::vector<float> values_of(int from, int mb, const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(from * 100 + mb) + static_cast<float>(i) / 8;
  return v;
}

// Fills a stretch of this thread's stack with a pattern, runs `meanwhile` (MPI calls, which
// progress any call still running), and returns how many bytes of the stretch changed: the
// frames of functions that returned just before lie inside it, and nothing may write there.
[[gnu::noinline]] int stack_bytes_written_during(const std::function<void()>& meanwhile) {
  volatile unsigned char stretch[64 * 1024];
  for (auto& b : stretch) b = 0xA5;
  meanwhile();
  int changed = 0;
  for (const auto& b : stretch) changed += b != 0xA5;
  return changed;
}

}  // namespace

TEST_CASE("NcclLink: two ranks send to each other first, then receive in reverse order") {
  testing::Deadline deadline("NcclLink exchange", std::chrono::seconds(120));
  MpiSession& session = testing::mpi_session();
  const int r = session.rank(), m = 4;
  if (r < 2) {
    const int peer = 1 - r;
    const Device gpu = Device::cuda(r);
    // Link 0 carries 0 -> 1, link 1 carries 1 -> 0; both ranks make them in that order.
    NcclLink zero("activations 0->1", session, MPI_COMM_WORLD, peer, 0, m, gpu, r == 0);
    NcclLink one("gradients 1->0", session, MPI_COMM_WORLD, peer, 1, m, gpu, r == 1);
    NcclLink& out = r == 0 ? zero : one;
    NcclLink& in = r == 0 ? one : zero;
    Stream stream = Stream::create(gpu);
    // Every message is made before the first is sent, and kept: a tensor freed while its send
    // waits for the peer's receive is the block the next from_vector takes, so that copy waits
    // for the send, and from_vector's host synchronisation with it; the peer does the same,
    // and neither reaches its receives (on GPUs as on emulated ones, which found it).
    std::vector<Message> sent;
    for (int mb = 0; mb < m; ++mb) {
      sent.push_back({Tensor::from_vector(values_of(r, mb, shape_of(mb, m)), shape_of(mb, m), stream),
                      Event()});
      sent.back().ready.record(stream);
    }
    for (int mb = 0; mb < m; ++mb) out.send(mb, sent[static_cast<size_t>(mb)]);
    for (int mb = m - 1; mb >= 0; --mb) {
      Message got = in.receive(mb);
      REQUIRE(got.ready.recorded());
      got.ready.synchronize();
      CHECK(got.tensor.device() == gpu);
      CHECK(got.tensor.shape() == shape_of(mb, m));
      CHECK(got.tensor.to_vector() == values_of(peer, mb, shape_of(mb, m)));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("NcclReducer: the exact sum of every rank's gradients, on every rank") {
  testing::Deadline deadline("NcclReducer", std::chrono::seconds(120));
  MpiSession& session = testing::mpi_session();
  const int r = session.rank(), n = session.size();
  const Device gpu = Device::cuda(r);
  Stream stream = Stream::create(gpu);
  std::vector<Tensor> grads;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v(static_cast<size_t>(100 * (k + 1)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * (k + 1)) * 0.25f * static_cast<float>(i % 5);
    grads.push_back(Tensor::from_vector(v, Shape{static_cast<int64_t>(v.size())}, stream));
  }
  NcclReducer reducer(session.faults(), MPI_COMM_WORLD, gpu);
  reducer.sum(grads, stream);
  stream.synchronize();
  for (int k = 0; k < 3; ++k) {
    const std::vector<float> got = grads[static_cast<size_t>(k)].to_vector();
    for (size_t i = 0; i < got.size(); ++i)  // sum over ranks q of (q+1)(k+1)/4 (i mod 5): exact
      CHECK(got[i] == static_cast<float>(n * (n + 1) / 2 * (k + 1)) * 0.25f * static_cast<float>(i % 5));
  }
}

// A replica whose step failed gives its word in abandon() instead of summing: no replica
// enqueues an ncclAllReduce that would wait on the GPU forever for it, and each throws the
// failed rank's notice. Without the agreement the others' streams hang in the all-reduce (the
// Deadline names it).
TEST_CASE("NcclReducer: a replica that abandons the round stops every sum, with its cause") {
  testing::Deadline deadline("NcclReducer's abandoned round", std::chrono::seconds(120));
  MpiSession& session = testing::mpi_session();
  const int r = session.rank();
  const Device gpu = Device::cuda(r);
  Stream stream = Stream::create(gpu);
  // A line of its own (the session's must stay clean for the other tests of this process).
  FaultLine line(r, session.size());
  const std::vector<float> mine(64, static_cast<float>(r + 1));
  const std::vector<Tensor> grads = {Tensor::from_vector(mine, Shape{64}, stream)};
  NcclReducer reducer(line, MPI_COMM_WORLD, gpu);
  if (r == 1) {
    reducer.abandon("its NaN check failed");
    line.notify("non-finite value in stage 0 (a test's failure)");
  } else {
    CHECK_THROWS_WITH_AS(reducer.sum(grads, stream),
                         "rank 1 failed: non-finite value in stage 0 (a test's failure)",
                         RankFailed);
    stream.synchronize();
    CHECK(grads[0].to_vector() == mine);  // nothing was summed
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The replica that failed has usually heard its own failure already (its link reported it,
// faults.h) when it abandons the round: its wait for the replicas' word throws at once, while
// the word's MPI_Iallreduce runs on, to complete when the other replica joins. MPI then writes
// the word into memory of the abandoning rank — once its stack, so the int landed in whatever
// frame lay there by then (a saved register of a failing rank's unwinding: a crash instead of
// the job's message). It must land in memory kept for it (poll.h, wait_for_request).
TEST_CASE("NcclReducer: a replica that abandons after hearing its own failure leaves its stack alone") {
  testing::Deadline deadline("NcclReducer's abandoned round", std::chrono::seconds(120));
  MpiSession& session = testing::mpi_session();
  const int r = session.rank();
  const Device gpu = Device::cuda(r);
  Stream stream = Stream::create(gpu);
  FaultLine line(r, session.size());
  const std::vector<Tensor> grads = {Tensor::from_vector(std::vector<float>(64, 1.0f), Shape{64},
                                                         stream)};
  NcclReducer reducer(line, MPI_COMM_WORLD, gpu);
  if (r == 1) {
    line.hear(1, "non-finite value in stage 0 (a test's failure)");  // as its link does
    const size_t kept_before = kept_request_buffers();
    reducer.abandon("its NaN check failed");
    CHECK(kept_request_buffers() == kept_before + 1);  // the word's call still runs
    const int written = stack_bytes_written_during([&] {
      const int go = 1;  // only now may replica 0 join the word's call
      MPI_Send(&go, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
      line.notify("non-finite value in stage 0 (a test's failure)");
      MPI_Barrier(MPI_COMM_WORLD);  // MPI completes the word's call here, or before
    });
    CHECK(written == 0);
  } else {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_THROWS_AS(reducer.sum(grads, stream), RankFailed);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
