// The CUDA half of device.cpp: asking the driver how many GPUs there are, without
// crashing when there is no GPU or no driver at all.
#include <cuda_runtime_api.h>

#include <string>

namespace brigade::detail {

int probe_cuda_devices(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    *why = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    (void)cudaGetLastError();  // clear the error so that later calls do not report it
    return 0;
  }
  if (count == 0) *why = "the CUDA driver reports 0 devices";
  return count;
}

}  // namespace brigade::detail
