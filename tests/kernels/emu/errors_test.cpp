// Misuse the emulator must report, loudly and without hanging: divergent barriers and
// shuffles (which hang or corrupt on a GPU), invalid launch shapes, and launches on a
// stream of the wrong kind.
#include <doctest/doctest.h>

#include <string>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/emu/emu.h"
#include "tests/support/deadline.h"

using brigade::Device;
using brigade::Stream;
using brigade::testing::Deadline;

namespace brigade::emu::error_kernels {

// Only the first 16 threads reach the barrier: the rest return and never arrive.
__global__ void barrier_in_branch_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  }
}

// Every thread reaches *a* barrier, but two different ones.
__global__ void two_barriers_kernel(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Half a warp shuffles with a full mask; the other half has returned.
__global__ void half_warp_shuffle_kernel(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1, 1);
}

// A mask that leaves out lanes the warp has.
__global__ void partial_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1, 1);
}

__global__ void empty_kernel(int* out) { out[0] = 0; }

// Thread (2,1,0) of block (1,0,0) fails a check, the others finish or wait at the barrier.
__global__ void failing_kernel(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 2 && threadIdx.y == 1)
    BRIGADE_CHECK(out[0] > 0, "out[0] = " << out[0] << " is not positive");
  __syncthreads();
}

// Device-side launches (dynamic parallelism) are not emulated.
__global__ void nested_launch_kernel(int* out) {
  if (threadIdx.x == 0) run_kernel("empty_kernel", 1, 1, 0, empty_kernel, out);
}

}  // namespace brigade::emu::error_kernels

namespace ek = brigade::emu::error_kernels;

TEST_CASE("a __syncthreads() that part of the block skips is reported, not a hang") {
  Deadline deadline("divergent __syncthreads must not hang");
  int out[64] = {};
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("barrier_in_branch_kernel", 2, 64, 0, ek::barrier_in_branch_kernel,
                               out),
      doctest::Contains("barrier_in_branch_kernel, block (0,0,0) of 64 threads cannot make progress"),
      brigade::Error);
  try {
    brigade::emu::run_kernel("barrier_in_branch_kernel", 1, 64, 0, ek::barrier_in_branch_kernel,
                             out);
  } catch (const brigade::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("threads 0-15 (linear index): wait at __syncthreads() (") !=
          std::string::npos);
    CHECK(message.find("errors_test.cpp:") != std::string::npos);
    CHECK(message.find("threads 16-63 (linear index): have returned from the kernel") !=
          std::string::npos);
  }
}

TEST_CASE("threads at two different __syncthreads() are a divergent barrier") {
  Deadline deadline("two barriers");
  int out[32] = {};
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("two_barriers_kernel", 1, 32, 0, ek::two_barriers_kernel, out),
      doctest::Contains("divergent __syncthreads(): thread (0,0,0) is at"), brigade::Error);
}

TEST_CASE("shuffles must be reached by, and name, every lane of the warp") {
  Deadline deadline("divergent shuffles");
  int out[32] = {};
  CHECK_THROWS_WITH_AS(brigade::emu::run_kernel("half_warp_shuffle_kernel", 1, 32, 0,
                                                ek::half_warp_shuffle_kernel, out),
                       doctest::Contains("threads 0-15 (linear index): wait at a warp shuffle"),
                       brigade::Error);
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("partial_mask_kernel", 1, 32, 0, ek::partial_mask_kernel, out),
      doctest::Contains("shuffle mask 0xffff leaves out lanes of warp 0"), brigade::Error);
}

TEST_CASE("an exception inside a kernel is reported with its kernel, block and thread") {
  Deadline deadline("failing kernel");
  int out[1] = {0};
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("failing_kernel", 2, brigade::emu::dim3(4, 2), 0,
                               ek::failing_kernel, out),
      "CUDA emulator: kernel failing_kernel, block (1,0,0), thread (2,1,0): out[0] = 0 is not "
      "positive",
      brigade::Error);
}

TEST_CASE("a launch from inside a kernel is refused") {
  Deadline deadline("nested launch");
  int out[1] = {};
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("nested_launch_kernel", 1, 32, 0, ek::nested_launch_kernel, out),
      doctest::Contains("kernel empty_kernel run from inside kernel nested_launch_kernel"),
      brigade::Error);
}

TEST_CASE("invalid launch shapes are rejected at the launch, naming the kernel and shape") {
  int out[1] = {};
  using brigade::emu::dim3;
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("empty_kernel", 1, 1025, 0, ek::empty_kernel, out),
      doctest::Contains("kernel empty_kernel launched with grid (1,1,1), block (1025,1,1), 0 B "
                        "dynamic shared memory: 1025 threads per block, the limit is 1024"),
      brigade::Error);
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("empty_kernel", 1, dim3(32, 32, 2), 0, ek::empty_kernel, out),
      doctest::Contains("2048 threads per block"), brigade::Error);
  CHECK_THROWS_WITH_AS(brigade::emu::run_kernel("empty_kernel", 0, 32, 0, ek::empty_kernel, out),
                       doctest::Contains("must be at least 1"), brigade::Error);
  CHECK_THROWS_WITH_AS(
      brigade::emu::run_kernel("empty_kernel", 1, 32, 48 * 1024 + 1, ek::empty_kernel, out),
      doctest::Contains("dynamic shared memory is at most 48.0 KiB"), brigade::Error);
  // On a stream the shape is checked at the launch, before anything is enqueued.
  Stream stream = Stream::create(Device::cpu(0));
  CHECK_THROWS_WITH_AS(BRIGADE_LAUNCH(ek::empty_kernel, 1, dim3(1, 1, 65), 0, stream, out),
                       doctest::Contains("block.z is at most 64"), brigade::Error);
}

TEST_CASE("a divergent kernel on a stream fails the stream (sticky), naming the kernel") {
  Deadline deadline("divergent kernel on a stream");
  Stream stream = Stream::create(Device::cpu(0));
  int out[64] = {};
  BRIGADE_LAUNCH(ek::barrier_in_branch_kernel, 1, 64, 0, stream, out);
  CHECK_THROWS_WITH_AS(stream.synchronize(),
                       doctest::Contains("ek::barrier_in_branch_kernel, block (0,0,0)"),
                       brigade::StreamError);
}

TEST_CASE("an emulated launch on a CUDA stream is an error, not a fallback") {
  if (brigade::cuda_device_count() == 0) {
    MESSAGE("no GPU here: a CUDA stream cannot be created, nothing to check");
    return;
  }
  Stream stream = Stream::create(Device::cuda(0));
  int out[1] = {};
  CHECK_THROWS_WITH_AS(BRIGADE_LAUNCH(ek::empty_kernel, 1, 1, 0, stream, out),
                       doctest::Contains("an emulated launch needs a CPU stream, got cuda:0"),
                       brigade::Error);
}
