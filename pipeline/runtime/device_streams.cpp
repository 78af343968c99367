#include "pipeline/runtime/device_streams.h"

#include "engine/event.h"

namespace brigade::pipeline {

void join_side_streams(const DeviceStreams& streams) {
  for (const Stream* side : {&streams.send, &streams.recv}) {
    Event done;
    done.record(*side);
    streams.compute.wait(done);
  }
}

void drain(const DeviceStreams& streams) {
  join_side_streams(streams);
  Event drained;
  drained.record(streams.compute);
  try {
    drained.synchronize();
  } catch (...) {
    // A failed stream skips its later waits, the joins above among them: the send and
    // receive streams may still be running the step's tasks. Each is waited for here (their
    // own failures are the compute stream's, or follow from it), so that nothing of the step
    // runs once the caller reads its trace and lets its tensors go.
    for (const Stream* side : {&streams.send, &streams.recv}) try {
        side->synchronize();
      } catch (...) {
      }
    throw;
  }
}

}  // namespace brigade::pipeline
