// fault_worker SCENARIO: an MPI program in which rank 1 fails while the other ranks wait on
// it; run under mpirun by fault_test.cpp, which checks how the job ends.
//   throw          rank 1 throws while ranks 0 and 2 wait in MpiLink::receive for it
//   throw-reduce   rank 1 throws while the others wait in MpiReducer::sum with it
//   kill           rank 1 dies by SIGKILL while the others wait in MpiLink::receive
// Every rank ends the way the trainer does: catch, report_failure_and_abort.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "pipeline/distributed/faults.h"
#include "pipeline/distributed/mpi_link.h"
#include "pipeline/distributed/mpi_reducer.h"

using namespace brigade;
using namespace brigade::distributed;

namespace {

void run(const MpiSession& session, const std::string& scenario) {
  const int r = session.rank();
  if (r == 1) {
    if (scenario == "kill") std::raise(SIGKILL);
    throw Error("out of memory on cpu:0 in stage 1 (a test's failure)");
  }
  if (scenario == "throw-reduce") {
    Tensor g = Tensor::zeros(Shape{16}, Device::cpu(0));
    MpiReducer(session, MPI_COMM_WORLD).sum({g}, Stream::default_for(Device::cpu(0)));
  } else {
    MpiLink link("gradients 1->" + std::to_string(r), session, MPI_COMM_WORLD, 1, r,
                 /*microbatches=*/1, Device::cpu(0));
    link.receive(0);
  }
  std::printf("rank %d: the wait on rank 1 ended without an error\n", r);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  if (argc != 2 || session.size() < 2) {
    std::fprintf(stderr, "usage: mpirun -np 3 fault_worker throw|throw-reduce|kill\n");
    return 2;
  }
  try {
    run(session, argv[1]);
  } catch (const std::exception& e) {
    report_failure_and_abort(session, e.what());
  }
  return 0;
}
