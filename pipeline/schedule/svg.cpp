#include "pipeline/schedule/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace brigade::pipeline {

namespace {

// Layout, in pixels.
constexpr double kMinLeft = 110;    // room for the row labels, at least
constexpr double kLabelCharWidth = 7;  // a 12-px sans-serif character, generously
constexpr double kRight = 30;
constexpr double kPlotWidth = 1000; // the longest timeline spans at least this...
constexpr double kMinBox = 16;      // ...and more, so that the shortest action is this wide,
constexpr double kMaxPlotWidth = 3200;  // up to this
constexpr double kRowHeight = 26;
constexpr double kRowGap = 4;
constexpr double kTitleHeight = 26;
constexpr double kAxisHeight = 34;
constexpr double kLegendHeight = 36;

const char* colour(Op op) {
  switch (op) {
    case Op::F: return "#4c78a8";   // blue
    case Op::B: return "#f58518";   // orange
    case Op::W: return "#54a24b";   // green
    case Op::BW: return "#b279a2";  // purple: B and W fused
  }
  return "#888888";
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving at most ~12 ticks.
double tick_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 12;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

bool is_receive_lane(const Timeline& t, int lane) {
  return lane >= 0 && static_cast<size_t>(lane) < t.lanes.size() && t.lanes[lane] == "recv";
}

// A receive is of an activation (F) or of a gradient (B): stripes of that colour on white.
std::string receive_pattern(Op op) { return op == Op::F ? "receive-F" : "receive-B"; }

std::string receive_patterns() {
  std::string defs = "<defs>\n";
  for (Op op : {Op::F, Op::B})
    defs += "<pattern id='" + receive_pattern(op) + "' width='6' height='6' "
            "patternUnits='userSpaceOnUse' patternTransform='rotate(45)'><rect width='6' "
            "height='6' fill='white'/><rect width='3' height='6' fill='" + colour(op) +
            "'/></pattern>\n";
  return defs + "</defs>\n";
}

double end_of(const Timeline& t) {
  double end = 0;
  for (const auto& e : t.events) end = std::max(end, e.end);
  return end;
}

}  // namespace

std::string timeline_svg(const std::vector<Timeline>& panels) {
  // The row labels ("device 3 compute") end 8 px left of the plot: room for the longest.
  size_t longest = 0;
  for (const Timeline& t : panels)
    for (size_t lane = 0; lane < std::max<size_t>(t.lanes.size(), 1); ++lane) {
      std::string label = "device " + std::to_string(std::max(t.devices - 1, 0));
      if (t.lanes.size() > 1) label += " " + t.lanes[lane];
      longest = std::max(longest, label.size());
    }
  const double left = std::max(kMinLeft, 18 + kLabelCharWidth * static_cast<double>(longest));

  double span = 0, shortest = 0;
  for (const Timeline& t : panels) {
    span = std::max(span, end_of(t));
    for (const auto& e : t.events)
      if (e.end > e.start && (shortest == 0 || e.end - e.start < shortest))
        shortest = e.end - e.start;
  }
  double scale = 1;  // pixels per time unit
  if (span > 0) {
    scale = std::max(kPlotWidth / span, shortest > 0 ? kMinBox / shortest : 0.0);
    scale = std::min(scale, kMaxPlotWidth / span);
  }
  const double plot_width = span * scale;
  const std::string unit = panels.empty() ? "unit" : panels.front().unit;

  std::string body;
  double y = 10;
  for (const Timeline& t : panels) {
    body += "<text x='10' y='" + num(y + 17) + "' font-size='14' font-weight='bold'>" +
            escape(t.title) + "</text>\n";
    y += kTitleHeight;
    const int lanes = static_cast<int>(t.lanes.size());
    auto row_y = [&](int device, int lane) {
      return y + (device * lanes + lane) * (kRowHeight + kRowGap);
    };
    for (int d = 0; d < t.devices; ++d)
      for (int lane = 0; lane < lanes; ++lane) {
        const double ry = row_y(d, lane);
        std::string label = "device " + std::to_string(d);
        if (lanes > 1) label += " " + t.lanes[lane];
        body += "<text x='" + num(left - 8) + "' y='" + num(ry + kRowHeight / 2 + 4) +
                "' font-size='12' text-anchor='end'>" + escape(label) + "</text>\n";
        // The row's frame: what stays white inside it is the bubble.
        body += "<rect x='" + num(left) + "' y='" + num(ry) + "' width='" +
                num(end_of(t) * scale) + "' height='" + num(kRowHeight) +
                "' fill='white' stroke='#bbbbbb' stroke-width='0.5'/>\n";
      }
    for (const TimelineEvent& e : t.events) {
      const double x = left + e.start * scale, w = (e.end - e.start) * scale;
      const double ry = row_y(e.device, e.lane);
      const int chunk = e.action.stage / std::max(t.devices, 1);
      const double opacity = t.chunks > 1 ? 1.0 - 0.5 * chunk / (t.chunks - 1) : 1.0;
      // A receive's bar spans the wait for its tensor and the arrival: striped, not solid,
      // so that it does not read as work.
      const bool receive = is_receive_lane(t, e.lane);
      const std::string fill = receive ? "url(#" + receive_pattern(e.action.op) + ")"
                                       : std::string(colour(e.action.op));
      body += "<rect x='" + num(x) + "' y='" + num(ry) + "' width='" + num(w) + "' height='" +
              num(kRowHeight) + "' fill='" + fill + "' fill-opacity='" +
              num(opacity) + "' stroke='white' stroke-width='1'><title>" +
              event_name(t, e) + " [" + num(e.start) + ", " + num(e.end) + ")</title></rect>\n";
      if (w >= 10)
        body += "<text x='" + num(x + w / 2) + "' y='" + num(ry + kRowHeight / 2 + 4) +
                "' font-size='" + (w >= 16 ? "11" : "8") +
                "' text-anchor='middle' fill='black'>" + std::to_string(e.action.microbatch) +
                "</text>\n";
    }
    y = row_y(t.devices, 0) + 6;
  }

  // Time axis, shared by every panel.
  const double step = tick_step(span);
  body += "<line x1='" + num(left) + "' y1='" + num(y) + "' x2='" + num(left + span * scale) +
          "' y2='" + num(y) + "' stroke='black'/>\n";
  for (double tick = 0; tick <= span + 1e-9; tick += step) {
    const double x = left + tick * scale;
    body += "<line x1='" + num(x) + "' y1='" + num(y) + "' x2='" + num(x) + "' y2='" +
            num(y + 5) + "' stroke='black'/>\n";
    char label[32];
    std::snprintf(label, sizeof label, "%g", tick);
    body += "<text x='" + num(x) + "' y='" + num(y + 18) +
            "' font-size='11' text-anchor='middle'>" + label + "</text>\n";
  }
  body += "<text x='" + num(left - 8) + "' y='" + num(y + 18) +
          "' font-size='11' text-anchor='end'>time (" + escape(unit) + ")</text>\n";
  y += kAxisHeight;

  // Legend.
  double x = left;
  for (Op op : {Op::F, Op::B, Op::W, Op::BW}) {
    static const char* what[] = {"F forward", "B input grad", "W weight grad", "BW fused B+W"};
    body += "<rect x='" + num(x) + "' y='" + num(y) + "' width='18' height='14' fill='" +
            colour(op) + "'/>\n<text x='" + num(x + 24) + "' y='" + num(y + 11) +
            "' font-size='12'>" + what[static_cast<int>(op)] + "</text>\n";
    x += 130;
  }
  bool chunked = false, receives = false;
  for (const Timeline& t : panels) {
    chunked = chunked || t.chunks > 1;
    for (const TimelineEvent& e : t.events) receives = receives || is_receive_lane(t, e.lane);
  }
  body += "<text x='" + num(x) + "' y='" + num(y + 11) +
          "' font-size='12'>number = micro-batch; white = idle (bubble)" +
          (chunked ? "; lighter = later chunk" : "") + "</text>\n";
  y += kLegendHeight;
  if (receives) {
    body += "<rect x='" + num(left) + "' y='" + num(y) + "' width='18' height='14' fill='url(#" +
            receive_pattern(Op::F) + ")'/>\n<text x='" + num(left + 24) + "' y='" + num(y + 11) +
            "' font-size='12'>striped, on a recv row = a receive: from when it is posted, waiting "
            "for its tensor, to the tensor's arrival (not work)</text>\n";
    y += kLegendHeight;
  }

  const double width = left + std::max(plot_width, 900.0) + kRight + 120;
  return "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(width) + "' height='" +
         num(y) + "' font-family='sans-serif'>\n" + (receives ? receive_patterns() : "") +
         "<rect width='100%' height='100%' fill='white'/>\n" + body + "</svg>\n";
}

}  // namespace brigade::pipeline
