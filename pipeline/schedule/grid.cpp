#include "pipeline/schedule/grid.h"

#include <algorithm>

#include "pipeline/schedule/happens_before.h"

namespace brigade::pipeline {

namespace {

std::string pad_left(const std::string& text, size_t width) {
  return std::string(width > text.size() ? width - text.size() : 0, ' ') + text;
}

}  // namespace

std::string format_grid(const std::vector<std::vector<std::string>>& texts,
                        const std::vector<std::vector<int>>& tick, int ticks,
                        std::optional<Cell> mark) {
  // Every cell is as wide as the widest action text plus the two brackets of a mark.
  size_t width = std::to_string(std::max(ticks - 1, 0)).size();
  for (const auto& row : texts)
    for (const std::string& text : row) width = std::max(width, text.size());
  width += 2;
  const int devices = static_cast<int>(texts.size());
  const size_t label = std::max<size_t>(4, 1 + std::to_string(devices).size());

  std::string out = "tick" + std::string(label - 4, ' ');
  // (Appending piecewise: GCC 12 at -O3 misreports `" " + str` under -Wrestrict.)
  for (int t = 0; t < ticks; ++t) {
    out += ' ';
    out += pad_left(std::to_string(t), width);
  }
  out += "\n";

  for (int d = 0; d < devices; ++d) {
    std::vector<std::string> cells(ticks, ".");
    std::string never;
    int marked_tick = -1;
    for (size_t i = 0; i < texts[d].size(); ++i) {
      std::string text = texts[d][i];
      const bool marked = mark && mark->device == d && mark->index == static_cast<int>(i);
      if (marked) text = "[" + text + "]";
      const int t = tick[d][i];
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

std::string format_grid(const Schedule& s, const DryRun& run, std::optional<Cell> mark) {
  std::vector<std::vector<std::string>> texts(s.lists.size());
  for (size_t d = 0; d < s.lists.size(); ++d)
    for (const Action& a : s.lists[d]) texts[d].push_back(to_string(a));
  return format_grid(texts, run.tick, run.ticks, mark);
}

std::string format_grid(const LoweredSchedule& s, std::optional<Cell> mark) {
  const HappensBefore hb = happens_before(s);
  std::vector<std::vector<std::string>> texts(s.lists.size());
  for (size_t d = 0; d < s.lists.size(); ++d)
    for (const Instruction& i : s.lists[d]) texts[d].push_back(to_string(i));
  return format_grid(texts, hb.tick, hb.ticks, mark);
}

std::string format_grid(const Schedule& s) { return format_grid(s, dry_run(s)); }

}  // namespace brigade::pipeline
