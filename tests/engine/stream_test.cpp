// Stream: order, cross-stream and cross-device waits, sticky errors, hang reports.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/event.h"
#include "engine/stream.h"
#include "engine/thread_pool.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

using brigade::Device;
using brigade::Event;
using brigade::Stream;
using brigade::testing::Deadline;
using brigade::testing::Gate;

TEST_CASE("tasks on one stream run in the order they were enqueued") {
  Deadline deadline("stream order");
  Stream s = Stream::create(Device::cpu(0));
  std::vector<int> seen;  // touched only by s's worker until synchronize() returns
  for (int i = 0; i < 1000; ++i) s.enqueue([&seen, i] { seen.push_back(i); });
  s.synchronize();
  REQUIRE(seen.size() == 1000);
  for (int i = 0; i < 1000; ++i) CHECK_MESSAGE(seen[static_cast<size_t>(i)] == i, "index " << i);
}

TEST_CASE("enqueue and wait do not block the caller: a gated stream holds its work") {
  Deadline deadline("gated stream");
  Stream s = Stream::create(Device::cpu(0));
  Gate gate;
  std::atomic<bool> ran{false};
  s.enqueue(gate.blocker());
  s.enqueue([&] { ran = true; });
  gate.wait_entered();
  CHECK_FALSE(s.query());
  CHECK_FALSE(ran.load());  // the blocker is provably still running
  gate.open();
  s.synchronize();
  CHECK(ran.load());
  CHECK(s.query());
}

// B waits on an event recorded on A while A is held by a gate; the gate opens only after
// B's work is enqueued, so B observes A's write only if the wait orders it.
static void check_wait(Device a_device, Device b_device) {
  Stream a = Stream::create(a_device);
  Stream b = Stream::create(b_device);
  Gate gate;
  int written = 0;   // written by A's task, read by B's task: ordered only by the event
  int observed = -1;
  a.enqueue(gate.blocker());
  a.enqueue([&] { written = 42; });
  Event e;
  e.record(a);
  b.wait(e);
  b.enqueue([&] { observed = written; });
  CHECK_FALSE(e.query());
  CHECK_FALSE(b.query());  // b is held by the wait, although its caller was not
  gate.open();
  b.synchronize();
  CHECK(observed == 42);
  CHECK(e.query());
}

TEST_CASE("a cross-stream wait orders work on the same device") {
  Deadline deadline("cross-stream wait");
  check_wait(Device::cpu(0), Device::cpu(0));
}

TEST_CASE("a cross-device wait orders work between two CPU devices") {
  Deadline deadline("cross-device wait");
  check_wait(Device::cpu(0), Device::cpu(1));
}

TEST_CASE("a wait on an event recorded later by another thread takes that record") {
  Deadline deadline("wait on a later record");
  Stream producer = Stream::create(Device::cpu(0));
  Stream consumer = Stream::create(Device::cpu(1));
  Gate gate;
  Event ready;
  int value = 0;
  std::promise<void> recorded;
  std::thread other([&] {
    producer.enqueue(gate.blocker());
    producer.enqueue([&] { value = 7; });
    ready.record(producer);
    recorded.set_value();
  });
  recorded.get_future().wait();  // the handoff: the record exists now
  int seen = -1;
  consumer.wait(ready);
  consumer.enqueue([&] { seen = value; });
  gate.open();
  consumer.synchronize();
  other.join();
  CHECK(seen == 7);
}

TEST_CASE("a wait keeps the record current when it was issued, not a later re-record") {
  Deadline deadline("re-record");
  Stream a = Stream::create(Device::cpu(0));
  Stream b = Stream::create(Device::cpu(1));
  Gate first, second;
  Event e;
  a.enqueue(first.blocker());
  e.record(a);                // record 1: after `first`
  b.wait(e);                  // captures record 1
  int seen = 0;
  b.enqueue([&] { seen = 1; });
  a.enqueue(second.blocker());
  e.record(a);                // record 2: after `second`, still closed
  first.open();
  b.synchronize();            // completes although record 2 cannot: b waited on record 1
  CHECK(seen == 1);
  CHECK_FALSE(e.query());     // the event now means record 2
  second.open();
  e.synchronize();
  CHECK(e.query());
}

TEST_CASE("using an event that was never recorded is an error, not a silent no-op") {
  Stream s = Stream::create(Device::cpu(0));
  Event e;
  CHECK_FALSE(e.recorded());
  const std::string id = e.str();
  CHECK_THROWS_WITH_AS(s.wait(e),
                       (s.str() + ": wait on " + id +
                        ", which was never recorded (record it on its producer stream before "
                        "waiting: waiting on nothing would silently drop the ordering)")
                           .c_str(),
                       brigade::Error);
  CHECK_THROWS_AS(e.synchronize(), brigade::Error);
  CHECK_THROWS_AS(e.query(), brigade::Error);
}

