#include "pipeline/distributed/nccl_reducer.h"

#include <cuda_runtime_api.h>

#include <array>
#include <memory>

namespace brigade::distributed {

namespace {
MPI_Comm duplicate(MPI_Comm comm) {
  MPI_Comm copy = MPI_COMM_NULL;
  BRIGADE_MPI_CHECK(MPI_Comm_dup(comm, &copy));
  return copy;
}
}  // namespace

NcclReducer::NcclReducer(FaultLine& faults, MPI_Comm replicas, Device gpu,
                         std::chrono::milliseconds timeout)
    : faults_(faults),
      agreement_(duplicate(replicas)),
      timeout_(timeout),
      nccl_(replicas, gpu) {
  BRIGADE_MPI_CHECK(MPI_Comm_rank(replicas, &replica_));
  BRIGADE_MPI_CHECK(MPI_Comm_size(replicas, &replicas_));
}

int NcclReducer::agree(bool abandoning) {
  // {this replica's word, the least word}: on the heap, kept if the wait throws (poll.h).
  const auto words = std::make_shared<std::array<int, 2>>();
  (*words)[0] = abandoning ? replica_ : replicas_;
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(&(*words)[0], &(*words)[1], 1, MPI_INT, MPI_MIN,
                                   agreement_.get(), &request));
  wait_for_request(faults_, request, words, timeout_, [] {
    return std::string("NcclReducer: the replicas' word on their gradients' sum");
  });
  const int first = (*words)[1];
  return first < replicas_ ? first : -1;
}

void NcclReducer::abandon(const std::string& /*why: the failing rank's own report says it*/) {
  try {
    agree(true);
  } catch (const std::exception&) {
    // Another rank's failure was heard first: the job is ending, and this step's own failure
    // is what the caller goes on to report.
  }
}

void NcclReducer::sum(const std::vector<Tensor>& tensors, const Stream& stream) {
  const Device& gpu = nccl_.device();
  BRIGADE_CHECK(stream.device() == gpu, "NcclReducer: the stream is on " << stream.device()
                                                                         << ", the replicas' "
                                                                            "communicator on "
                                                                         << gpu);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRIGADE_CHECK(t.defined() && t.device() == gpu && t.dtype() == DType::float32,
                  "NcclReducer: tensor " << i << " (" << (t.defined() ? t.str() : "undefined")
                                         << ") is not a float32 tensor on " << gpu);
  }
  if (const int failed = agree(false); failed >= 0) {
    // That replica's rank is ending the job and notifies every rank with its cause: wait for
    // the notice (poll_until throws it as RankFailed) rather than invent a cause here.
    poll_until(faults_, [] { return false; }, [] { return false; }, timeout_, [&] {
      return "NcclReducer: replica " + std::to_string(failed) +
             "'s step failed; waiting for its rank's fault notice";
    });
  }
  BRIGADE_CUDA_CHECK(cudaSetDevice(gpu.index));
  BRIGADE_NCCL_RANK_CHECK(ncclGroupStart());
  for (const Tensor& t : tensors) {
    float* data = t.data<float>();
    // In place; after the work enqueued on `stream` before this call, which wrote them.
    const ncclResult_t status = ncclAllReduce(data, data, static_cast<size_t>(t.numel()),
                                              ncclFloat, ncclSum, nccl_.get(),
                                              stream.cuda_handle());
    if (status != ncclSuccess) {
      ncclGroupEnd();  // close the group before reporting
      BRIGADE_NCCL_RANK_CHECK(status);
    }
  }
  BRIGADE_NCCL_RANK_CHECK(ncclGroupEnd());
}

}  // namespace brigade::distributed
