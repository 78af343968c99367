// StepTrace: the measured timeline of one step — when each action ran on its device's compute
// stream, when each copy ran on its send stream (a send to another process: when its tensor
// was written, executor.cpp), and on its receive stream each receive, from when it was posted
// to when its tensor was here — read without ever making the host wait.
//
//   CPU stream: a task on the stream reads the clock at each marker (written by the stream's
//     worker, read after the step's final synchronisation).
//   CUDA stream: a CUDA event recorded at each marker. Each device's clock is tied to the
//     host's by an origin event recorded on its idle compute stream at the step's start (the
//     previous step ended with the host's wait for it, so it completes as it is recorded); a
//     marker's time is the origin's host time plus the GPU's elapsed time since the origin
//     (CUDA times events of one device against each other only). Behind a step still
//     pending (Runtime::submit), no stream is idle: every device's compute stream waits for
//     that step's end event first, so the origins complete together, as that step ends, and
//     each is time 0 of the step; the send and receive streams wait for the origin.
//
// Each device's thread appends to its own list, so marking needs no lock.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/event.h"
#include "engine/stream.h"
#include "pipeline/schedule/action.h"
#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

enum class TraceLane { compute = 0, send = 1, recv = 2 };

class StepTrace {
 public:
  // devices[d]: schedule device d's device. Made before the step's device threads start.
  explicit StepTrace(const std::vector<Device>& devices);
  // Device d's origin, on its idle compute stream — or on one whose streams all wait for the
  // end of the step before (`behind_previous_step`) — called by device d's thread before its
  // first action (a CUDA call that fails there is that device's failure).
  void start(int d, const Stream& compute, bool behind_previous_step);

  // The start or the end of `a` on device d's `s` (its compute, send or receive stream). On
  // the send lane, `a` is the action whose result is sent (0F3 for 0SF3, 1B3 for 1SB3); on
  // the receive lane, the one that receives (1F3 for 1RF3, 0B3 for 0RB3).
  void mark(int d, TraceLane lane, const Action& a, const Stream& s, bool start);

  // Device d sent `bytes` to another device (a tensor between stages; d's thread only).
  void sent(int d, uint64_t bytes) { sent_bytes_[static_cast<size_t>(d)] += bytes; }
  // What every device sent, after the device threads have ended.
  uint64_t sent_bytes() const;

  // After the step's final synchronisation: turn CUDA markers into the host clock.
  void read_cuda_markers();
  // The one marked action that started and did not end — where a failed stream failed (the
  // streams that inherited the failure through a wait skipped both markers). Receives are
  // not candidates: a receive's start is marked before its wait, so a receive whose sender
  // failed has a start and no end, yet did not fail itself.
  std::optional<std::pair<int, Action>> unfinished() const;
  // Lanes compute, send and recv, ms from the step's start, and a flow from each send to its
  // receive (join_sends_to_receives; sends to another process and receives from one have no
  // partner here until the processes' timelines are merged).
  Timeline timeline(const Schedule& schedule) const;
  // The step's start on the host's clock: the timeline's time 0, except on GPUs behind a
  // pending step, whose 0 is that step's end (origin_ms_), later than this.
  std::chrono::steady_clock::time_point zero() const { return t0_; }

 private:
  struct Marker {
    Action action;
    TraceLane lane = TraceLane::compute;
    double start = -1, end = -1;
    Event start_event = Event::timed(), end_event = Event::timed();  // CUDA streams only
  };
  std::chrono::steady_clock::time_point t0_;
  std::vector<Device> devices_;
  std::vector<Event> origins_;       // [device], CUDA: recorded on its idle compute stream...
  std::vector<double> origin_ms_;    // ...at this host time (ms since t0_)
  std::vector<std::deque<Marker>> markers_;  // [device]; a deque: marked entries never move
  std::vector<uint64_t> sent_bytes_;          // [device]
};

}  // namespace brigade::pipeline
