// The streams of one device the runtime runs (runtime.h): a compute stream for the actions,
// a send stream for the copies of outgoing activations and gradients, a receive stream that
// owns the buffers those copies land in (and copies what another Runtime handed over), and —
// on a CUDA device — a CPU stream for the checks of its results (step_checks.h).
//
// drain() is a step's host wait for a device where its verdict is on the host (step_end.cpp).
#pragma once
#include <optional>

#include "engine/stream.h"

namespace brigade::pipeline {

struct DeviceStreams {
  Stream compute, send, recv;
  std::optional<Stream> check;
};

// The send and receive streams' work joined into the compute stream: stream-ordered waits,
// no host block. What comes after on the compute stream comes after all of the device's work.
void join_side_streams(const DeviceStreams& streams);

// Waits, on the host, for everything enqueued on a device's streams: the send and receive
// streams' work joined into the compute stream (stream-ordered waits, no host block), then one
// event after it all and one host wait for it. Throws what failed on any of the three — after
// waiting for the send and receive streams each on its own, since a failed compute stream
// skips the joins.
void drain(const DeviceStreams& streams);

}  // namespace brigade::pipeline
