// Event: query while gated, elapsed time non-negative and ordered, misuse reported.
#include <doctest/doctest.h>

#include "engine/event.h"
#include "engine/stream.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

using brigade::Device;
using brigade::Event;
using brigade::Stream;
using brigade::testing::Deadline;
using brigade::testing::Gate;

TEST_CASE("query() is false while the recorded work is held, true once it has run") {
  Deadline deadline("event query");
  Stream s = Stream::create(Device::cpu(0));
  Gate gate;
  s.enqueue(gate.blocker());
  Event e;
  e.record(s);
  gate.wait_entered();
  CHECK_FALSE(e.query());
  gate.open();
  e.synchronize();
  CHECK(e.query());
}

TEST_CASE("elapsed time is non-negative and ordered: a < b < c gives ab <= ac") {
  Deadline deadline("elapsed time");
  Stream s = Stream::create(Device::cpu(0));
  Event a = Event::timed(), b = Event::timed(), c = Event::timed();
  a.record(s);
  // Some work between the markers, so the clocks are read at distinct moments.
  volatile double sink = 0;
  s.enqueue([&] { for (int i = 0; i < 100000; ++i) sink = sink + i; });
  b.record(s);
  s.enqueue([&] { for (int i = 0; i < 100000; ++i) sink = sink + i; });
  c.record(s);
  c.synchronize();
  const float ab = brigade::elapsed_ms(a, b);
  const float ac = brigade::elapsed_ms(a, c);
  const float bc = brigade::elapsed_ms(b, c);
  CHECK(ab >= 0);
  CHECK(bc >= 0);
  CHECK(ab <= ac);
  CHECK(brigade::elapsed_ms(a, a) == 0);
}

TEST_CASE("elapsed time across two streams follows the wait that orders them") {
  Deadline deadline("elapsed across streams");
  Stream s1 = Stream::create(Device::cpu(0));
  Stream s2 = Stream::create(Device::cpu(1));
  Event a = Event::timed(), b = Event::timed();
  a.record(s1);
  s2.wait(a);
  b.record(s2);  // runs after a's marker, by the wait
  b.synchronize();
  CHECK(brigade::elapsed_ms(a, b) >= 0);
}

TEST_CASE("elapsed_ms refuses unfinished, unrecorded or untimed events") {
  Deadline deadline("elapsed misuse");
  Stream s = Stream::create(Device::cpu(0));
  Gate gate;
  Event a = Event::timed(), b = Event::timed(), never = Event::timed(), untimed;
  a.record(s);
  s.enqueue(gate.blocker());
  b.record(s);
  CHECK_THROWS_WITH_AS(brigade::elapsed_ms(a, b),
                       ("elapsed_ms(" + a.str() + ", " + b.str() +
                        "): both events must have completed (synchronize them first)").c_str(),
                       brigade::Error);
  CHECK_THROWS_WITH_AS(brigade::elapsed_ms(a, never),
                       (never.str() + ".elapsed_ms(): the event was never recorded (record it "
                        "on a stream before using it)").c_str(),
                       brigade::Error);
  gate.open();
  b.synchronize();
  untimed.record(s);
  untimed.synchronize();
  CHECK_THROWS_WITH_AS(brigade::elapsed_ms(a, untimed),
                       ("elapsed_ms(" + a.str() + ", " + untimed.str() + "): " + untimed.str() +
                        " was not made by Event::timed()").c_str(),
                       brigade::Error);
}

TEST_CASE("events are shared handles: a copy sees the same record") {
  Deadline deadline("event copies");
  Stream s = Stream::create(Device::cpu(0));
  Event e;
  Event copy = e;
  e.record(s);
  CHECK(copy.recorded());
  CHECK(copy.id() == e.id());
  copy.synchronize();
  CHECK(e.query());
}
