#include "pipeline/distributed/mpi_reducer.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

namespace brigade::distributed {

namespace {

template <typename T>
void all_reduce_sum(FaultLine& faults, MPI_Comm comm, const std::shared_ptr<std::vector<T>>& values,
                    MPI_Datatype type, std::chrono::milliseconds timeout, const std::string& what) {
  const size_t count = values->size();
  for (size_t start = 0; start < count;) {
    const int slice = static_cast<int>(std::min<size_t>(count - start, INT_MAX));
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values->data() + start, slice, type, MPI_SUM,
                                     comm, &request));
    // A collective cannot be cancelled: after a RankFailed or a timeout, which end the job,
    // the values stay MPI's (poll.h).
    wait_for_request(faults, request, values, timeout, [&] { return what; });
    start += static_cast<size_t>(slice);
  }
}

}  // namespace

void all_reduce_sum(FaultLine& faults, MPI_Comm comm,
                    const std::shared_ptr<std::vector<float>>& values,
                    std::chrono::milliseconds timeout, const std::string& what) {
  all_reduce_sum(faults, comm, values, MPI_FLOAT, timeout, what);
}

void all_reduce_sum(FaultLine& faults, MPI_Comm comm,
                    const std::shared_ptr<std::vector<double>>& values,
                    std::chrono::milliseconds timeout, const std::string& what) {
  all_reduce_sum(faults, comm, values, MPI_DOUBLE, timeout, what);
}

MpiReducer::MpiReducer(const MpiSession& session, MPI_Comm replicas,
                       std::chrono::milliseconds timeout)
    : faults_(session.faults()), comm_(replicas), timeout_(timeout) {}

void MpiReducer::sum(const std::vector<Tensor>& tensors, const Stream& stream) {
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRIGADE_CHECK(t.defined() && t.device().is_cpu() && t.dtype() == DType::float32,
                  "MpiReducer: tensor " << i << " (" << (t.defined() ? t.str() : "undefined")
                                        << ") is not a float32 CPU tensor; GPU gradients "
                                           "go through an NcclReducer");
    total += static_cast<size_t>(t.numel());
  }
  stream.synchronize();  // the gradients are written (and the stream's failure, if any, thrown)
  // The same buffer each round, but after a round given up on: that one stays MPI's (poll.h).
  if (!buffer_ || buffer_.use_count() > 1) buffer_ = std::make_shared<std::vector<float>>();
  buffer_->resize(total);
  size_t at = 0;
  for (const Tensor& t : tensors) {
    std::memcpy(buffer_->data() + at, t.data<float>(), t.nbytes());
    at += static_cast<size_t>(t.numel());
  }
  // Same bits on every replica. MPI_SUM over float is commutative but not associative, so
  // what matters is that every element's sum is formed ONCE and copied, or formed by the
  // same pairings everywhere. OpenMPI's all-reduce algorithms do one or the other: ring and
  // Rabenseifner reduce each segment on one rank and then all-gather it (a copy);
  // recursive doubling has ranks r and r^k combine x_r + x_{r^k} and x_{r^k} + x_r, which
  // are equal bit for bit (IEEE addition is commutative), level by level; the choice of
  // algorithm depends only on the message size and the communicator's size, which every
  // replica shares. tests/pipeline/distributed/reducer_test.cpp checks the bits on 2, 3 and 4 ranks.
  all_reduce_sum(faults_, comm_, buffer_, timeout_,
                 "MpiReducer: the all-reduce of " + std::to_string(total) +
                     " gradient values across the stage's replicas");
  at = 0;
  for (const Tensor& t : tensors) {
    std::memcpy(t.data<float>(), buffer_->data() + at, t.nbytes());
    at += static_cast<size_t>(t.numel());
  }
}

}  // namespace brigade::distributed
