// brigade-train: the standalone trainer. tools/train/README.md explains the flags and the
// files; trainer.h is the run itself. Exit status:
//   0        done
//   1        failed while running (out of memory, a diverged run, a file that could not be
//            written, a device fault): training had begun
//   2        refused before the first step: a bad command line or input (an unknown flag, a
//            value out of range, a malformed model file, missing or truncated data, a device
//            this machine lacks, a checkpoint of another run, an unwritable output, a batch
//            that cannot fit)
//   130/143  stopped by SIGINT/SIGTERM between steps, after writing a checkpoint
//
// --distributed (under mpirun): MPI starts before anything else. An error every rank meets
// alike (a usage error, a refused checkpoint) is printed by rank 0 and every rank exits with
// its status; an error of one rank ends the whole job naming that rank (distributed.h).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "tools/train/options.h"
#include "tools/train/trainer.h"
#if defined(BRIGADE_HAVE_MPI)
#include "tools/train/distributed.h"
#endif

namespace {

int run(int argc, char** argv, brigade::train::Cluster* cluster) {
  using namespace brigade::train;
#if defined(BRIGADE_HAVE_MPI)
  const bool speaks = cluster == nullptr || cluster->root();
#else
  const bool speaks = true;
#endif
  try {
    const std::optional<Options> options = parse_options(argc, argv);
    if (!options) return 0;  // --help
    return run_training(*options, cluster);
  } catch (const UsageError& e) {
    if (speaks) std::fprintf(stderr, "brigade-train: %s\n", e.what());
    return 2;
  } catch (const InputError& e) {  // refused before the first step
#if defined(BRIGADE_HAVE_MPI)
    if (cluster) cluster->abort_job(e.what());  // this rank alone: end the whole job
#endif
    std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return 2;
#if defined(BRIGADE_HAVE_MPI)
  } catch (const AllRanksError& e) {
    if (speaks) std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return e.status();
#endif
  } catch (const std::exception& e) {
#if defined(BRIGADE_HAVE_MPI)
    if (cluster) cluster->abort_job(e.what());  // this rank alone: end the whole job
#endif
    std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return 1;
  }
}

// A run that failed may leave work queued on CPU streams (the failed step's tail, behind the
// error that stopped it): their workers would still be calling into OpenBLAS while static
// destructors tear the process down. A failed single-process run therefore ends at once,
// after flushing what it printed; everything it writes is already renamed into place or
// was never started. (Under mpirun the cluster's own shutdown ends the job.)
int finish(int status, brigade::train::Cluster* cluster) {
  if (status == 0 || cluster != nullptr) return status;
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
#if defined(BRIGADE_HAVE_MPI)
  std::unique_ptr<brigade::train::Cluster> cluster;
  if (brigade::train::wants_distributed(argc, argv)) try {
      cluster = brigade::train::Cluster::start(&argc, &argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "brigade-train: %s\n", e.what());
      return 2;
    }
  return finish(run(argc, argv, cluster.get()), cluster.get());
#else
  return finish(run(argc, argv, nullptr), nullptr);  // --distributed is refused by run_training
#endif
}
