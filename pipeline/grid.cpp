#include "pipeline/grid.h"

#include <algorithm>

namespace brigade::pipeline {

namespace {

std::string pad_left(const std::string& text, size_t width) {
  return std::string(width > text.size() ? width - text.size() : 0, ' ') + text;
}

}  // namespace

std::string format_grid(const Schedule& s, const DryRun& run, std::optional<Cell> mark) {
  // Every cell is as wide as the widest action text plus the two brackets of a mark.
  size_t width = std::to_string(std::max(run.ticks - 1, 0)).size();
  for (const auto& list : s.lists)
    for (const Action& a : list) width = std::max(width, to_string(a).size());
  width += 2;
  const size_t label = std::max<size_t>(4, 1 + std::to_string(s.devices).size());

  std::string out = "tick" + std::string(label - 4, ' ');
  // (Appending piecewise: GCC 12 at -O3 misreports `" " + str` under -Wrestrict.)
  for (int t = 0; t < run.ticks; ++t) {
    out += ' ';
    out += pad_left(std::to_string(t), width);
  }
  out += "\n";

  for (int d = 0; d < s.devices; ++d) {
    std::vector<std::string> cells(run.ticks, ".");
    std::string never;
    int marked_tick = -1;
    for (size_t i = 0; i < s.lists[d].size(); ++i) {
      std::string text = to_string(s.lists[d][i]);
      const bool marked = mark && mark->device == d && mark->index == static_cast<int>(i);
      if (marked) text = "[" + text + "]";
      const int t = run.tick[d][i];
      if (t >= 0) {
        cells[t] = text;
        if (marked) marked_tick = t;
      } else {
        never += " " + text;
      }
    }
    std::string row = "d";
    row += std::to_string(d);
    row += std::string(label - row.size(), ' ');
    for (const std::string& c : cells) {
      row += ' ';
      row += pad_left(c, width);
    }
    if (!never.empty()) row += " | never ran:" + never;
    out += row + "\n";
    if (marked_tick >= 0)
      out += std::string(label + (marked_tick + 1) * (width + 1) - width / 2, ' ') + "^\n";
  }
  return out;
}

std::string format_grid(const Schedule& s) { return format_grid(s, dry_run(s)); }

}  // namespace brigade::pipeline
