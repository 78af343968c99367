// A GPU per rank (local_gpu.h): the ranks of one host found through MPI, and the choice of a
// GPU — or the refusal — for hosts with enough, too few and no GPUs, worked out by hand.
#include <doctest/doctest.h>

#include "pipeline/distributed/local_gpu.h"
#include "tests/pipeline/distributed/mpi_test.h"

using namespace brigade;
using namespace brigade::distributed;

TEST_CASE("host_ranks: every rank of a one-host job is on this host, in world order") {
  MpiSession& session = testing::mpi_session();
  const HostRanks here = host_ranks();
  // mpirun starts every rank of the test on this machine.
  CHECK(here.local_size == session.size());
  CHECK(here.local_rank == session.rank());  // ordered by world rank (the split's key)
  CHECK(!here.host.empty());
}

TEST_CASE("choose_gpu: a GPU each while the host has enough; one clear refusal otherwise") {
  // 4 GPUs, 3 ranks: ranks 0, 1, 2 take cuda:0, 1, 2.
  for (int r = 0; r < 3; ++r) {
    const GpuChoice c = choose_gpu({"gpubox", r, 3}, 4);
    CHECK(c.refusal.empty());
    CHECK(c.gpu == r);
  }
  // As many GPUs as ranks: the last rank takes the last GPU.
  CHECK(choose_gpu({"gpubox", 1, 2}, 2).gpu == 1);
  // Fewer GPUs than ranks: two would share one, which NCCL does not support.
  const GpuChoice few = choose_gpu({"gpubox", 2, 3}, 2);
  CHECK(few.gpu == -1);
  CHECK(few.refusal ==
        "host gpubox has 2 GPU(s) for its 3 rank(s): NCCL cannot put two ranks of one "
        "communicator on one GPU; start at most 2 rank(s) per host (mpirun --map-by ppr:2:node) "
        "or use more hosts");
  const GpuChoice none = choose_gpu({"vm", 0, 2}, 0);
  CHECK(none.gpu == -1);
  CHECK(none.refusal ==
        "host vm has 0 GPU(s) for its 2 rank(s): each rank needs a GPU of its own; run on hosts "
        "with GPUs, or leave --devices out for a CPU device per rank");
}
