// Faults: a rank that fails takes the whole job down, quickly and saying which rank it was.
//
// The protocol (README.md, "Faults"):
//   1. A rank that fails (the trainer catches the exception) calls
//      report_failure_and_abort(session, what): it prints "brigade: rank r failed: <what>"
//      on stderr and sends a short notice "<what>" to every other rank on a communicator of
//      its own (a duplicate of MPI_COMM_WORLD, so no link or collective can ever match it).
//   2. Every wait of this folder (a link's receive, a send in flight, an all-reduce) polls
//      for notices between its tests (poll.h); a notice makes it throw RankFailed("rank r
//      failed: <what>"), so a rank blocked on the failed one stops with that message
//      instead of waiting to be killed. The trainer catches it and calls
//      report_failure_and_abort too, which then prints "brigade: rank q stops: rank r failed:
//      <what>" and acknowledges to rank r, sending no notice of its own.
//      A rank whose host is not in such a wait but waiting on its own device's work (an
//      Event's or a Stream's synchronize: the step before, a flush, the checks' host stream, a
//      blocking copy) hears the notice there too: while the session lives, those waits poll
//      their device and call FaultLine::end_job_if_heard between polls (engine/host_wait.h),
//      which prints "rank q stops: ... (here: waiting on its device's work: <stream>)" and
//      acknowledges in place, so a slow GPU cannot hold a rank silent until it is killed (a
//      rank whose own failure its link heard, below, ends there as in 1, "failed: ...").
//   3. Rank r calls MPI_Abort once every other rank has acknowledged (or has failed itself,
//      its own notice standing for the acknowledgement), or after `acknowledgement_wait`:
//      so each rank that was waiting has said why it stops before mpirun kills it, and mpirun
//      prints "MPI_ABORT was invoked on rank r". A rank that acknowledged waits to be killed;
//      if rank r never aborts, it aborts the job itself after twice that bound.
//   Work that fails on a rank's stream while its host waits in a receive: the link that was to
//   send its tensor sends the cause instead (mpi_link.h), so the receiver throws RankFailed at
//   once, and hears() it on its own rank as well, so that rank's host stops at its next wait
//   and takes the job down as in 1.
//   4. A rank that dies without a word (SIGKILL, a segfault, the OOM killer): mpirun sees the
//      process end and kills the job, printing "mpirun noticed that process rank r with PID
//      ... exited on signal 9 (Killed)" (OpenMPI 4.1; tests/pipeline/distributed/fault_test.cpp).
//   5. Last resort, for launchers that do not watch their processes: every wait has a
//      deadline (poll.h, BRIGADE_MPI_TIMEOUT_S, default 600 s) after which it throws an error
//      naming the rank it was waiting for.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/distributed/mpi_session.h"

namespace brigade::distributed {

// Another rank failed: thrown by the waits of this folder when its notice arrives.
class RankFailed : public Error {
 public:
  RankFailed(int rank, const std::string& cause)
      : Error("rank " + std::to_string(rank) + " failed: " + cause), rank_(rank), cause_(cause) {}
  int rank() const { return rank_; }  // the rank that failed (in MPI_COMM_WORLD)
  const std::string& cause() const { return cause_; }  // what it failed of

 private:
  int rank_;
  std::string cause_;
};

// How long a failed rank waits for the others to say why they stop before it aborts the job.
// It ends as soon as all have answered, so the bound matters only for a rank that cannot: one
// already dead (mpirun ends the job for it anyway) or one stuck outside every wait that
// listens. Every wait on MPI and every host wait on a device listens, so what remains is the
// host's own work between two waits, milliseconds even on a loaded machine; a longer bound
// would only make a job with a truly stuck rank take longer to end.
constexpr std::chrono::seconds acknowledgement_wait{5};

// The fault notices of one process (owned by its MpiSession). Thread-safe.
class FaultLine {
 public:
  FaultLine(int rank, int size);  // collective: duplicates MPI_COMM_WORLD
  // Reads every notice that has arrived; throws RankFailed for the first one ever heard.
  void check();
  // The first failure heard of (by check or hear), if any.
  std::optional<RankFailed> heard() const;
  // A failure of `rank` learned otherwise than by its notice: a link's failure message from
  // the peer, or, with `rank` this rank's own, work of this rank that failed on a stream
  // behind a send (mpi_link.h). Kept as if its notice had come, unless a failure was heard
  // first; returns the first failure heard, for the caller to throw. After its own failure,
  // this rank's next check() throws it, so its host stops even while it waits on a peer.
  RankFailed hear(int rank, const std::string& what);
  int rank() const { return rank_; }  // this process's, in MPI_COMM_WORLD
  // What a host wait on a device's work calls between its polls while the session lives
  // (engine/host_wait.h): reads every notice that has arrived and, once a failure has been
  // heard, ends the job right here as report_failure_and_abort does, the wait (`waiting_on`)
  // named as where this rank was. It does not throw RankFailed: unwinding from a wait on a
  // device runs destructors that wait on the same device (a stream drains as it goes), and a
  // slow device would hold the rank there, silent, until the failed rank aborts the job.
  void end_job_if_heard(const std::function<std::string()>& waiting_on);
  // Sends `what` to every other rank as this rank's failure notice and waits (at most 1 s)
  // for the notices to leave. abort_job does this, then aborts.
  void notify(const std::string& what);
  // See report_failure_and_abort.
  [[noreturn]] void abort_job(const std::string& what);

 private:
  // With mutex_ held: reads every notice that has arrived (the first one heard is kept in
  // heard_) and returns the ranks that sent them.
  std::vector<int> read_notices();
  // This rank failed and has notified: waits until every other rank has acknowledged or sent
  // a failure notice of its own, at most acknowledgement_wait.
  void await_acknowledgements();
  // This rank stops because another failed: acknowledges to each failed rank it has heard of,
  // now and as later notices arrive, until the job is aborted (at most 2 x
  // acknowledgement_wait; then it returns, and the caller aborts).
  void acknowledge_until_killed();

  int rank_, size_;
  Communicator comm_;
  mutable std::mutex mutex_;
  std::optional<RankFailed> heard_;
  std::deque<std::string> notices_;  // sent by notify (a deque: MPI holds pointers into them)
  bool aborting_ = false;
};

// Ends the whole job (never returns): the protocol above. If this rank has heard of another
// rank's failure, it says so and aborts; otherwise it is the failed rank: it prints `what`,
// notifies every other rank and aborts. The process exits non-zero (MPI_Abort's code 1).
[[noreturn]] void report_failure_and_abort(const MpiSession& session, const std::string& what);

}  // namespace brigade::distributed
