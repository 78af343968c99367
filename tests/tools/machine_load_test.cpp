// The machine's load (tools/machine_load.h): /proc/loadavg read, the warning of a busy
// machine decided from it, and brigade-train printing that warning at its start exactly when
// the load this test reads around the run says the machine was busy throughout.
#include <doctest/doctest.h>

#include <thread>

#include "tests/tools/train/run_binary.h"
#include "tools/machine_load.h"

using namespace brigade::tools;
namespace fs = std::filesystem;

TEST_CASE("machine load: /proc/loadavg's form read, a file that is not one refused") {
  const fs::path dir = brigade::train::test::temp_dir("loadavg");
  const auto load = read_load_average(
      brigade::train::test::write_file(dir / "loadavg", "3.10 2.50 1.20 3/200 12345\n"));
  REQUIRE(load.has_value());
  CHECK(load->one == 3.10);
  CHECK(load->five == 2.50);
  CHECK(load->fifteen == 1.20);
  CHECK(describe_load(load) == "3.10 2.50 1.20");
  CHECK_FALSE(read_load_average((dir / "missing").string()).has_value());
  CHECK_FALSE(read_load_average(brigade::train::test::write_file(dir / "bad", "busy\n")));
  CHECK(describe_load(std::nullopt) == "unknown");
  fs::remove_all(dir);
}

TEST_CASE("machine load: a warning when others keep half of the cores busy, else none") {
  CHECK(busy_machine_warning(LoadAverage{0.2, 0.1, 0.1}, 2) == "");
  CHECK(busy_machine_warning(LoadAverage{0.99, 3, 3}, 2) == "");  // the last minute decides
  CHECK(busy_machine_warning(std::nullopt, 2) == "");
  CHECK(busy_machine_warning(LoadAverage{1.0, 0.5, 0.25}, 2) ==
        "warning: load average 1.00 0.50 0.25 on 2 cores: other work keeps this machine busy, "
        "so this run's timings (step times, samples/s, the bubble it measures, a --balance "
        "time cut) are what that work leaves, not this machine's speed");
  CHECK(busy_machine_warning(LoadAverage{8, 8, 8}, 16) != "");
  CHECK(busy_machine_warning(LoadAverage{7.9, 8, 8}, 16) == "");
}

TEST_CASE("machine load: brigade-train warns at its start when the machine is busy") {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto before = read_load_average();
  const brigade::train::test::Run r = brigade::train::test::run_train(
      {"--model", "tiny_cnn", "--data", "synthetic", "--synthetic-count", "64", "--batch", "32",
       "--steps", "1", "--devices", "cpu:0"});
  const auto after = read_load_average();
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  if (!before || !after) {
    MESSAGE("SKIP: no /proc/loadavg on this machine");
    return;
  }
  const bool busy = load_makes_timings_unreliable(*before, cores) &&
                    load_makes_timings_unreliable(*after, cores);
  const bool quiet = !load_makes_timings_unreliable(*before, cores) &&
                     !load_makes_timings_unreliable(*after, cores);
  const bool warned = r.output.find("warning: load average ") != std::string::npos;
  if (busy) CHECK(warned);
  if (quiet) CHECK_FALSE(warned);
  if (!busy && !quiet) MESSAGE("the load crossed the threshold during the run: not decided");
}
