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
  drained.synchronize();
}

}  // namespace brigade::pipeline
