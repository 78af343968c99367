// Waiting on MPI without burning a core and without hanging.
//
// MPI makes progress only inside MPI calls, and OpenMPI's blocking calls spin at 100 % of a
// core; with several ranks on a 2-core machine that starves the ranks doing the work. So
// every wait of this folder is poll_until: a loop of non-blocking tests (MPI_Test,
// MPI_Improbe...) with a pause between tries that grows from a yield to 1 ms. Between tries
// it also
//   - reads fault notices (faults.h): another rank failed -> RankFailed;
//   - asks stop() (a link closed): -> returns false;
//   - checks the deadline, the last resort against a peer that vanished without a word:
//     -> MpiError "<what>: still waiting after 600 s; has rank r died?".
//
// A wait for a nonblocking call (MPI_Isend, MPI_Irecv, MPI_Iallreduce, MPI_Ibcast) is
// wait_for_request, which owns the call's buffers: a wait that throws leaves the call
// running, and MPI writes into its buffers whenever the call completes (see below).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "pipeline/distributed/faults.h"

namespace brigade::distributed {

// The deadline of every wait: BRIGADE_MPI_TIMEOUT_S (seconds, > 0) if set, else
// kDefaultTimeout. Throws brigade::Error naming the variable if it is set to something else.
inline constexpr std::chrono::seconds kDefaultTimeout{600};
std::chrono::milliseconds default_timeout();

// Calls test() until it returns true (-> true) or stop() does (-> false). `what` describes
// the wait for the timeout's message ("activations 0->1: micro-batch 3 from rank 0").
bool poll_until(FaultLine& faults, const std::function<bool()>& test,
                const std::function<bool()>& stop, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what);

// Waits (poll_until, never stopped) for `request`, a nonblocking call on memory inside
// `buffers`. Until the request completes MPI may read and write that memory, within any MPI
// call of any thread of this rank; a collective cannot be cancelled, and its peers may join it
// long after this rank gave up. So when the wait throws (a rank's failure heard, the
// deadline), `buffers` are kept for the rest of the process, never freed nor reused. Every
// buffer of the call must be inside them: one on the caller's stack would be written after
// its frame is gone (a replica's one int, written into whatever that stack holds by then).
//
//   auto words = std::make_shared<std::array<int, 2>>();
//   MPI_Iallreduce(&(*words)[0], &(*words)[1], 1, MPI_INT, MPI_MIN, comm, &request);
//   wait_for_request(faults, request, words, timeout, what);
void wait_for_request(FaultLine& faults, MPI_Request& request, std::shared_ptr<void> buffers,
                      std::chrono::milliseconds timeout, const std::function<std::string()>& what);

// Keeps `buffers` for the rest of the process: the memory of a nonblocking call given up on
// that MPI may still write (wait_for_request's rule, for a caller that gives its request up
// itself: MpiLink's receive, cancelled and freed when closed or past its deadline, completes
// anyway if its message was already matched).
void keep_for_mpi(std::shared_ptr<void> buffers);

// How many calls' buffers have been kept so far in this process (tests).
size_t kept_request_buffers();

}  // namespace brigade::distributed
