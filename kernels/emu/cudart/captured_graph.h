// A captured CUDA graph, as the emulation keeps it: what stream capture (capture.cpp) makes
// and cudaGraphLaunch (graphs.cpp) replays.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

// One operation of a capture: its task, and the accesses the happens-before check checks at
// each replay.
struct CapturedAccess {
  const void* pointer;
  bool write;
  std::string what;
};
struct CapturedOperation {
  Task task;
  std::vector<CapturedAccess> accesses;
};

// The graphs are immutable once captured: an instantiation shares the operations.
struct CapturedGraph {
  Gpu* gpu = nullptr;
  std::vector<CapturedOperation> operations;
};

}  // namespace brigade::emu::gpu

struct CUgraph_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
};
struct CUgraphExec_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
  // Its last launch (stream, position, clock): the next one is ordered after it, on any stream.
  std::shared_ptr<brigade::emu::gpu::Record> last_launch;
};
