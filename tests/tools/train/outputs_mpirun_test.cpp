// What a run writes under mpirun: every rank's devices in --metrics, and every rank's events in
// --trace on rank 0's clock, with an arrow from each send to its receive; and the parts of
// tools/train/rank_reports.h behind them, a rank's timeline packed and moved onto rank 0's.
// The same outputs of one process are outputs_test.cpp's.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tests/tools/train/outputs_run.h"
#include "tests/tools/train/run_binary.h"
#if defined(BRIGADE_HAVE_MPI)
#include "tools/train/rank_reports.h"
#endif

using namespace brigade::train::test;
namespace fs = std::filesystem;

// Under mpirun rank 0 writes the files, but each rank measures only its own device: the
// metrics' peak_memory named rank 0's device alone, and the trace drew rank 1's device as
// empty lanes, and sent_bytes counted rank 0's sends alone. Both now hold every rank's
// (rank_reports.h; sent_bytes as one process on two devices counts them), and rank 1's events
// sit on rank 0's clock: each receive ends after the other rank's action that made its tensor.
TEST_CASE("outputs: --metrics and --trace: under mpirun, every rank's devices and events") {
  if (!have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  const fs::path dir = temp_dir("outputs-mpirun");
  const fs::path metrics = dir / "m.jsonl", json = dir / "t.json";
  // Two ranks, one per device block of the model; 4 micro-batches (2 x stages).
  const Run r = run_command(
      "mpirun --allow-run-as-root --oversubscribe -np 2 " +
      train_command(quick_on(dir, "cpu", {"--distributed", "--steps", "2", "--metrics",
                                          metrics.string(), "--trace", json.string()})));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  // The same run in one process, on two CPU devices: its sent_bytes, each step's, are what
  // the ranks' add up to (rank 0 sends the activations, rank 1 the gradients).
  const fs::path alone = dir / "alone.jsonl";
  run_train_ok(quick_on(dir, "cpu:0,cpu:1", {"--steps", "2", "--metrics", alone.string()}));
  std::vector<uint64_t> sent_alone;
  std::ifstream alone_in(alone);
  for (std::string line; std::getline(alone_in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == "step") sent_alone.push_back(j["sent_bytes"].get<uint64_t>());
  }
  REQUIRE(sent_alone.size() == 2u);
  std::ifstream in(metrics);
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] != "step") continue;
    CAPTURE(line);
    CHECK(j["peak_memory"].size() == 2u);
    CHECK(j["peak_memory"].value("rank 0 cpu:0", uint64_t{0}) > 0);
    CHECK(j["peak_memory"].value("rank 1 cpu:1", uint64_t{0}) > 0);
    CHECK(sent_alone[static_cast<size_t>(steps)] > 0);
    CHECK(j["sent_bytes"].get<uint64_t>() == sent_alone[static_cast<size_t>(steps)]);
    ++steps;
  }
  CHECK(steps == 2);

  const nlohmann::json trace = nlohmann::json::parse(slurp(json));
  std::vector<int> computes(2, 0);  // [device]: its compute lane's events
  // When each compute action ended: (stage, "F" or "B" for B and BW, micro-batch) -> µs.
  std::map<std::tuple<int, std::string, int>, double> computed;
  std::vector<nlohmann::json> receives;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int pid = e["pid"].get<int>();
    REQUIRE((pid == 0 || pid == 1));
    // A rank whose step began before rank 0's once had events before 0, drawn left of an
    // SVG's axis: the trace starts at its earliest event.
    CHECK(e["ts"].get<double>() >= 0);
    const nlohmann::json& a = e["args"];
    const std::string op = a["op"] == "F" ? "F" : "B";
    if (e["tid"] == 0) {
      ++computes[static_cast<size_t>(pid)];
      computed[{a["stage"].get<int>(), op, a["microbatch"].get<int>()}] =
          e["ts"].get<double>() + e["dur"].get<double>();
    }
    if (e["tid"] == 2) receives.push_back(e);
  }
  // Each device runs its stage's F and BW of each micro-batch.
  CHECK(computes[0] == 8);
  CHECK(computes[1] == 8);
  // Rank 1 receives each micro-batch's activation, rank 0 its gradient. A receive cannot end
  // before the other rank's action that made its tensor ended: true on one clock only. The
  // clocks agree within half a round trip between the ranks, microseconds here: 1 ms (1000
  // in the trace's microseconds) leaves room for a loaded machine.
  CHECK(receives.size() == 8);
  for (const nlohmann::json& receive : receives) {
    CAPTURE(receive.dump());
    const nlohmann::json& a = receive["args"];
    const bool activation = a["op"] == "F";
    const auto made = computed.find({a["stage"].get<int>() + (activation ? -1 : 1),
                                     activation ? "F" : "B", a["microbatch"].get<int>()});
    REQUIRE(made != computed.end());
    CHECK(receive["ts"].get<double>() + receive["dur"].get<double>() > made->second - 1000);
  }
  // An arrow from each send to its receive on the other rank, as between two devices of one
  // process: a flow's start ("s", on the sender's send lane) and finish ("f", at the
  // receive's end), paired by id, named by the send ("0SF3").
  std::map<uint64_t, nlohmann::json> flow_starts, flow_ends;  // by flow id
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "s") flow_starts[e["id"].get<uint64_t>()] = e;
    if (e["ph"] == "f") flow_ends[e["id"].get<uint64_t>()] = e;
  }
  CHECK(flow_starts.size() == flow_ends.size());
  for (const nlohmann::json& receive : receives) {
    CAPTURE(receive.dump());
    const nlohmann::json& a = receive["args"];
    const bool activation = a["op"] == "F";
    const int sender = a["stage"].get<int>() + (activation ? -1 : 1);
    const std::string send = std::to_string(sender) + (activation ? "SF" : "SB") +
                             std::to_string(a["microbatch"].get<int>());
    const double received = receive["ts"].get<double>() + receive["dur"].get<double>();
    int arrows = 0;
    for (const auto& id_end : flow_ends) {
      const nlohmann::json& end = id_end.second;
      if (end["name"] != send || end["pid"] != receive["pid"] || end["tid"] != 2) continue;
      ++arrows;
      const auto start = flow_starts.find(id_end.first);
      REQUIRE(start != flow_starts.end());
      const nlohmann::json& from = start->second;
      CAPTURE(from.dump());
      CHECK(from["pid"].get<int>() == 1 - receive["pid"].get<int>());  // from the other rank
      CHECK(from["tid"] == 1);                                          // its send lane
      CHECK(end["ts"].get<double>() == doctest::Approx(received));
      // Sent before it arrived, on one clock within the ranks' tolerance above.
      CHECK(from["ts"].get<double>() <= received + 1000);
    }
    CHECK(arrows == 1);
  }
}

