#include "pipeline/schedule/schedule_text.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/error.h"
#include "pipeline/schedule/pytorch_csv.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

namespace {

std::string header(const std::string& name, int devices, int chunks, int microbatches,
                   int batch_units, Placement placement) {
  std::string out = "# brigade schedule (pipeline/schedule/schedule_text.h): one line per device\n";
  out += "name: " + name + "\n";
  out += "devices: " + std::to_string(devices) + "\n";
  out += "chunks: " + std::to_string(chunks) + "\n";
  out += "microbatches: " + std::to_string(microbatches) + "\n";
  if (batch_units != 1) out += "batch_units: " + std::to_string(batch_units) + "\n";
  if (placement != Placement::looped)
    out += std::string("placement: ") + placement_name(placement) + "\n";
  return out;
}

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// The ScheduleError of validate() again, with the file, line and action in front.
[[noreturn]] void rethrow_at(const ScheduleText& text, const std::string& source,
                             const ScheduleError& e) {
  std::string where = source;
  if (const auto& at = e.at(); at && at->device < static_cast<int>(text.line_of_device.size())) {
    where += ":" + std::to_string(text.line_of_device[at->device]) + ": ";
    where += to_string(text.lists.lists[at->device][at->index]);
  }
  throw ScheduleError(where + ": " + e.what(), e.at());
}

}  // namespace

std::string format_schedule_text(const Schedule& s) {
  return header(s.name, s.devices, s.chunks, s.microbatches, s.batch_units, s.placement) +
         format_lists(s);
}

std::string format_schedule_text(const LoweredSchedule& s) {
  return header(s.name, s.devices, s.chunks, s.microbatches, s.batch_units, s.placement) +
         format_lists(s);
}

ScheduleText parse_schedule_text(std::string_view text, const std::string& source) {
  ScheduleText out;
  LoweredSchedule& s = out.lists;
  s.name = source;
  std::optional<int> devices, microbatches;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  // `why` quotes the file's own text: a control byte or a byte that is no UTF-8 is shown as
  // \xNN, and a long line cut (engine/error.h's printable), never sent to a terminal raw.
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(source + ":" + std::to_string(line_no) + ": " +
                                printable(why, 400));
  };
  auto number = [&](const std::string& key, const std::string& value) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || n < 1)
      fail("'" + key + ": " + value + "' is not a whole number of at least 1");
    return n;
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const std::string body = trim(line);
    if (body.empty()) continue;
    const size_t colon = body.find(':');
    if (colon == std::string::npos)
      fail("expected 'key: value' or 'dN: actions', got '" + body + "'");
    const std::string key = trim(body.substr(0, colon)), value = trim(body.substr(colon + 1));
    if (key.size() > 1 && key[0] == 'd' && key.find_first_not_of("0123456789", 1) == key.npos) {
      if (!devices || !microbatches)
        fail("a device line before the header said 'devices:' and 'microbatches:'");
      std::string expect = "d";  // (appended: GCC 12 misreports "d" + str under -Wrestrict)
      expect += std::to_string(s.lists.size());
      if (key != expect) fail("expected '" + expect + ":' next, got '" + key + ":'");
      if (static_cast<int>(s.lists.size()) == s.devices)
        fail("more device lines than 'devices: " + std::to_string(s.devices) + "'");
      auto& list = s.lists.emplace_back();
      out.line_of_device.push_back(line_no);
      std::istringstream words(value);
      for (std::string word; words >> word;) {
        try {
          list.push_back(parse_instruction(word));
        } catch (const std::invalid_argument& e) {
          fail(e.what());
        }
      }
      continue;
    }
    if (!s.lists.empty()) fail("header line '" + key + ":' after the device lines");
    if (key == "name") s.name = value;
    else if (key == "devices") s.devices = *(devices = number(key, value));
    else if (key == "chunks") s.chunks = number(key, value);
    else if (key == "microbatches") s.microbatches = *(microbatches = number(key, value));
    else if (key == "batch_units") s.batch_units = number(key, value);
    else if (key == "placement") {
      try {
        s.placement = parse_placement(value);
      } catch (const std::invalid_argument& e) {
        fail(e.what());
      }
    } else
      fail("unknown header key '" + key +
           "' (name, devices, chunks, microbatches, batch_units, placement)");
  }
  if (!devices || !microbatches)
    throw std::invalid_argument(source + ": the header must say 'devices:' and 'microbatches:'");
  if (static_cast<int>(s.lists.size()) != s.devices)
    throw std::invalid_argument(source + ": " + std::to_string(s.lists.size()) +
                                " device lines for 'devices: " + std::to_string(s.devices) + "'");
  // Every stage runs a forward and a backward of every micro-batch: lists shorter than that
  // are refused here, before validation sizes its tables by the header's counts (a header of
  // 'microbatches: 100000000' over two short lines once took 2.3 GB to be refused).
  size_t actions = 0;
  for (const auto& list : s.lists) actions += list.size();
  const double least = 2.0 * s.devices * s.chunks * s.microbatches;  // in a double: no overflow
  if (static_cast<double>(actions) < least) {
    char count[32];
    std::snprintf(count, sizeof count, "%.0f", least);
    throw std::invalid_argument(
        source + ": " + std::to_string(s.devices) +
        (s.devices == 1 ? " device x " : " devices x ") + std::to_string(s.chunks) + (s.chunks == 1 ? " chunk x " : " chunks x ") +
        std::to_string(s.microbatches) + " micro-batches need at least " + count +
        " actions (a forward and a backward of each stage and micro-batch); the device lines " +
        "hold " + std::to_string(actions));
  }
  return out;
}

ScheduleText read_schedule_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot open schedule file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return is_pytorch_csv(path) ? parse_pytorch_csv(text.str(), path)
                              : parse_schedule_text(text.str(), path);
}

LoweredSchedule load_schedule(const std::string& path, std::optional<int> max_live) {
  const ScheduleText text = read_schedule_file(path);
  try {
    if (text.lowered()) {
      validate(text.lists, max_live);
      return text.lists;
    }
    validate(compute_only(text.lists));
  } catch (const ScheduleError& e) {
    rethrow_at(text, path, e);
  }
  LoweredSchedule lowered = lower(compute_only(text.lists));
  try {
    validate(lowered, max_live);
  } catch (const ScheduleError& e) {  // only the bound can fail here: point at the file
    throw ScheduleError(path + " (lowered): " + e.what(), e.at());
  }
  return lowered;
}

Schedule load_compute_schedule(const std::string& path) {
  const LoweredSchedule lowered = load_schedule(path);
  Schedule s = compute_only(lowered);
  const LoweredSchedule expected = lower(s);
  for (int d = 0; d < lowered.devices; ++d)
    for (size_t i = 0; i < lowered.lists[d].size(); ++i)
      if (i >= expected.lists[d].size() || expected.lists[d][i] != lowered.lists[d][i])
        throw ScheduleError(
            path + ": device " + std::to_string(d) + " position " + std::to_string(i) + ": " +
            to_string(lowered.lists[d][i]) + " is not where the runtime communicates (it " +
            "receives right before the compute that uses a tensor and sends right after the " +
            "one that makes it; expected " +
            (i < expected.lists[d].size() ? to_string(expected.lists[d][i]) : "the end") +
            "); give the runtime the compute-only lists", Cell{d, static_cast<int>(i)});
  return s;
}

}  // namespace brigade::pipeline
