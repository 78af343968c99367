// Event: a marker in a stream's work, with CUDA semantics.
//
//   e.record(s)        marks the point in s's queue reached by everything enqueued so far;
//   s2.wait(e)         s2's later work waits for that point (no host blocking);
//   e.query()          true once the marked work has run;
//   e.synchronize()    blocks the host until it has; throws if that work failed;
//   elapsed_ms(a, b)   milliseconds between two completed records (same device kind), of
//                      events made with Event::timed().
//
// Re-recording moves the marker; waits already issued keep the record current when they
// were issued (as in CUDA). An Event is a cheap shared handle.
//
// Unlike CUDA, using an event that was never recorded (wait, query, synchronize,
// elapsed_ms) throws brigade::Error. CUDA treats wait/query on it as "already done", which
// silently removes the ordering a pipeline depends on: the classic pipeline bug.
//
// On CPU streams a record is a position in the stream's FIFO and its time is read from the
// steady clock when the worker reaches it; on CUDA streams it is a cudaEvent_t, taken from a
// per-device pool and given back when the record is dropped. An Event orders work; only one
// made with Event::timed() can be timed: on a GPU its cudaEvent_t records a timestamp, which
// costs more than the cudaEventDisableTiming events that every other Event uses.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace brigade {

class Stream;

namespace detail {
struct EventState;
class EventRecord;
}

class Event {
 public:
  Event();  // orders work; elapsed_ms refuses it
  static Event timed();  // orders work and can be timed (trace markers)

  void record(const Stream& stream);
  bool recorded() const;
  bool query() const;
  void synchronize() const;
  // Blocks until the recorded work has run, or `deadline` has passed; whether it has run (a
  // failed stream's work has run too: this never throws for it).
  bool wait_until(std::chrono::steady_clock::time_point deadline) const;

  uint64_t id() const;
  std::string str() const;  // "event#7"

  // The record current now (null if never recorded): what a wait captures.
  std::shared_ptr<detail::EventRecord> current_record() const;

 private:
  friend float elapsed_ms(const Event& start, const Event& end);
  std::shared_ptr<detail::EventState> state_;
};

// Milliseconds from `start`'s record to `end`'s; both must be made by Event::timed(),
// recorded and complete, and both on CPU streams or both on CUDA streams.
float elapsed_ms(const Event& start, const Event& end);

}  // namespace brigade
