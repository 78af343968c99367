// Pictures: the Chrome trace is valid trace-event JSON that says what the timeline says; the
// SVG draws one box per action.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/svg.h"

namespace bp = brigade::pipeline;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Chrome trace: one complete event per action, in microseconds") {
  const bp::Simulation sim = bp::simulate(bp::zb_h1(3, 4), bp::CostModel{});
  const auto doc = nlohmann::json::parse(bp::chrome_trace_json(sim.timeline));
  REQUIRE(doc.contains("traceEvents"));
  size_t complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const bp::Action a = bp::parse_action(e["name"].get<std::string>());
    // Find the timeline event it came from and compare.
    bool found = false;
    for (const bp::TimelineEvent& t : sim.timeline.events)
      if (t.action == a) {
        found = true;
        CHECK(e["pid"] == t.device);
        CHECK(e["tid"] == t.lane);
        CHECK(e["ts"].get<double>() == doctest::Approx(t.start * 1000));
        CHECK(e["dur"].get<double>() == doctest::Approx((t.end - t.start) * 1000));
        CHECK(e["args"]["microbatch"] == a.microbatch);
      }
    CHECK(found);
    ++complete;
  }
  CHECK(complete == sim.timeline.events.size());
  CHECK(complete == 3 * 4 * 3);  // p · m · {F, B, W}
}

TEST_CASE("SVG: a labelled box per action, a row label per device, a legend") {
  const bp::Simulation a = bp::simulate(bp::gpipe(2, 3), bp::CostModel{});
  const bp::Simulation b = bp::simulate(bp::interleaved_1f1b(2, 2, 2), bp::CostModel{});
  const std::string svg = bp::timeline_svg({a.timeline, b.timeline});
  CHECK(svg.rfind("<svg xmlns='http://www.w3.org/2000/svg'", 0) == 0);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<title>") == int(a.timeline.events.size() + b.timeline.events.size()));
  CHECK(count(svg, ">device 0<") == 2);
  CHECK(count(svg, "<title>0BW2 [") == 1);
  for (const char* legend : {"F forward", "B input grad", "W weight grad", "BW fused B+W"})
    CHECK(count(svg, legend) == 1);
}

// A row label ends 8 px left of the plot: the plot starts far enough right for the longest
// ("device 11 receive", 17 characters) at 7 px a character, instead of clipping it.
TEST_CASE("SVG: the left margin makes room for the longest row label") {
  bp::Timeline t;
  t.devices = 12;
  t.lanes = {"compute", "send", "receive"};
  t.events = {{11, 2, {11, bp::Op::F, 0}, 0, 1}};
  const std::string svg = bp::timeline_svg({t});
  const std::string label = ">device 11 receive<";
  REQUIRE(count(svg, label) == 1);
  // The label is anchored at its end, 8 px left of the plot: 17 characters must fit before it.
  const size_t text = svg.rfind("<text x='", svg.find(label));
  const double label_end = std::stod(svg.substr(text + 9));
  CHECK(label_end >= 17 * 7 + 10);
}

TEST_CASE("Chrome trace of lowered lists: send and receive lanes, an arrow per transfer") {
  bp::CostModel costs;
  costs.comm = 0.5;
  const bp::Simulation sim = bp::simulate(bp::lower(bp::one_f_one_b(3, 2)), costs);
  const auto doc = nlohmann::json::parse(bp::chrome_trace_json(sim.timeline));
  std::map<int, nlohmann::json> starts, ends;  // flow id -> its two halves
  std::vector<std::string> lanes;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<int>()] = e;
    if (e["ph"] == "f") ends[e["id"].get<int>()] = e;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0)
      lanes.push_back(e["args"]["name"].get<std::string>());
  }
  CHECK(lanes == std::vector<std::string>{"compute", "send", "recv"});
  REQUIRE(starts.size() == sim.timeline.flows.size());
  CHECK(starts.size() == 2 * 2 * 2);  // 2 boundaries, 2 micro-batches, activation and gradient
  for (size_t k = 0; k < sim.timeline.flows.size(); ++k) {
    const bp::TimelineEvent& send = sim.timeline.events[sim.timeline.flows[k].from];
    const bp::TimelineEvent& recv = sim.timeline.events[sim.timeline.flows[k].to];
    REQUIRE(ends.count(int(k)) == 1);
    const auto& s = starts[int(k)];
    const auto& f = ends[int(k)];
    CHECK(s["name"] == bp::event_name(sim.timeline, send));  // "0SF1", "2SB0", ...
    CHECK(s["pid"] == send.device);
    CHECK(s["tid"] == 1);
    CHECK(s["ts"].get<double>() == doctest::Approx(send.start * 1000));
    CHECK(f["pid"] == recv.device);
    CHECK(f["tid"] == 2);
    CHECK(f["bp"] == "e");
    CHECK(f["ts"].get<double>() == doctest::Approx(recv.end * 1000));
  }
  // The complete events on the transfer lanes are named as lowering names them.
  int sends = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == 1) {
      const bp::Instruction i = bp::parse_instruction(e["name"].get<std::string>());
      CHECK(bp::lane_of(i.kind) == bp::Lane::Send);
      ++sends;
    }
  CHECK(sends == 8);
  const std::string svg = bp::timeline_svg({sim.timeline});
  CHECK(count(svg, ">device 2 recv<") == 1);
  CHECK(count(svg, "<title>1RF0 [") == 1);
  // A receive's bar is waiting, then arrival: striped, with a legend that says so. Every event
  // on a recv lane, and only those, is drawn with a pattern.
  int receives = 0;
  for (const bp::TimelineEvent& e : sim.timeline.events) receives += e.lane == 2;
  REQUIRE(receives > 0);
  CHECK(count(svg, "fill='url(#receive-") == receives + 1);  // + the legend's swatch
  CHECK(count(svg, "<pattern id='receive-F'") == 1);
  CHECK(count(svg, "striped, on a recv row = a receive") == 1);
  // A timeline without transfer lanes has neither.
  const bp::Simulation compute_only = bp::simulate(bp::gpipe(2, 3), bp::CostModel{});
  const std::string plain = bp::timeline_svg({compute_only.timeline});
  CHECK(count(plain, "url(#receive-") == 0);
  CHECK(count(plain, "striped") == 0);
}
