// Not a doctest: a program that must FAIL. It hangs on purpose (a stream waits on a gate
// that never opens) under a 1-second Deadline, which must print the live streams and abort.
// meson runs it with should_fail: a Deadline that never fired would make the test hang
// until meson's own timeout and then count as a failure of the deadline, not a pass.
#include <cstdio>

#include "engine/event.h"
#include "engine/stream.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

int main() {
  using namespace brigade;
  Stream held = Stream::create(Device::cpu(0));
  Stream waiter = Stream::create(Device::cpu(1));
  testing::Gate never_opened;
  held.enqueue(never_opened.blocker());
  Event e;
  e.record(held);
  waiter.wait(e);
  testing::Deadline deadline("deadline_fires (expected to abort)", std::chrono::seconds(1));
  waiter.synchronize();  // hangs: only the deadline ends this
  std::puts("unreachable: the deadline did not fire");
  return 0;
}
