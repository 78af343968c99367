// brigade-train: the standalone trainer. tools/train/README.md explains the flags and the
// files; trainer.h is the run itself. Exit status: 0 done, 1 a run-time error (a bad data or
// model file, out of memory, a corrupt checkpoint), 2 a usage error, 130/143 stopped by
// SIGINT/SIGTERM after writing a checkpoint.
#include <cstdio>
#include <exception>

#include "tools/train/options.h"
#include "tools/train/trainer.h"

int main(int argc, char** argv) {
  using namespace brigade::train;
  try {
    const std::optional<Options> options = parse_options(argc, argv);
    if (!options) return 0;  // --help
    return run_training(*options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "brigade-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-train: error: %s\n", e.what());
    return 1;
  }
}
