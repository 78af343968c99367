// FaultLine's notices without the abort: rank 1 notifies, every other rank's wait throws
// RankFailed naming it (what a trainer sees before it calls report_failure_and_abort). The
// abort itself is tested by fault_test.cpp, which watches whole jobs end.
#include <doctest/doctest.h>

#include "pipeline/distributed/poll.h"
#include "tests/pipeline/distributed/mpi_test.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::distributed;

TEST_CASE("FaultLine: a notice from rank 1 ends every other rank's wait with RankFailed") {
  testing::Deadline deadline("fault notices", std::chrono::seconds(60));
  MpiSession& session = testing::mpi_session();
  // A line of its own (the session's must stay clean for the other tests of this process).
  FaultLine line(session.rank(), session.size());
  if (session.rank() == 1) {
    line.notify("cpu:0 out of memory in stage 1");
    CHECK_FALSE(line.heard().has_value());  // its own notice is not news to it
  } else {
    int failed_rank = -1;
    std::string message;
    try {
      // Nothing else can end this wait (no test, no stop, a long deadline): only the notice.
      poll_until(line, [] { return false; }, [] { return false; }, std::chrono::seconds(50),
                 [] { return std::string("a wait for nothing"); });
    } catch (const RankFailed& e) {
      failed_rank = e.rank();
      message = e.what();
    }
    CHECK(failed_rank == 1);
    CHECK(message == "rank 1 failed: cpu:0 out of memory in stage 1");
    REQUIRE(line.heard().has_value());
    CHECK(line.heard()->rank() == 1);
    // Heard once, it stays heard: every later wait ends the same way at once.
    CHECK_THROWS_AS(line.check(), RankFailed);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
