#include "pipeline/schedule/action.h"

#include <cctype>
#include <stdexcept>

namespace brigade::pipeline {

const char* op_name(Op op) {
  switch (op) {
    case Op::F: return "F";
    case Op::B: return "B";
    case Op::W: return "W";
    case Op::BW: return "BW";
  }
  return "?";
}

std::string to_string(const Action& a) {
  return std::to_string(a.stage) + op_name(a.op) + std::to_string(a.microbatch);
}

Action parse_action(std::string_view text) {
  auto fail = [&](const char* why) {
    throw std::invalid_argument("action '" + std::string(text) + "': " + why +
                                " (expected stage, op, micro-batch, e.g. 1F3 or 0BW2)");
  };
  size_t i = 0;
  auto number = [&]() {
    size_t begin = i;
    long value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      value = value * 10 + (text[i] - '0');
      if (value > 1'000'000'000) fail("number too large");
      ++i;
    }
    if (i == begin) fail("missing number");
    return static_cast<int>(value);
  };
  Action a;
  a.stage = number();
  size_t op_begin = i;
  while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
  std::string_view op = text.substr(op_begin, i - op_begin);
  if (op == "F") a.op = Op::F;
  else if (op == "B") a.op = Op::B;
  else if (op == "W") a.op = Op::W;
  else if (op == "BW") a.op = Op::BW;
  else fail("unknown op (F, B, W or BW)");
  a.microbatch = number();
  if (i != text.size()) fail("trailing characters");
  return a;
}

std::string to_string(const Need& n) {
  static const char* letter[kPhases] = {"F", "B", "W"};
  return std::to_string(n.stage) + letter[static_cast<int>(n.phase)] +
         std::to_string(n.microbatch);
}

std::vector<Phase> completes(Op op) {
  switch (op) {
    case Op::F: return {Phase::Forward};
    case Op::B: return {Phase::InputGrad};
    case Op::W: return {Phase::WeightGrad};
    case Op::BW: return {Phase::InputGrad, Phase::WeightGrad};
  }
  return {};
}

std::vector<Need> needs(const Action& a, int num_stages) {
  const int s = a.stage, m = a.microbatch;
  switch (a.op) {
    case Op::F:
      if (s == 0) return {};
      return {{s - 1, Phase::Forward, m}};
    case Op::B:
    case Op::BW:
      if (s == num_stages - 1) return {{s, Phase::Forward, m}};
      return {{s, Phase::Forward, m}, {s + 1, Phase::InputGrad, m}};
    case Op::W:
      return {{s, Phase::InputGrad, m}};
  }
  return {};
}

}  // namespace brigade::pipeline
