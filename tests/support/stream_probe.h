// finishes_or_blocks: which of two things a stream does with the work it was given, decided
// without a timing assumption.
//
//   writer.enqueue(...);                 // work that must, or must not, wait for something
//   Event done; done.record(writer);
//   if (finishes_or_blocks(writer, done)) ...  // true: it ran through; false: it stopped at a wait
//
// A stream that reaches a wait item whose event cannot complete (its stream held by a Gate or a
// StreamHold) says "blocked on event#..." in describe_streams() and stays so; one without such a
// wait completes `done`. The loop ends in both cases, and the answer cannot change after it.
// CPU streams only (a CUDA stream does not say where it waits).
#pragma once

#include <string>
#include <thread>

#include "engine/event.h"
#include "engine/stream.h"

namespace brigade::testing {

// Whether s's line of describe_streams() ("cpu:0 stream#3: blocked on event#7 (...)") says so.
inline bool blocked_at_a_wait(const Stream& s) {
  std::string all(1, '\n'), name(1, '\n');
  all.append(describe_streams());
  name.append(s.str()).append(": ");
  const size_t at = all.find(name);
  if (at == std::string::npos) return false;
  const std::string line = all.substr(at + 1, all.find('\n', at + 1) - at - 1);
  return line.find("blocked on event#") != std::string::npos;
}

inline bool finishes_or_blocks(const Stream& s, const Event& done) {
  for (;;) {
    if (done.query()) return true;
    if (blocked_at_a_wait(s)) return false;
    std::this_thread::yield();
  }
}

}  // namespace brigade::testing
