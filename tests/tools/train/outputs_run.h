// The quick run of brigade-train that outputs_test.cpp and outputs_mpirun_test.cpp write their
// files from: the small model (run_binary.h) on 128 synthetic samples, batch 32, one epoch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"

namespace brigade::train::test {

// The arguments of that run on `devices`, `extra` after them.
inline std::vector<std::string> quick_on(const std::filesystem::path& dir,
                                         const std::string& devices,
                                         std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "128",
                                   "--batch", "32", "--devices", devices, "--epochs", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace brigade::train::test
