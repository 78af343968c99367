// The picture of training (tools/plot/plot.h): the metrics read back, the means and ticks by
// hand, the points where the data puts them, brigade-plot over several runs, and
// brigade-train --plot.
#include <doctest/doctest.h>

#include <cmath>

#include <fstream>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"
#include "tools/plot/plot.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;
namespace plot = brigade::plot;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The x of every test dot, in document order.
std::vector<double> dot_xs(const std::string& svg) {
  // (No std::regex: GCC 12 warns falsely inside it under -O2 with the sanitizers.)
  std::vector<double> xs;
  const std::string dot = "<circle class=\"test\" cx=\"";
  for (size_t at = svg.find(dot); at != std::string::npos; at = svg.find(dot, at + 1))
    xs.push_back(std::stod(svg.substr(at + dot.size())));
  return xs;
}

const char* kMetrics =
    "{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"batch\":0,\"loss\":2.5,\"accuracy\":0.1}\n"
    "{\"kind\":\"step\",\"step\":2,\"epoch\":0,\"batch\":1,\"loss\":2.0,\"accuracy\":null}\n"
    "{\"kind\":\"eval\",\"step\":2,\"epoch\":0,\"test_loss\":1.9,\"test_accuracy\":0.3}\n"
    "{\"kind\":\"step\",\"step\":2,\"epoch\":0,\"batch\":1,\"loss\":1.5,\"accuracy\":0.4}\n"
    "{\"kind\":\"step\",\"step\":4,\"epoch\":0,\"batch\":3,\"loss\":1.0,\"accuracy\":0.6}\n"
    "{\"kind\":\"eval\",\"step\":4,\"epoch\":0,\"test_loss\":1.1,\"test_accuracy\":0.5}\n";

}  // namespace

TEST_CASE("plot: metrics read back; a step written twice (a resume) keeps the later line") {
  const fs::path dir = temp_dir("plot-read");
  const plot::Series s = plot::read_metrics(write_file(dir / "run-a.jsonl", kMetrics));
  CHECK(s.name == "run-a");
  REQUIRE(s.steps.size() == 3);
  CHECK(s.steps[1].step == 2);
  CHECK(s.steps[1].loss == 1.5);
  CHECK(*s.steps[1].accuracy == 0.4);
  REQUIRE(s.evals.size() == 2);
  CHECK(s.evals[1].loss == 1.1);
  const std::string bad = write_file(dir / "bad.jsonl", std::string(kMetrics) + "{\"kind\":\"step\"}\n");
  const std::string where = bad + ":7: a step line";
  CHECK_THROWS_WITH_AS(plot::read_metrics(bad), doctest::Contains(where.c_str()),
                       plot::MetricsError);
  CHECK_THROWS_WITH_AS(plot::read_metrics(write_file(dir / "text.jsonl", "epoch 1\n")),
                       doctest::Contains("text.jsonl:1: not a JSON line"), plot::MetricsError);
}