#if defined(BRIGADE_HAVE_MPI)
// A rank's events travel as numbers from its own time 0 and land on rank 0's: one mpirun on
// one host cannot show the arithmetic wrong (its ranks share a clock, offset 0), so here a
// worked example does. A peer whose clock reads 5 ms more than rank 0's, and whose step began
// at 102 ms on it (97 ms on rank 0's), sent an event at 1..2 ms; rank 0's step began at 100
// ms: the event is at -2..-1 ms on rank 0's timeline.
TEST_CASE("outputs: a rank's trace events move onto rank 0's clock by its measured offset") {
  brigade::pipeline::Timeline peer;
  peer.sent_bytes = 4096;
  peer.events.push_back({.device = 1, .lane = 2, .action = {}, .start = 1.0, .end = 2.0});
  constexpr int64_t kMs = 1'000'000;  // ns
  const std::string bytes = brigade::train::pack_timeline(peer, 102 * kMs);
  brigade::pipeline::Timeline here;
  CHECK(brigade::train::unpack_timeline_into(here, bytes, 5 * kMs, 100 * kMs) == 4096u);
  REQUIRE(here.events.size() == 1u);
  CHECK(here.events[0].device == 1);
  CHECK(here.events[0].lane == 2);
  CHECK(here.events[0].start == doctest::Approx(-2.0).epsilon(1e-12));
  CHECK(here.events[0].end == doctest::Approx(-1.0).epsilon(1e-12));
}

// A step's peaks ride in the sum of the step's agreement (MpiRanks::agree_on_step): each rank
// fills its own slots and zeros the others', and the sum, done here by hand as MPI_SUM does it,
// reads back as every rank's devices, named by rank; a peak of 0 bytes stays one, and bytes
// past 2^32 come back exact.
TEST_CASE("outputs: a step's peaks summed over the ranks read back as every rank's") {
  constexpr int kRanks = 2, kSlots = 2;  // two ranks, pipelines of two devices
  const std::vector<double> rank0 =
      brigade::train::peak_words({{"cpu:0", 31457280}}, 0, kRanks, kSlots);
  const std::vector<double> rank1 = brigade::train::peak_words(
      {{"cuda:3", (uint64_t{1} << 40) + 1}, {"cpu:0", 0}}, 1, kRanks, kSlots);
  REQUIRE(rank0.size() == rank1.size());
  std::vector<double> summed(rank0.size());
  for (size_t i = 0; i < summed.size(); ++i) summed[i] = rank0[i] + rank1[i];
  const std::map<std::string, uint64_t> expected = {{"rank 0 cpu:0", 31457280},
                                                    {"rank 1 cpu:0", 0},
                                                    {"rank 1 cuda:3", (uint64_t{1} << 40) + 1}};
  CHECK(brigade::train::peaks_of_words(summed, kSlots) == expected);
  // A rank measures at most its pipeline's devices: more has no slot to go in.
  CHECK_THROWS(brigade::train::peak_words({{"cpu:0", 1}, {"cpu:1", 1}, {"cpu:2", 1}}, 0,
                                          kRanks, kSlots));
}
#endif
