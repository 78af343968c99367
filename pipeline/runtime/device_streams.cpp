#include "pipeline/runtime/device_streams.h"

#include "engine/event.h"

namespace brigade::pipeline {

void drain(const DeviceStreams& streams) {
  for (const Stream* side : {&streams.send, &streams.recv}) {
    Event done;
    done.record(*side);
    streams.compute.wait(done);
  }
  Event drained;
  drained.record(streams.compute);
  drained.synchronize();
}

}  // namespace brigade::pipeline
