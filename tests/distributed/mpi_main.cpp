// main() of the tests that run under mpirun: one MpiSession for the process, doctest, and an
// exit status that is non-zero on EVERY rank when a check failed on ANY rank (so mpirun's
// status, which meson reads, cannot depend on which rank failed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/distributed/mpi_test.h"

namespace {
brigade::distributed::MpiSession* the_session = nullptr;
}

brigade::distributed::MpiSession& brigade::testing::mpi_session() { return *the_session; }

int main(int argc, char** argv) {
  brigade::distributed::MpiSession session(&argc, &argv);
  the_session = &session;
  doctest::Context context(argc, argv);
  const int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  BRIGADE_MPI_CHECK(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (any && !failed && session.rank() != 0) std::fprintf(stderr, "rank %d: passed, another rank failed\n", session.rank());
  the_session = nullptr;
  return any;
}
