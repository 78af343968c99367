// Every model shipped in tools/models/ trains, in every tool that takes --model: a few steps of
// brigade-train (by name, as a user types it, on its own device blocks) and of
// brigade-bench-pipeline --train, each loss finite. mlp.model did not (its input was (1, 784)
// while the data is 28x28x1; issue 20).
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> shipped_models() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(BRIGADE_MODELS_DIR))
    if (entry.path().extension() == ".model") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Every number after "loss" in the output, in order.
std::vector<double> losses(const std::string& output) {
  // (No std::regex: GCC 12 warns falsely inside it under -O2 with the sanitizers, and CI
  // builds with -Werror.)
  std::vector<double> out;
  for (size_t at = output.find("loss"); at != std::string::npos;
       at = output.find("loss", at + 4)) {
    size_t i = at + 4;  // skip to the number: anything but a digit or '-', or "nan"/"inf"
    while (i < output.size() && !std::isdigit(static_cast<unsigned char>(output[i])) &&
           output[i] != '-' && output.compare(i, 3, "nan") != 0 && output.compare(i, 3, "inf") != 0)
      ++i;
    if (i < output.size()) out.push_back(std::strtod(output.c_str() + i, nullptr));
  }
  return out;
}

}  // namespace

TEST_CASE("models: every file in tools/models trains a few steps in brigade-train, by name") {
  const std::vector<fs::path> files = shipped_models();
  REQUIRE(files.size() >= 3);
  for (const fs::path& file : files) {
    const std::string name = file.stem().string();
    CAPTURE(name);
    const Run r = run_train({"--model", name, "--data", "synthetic", "--synthetic-count", "192",
                             "--batch", "48", "--steps", "3", "--print-every", "1"});
    CAPTURE(r.output);
    CHECK(r.status == 0);
    const std::vector<double> l = losses(r.output);
    CHECK(l.size() >= 3);  // a line per step, then the evaluation
    for (double v : l) CHECK(std::isfinite(v));
    CHECK(r.output.find("test accuracy") != std::string::npos);
  }
}

TEST_CASE("models: every file in tools/models trains in brigade-bench-pipeline --train") {
  const char* bench = std::getenv("BRIGADE_BENCH_PIPELINE");
  REQUIRE_MESSAGE(bench != nullptr, "BRIGADE_BENCH_PIPELINE is not set: run through meson test");
  for (const fs::path& file : shipped_models()) {
    CAPTURE(file);
    const Run named = run_command(std::string(bench) + " --model " + file.stem().string() +
                                  " --train 2");
    CAPTURE(named.output);
    CHECK(named.status == 0);
    const std::vector<double> l = losses(named.output);
    CHECK(l.size() == 2);
    for (double v : l) CHECK(std::isfinite(v));
  }
}

TEST_CASE("models: `dense units=10` then `softmax` trains exactly as `activation=softmax`") {
  // The loss applies the softmax; before issue 20 the `softmax` line applied it a second
  // time (test loss 1.96 against 0.93).
  const fs::path dir = temp_dir("softmax");
  std::string folded = kSmallModel;
  folded.replace(folded.find("dense units=10 activation=softmax"),
                 std::string("dense units=10 activation=softmax").size(),
                 "dense units=10\nsoftmax");
  const auto run = [&](const std::string& name, const std::string& text) {
    const Run r = run_train({"--model", write_file(dir / name, text), "--data", "synthetic",
                             "--synthetic-count", "256", "--batch", "32", "--steps", "6",
                             "--print-every", "1"});
    CAPTURE(r.output);
    CHECK(r.status == 0);
    return losses(r.output);
  };
  const std::vector<double> written = run("written.model", kSmallModel);
  const std::vector<double> as_layer = run("layer.model", folded);
  REQUIRE(written.size() >= 6);
  CHECK(as_layer == written);  // the same spec: bit for bit the same run
}
