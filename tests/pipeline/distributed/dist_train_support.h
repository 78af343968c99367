// What the tests of brigade-train --distributed share (parity_test.cpp, failure_test.cpp):
// brigade-train run alone and under `mpirun -np ranks`, each bounded by `timeout` so that a
// hang becomes a failure; the small three-stage model and its recipe; and the comparison of
// two saved parameter files. BRIGADE_MPIRUN and BRIGADE_TRAIN come from meson.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "tests/tools/train/run_binary.h"

namespace brigade::distributed::test {

namespace fs = std::filesystem;

using brigade::train::test::Run;
using brigade::train::test::run_command;
using brigade::train::test::temp_dir;

inline std::string quoted(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += " '" + a + "'";
  return s;
}

// brigade-train alone, and under `mpirun -np ranks`; each bounded by `timeout`.
inline Run train(const std::vector<std::string>& args) {
  return run_command(std::string("timeout 300 ") + BRIGADE_TRAIN + quoted(args));
}
inline Run train_mpi(int ranks, const std::vector<std::string>& args) {
  return run_command(std::string("timeout 300 ") + BRIGADE_MPIRUN +
                     " --oversubscribe --allow-run-as-root -np " + std::to_string(ranks) + " " +
                     BRIGADE_TRAIN + quoted(args));
}

// Three device blocks, 11,042 parameters, dropout in two stages (so masks must agree).
inline constexpr const char* kModel =
    "input 28x28x1\n"
    "device 0\n"
    "conv2d filters=4 kernel=3x3 activation=relu\n"
    "maxpool2d pool=2x2\n"
    "device 1\n"
    "dropout rate=0.25\n"
    "flatten\n"
    "dense units=16 activation=relu\n"
    "device 2\n"
    "dropout rate=0.5\n"
    "dense units=10 activation=softmax\n";

inline std::vector<std::string> recipe(const fs::path& dir, int microbatches) {
  const fs::path model = dir / "three.model";
  if (!fs::exists(model)) std::ofstream(model) << kModel;
  return {"--model", model.string(), "--data", "synthetic", "--synthetic-count", "240",
          "--batch", "24", "--steps", "4", "--microbatches", std::to_string(microbatches),
          "--optimizer", "adam", "--lr", "0.01",
          // one thread per device in both runs, whatever the machine: the same kernels' splits
          "--threads-per-device", "1"};
}

inline std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The recipe for GPUs: without its thread count, which is a CPU device's (brigade-train refuses
// one for a GPU).
inline std::vector<std::string> on_gpus(std::vector<std::string> a) {
  const auto at = std::find(a.begin(), a.end(), "--threads-per-device");
  if (at != a.end()) a.erase(at, at + 2);
  return a;
}

// Every tensor of two safetensors files: bit-identical, or within 1e-5 (1 + |b|).
inline void check_same(const fs::path& got, const fs::path& want, bool exact) {
  const auto a = brigade::safetensors::read_file(got.string());
  const auto b = brigade::safetensors::read_file(want.string());
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& t : b.tensors) {
    CAPTURE(t.name);
    const auto* u = a.find(t.name);
    REQUIRE(u != nullptr);
    const auto x = a.bytes(*u), y = b.bytes(t);
    REQUIRE(x.size() == y.size());
    std::vector<float> fx(x.size() / 4), fy(y.size() / 4);
    std::memcpy(fx.data(), x.data(), x.size());
    std::memcpy(fy.data(), y.data(), y.size());
    for (size_t i = 0; i < fx.size(); ++i) {
      const bool ok = exact ? fx[i] == fy[i]
                            : std::fabs(fx[i] - fy[i]) <= 1e-5 * (1 + std::fabs(fy[i]));
      if (!ok) {
        FAIL_CHECK("element " << i << ": " << fx[i] << " vs " << fy[i]
                              << (exact ? " (expected bit-exact)" : " beyond 1e-5"));
        break;
      }
    }
  }
}

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace brigade::distributed::test
