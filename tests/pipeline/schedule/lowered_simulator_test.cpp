// The simulator on lowered lists: the compute-only simulator's times where no send queues
// (every generator with comm = 0, a hand case with comm > 0), the cost of a queue worked out
// by hand, and one flow from each send to its receive.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/simulator.h"

namespace bp = brigade::pipeline;

namespace {

// (device, action) -> (start, end) of the compute-lane events.
std::map<std::pair<int, bp::Action>, std::pair<double, double>> compute_times(
    const bp::Timeline& t) {
  std::map<std::pair<int, bp::Action>, std::pair<double, double>> out;
  for (const bp::TimelineEvent& e : t.events)
    if (e.lane == 0) out[{e.device, e.action}] = {e.start, e.end};
  return out;
}

// "start-end" of every event on device d, lane by lane, in the order they ran.
std::string lane_story(const bp::Timeline& t, int d) {
  std::string out;
  for (size_t lane = 0; lane < t.lanes.size(); ++lane) {
    out += t.lanes[lane] + ":";
    for (const bp::TimelineEvent& e : t.events)
      if (e.device == d && e.lane == static_cast<int>(lane)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s[%g,%g]", bp::event_name(t, e).c_str(), e.start,
                      e.end);
        out += buf;
      }
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("comm = 0: every compute action at the compute-only simulator's times") {
  for (const std::string& name : bp::schedule_names())
    for (int p = 1; p <= 4; ++p)
      for (int m : {1, 2, 3, 4, 8}) {
        bp::Schedule s;
        try {
          s = bp::make_schedule(name, p, m, name == "interleaved-1f1b" ? 2 : 1);
        } catch (const std::invalid_argument&) {
          continue;
        }
        CAPTURE(name);
        CAPTURE(p);
        CAPTURE(m);
        bp::CostModel costs;  // uneven stages, so that equal times are not a coincidence
        for (int st = 0; st < s.stages(); ++st)
          costs.stages.push_back({1.0 + st % 3, 0.5 + st % 2, 0.75, 1, 1.5 + 0.25 * st});
        const bp::Simulation plain = bp::simulate(s, costs);
        const bp::Simulation lowered = bp::simulate(bp::lower(s), costs);
        CHECK(lowered.stats.makespan == plain.stats.makespan);
        CHECK(compute_times(lowered.timeline) == compute_times(plain.timeline));
        for (int d = 0; d < p; ++d)
          CHECK(lowered.stats.devices[d].peak_in_flight == plain.stats.devices[d].peak_in_flight);
      }
}

TEST_CASE("comm > 0, no send queues: the same times as the compute-only simulator") {
  // The hand-worked GPipe of simulator_test.cpp: stage 0 F=1 BW=2, stage 1 F=3 BW=2,
  // comm 0.5, makespan 14. Each transfer shows on both lanes; e.g. 1SB0 [9.5, 10] is paid on
  // device 1's send lane and waited for on device 0's receive lane.
  bp::CostModel costs;
  costs.stages = {{1, 2, 0, 10}, {3, 1, 1, 100}};
  costs.comm = 0.5;
  const bp::Simulation plain = bp::simulate(bp::gpipe(2, 2), costs);
  const bp::Simulation lowered = bp::simulate(bp::lower(bp::gpipe(2, 2)), costs);
  CHECK(lowered.stats.makespan == doctest::Approx(14));
  CHECK(compute_times(lowered.timeline) == compute_times(plain.timeline));
  CHECK(lane_story(lowered.timeline, 0) ==
        "compute: 0F0[0,1] 0F1[1,2] 0BW0[10,12] 0BW1[12,14]\n"
        "send: 0SF0[1,1.5] 0SF1[2,2.5]\n"
        "recv: 0RB0[9.5,10] 0RB1[11.5,12]\n");
  CHECK(lane_story(lowered.timeline, 1) ==
        "compute: 1F0[1.5,4.5] 1F1[4.5,7.5] 1BW0[7.5,9.5] 1BW1[9.5,11.5]\n"
        "send: 1SB0[9.5,10] 1SB1[11.5,12]\n"
        "recv: 1RF0[1,1.5] 1RF1[2,2.5]\n");
}

TEST_CASE("comm > 0, a send queues behind another: the cost shows where it is paid") {
  // Unit costs, comm 2. Device 0 makes 0F1 at 2 but its send lane is busy with 0SF0 until 3:
  // 1F1 starts at 5, not at 4 as in the compute-only model, where links are never busy.
  bp::CostModel costs;
  costs.comm = 2;
  const bp::Schedule s = bp::gpipe(2, 2);
  CHECK(bp::simulate(s, costs).stats.makespan == doctest::Approx(13));
  const bp::Simulation lowered = bp::simulate(bp::lower(s), costs);
  CHECK(lowered.stats.makespan == doctest::Approx(14));
  CHECK(lane_story(lowered.timeline, 0) ==
        "compute: 0F0[0,1] 0F1[1,2] 0BW0[10,12] 0BW1[12,14]\n"
        "send: 0SF0[1,3] 0SF1[3,5]\n"
        "recv: 0RB0[8,10] 0RB1[10,12]\n");
  CHECK(lane_story(lowered.timeline, 1) ==
        "compute: 1F0[3,4] 1F1[5,6] 1BW0[6,8] 1BW1[8,10]\n"
        "send: 1SB0[8,10] 1SB1[10,12]\n"
        "recv: 1RF0[1,3] 1RF1[3,5]\n");
}

TEST_CASE("one flow from each send to its receive") {
  const bp::LoweredSchedule l = bp::lower(bp::interleaved_1f1b(2, 4, 2));
  bp::CostModel costs;
  costs.comm = 0.25;
  const bp::Simulation sim = bp::simulate(l, costs);
  const bp::Timeline& t = sim.timeline;
  size_t transfers = 0;
  for (const auto& list : l.lists)
    for (const bp::Instruction& i : list) transfers += bp::lane_of(i.kind) == bp::Lane::Send;
  REQUIRE(t.flows.size() == transfers);
  CHECK(transfers == 2 * 3 * 4);  // 3 boundaries, 4 micro-batches, activation and gradient
  for (const bp::Flow& f : t.flows) {
    const bp::TimelineEvent& send = t.events.at(f.from);
    const bp::TimelineEvent& recv = t.events.at(f.to);
    CAPTURE(bp::event_name(t, send));
    CHECK(t.lanes[send.lane] == "send");
    CHECK(t.lanes[recv.lane] == "recv");
    CHECK(send.device != recv.device);
    const bp::Instruction sent = bp::parse_instruction(bp::event_name(t, send));
    CHECK(bp::event_name(t, recv) == bp::to_string(bp::partner(sent)));
    CHECK(recv.start >= send.start);
    CHECK(recv.end >= send.end);  // it has arrived
  }
}
