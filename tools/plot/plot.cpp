#include "tools/plot/plot.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace brigade::plot {

namespace {

// The largest step number taken: a double holds every whole number up to it exactly, and the
// plot's x axis is drawn in doubles.
constexpr int64_t kLastStep = int64_t{1} << 53;

// Field `key` of line j: a step number (a whole number from 1 to 2^53), else a JSON type
// error, which read_metrics names with the line.
int64_t step_of(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > kLastStep) ||
      v.get<int64_t>() < 1 || v.get<int64_t>() > kLastStep)
    throw std::invalid_argument(std::string("\"") + key + "\" is " + v.dump() +
                                ", not a step number from 1 to 2^53");
  return v.get<int64_t>();
}

}  // namespace

Series read_metrics(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw MetricsError("metrics file '" + path + "' is a directory");
  std::ifstream in(path);
  if (!in) throw MetricsError("cannot open metrics file '" + path + "'");
  std::map<int64_t, StepPoint> steps;  // by step: a resumed run's repeat replaces the first
  std::map<int64_t, EvalPoint> evals;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw MetricsError(where + "not a JSON line (expected --metrics output of brigade-train)");
    }
    if (!j.is_object() || (j.contains("kind") && !j["kind"].is_string()))
      throw MetricsError(where + "not a line of brigade-train's --metrics (a JSON object whose "
                         "\"kind\" is a string)");
    const std::string kind = j.value("kind", "");
    try {
      if (kind == "step") {
        StepPoint p{step_of(j, "step"), j.at("loss").get<double>(), std::nullopt};
        if (j.contains("accuracy") && !j["accuracy"].is_null()) p.accuracy = j["accuracy"].get<double>();
        steps[p.step] = p;
      } else if (kind == "eval") {
        const EvalPoint e{step_of(j, "step"), j.at("test_loss").get<double>(),
                          j.at("test_accuracy").get<double>()};
        evals[e.step] = e;
      }
    } catch (const std::exception& e) {  // a field missing, of another type, out of range
      throw MetricsError(where + "a " + kind + " line without the expected fields (" +
                         e.what() + ")");
    }
  }
  if (in.bad()) throw MetricsError("cannot read metrics file '" + path + "'");
  Series s;
  s.name = std::filesystem::path(path).stem().string();
  for (const auto& [step, p] : steps) s.steps.push_back(p);
  for (const auto& [step, e] : evals) s.evals.push_back(e);
  return s;
}

std::vector<double> moving_mean(const std::vector<double>& values, size_t window) {
  window = std::max<size_t>(window, 1);
  std::vector<double> out(values.size());
  // Summed in a long double: a window of values near a double's largest (a diverging loss)
  // would overflow a double's sum to infinity, and its mean with it.
  long double sum = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    sum += values[i];
    if (i >= window) sum -= values[i - window];
    out[i] = static_cast<double>(sum / static_cast<long double>(std::min(i + 1, window)));
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi))  // no tick would end the loop below
    throw std::invalid_argument("nice_ticks: the range must be finite");
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(count, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * power) {
      step = m * power;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

namespace {

// Colour-blind-safe (Okabe-Ito), in order.
const char* kColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"};

constexpr double kWidth = 900, kLeft = 72, kRight = 24, kTop = 76, kPanel = 230, kGap = 52,
                 kBottom = 44;

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A panel: data x in [x0, x1], y in [y0, y1], drawn in the box at `top`.
struct Panel {
  double x0, x1, y0, y1, top;
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); }
  double py(double y) const { return top + kPanel - (y - y0) / (y1 - y0) * kPanel; }
};

void draw_frame(std::ostringstream& os, const Panel& p, const std::string& name, int id,
                const std::vector<double>& xticks, bool x_labels, double y_scale,
                const std::string& y_unit) {
  const double right = kWidth - kRight;
  os << "<clipPath id=\"panel" << id << "\"><rect x=\"" << num(kLeft) << "\" y=\"" << num(p.top)
     << "\" width=\"" << num(right - kLeft) << "\" height=\"" << num(kPanel) << "\"/></clipPath>\n";
  for (double t : nice_ticks(p.y0, p.y1, 5)) {
    os << "<line x1=\"" << num(kLeft) << "\" x2=\"" << num(right) << "\" y1=\"" << num(p.py(t))
       << "\" y2=\"" << num(p.py(t)) << "\" stroke=\"#e4e4e4\"/>\n"
       << "<text x=\"" << num(kLeft - 6) << "\" y=\"" << num(p.py(t) + 4)
       << "\" text-anchor=\"end\">" << label(t * y_scale) << y_unit << "</text>\n";
  }
  for (double t : xticks) {
    os << "<line x1=\"" << num(p.px(t)) << "\" x2=\"" << num(p.px(t)) << "\" y1=\"" << num(p.top)
       << "\" y2=\"" << num(p.top + kPanel) << "\" stroke=\"#e4e4e4\"/>\n";
    if (x_labels)
      os << "<text x=\"" << num(p.px(t)) << "\" y=\"" << num(p.top + kPanel + 16)
         << "\" text-anchor=\"middle\">" << label(t) << "</text>\n";
  }
  os << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(p.top) << "\" width=\""
     << num(right - kLeft) << "\" height=\"" << num(kPanel)
     << "\" fill=\"none\" stroke=\"#888\"/>\n"
     << "<text x=\"" << num(kLeft) << "\" y=\"" << num(p.top - 6)
     << "\" font-weight=\"bold\">" << name << "</text>\n";
}

std::string polyline(const Panel& p, const std::vector<int64_t>& xs, const std::vector<double>& ys) {
  std::string points;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) points += ' ';
    points += num(p.px(static_cast<double>(xs[i])));
    points += ',';
    points += num(p.py(ys[i]));
  }
  return points;
}

}  // namespace

