// A GPU that faults (an illegal address: a sticky error, as on a real GPU; CUDA reports it to
// every later call on that device) under a running pipeline, on emulated GPUs (an
// -Dcuda=emulated build; the test is empty elsewhere). The user must read the step, device,
// stage and action that failed, not the CUDA error of making fresh streams afterwards (which
// a faulted GPU refuses too), and the allocator says in one line that it stops reusing the
// faulted GPU's blocks, not once per block. A separate executable (tests/pipeline/runtime/meson.build):
// the fault is sticky for the whole process, so nothing else may run after it.
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_runtime_api.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/emu/cudart/launch.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tests/support/stderr_capture.h"

namespace brigade::pipeline {
namespace {

using testing::StderrCapture;

size_t count_lines_with(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) ++n;
  return n;
}

// Makes cuda:`device` fault: a one-thread kernel whose pointer argument is pageable host
// memory, which no GPU may touch (the emulator checks every kernel's pointers at launch).
void fault_gpu(int device) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  static float host = 0;
  REQUIRE(emu::launch_on_gpu(s, {"store_to_host", {1}, {1}, 0}, [] { host = 1; }, {&host}) ==
          cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  (void)cudaGetLastError();
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);  // this thread stages the batches there
}

TEST_CASE("a GPU that faults: the step's diagnosis, one line from the allocator, no crash after") {
  REQUIRE(cuda_device_count() >= 2);
  testing::Deadline deadline("a faulted GPU under a pipeline");
  // Stages 0 and 2 on cuda:0 (so the micro-batches are staged on a healthy GPU), stage 1 on
  // cuda:1, which faults between two steps.
  const Partition partition = at_cuts(8, {2, 6});
  const std::vector<Device> devices = {Device::cuda(0), Device::cuda(1), Device::cuda(0)};
  auto model = layers::Sequential::placed(test::small_spec(), layer_devices(partition, devices),
                                          test::kModelSeed);
  auto runtime = std::make_unique<Runtime>(*model, devices, partition, make_schedule("1f1b", 3, 4),
                                           test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  const HostBatch batch = test::random_batch(8, 3);
  CHECK(std::isfinite(runtime->step(batch, 0).loss));
  fault_gpu(1);

  StderrCapture captured;
  for (uint32_t step = 1; step <= 2; ++step) {  // the second: on the streams the first kept
    CAPTURE(step);
    try {
      runtime->step(batch, step);
      FAIL("the step did not fail");
    } catch (const PipelineError& e) {
      const std::string what = e.what();
      CAPTURE(what);
      // The step, where (device 1's thread, or a neighbour's transfer into cuda:1), and why.
      CHECK(what.rfind("pipeline step " + std::to_string(step) + " (schedule 1f1b) failed on cuda:",
                       0) == 0);
      CHECK(what.find("cuda:1 faulted earlier and stays faulted") != std::string::npos);
      CHECK(what.find("illegal") != std::string::npos);
      // Making the next step's streams failed too: said after the diagnosis, not instead.
      CHECK(what.find("; then no fresh streams could be made for the next step") !=
            std::string::npos);
      CHECK(e.device() >= 0);
    }
  }
  runtime.reset();
  model.reset();  // every parameter block of cuda:1 freed on a faulted GPU
  const std::string err = captured.text();
  CAPTURE(err);
  CHECK(count_lines_with(err, "cuda:1: freed blocks are no longer reused") == 1);
  CHECK(count_lines_with(err, "reused") == 1);
}

}  // namespace
}  // namespace brigade::pipeline
#endif
