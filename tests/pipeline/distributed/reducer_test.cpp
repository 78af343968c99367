// MpiReducer across every rank of the job (2, 3 and 4 ranks): the sums against sums computed
// here from every rank's known inputs, and the same bits on every rank. Also the layout of
// make_topology, and wait_for_request's buffers after a wait that throws (poll.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/distributed/mpi_reducer.h"
#include "tests/pipeline/distributed/mpi_test.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"

using namespace brigade;
using namespace brigade::distributed;

namespace {

// Rank r's element i of tensor k: exact (small multiples of 1/8, so every order of
// summation gives the same float) or "random" (a hash; sums depend on the order).
float input(int rank, int k, int64_t i, bool exact) {
  if (exact) return static_cast<float>((rank + 1) * (k + 1)) * 0.125f * static_cast<float>(i % 7 - 3);
  uint32_t h = static_cast<uint32_t>(rank * 7919 + k * 104729) ^ static_cast<uint32_t>(i * 2654435761u);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return static_cast<float>(h % 20001) / 1000.0f - 10.0f;  // in [-10, 10]
}

const std::vector<Shape> shapes = {Shape{3, 4}, Shape{7}, Shape{2, 3, 5, 5}, Shape{}};

std::vector<Tensor> inputs_of(int rank, bool exact, const Stream& stream) {
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < shapes.size(); ++k) {
    std::vector<float> v(static_cast<size_t>(shapes[k].numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = input(rank, static_cast<int>(k), static_cast<int64_t>(i), exact);
    tensors.push_back(Tensor::from_vector(v, shapes[k], stream));
  }
  return tensors;
}

// The sum of every rank's input, added in rank order in double.
std::vector<double> local_sum(int ranks, int k, bool exact) {
  std::vector<double> sum(static_cast<size_t>(shapes[static_cast<size_t>(k)].numel()), 0.0);
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += input(r, k, static_cast<int64_t>(i), exact);
  return sum;
}

// True on every rank iff every rank holds exactly these bytes.
bool same_bits_everywhere(const std::vector<float>& values) {
  MpiSession& session = testing::mpi_session();
  std::vector<float> all(values.size() * static_cast<size_t>(session.size()));
  BRIGADE_MPI_CHECK(MPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_FLOAT,
                                  all.data(), static_cast<int>(values.size()), MPI_FLOAT,
                                  MPI_COMM_WORLD));
  for (int r = 0; r < session.size(); ++r)
    if (std::memcmp(all.data() + values.size() * static_cast<size_t>(r), values.data(),
                    values.size() * sizeof(float)) != 0)
      return false;
  return true;
}

void check_sums(bool exact) {
  MpiSession& session = testing::mpi_session();
  Stream stream = Stream::create(Device::cpu(0));
  std::vector<Tensor> tensors = inputs_of(session.rank(), exact, stream);
  MpiReducer reducer(session, MPI_COMM_WORLD);
  reducer.sum(tensors, stream);
  std::vector<float> everything;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<float> got = tensors[k].to_vector();
    const std::vector<double> want = local_sum(session.size(), static_cast<int>(k), exact);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (exact) {
        CHECK(got[i] == static_cast<float>(want[i]));
      } else {
        // float sums of up to 4 values in [-10, 10]: a few ulps of 40 at most
        CHECK(std::abs(got[i] - want[i]) <= 1e-5 * 40);
      }
    }
    everything.insert(everything.end(), got.begin(), got.end());
  }
  CHECK(same_bits_everywhere(everything));
}

}  // namespace

TEST_CASE("MpiReducer: exactly representable inputs sum to the exact sum on every rank") {
  testing::Deadline deadline("MpiReducer exact", std::chrono::seconds(60));
  check_sums(true);
}

TEST_CASE("MpiReducer: arbitrary inputs, the local sum within rounding, the same bits everywhere") {
  testing::Deadline deadline("MpiReducer rounding", std::chrono::seconds(60));
  check_sums(false);
}

