// Pictures: the Chrome trace is valid trace-event JSON that says what the timeline says; the
// SVG draws one box per action.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "pipeline/chrome_trace.h"
#include "pipeline/generators/generators.h"
#include "pipeline/simulator.h"
#include "pipeline/svg.h"

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
