// main() of the tests that run under mpirun: one MpiSession for the process, doctest (its
// summary from rank 0 alone), and an exit status that is non-zero on EVERY rank when a check
// failed on ANY rank (so mpirun's status, which meson reads, cannot depend on which rank
// failed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "engine/device.h"
#include "tests/pipeline/distributed/mpi_test.h"

namespace {
brigade::distributed::MpiSession* the_session = nullptr;
}

brigade::distributed::MpiSession& brigade::testing::mpi_session() { return *the_session; }

int main(int argc, char** argv) {
  brigade::distributed::MpiSession session(&argc, &argv);
  the_session = &session;
#if defined(BRIGADE_MPI_TEST_NEEDS_A_GPU_PER_RANK)
  // NCCL does not run two ranks of a communicator on one GPU: with fewer GPUs than ranks
  // there is nothing to check, and the test says so as a skip (77 on every rank: mpirun's
  // status, which meson reads as "skipped"), not as a pass.
  if (brigade::cuda_device_count() < session.size()) {
    if (session.rank() == 0)
      std::printf("skipped: %d GPU(s) for %d ranks; NCCL needs a GPU of its own for every rank\n",
                  brigade::cuda_device_count(), session.size());
    the_session = nullptr;
    return 77;
  }
#endif
  doctest::Context context(argc, argv);
  // Every rank runs every case; only rank 0 prints the summary (the other ranks print only
  // their failures), so a test case counts once in CI's "N passed" line.
  if (session.rank() != 0) context.setOption("minimal", true);
  // mpirun hands the ranks a terminal-like stdout, so doctest would colour its summary and
  // CI's count of "[doctest] test cases:" lines would not see it.
  context.setOption("no-colors", true);
  const int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  BRIGADE_MPI_CHECK(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (any && !failed && session.rank() != 0) std::fprintf(stderr, "rank %d: passed, another rank failed\n", session.rank());
  the_session = nullptr;
  return any;
}
