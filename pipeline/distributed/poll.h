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
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "pipeline/distributed/faults.h"

namespace brigade::distributed {

// The deadline of every wait: BRIGADE_MPI_TIMEOUT_S (seconds, > 0) if set, else 600 s.
// Throws brigade::Error naming the variable if it is set to something else.
std::chrono::milliseconds default_timeout();

// Calls test() until it returns true (-> true) or stop() does (-> false). `what` describes
// the wait for the timeout's message ("activations 0->1: micro-batch 3 from rank 0").
bool poll_until(FaultLine& faults, const std::function<bool()>& test,
                const std::function<bool()>& stop, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what);

}  // namespace brigade::distributed
