// The commands of the docs that the docs test does not run, each with the reason. Reviewed by
// hand: a command is listed here only when it needs a GPU, a download, several machines or
// minutes; every other ```sh line of README.md and docs/*.md runs. An entry that matches no
// command any more fails the test, so the list cannot outlive the docs.
#pragma once

#include <string>
#include <vector>

namespace brigade::docs_test {

struct NotRun {
  std::string page;     // "README.md", "docs/distributed.md", ...; a page alone: all its commands
  std::string command;  // the command exactly as written (its first line), "" for the whole page
  std::string reason;
};

inline const std::vector<NotRun>& not_run() {
  static const std::vector<NotRun> list = {
      {"README.md", "tools/setup.sh && build/tools/brigade-train",
       "installs Debian packages and builds (minutes)"},
      {"README.md", "tools/setup.sh && meson test -C build",
       "installs and builds, then runs every suite, this test among them (minutes)"},
      {"docs/distributed.md",
       "mpirun --allow-run-as-root --oversubscribe -np 4 build/tools/brigade-train --distributed "
       "--devices cuda   # a GPU per rank, NCCL",
       "needs a GPU per rank"},
      {"docs/distributed.md",
       "mpirun --hostfile hosts -np 6 build/tools/brigade-train --distributed --data-parallel 2 \\",
       "needs the machines of a hostfile"},
      {"docs/benchmarks.md",
       "env OPENBLAS_CORETYPE=Haswell build/tools/brigade-bench --level both --impls cpu "
       "--threads 1 --batch 128 --batches 128 --reps 5 --precision fp32,bf16 --json "
       "bf16-haswell.json",
       "a measurement of both precisions at both levels: about a minute on 2 cores"},
      {"docs/benchmarks.md",
       "env -u OPENBLAS_CORETYPE build/tools/brigade-bench --level both --impls cpu --threads 1 "
       "--batch 128 --batches 128 --reps 5 --precision fp32,bf16 --json bf16-avx512.json",
       "a measurement of both precisions at both levels: about a minute on 2 cores"},
      {"docs/gpu.md", "",
       "every command needs a GPU, the CUDA toolkit, a download or a build of minutes"},
  };
  return list;
}

}  // namespace brigade::docs_test