std::string render_svg(const std::vector<Series>& runs, const std::string& title) {
  int64_t first = INT64_MAX, last = 0;
  size_t longest = 0;
  double top_loss = 0;
  for (const Series& r : runs) {
    if (r.steps.empty()) continue;
    first = std::min(first, r.steps.front().step);
    last = std::max(last, r.steps.back().step);
    longest = std::max(longest, r.steps.size());
  }
  if (last == 0) throw std::invalid_argument("no training steps to draw");
  // One window for every run, so that their means compare: about 1/40 of the longest run.
  const size_t window = std::max<size_t>(1, longest / 40);
  struct Drawn {
    std::vector<int64_t> x;
    std::vector<double> loss, mean_loss, accuracy;
    std::vector<int64_t> acc_x;
  };
  std::vector<Drawn> drawn;
  for (const Series& r : runs) {
    Drawn d;
    for (const StepPoint& s : r.steps) {
      d.x.push_back(s.step);
      d.loss.push_back(s.loss);
      if (s.accuracy) d.acc_x.push_back(s.step), d.accuracy.push_back(*s.accuracy);
    }
    d.mean_loss = moving_mean(d.loss, window);
    d.accuracy = moving_mean(d.accuracy, window);
    for (double v : d.mean_loss) top_loss = std::max(top_loss, v);
    for (const EvalPoint& e : r.evals) top_loss = std::max(top_loss, e.loss);
    drawn.push_back(std::move(d));
  }
  const double x0 = first <= 1 ? 0 : static_cast<double>(first - 1), x1 = static_cast<double>(last);
  const std::vector<double> xticks = nice_ticks(x0, x1, 8);
  // 5 % of room above the highest loss, where a double has it (a diverging loss may not).
  const double headroom = top_loss < DBL_MAX / 1.05 ? top_loss * 1.05 : top_loss;
  const double y_loss = std::max(nice_ticks(0, headroom, 5).back(), headroom);
  const Panel loss{x0, x1, 0, y_loss > 0 ? y_loss : 1, kTop};
  const Panel acc{x0, x1, 0, 1, kTop + kPanel + kGap};
  const double height = acc.top + kPanel + kBottom;

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
     << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << num(kLeft) << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
     << escaped(title) << "</text>\n";
  // Legend: one entry per run, then what the marks mean.
  double lx = kLeft;
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    os << "<line x1=\"" << num(lx) << "\" x2=\"" << num(lx + 22) << "\" y1=\"42\" y2=\"42\" stroke=\""
       << colour << "\" stroke-width=\"2.5\"/>\n<circle cx=\"" << num(lx + 11)
       << "\" cy=\"42\" r=\"3.5\" fill=\"" << colour << "\"/>\n<text x=\"" << num(lx + 28)
       << "\" y=\"46\">" << escaped(runs[i].name) << "</text>\n";
    lx += 40 + 7.0 * static_cast<double>(runs[i].name.size());
  }
  os << "<text x=\"" << num(kWidth - kRight) << "\" y=\"46\" text-anchor=\"end\" fill=\"#555\">"
     << "faint: each step · line: mean of " << window << " step" << (window == 1 ? "" : "s")
     << " · dots: test set</text>\n";

  draw_frame(os, loss, "loss", 0, xticks, false, 1, "");
  draw_frame(os, acc, "accuracy", 1, xticks, true, 100, " %");
  os << "<text x=\"" << num((kLeft + kWidth - kRight) / 2) << "\" y=\"" << num(height - 8)
     << "\" text-anchor=\"middle\">step</text>\n";

  for (size_t i = 0; i < runs.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    const Drawn& d = drawn[i];
    const Series& r = runs[i];
    os << "<g clip-path=\"url(#panel0)\" fill=\"none\" stroke=\"" << colour << "\">\n"
       << "<polyline class=\"steps\" stroke-opacity=\"0.25\" points=\"" << polyline(loss, d.x, d.loss)
       << "\"/>\n<polyline class=\"mean\" stroke-width=\"2\" points=\""
       << polyline(loss, d.x, d.mean_loss) << "\"/>\n</g>\n";
    if (!d.accuracy.empty())
      os << "<g clip-path=\"url(#panel1)\" fill=\"none\" stroke=\"" << colour << "\">\n"
         << "<polyline class=\"mean\" stroke-width=\"2\" points=\""
         << polyline(acc, d.acc_x, d.accuracy) << "\"/>\n</g>\n";
    for (const Panel* p : {&loss, &acc}) {
      const bool is_loss = p == &loss;
      std::vector<int64_t> xs;
      std::vector<double> ys;
      for (const EvalPoint& e : r.evals) xs.push_back(e.step), ys.push_back(is_loss ? e.loss : e.accuracy);
      if (xs.size() > 1)
        os << "<polyline class=\"test\" fill=\"none\" stroke=\"" << colour
           << "\" stroke-dasharray=\"4 3\" points=\"" << polyline(*p, xs, ys) << "\"/>\n";
      for (size_t k = 0; k < xs.size(); ++k) {
        char tip[96];
        std::snprintf(tip, sizeof tip, is_loss ? "step %lld: test loss %.4f" : "step %lld: test accuracy %.2f %%",
                      static_cast<long long>(xs[k]), is_loss ? ys[k] : 100 * ys[k]);
        os << "<circle class=\"test\" cx=\"" << num(p->px(static_cast<double>(xs[k]))) << "\" cy=\""
           << num(p->py(ys[k])) << "\" r=\"3.5\" fill=\"" << colour << "\"><title>"
           << escaped(r.name) << ", " << tip << "</title></circle>\n";
      }
    }
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace brigade::plot
