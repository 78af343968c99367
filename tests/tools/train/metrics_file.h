// Reading a --metrics file (JSON lines) in the trainer's tests: the loss of every step line,
// checking that the steps are numbered 1, 2, 3, ... as the file promises.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brigade::train::test {

inline std::vector<double> step_losses(const std::filesystem::path& metrics) {
  std::ifstream in(metrics);
  REQUIRE_MESSAGE(in.good(), "no metrics file " << metrics);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] != "step") continue;
    CHECK(j["step"].get<int64_t>() == static_cast<int64_t>(out.size()) + 1);
    out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace brigade::train::test
