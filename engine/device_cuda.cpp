// The CUDA half of device.cpp: asking the driver how many GPUs there are, without
// crashing when there is no GPU or no driver at all, and each one's compute capability.
#include <cuda_runtime_api.h>

#include <string>

#include "engine/device.h"
#include "engine/error.h"

namespace brigade::detail {

bool cuda_enable_peer_access(int from, int to) {
  int can = 0;
  BRIGADE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (can == 0) return false;
  BRIGADE_CUDA_CHECK(cudaSetDevice(from));  // access is granted to the current device
  const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // enabled before (by another part of the program): fine
    return true;
  }
  BRIGADE_CUDA_CHECK(status);
  return true;
}

ComputeCapability cuda_compute_capability(int index) {
  ComputeCapability capability;
  BRIGADE_CUDA_CHECK(
      cudaDeviceGetAttribute(&capability.major, cudaDevAttrComputeCapabilityMajor, index));
  BRIGADE_CUDA_CHECK(
      cudaDeviceGetAttribute(&capability.minor, cudaDevAttrComputeCapabilityMinor, index));
  return capability;
}

int probe_cuda_devices(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // The name and the runtime's words ("cudaErrorInsufficientDriver: CUDA driver version is
    // insufficient for CUDA runtime version"; on emulated GPUs, the variable set wrong).
    *why = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    (void)cudaGetLastError();  // clear the error so that later calls do not report it
    return 0;
  }
  if (count == 0) *why = "the CUDA driver reports 0 devices";
  return count;
}

}  // namespace brigade::detail
