// What rank 0 reports for the whole mpirun job, gathered from the other ranks (distributed.h:
// MpiRanks): each --metrics line's peak memory of every rank's devices (carried in the step's
// agreement), and the last step's trace with every rank's events. Each rank measures only its
// own devices; without these, rank 0 wrote its own alone, and drew the other ranks' devices as
// empty lanes.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pipeline/distributed/faults.h"
#include "pipeline/distributed/mpi_session.h"
#include "pipeline/schedule/timeline.h"

namespace brigade::train {

// A communicator of rank 0's reports, waited on as every wait of pipeline/distributed/ is
// (poll.h: no spinning, fault notices heard, a deadline).
struct ReportChannel {
  distributed::FaultLine& faults;
  MPI_Comm comm;
  std::chrono::milliseconds timeout;

  // Waits for `request`, a call on memory inside `buffers` (poll.h, wait_for_request).
  void wait(MPI_Request& request, std::shared_ptr<void> buffers, const std::string& what) const;
  // Rank 0 gets every rank's `mine`, by rank; the others get nothing. Every rank calls it.
  std::vector<std::string> gather(const std::string& mine, const std::string& what) const;
};

// A step's peak memory as it rides in the sum MpiRanks::agree_on_step makes anyway, with no
// collective of its own: `slots` devices per rank (a rank's runtime measures at most its
// pipeline's devices), each three numbers (its kind + 1, 0 for an empty slot; its index; its
// bytes), this rank's `peaks` (named by Device::str, as the runtime names them) at its own
// place and zeros at every other rank's, so that the sum is every rank's: exactly, each number
// having one addend that is not 0 (bytes below 2^53).
std::vector<double> peak_words(const std::map<std::string, uint64_t>& peaks, int rank, int ranks,
                               int slots);
// The summed words (every rank's peak_words, added up) as every rank's peaks, each device named
// by its rank ("rank 1 cpu:1"): the ranks of several replicas, or GPUs on several hosts, have
// devices of the same name.
std::map<std::string, uint64_t> peaks_of_words(std::span<const double> summed, int slots);

// A rank's trace as it travels: `t`'s events (ms from its time 0) and bytes sent, and its time
// 0 on its own steady clock, `zero_ns`; plain numbers copied as bytes (every rank runs this
// program on one kind of machine).
std::string pack_timeline(const pipeline::Timeline& t, int64_t zero_ns);
// Appends the events of `bytes` (pack_timeline's, from a rank whose clock reads `offset_ns`
// more than this one's at the same instant) to `t`, whose time 0 is `zero_ns` on this rank's
// clock, moved onto that time 0; returns the sender's bytes sent.
uint64_t unpack_timeline_into(pipeline::Timeline& t, const std::string& bytes, int64_t offset_ns,
                              int64_t zero_ns);

// Rank 0's `timeline` gets the events of ranks 1 .. `pipeline_ranks` - 1 (replica 0's
// pipeline, whose rank d runs schedule device d: the lanes of the trace), moved onto rank 0's
// clock (and every event moved later where a peer's began before 0), and their bytes sent,
// and a flow from each send to its receive, across the ranks too (join_sends_to_receives);
// `zero` is this rank's timeline's time 0 on its steady clock (StepResult::timeline_zero).
// Every rank calls it.
void gather_timeline(const ReportChannel& channel, int pipeline_ranks,
                     pipeline::Timeline& timeline, std::chrono::steady_clock::time_point zero);

}  // namespace brigade::train
