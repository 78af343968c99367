// A captured CUDA graph, as the emulation keeps it: what stream capture (capture.cpp) makes
// and cudaGraphLaunch (graphs.cpp) replays.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

// One operation of a capture: its task, and the accesses the happens-before check checks at
// each replay.
struct CapturedAccess {
  const void* pointer;
  uint64_t bytes;  // hb.h's record_access
  bool write;
  std::string what;
  // The allocation's Allocation::lendings at the capture (0 outside any allocation).
  uint64_t lendings = 0;
};
struct CapturedOperation {
  Task task;
  std::vector<CapturedAccess> accesses;
  // What the operation's launch checked of its memory, checked again at each replay (memory
  // may have been freed and allocated again smaller, or lent to a smaller tensor, since the
  // capture): "" when it may run, else why not. Empty for operations that declare nothing.
  std::function<std::string()> recheck;
  // The branch of the graph it is on (the stream it was captured from: 0 the capture's
  // origin, forks from 1), and what of each branch is ordered before it, itself included:
  // `after.at(b)` operations of branch b, counted in capture order (the capture's clock).
  uint32_t branch = 0;
  VectorClock after;
};

// The graphs are immutable once captured: an instantiation shares the operations.
struct CapturedGraph {
  Gpu* gpu = nullptr;
  std::vector<CapturedOperation> operations;
  uint32_t branches = 1;
  std::vector<uint64_t> branch_operations;  // [branches]: how many operations each holds
};

}  // namespace brigade::emu::gpu

struct CUgraph_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
};
struct CUgraphExec_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
  // Its last launch (stream, position, clock): the next one is ordered after it, on any stream.
  std::shared_ptr<brigade::emu::gpu::Record> last_launch;
  // The happens-before check's number for each branch of the graph, as if each were a stream
  // of its own (hb.h), and how many operations of each its launches have replayed: a launch
  // is ordered after the previous one, so its branches go on where that one's ended.
  std::vector<uint32_t> branch_ids;
  std::vector<uint64_t> branch_replayed;
};
