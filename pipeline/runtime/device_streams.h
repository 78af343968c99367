// The streams of one device the runtime runs (runtime.h): a compute stream for the actions,
// a send stream for the copies of outgoing activations and gradients, a receive stream that
// owns the buffers those copies land in (and copies what another Runtime handed over), and —
// on a CUDA device — a CPU stream for the checks of its results (step_checks.h).
#pragma once
#include <optional>

#include "engine/stream.h"

namespace brigade::pipeline {

struct DeviceStreams {
  Stream compute, send, recv;
  std::optional<Stream> check;
};

}  // namespace brigade::pipeline
