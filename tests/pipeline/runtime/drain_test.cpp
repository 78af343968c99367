// drain() (device_streams.h): the host's wait for everything a device's streams were given in a
// step, also when its compute stream has failed. A failed CPU stream skips its later waits, so
// the joins of the send and receive streams into it held nothing: drain returned while a send
// was still copying, and the step's end read its trace (and dropped its tensors) under that
// copy's feet, once naming the failure at that send instead of where it began.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/host_wait.h"
#include "engine/stream.h"
#include "pipeline/runtime/device_streams.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

using brigade::Device;
using brigade::Stream;
using brigade::pipeline::DeviceStreams;

TEST_CASE("drain waits for the send and receive streams when the compute stream has failed") {
  brigade::testing::Deadline deadline("a drain behind a failed compute stream");
  const Device dev = Device::cpu(160);
  const DeviceStreams streams{Stream::create(dev), Stream::create(dev), Stream::create(dev), {}};
  // The send stream is held busy by a gate; only a host wait on that stream opens it (the
  // listener sees what each host wait waits on), so a drain that does not wait for the send
  // stream returns with the send's task not run, and one that does lets it run first.
  brigade::testing::Gate gate;
  std::atomic<bool> sent{false};
  streams.send.enqueue(gate.blocker());
  streams.send.enqueue([&sent] { sent = true; });
  const std::string send_stream = streams.send.str();
  brigade::HostWaitListening listening([&](const std::function<std::string()>& waiting_on) {
    if (waiting_on() == send_stream) gate.open();
  });
  streams.compute.enqueue([] { throw std::runtime_error("a check failed"); });

  bool sent_when_drained = false;
  CHECK_THROWS_WITH_AS(
      {
        try {
          brigade::pipeline::drain(streams);
        } catch (...) {
          sent_when_drained = sent;
          throw;
        }
      },
      doctest::Contains("a check failed"), brigade::StreamError);
  CHECK(sent_when_drained);
  gate.open();  // before the gate goes, whatever the drain did
  streams.send.synchronize();
}