// JSON that is no --metrics line, and step numbers a run cannot have, are refused naming the
// file and line: they once aborted brigade-plot (an array, a kind that is a number: an
// exception thrown from the handler of another) or drew nonsense (1.5 as step 1, 1e30 at an
// x of -3.7e21, 2^64 - 1 as step -1).
TEST_CASE("plot: lines that are no --metrics output are refused with their file and line") {
  const fs::path dir = temp_dir("plot-bad-lines");
  const auto refusal = [&](const std::string& line) {
    const std::string file = write_file(dir / "m.jsonl", line + "\n");
    try {
      plot::read_metrics(file);
    } catch (const plot::MetricsError& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  const std::string where = (dir / "m.jsonl").string() + ":1: ";
  for (const char* line : {"[1,2]", "\"x\"", "3", "{\"kind\":5,\"step\":1,\"loss\":1}"}) {
    CAPTURE(line);
    CHECK(refusal(line) == where + "not a line of brigade-train's --metrics (a JSON object whose "
                                   "\"kind\" is a string)");
  }
  for (const char* step : {"1.5", "1e30", "18446744073709551615", "0", "-3", "\"2\""}) {
    CAPTURE(step);
    const std::string why = refusal(std::string("{\"kind\":\"step\",\"step\":") + step +
                                     ",\"loss\":1}");
    CHECK(why.starts_with(where + "a step line without the expected fields"));
    CHECK(why.find("not a step number from 1 to 2^53") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(plot::read_metrics(dir.string()), doctest::Contains("is a directory"),
                       plot::MetricsError);
}

// A diverging run's losses near a double's largest: the moving mean once overflowed to
// infinity, the y axis had no tick, and brigade-plot read past an empty vector (SIGSEGV).
TEST_CASE("plot: losses near a double's largest draw a finite plot") {
  CHECK(plot::moving_mean({1e308, 1e308, 1e308}, 2) == std::vector<double>{1e308, 1e308, 1e308});
  plot::Series run;
  run.name = "diverged";
  run.steps = {{1, 1e308, std::nullopt}, {2, 1.7e308, std::nullopt}};
  const std::string svg = plot::render_svg({run}, "diverged");
  CHECK(svg.find("inf") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK_THROWS_AS(plot::nice_ticks(0, HUGE_VAL, 5), std::invalid_argument);
}

TEST_CASE("plot: moving means and ticks by hand") {
  CHECK(plot::moving_mean({1, 3, 5, 7}, 2) == std::vector<double>{1, 2, 4, 6});
  CHECK(plot::moving_mean({4, 8}, 1) == std::vector<double>{4, 8});
  CHECK(plot::nice_ticks(0, 10, 5) == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(plot::nice_ticks(0, 2.1, 5) == std::vector<double>{0, 0.5, 1, 1.5, 2});
  CHECK(plot::nice_ticks(0, 300, 8) == std::vector<double>{0, 50, 100, 150, 200, 250, 300});
}

TEST_CASE("plot: each run's test points lie where their steps put them, both panels") {
  const fs::path dir = temp_dir("plot-render");
  const plot::Series a = plot::read_metrics(write_file(dir / "a.jsonl", kMetrics));
  plot::Series b = a;
  b.name = "b<&>";
  const std::string svg = plot::render_svg({a, b}, "two runs");
  CHECK(count(svg, "<circle class=\"test\"") == 2 * 2 * 2);  // runs x evaluations x panels
  CHECK(svg.find("b&lt;&amp;&gt;") != std::string::npos);     // the legend, escaped
  // Steps 0..4 span the plot's width, x = 72 .. 876: step 2 at 474, step 4 at 876.
  const std::vector<double> xs = dot_xs(svg);
  REQUIRE(xs.size() == 8);
  CHECK(xs[0] == doctest::Approx(474.0));
  CHECK(xs[1] == doctest::Approx(876.0));
  CHECK_THROWS_AS(plot::render_svg({plot::Series{}}, "empty"), std::invalid_argument);
}

TEST_CASE("plot: brigade-plot overlays runs; a bad file is named with its line, exit 2") {
  const char* tool = std::getenv("BRIGADE_PLOT");
  REQUIRE_MESSAGE(tool != nullptr, "BRIGADE_PLOT is not set: run through meson test");
  const fs::path dir = temp_dir("plot-cli");
  const std::string a = write_file(dir / "adam.jsonl", kMetrics);
  const std::string b = write_file(dir / "sgd.jsonl", kMetrics);
  const Run ok = run_command(std::string(tool) + " " + a + " " + b + " -o " + (dir / "c.svg").string());
  CAPTURE(ok.output);
  CHECK(ok.status == 0);
  const std::string svg = slurp(dir / "c.svg");
  CHECK(svg.find(">adam</text>") != std::string::npos);
  CHECK(svg.find(">sgd</text>") != std::string::npos);
  CHECK(svg.find("adam vs sgd") != std::string::npos);
  const std::string bad = write_file(dir / "bad.jsonl", "{\"kind\":\"eval\",\"step\":1}\n");
  const Run refused = run_command(std::string(tool) + " " + bad + " -o " + (dir / "d.svg").string());
  CHECK(refused.status == 2);
  CHECK(refused.output.find(bad + ":1:") != std::string::npos);
  CHECK(run_command(std::string(tool) + " " + a).status == 2);  // no -o
  CHECK(run_command(std::string(tool) + " " + a + " -o x.png").status == 2);
}

TEST_CASE("plot: brigade-train --plot draws the run, a test point per evaluation") {
  const fs::path dir = temp_dir("plot-train");
  const std::vector<std::string> base = {
      "--model", write_file(dir / "small.model", kSmallModel), "--data", "synthetic",
      "--synthetic-count", "320", "--batch", "32", "--devices", "cpu:0", "--steps", "6",
      "--eval-every", "2"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--plot", (dir / "run.svg").string()});
  const Run r = run_train(args);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string svg = slurp(dir / "run.svg");
  CHECK(count(svg, "<circle class=\"test\"") == 3 * 2);  // steps 2, 4, 6; two panels
  CHECK(count(svg, "<polyline class=\"mean\"") == 2);

  args = base;
  args.insert(args.end(), {"--plot", (dir / "nodir" / "x.svg").string()});
  const Run refused = run_train(args);
  CHECK(refused.status == 2);
  CHECK(refused.output.find("--plot '") != std::string::npos);
  CHECK(refused.output.find("loss") == std::string::npos);  // before any step
  args = base;
  args.insert(args.end(), {"--plot", (dir / "x.png").string()});
  CHECK(run_train(args).status == 2);
}
