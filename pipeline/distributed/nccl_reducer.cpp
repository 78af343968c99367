#include "pipeline/distributed/nccl_reducer.h"

#include <cuda_runtime_api.h>

namespace brigade::distributed {

NcclReducer::NcclReducer(MPI_Comm replicas, Device gpu) : nccl_(replicas, gpu) {}

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