TEST_CASE("MpiReducer: waits for the stream that writes the gradients") {
  testing::Deadline deadline("MpiReducer stream order", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  Stream stream = Stream::create(Device::cpu(0));
  Tensor g = Tensor::zeros(Shape{1000}, stream);
  // Written by a task on `stream` (not yet run when sum() is called, perhaps): sum must see it.
  stream.enqueue([g, r = session.rank()] {
    float* p = g.data<float>();
    for (int i = 0; i < 1000; ++i) p[i] = static_cast<float>(r + i);
  });
  MpiReducer reducer(session, MPI_COMM_WORLD);
  reducer.sum({g}, stream);
  const int n = session.size();
  const std::vector<float> got = g.to_vector();
  for (int i = 0; i < 1000; ++i)
    CHECK(got[static_cast<size_t>(i)] == static_cast<float>(n * (n - 1) / 2 + n * i));
}

TEST_CASE("MpiReducer: a GPU or undefined tensor is refused, naming it") {
  MpiSession& session = testing::mpi_session();
  MpiReducer reducer(session, MPI_COMM_WORLD);
  CHECK(testing::error_text<Error>([&] {
          reducer.sum({Tensor::zeros(Shape{2}, Device::cpu(0)), Tensor()},
                      Stream::default_for(Device::cpu(0)));
        }) == "MpiReducer: tensor 1 (undefined) is not a float32 CPU tensor; GPU gradients go "
              "through an NcclReducer");
}

// Rank 1 has heard a failure, so its wait for an all-reduce throws before the others join;
// they join later, and MPI completes rank 1's part of the call during its later MPI calls,
// writing the sum into rank 1's buffers: kept for MPI, not freed with the wait's caller.
TEST_CASE("wait_for_request: a wait that throws leaves the call's buffers to MPI, which fills them") {
  testing::Deadline deadline("wait_for_request", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  const int n = session.size(), r = session.rank();
  FaultLine line(r, n);
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const Communicator comm(dup);
  auto words = std::make_shared<std::vector<int>>(std::vector<int>{r + 1, 0});  // {mine, sum}
  const std::shared_ptr<std::vector<int>> watched = words;
  MPI_Request request = MPI_REQUEST_NULL;
  const auto what = [] { return std::string("a test's all-reduce"); };
  if (r == 1) {
    line.hear(1, "a test's failure");
    MPI_Iallreduce(&(*words)[0], &(*words)[1], 1, MPI_INT, MPI_SUM, comm.get(), &request);
    const size_t kept_before = kept_request_buffers();
    CHECK_THROWS_AS(
        wait_for_request(line, request, std::move(words), std::chrono::seconds(30), what),
        RankFailed);
    CHECK(kept_request_buffers() == kept_before + 1);
    CHECK(watched.use_count() == 2);  // here and among the kept
    MPI_Barrier(MPI_COMM_WORLD);  // the others join now
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((*watched)[1] == 0 && std::chrono::steady_clock::now() < until) {
      int flag = 0;  // any MPI call progresses the call left running
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm.get(), &flag, MPI_STATUS_IGNORE);
    }
  } else {
    MPI_Barrier(MPI_COMM_WORLD);  // after rank 1 gave up
    MPI_Iallreduce(&(*words)[0], &(*words)[1], 1, MPI_INT, MPI_SUM, comm.get(), &request);
    wait_for_request(line, request, words, std::chrono::seconds(30), what);
  }
  CHECK((*watched)[1] == n * (n + 1) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("make_topology: replicas of a pipeline of consecutive ranks") {
  MpiSession& session = testing::mpi_session();
  const int n = session.size(), r = session.rank();
  for (int p = 1; p <= n; ++p) {
    if (n % p != 0) {
      CHECK(testing::error_text<Error>([&] { make_topology(session, p); }) ==
            "cannot lay " + std::to_string(n) + " ranks out as pipelines of " +
                std::to_string(p) +
                " stages: the number of ranks (mpirun -np) must be the number of stages "
                "times the number of replicas");
      continue;
    }
    Topology t = make_topology(session, p);
    CHECK(t.stages == p);
    CHECK(t.replicas == n / p);
    CHECK(t.replica == r / p);
    CHECK(t.position == r % p);
    CHECK(t.pipeline.size() == p);
    CHECK(t.pipeline.rank() == r % p);
    CHECK(t.stage_replicas.size() == n / p);
    CHECK(t.stage_replicas.rank() == r / p);
    // The replicas' communicator holds the ranks at my position: sum their world ranks.
    int world = r, sum = 0;
    BRIGADE_MPI_CHECK(MPI_Allreduce(&world, &sum, 1, MPI_INT, MPI_SUM, t.stage_replicas.get()));
    int want = 0;
    for (int d = 0; d < n / p; ++d) want += d * p + r % p;
    CHECK(sum == want);
  }
}