TEST_CASE("a failing task makes the stream's error sticky; markers still complete") {
  Deadline deadline("sticky error");
  Stream s = Stream::create(Device::cpu(2));
  std::atomic<int> after{0};
  s.enqueue([] { throw std::runtime_error("boom"); });
  s.enqueue([&] { after++; });  // skipped: the stream has failed
  Event e;
  e.record(s);
  const std::string expected = s.str() + ": task failed: boom";
  CHECK_THROWS_WITH_AS(s.synchronize(), expected.c_str(), brigade::StreamError);
  CHECK_THROWS_WITH_AS(e.synchronize(), expected.c_str(), brigade::StreamError);
  CHECK(e.query());  // the marker ran
  CHECK(after == 0);
  s.enqueue([&] { after++; });
  CHECK_THROWS_AS(s.synchronize(), brigade::StreamError);  // still failed
  CHECK(after == 0);
  try {
    s.synchronize();
  } catch (const brigade::StreamError& error) {
    CHECK_THROWS_WITH_AS(std::rethrow_exception(error.cause()), "boom", std::runtime_error);
  }
}

TEST_CASE("an event recorded before the failure is clean; a waiter inherits a later one") {
  Deadline deadline("error propagation");
  Stream a = Stream::create(Device::cpu(0));
  Stream b = Stream::create(Device::cpu(1));
  Event before, after;
  before.record(a);
  a.enqueue([] { throw std::runtime_error("stage 0 exploded"); });
  after.record(a);
  CHECK_NOTHROW(before.synchronize());
  b.wait(after);
  bool ran = false;
  b.enqueue([&] { ran = true; });
  // The first cause first, then the wait that passed it on.
  const std::string expected = a.str() + ": task failed: stage 0 exploded [passed on by the "
                               "waits of " + b.str() + " on " + after.str() + "]";
  CHECK_THROWS_WITH_AS(b.synchronize(), expected.c_str(), brigade::StreamError);
  CHECK_FALSE(ran);
}

TEST_CASE("an error passed on through several waits names its first cause first, then the waits") {
  Deadline deadline("error chain");
  Stream a = Stream::create(Device::cpu(0));
  Stream b = Stream::create(Device::cpu(1));
  Stream c = Stream::create(Device::cpu(0));
  Event a_done, b_done;
  a.enqueue([] { throw std::runtime_error("the loss is nan"); });
  a_done.record(a);
  b.wait(a_done);
  b_done.record(b);
  c.wait(b_done);
  const std::string expected = a.str() + ": task failed: the loss is nan [passed on by the waits "
                               "of " + b.str() + " on " + a_done.str() + ", " + c.str() + " on " +
                               b_done.str() + "]";
  CHECK_THROWS_WITH_AS(c.synchronize(), expected.c_str(), brigade::StreamError);
  try {
    c.synchronize();
  } catch (const brigade::StreamError& error) {  // the original exception travels too
    CHECK_THROWS_WITH_AS(std::rethrow_exception(error.cause()), "the loss is nan",
                         std::runtime_error);
  }
}

TEST_CASE("synchronize from a task of the same stream is refused instead of deadlocking") {
  Deadline deadline("self synchronize");
  Stream s = Stream::create(Device::cpu(0));
  s.enqueue([s] { s.synchronize(); });
  CHECK_THROWS_WITH_AS(s.synchronize(),
                       (s.str() + ": task failed: " + s.str() +
                        ": synchronize() called from a task of the same stream would wait for "
                        "itself forever").c_str(),
                       brigade::StreamError);
}

TEST_CASE("describe_streams says which stream is blocked on which event and where") {
  Deadline deadline("describe_streams");
  Stream a = Stream::create(Device::cpu(0));
  Stream b = Stream::create(Device::cpu(1));
  Gate gate;
  a.enqueue(gate.blocker());
  gate.wait_entered();  // a's worker is now running position 1
  Event e;
  e.record(a);  // position 2 of a; a is at 0 while gated
  b.wait(e);
  // b's worker reaches the wait item at a moment nothing can signal to us (it is blocked),
  // so we poll the description itself until it says so; the deadline bounds the loop.
  const std::string expected = b.str() + ": blocked on " + e.str() + " (" + a.str() +
                               ", position 2; that stream is at 0)";
  std::string text;
  for (;;) {
    text = brigade::describe_streams();
    if (text.find(expected) != std::string::npos) break;
    std::this_thread::yield();
  }
  CHECK(text.find(a.str() + ": running position 1") != std::string::npos);
  gate.open();
  b.synchronize();
}

TEST_CASE("a CPU stream gives its device's thread pool; dropping a stream drains it") {
  Deadline deadline("pool and drain");
  brigade::configure_cpu_device(5, {3, 0});
  Stream s = Stream::create(Device::cpu(5));
  CHECK(s.thread_pool().size() == 3);
  CHECK(&s.thread_pool() == &brigade::cpu_thread_pool(Device::cpu(5)));
  CHECK(Stream::default_for(Device::cpu(5)) == Stream::default_for(Device::cpu(5)));
  std::atomic<int> count{0};
  {
    Stream t = Stream::create(Device::cpu(5));
    for (int i = 0; i < 100; ++i) t.enqueue([&] { count++; });
  }  // the last handle: the stream finishes its queue, then its worker ends
  CHECK(count == 100);
}
