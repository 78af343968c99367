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
// alike (a usage error, a refused checkpoint, a missing data set) is printed by rank 0 and
// every rank exits with its status; an error of one rank, a refusal of its own host or
// environment included, ends the whole job naming that rank (distributed.h).
// Whether this process trains alone or as a rank is chosen once, in start_processes().
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "tools/train/lone_process.h"
#include "tools/train/options.h"
#include "tools/train/trainer.h"
#include "tools/train/training_processes.h"
#if defined(BRIGADE_HAVE_MPI)
#include "tools/train/distributed.h"  // MpiRanks: built where Meson finds MPI
#endif

namespace {

using brigade::train::TrainingProcesses;

// The one place that chooses how this process trains: as a rank of the mpirun job when
// argv asks for --distributed in a build with MPI (MPI starts here, before anything else),
// else alone (a build without MPI then refuses --distributed in run_training, and uses
// neither argument).
std::unique_ptr<TrainingProcesses> start_processes([[maybe_unused]] int* argc,
                                                   [[maybe_unused]] char*** argv) {
#if defined(BRIGADE_HAVE_MPI)
  if (brigade::train::wants_distributed(*argc, *argv))
    return brigade::train::MpiRanks::start(argc, argv);
#endif
  return std::make_unique<brigade::train::LoneProcess>();
}

// A refusal before the first step (status 2), said once: by the reporter where every process
// refused, else, under mpirun, by the rank that alone refused as it ends the job.
int refused(TrainingProcesses& processes, const char* what, const char* kind) {
  if (!processes.agree_on_refusal()) processes.end_job_for_own_error(what);
  if (processes.is_reporter()) std::fprintf(stderr, "brigade-train: %s%s\n", kind, what);
  return 2;
}

int run(int argc, char** argv, TrainingProcesses& processes) {
  using namespace brigade::train;
  try {
    const std::optional<Options> options = parse_options(argc, argv);
    if (!options) return 0;  // --help
    return run_training(*options, processes);
  } catch (const UsageError& e) {
    return refused(processes, e.what(), "");
  } catch (const InputError& e) {  // refused before the first step
    return refused(processes, e.what(), "error: ");
  } catch (const AllRanksError& e) {
    if (processes.is_reporter()) std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return e.status();
  } catch (const std::exception& e) {
    processes.end_job_for_own_error(e.what());
    std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return 1;
  }
}

// A run that failed may leave work queued on CPU streams (the failed step's tail, behind the
// error that stopped it): their workers would still be calling into OpenBLAS while static
// destructors tear the process down. A failed single-process run therefore ends at once,
// after flushing what it printed; everything it writes is already renamed into place or
// was never started. (Under mpirun the ranks' own shutdown ends the job.)
int finish(int status, const TrainingProcesses& processes) {
  if (status == 0 || processes.distributed()) return status;
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<TrainingProcesses> processes;
  try {
    processes = start_processes(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-train: %s\n", e.what());
    return 2;
  }
  return finish(run(argc, argv, *processes), *processes);
}
