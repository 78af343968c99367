#include "pipeline/schedule/lowering.h"

#include <cctype>
#include <stdexcept>

namespace brigade::pipeline {

namespace {

constexpr const char* kNames[] = {"F", "B", "W", "BW", "SF", "RF", "SB", "RB"};

}  // namespace

const char* kind_name(Kind k) { return kNames[static_cast<int>(k)]; }

std::string to_string(const Instruction& i) {
  std::string out = std::to_string(i.stage);
  out += kind_name(i.kind);
  out += std::to_string(i.microbatch);
  return out;
}

Instruction parse_instruction(std::string_view text) {
  // The grammar is Action's with four more words: digits, letters, digits.
  size_t op_begin = 0;
  while (op_begin < text.size() && std::isdigit(static_cast<unsigned char>(text[op_begin])))
    ++op_begin;
  size_t op_end = op_begin;
  while (op_end < text.size() && std::isalpha(static_cast<unsigned char>(text[op_end]))) ++op_end;
  const std::string_view word = text.substr(op_begin, op_end - op_begin);
  for (int k = static_cast<int>(Kind::SendF); k <= static_cast<int>(Kind::RecvB); ++k)
    if (word == kNames[k]) {
      // Reuse the action parser for the numbers by reading the transfer as a forward.
      std::string as_action(text.substr(0, op_begin));
      as_action += 'F';
      as_action += text.substr(op_end);
      try {
        const Action a = parse_action(as_action);
        return {a.stage, static_cast<Kind>(k), a.microbatch};
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument("action '" + std::string(text) +
                                    "': expected stage, op, micro-batch, e.g. 0SF3 or 1RB2");
      }
    }
  try {
    return instruction(parse_action(text));
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("action '" + std::string(text) +
                                "': expected stage, op, micro-batch with op F, B, W, BW or a "
                                "transfer SF, RF, SB, RB (e.g. 1F3, 0BW2, 0SF3, 1RF3)");
  }
}

bool is_compute(Kind k) { return static_cast<int>(k) <= static_cast<int>(Kind::BW); }

Lane lane_of(Kind k) {
  if (is_compute(k)) return Lane::Compute;
  return k == Kind::SendF || k == Kind::SendB ? Lane::Send : Lane::Recv;
}

Instruction instruction(const Action& a) {
  return {a.stage, static_cast<Kind>(static_cast<int>(a.op)), a.microbatch};
}

Action compute_action(const Instruction& i) {
  if (!is_compute(i.kind))
    throw std::invalid_argument("compute_action: " + to_string(i) + " is a transfer");
  return {i.stage, static_cast<Op>(static_cast<int>(i.kind)), i.microbatch};
}

Instruction partner(const Instruction& i) {
  switch (i.kind) {
    case Kind::SendF: return {i.stage + 1, Kind::RecvF, i.microbatch};
    case Kind::RecvF: return {i.stage - 1, Kind::SendF, i.microbatch};
    case Kind::SendB: return {i.stage - 1, Kind::RecvB, i.microbatch};
    case Kind::RecvB: return {i.stage + 1, Kind::SendB, i.microbatch};
    default: break;
  }
  throw std::invalid_argument("partner: " + to_string(i) + " is not a transfer");
}

size_t LoweredSchedule::total() const {
  size_t n = 0;
  for (const auto& list : lists) n += list.size();
  return n;
}

bool LoweredSchedule::has_transfers() const {
  for (const auto& list : lists)
    for (const Instruction& i : list)
      if (!is_compute(i.kind)) return true;
  return false;
}

LoweredSchedule lower(const Schedule& s) {
  LoweredSchedule out{s.name, s.devices, s.chunks, s.microbatches, s.batch_units, s.placement, {}};
  out.lists.resize(s.lists.size());
  const int last = s.stages() - 1;
  auto elsewhere = [&](int stage, int neighbour) {
    return neighbour >= 0 && neighbour <= last && s.device_of(neighbour) != s.device_of(stage);
  };
  for (size_t d = 0; d < s.lists.size(); ++d) {
    std::vector<Instruction>& list = out.lists[d];
    for (const Action& a : s.lists[d]) {
      const int st = a.stage, mb = a.microbatch;
      const bool forward = a.op == Op::F, backward = a.op == Op::B || a.op == Op::BW;
      // Receive what this action consumes from another device, right before it...
      if (forward && elsewhere(st, st - 1)) list.push_back({st, Kind::RecvF, mb});
      if (backward && elsewhere(st, st + 1)) list.push_back({st, Kind::RecvB, mb});
      list.push_back(instruction(a));
      // ...and send what it produces for another device, right after it. W produces nothing
      // that leaves the device.
      if (forward && elsewhere(st, st + 1)) list.push_back({st, Kind::SendF, mb});
      if (backward && elsewhere(st, st - 1)) list.push_back({st, Kind::SendB, mb});
    }
  }
  return out;
}

Schedule compute_only(const LoweredSchedule& s) {
  Schedule out;
  out.name = s.name;
  out.devices = s.devices;
  out.chunks = s.chunks;
  out.microbatches = s.microbatches;
  out.batch_units = s.batch_units;
  out.placement = s.placement;
  out.lists.resize(s.lists.size());
  for (size_t d = 0; d < s.lists.size(); ++d)
    for (const Instruction& i : s.lists[d])
      if (is_compute(i.kind)) out.lists[d].push_back(compute_action(i));
  return out;
}

std::string format_lists(const LoweredSchedule& s) {
  std::string out;
  for (size_t d = 0; d < s.lists.size(); ++d) {
    out += 'd';
    out += std::to_string(d);
    out += ':';
    for (const Instruction& i : s.lists[d]) {
      out += ' ';
      out += to_string(i);
    }
    out += '\n';
  }
  return out;
}

}  // namespace brigade::pipeline
