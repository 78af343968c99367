// The GPU data path in its steady state, on emulated GPUs (an -Dcuda=emulated build; the test
// is empty elsewhere): a step frees no device memory, makes no device-wide synchronisation and
// no legacy-stream copy, and creates or destroys no stream or event object — the calls that
// stall a real GPU or the host, or cost a driver call per use. The emulated runtime counts
// them (cuda_emulation.h's api_counts); BRIGADE_TEST_DEVICES=cuda:all puts stage s on
// cuda:(s mod the number of GPUs), cuda puts every stage on cuda:0. (cudaMalloc and
// cudaEventCreate calls are not counted here: how far the host runs ahead of the GPU decides how
// many blocks and events are in flight at once, so the caches may still grow a little in a
// later step. tests/engine/cuda_test.cpp holds the event pool exactly. cudaMalloc's bytes are
// bounded: under one cuBLAS workspace, so a step allocates none.)
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "engine/allocator.h"
#include "kernels/cuda/vendor_handles.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

TEST_CASE("a step on GPUs: no cudaFree, device sync, legacy copy, stream or event destruction") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("steady state on GPUs");
  const Partition partition = at_cuts(8, {2, 6});
  auto model = test::placed_model(partition, 3, /*first_device=*/0);
  Runtime runtime(*model, test::test_devices(3, 0), partition, make_schedule("1f1b", 3, 4),
                  test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  const auto data = test::random_batches(3, 8, 40);
  runtime.step(data[0], 0);  // makes the streams, warms the allocators and the event pools
  runtime.step(data[1], 1);
  const emu::gpu::ApiCounts before = emu::gpu::api_counts();
  runtime.step(data[2], 2);
  const emu::gpu::ApiCounts after = emu::gpu::api_counts();
  // BRIGADE_NO_MEMORY_CACHING=1 gives every block back once its work is done: cudaFree is its
  // point there. But not cuBLAS's workspaces (32 MiB each, more than all of a step's tensors
  // here): each stream keeps its own (kernels/cuda/vendor_handles.h).
  if (Allocator::caching()) CHECK(after.free == before.free);
  CHECK(after.malloc_bytes - before.malloc_bytes < cuda::vendor::kCublasWorkspaceBytes);
  CHECK(after.free_bytes - before.free_bytes < cuda::vendor::kCublasWorkspaceBytes);
  CHECK(after.event_destroy == before.event_destroy);
  CHECK(after.stream_create == before.stream_create);
  CHECK(after.stream_destroy == before.stream_destroy);
  CHECK(after.device_synchronize == before.device_synchronize);
  CHECK(after.legacy_memcpy == before.legacy_memcpy);
  // Stream synchronisations remain, for the staging of a host batch and the label check's
  // copies; the step's own wait is an event (gpu_call_budget_test.cpp counts it).
  CHECK(after.stream_synchronize > before.stream_synchronize);
}

// Neighbouring stages on two GPUs copy to each other every micro-batch: the runtime enables
// peer access between them (both ways) and says so in one line; stages that share a GPU need
// none (one GPU: no line at all).
TEST_CASE("neighbouring stages on two GPUs get peer access both ways") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: no GPU to enable");
    return;
  }
  const Partition partition = at_cuts(8, {2, 6});
  auto model = test::placed_model(partition, 3, /*first_device=*/0);
  Runtime runtime(*model, test::test_devices(3, 0), partition, make_schedule("1f1b", 3, 4),
                  test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  // The pairs of GPUs that neighbouring stages sit on, from the placement (cuda:all on 4 GPUs:
  // 0-1, 1-2; on 2 GPUs: 0-1 (stage 2 is back on cuda:0); cuda: none).
  const std::vector<Device> placed = test::test_devices(3, 0);
  std::set<std::pair<int, int>> pairs;
  for (size_t s = 0; s + 1 < placed.size(); ++s)
    if (placed[s] != placed[s + 1])
      pairs.insert(std::minmax(placed[s].index, placed[s + 1].index));
  std::ostringstream expected;
  for (const auto& [a, b] : pairs)
    expected << (a == pairs.begin()->first && b == pairs.begin()->second ? "peer access: " : ", ")
             << "cuda:" << a << "<->cuda:" << b;
  CHECK(runtime.peer_access() == expected.str());
  // Enabled already: CUDA answers so for each direction of each pair.
  for (auto [from, to] : pairs)
    for (auto [x, y] : {std::pair{from, to}, {to, from}}) {
      REQUIRE(cudaSetDevice(x) == cudaSuccess);
      CHECK(cudaDeviceEnablePeerAccess(y, 0) == cudaErrorPeerAccessAlreadyEnabled);
      (void)cudaGetLastError();
    }
}

}  // namespace
}  // namespace brigade::pipeline
#endif
