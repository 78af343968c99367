// Action: one unit of pipeline work, the word of the schedule language.
//
// A pipeline step is a list of actions per device. Each action names a stage (a chunk of the
// model's layers), a micro-batch, and what to do with them:
//   F   forward
//   B   backward for the input gradient (what the previous stage is waiting for)
//   W   backward for the weight gradient (nobody waits for it: it can fill a bubble)
//   BW  B and W fused, as GPipe and 1F1B run them
// The text form is stage, op, micro-batch with nothing between: "1F3" is stage 1 forward of
// micro-batch 3, "0BW2" is stage 0's fused backward of micro-batch 2. It prints and parses
// back (to_string / parse_action), so schedules can be written in tests by hand.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::pipeline {

enum class Op { F, B, W, BW };

struct Action {
  int stage = 0;
  Op op = Op::F;
  int microbatch = 0;

  auto operator<=>(const Action&) const = default;
};

const char* op_name(Op op);                 // "F", "B", "W", "BW"
std::string to_string(const Action& a);     // "1F3"
Action parse_action(std::string_view text); // throws std::invalid_argument naming the text

// The three things that can have happened to a (stage, micro-batch): its forward ran, its
// input gradient exists (by B or BW), its weight gradient exists (by W or BW). Dependencies
// are stated in phases so that a B may wait on a neighbour that runs BW, and vice versa.
enum class Phase { Forward = 0, InputGrad = 1, WeightGrad = 2 };
constexpr int kPhases = 3;

struct Need {
  int stage;
  Phase phase;
  int microbatch;
};
std::string to_string(const Need& n);  // "2F1", "3B1" (B means "B or BW"), "2W1"

// The phases an action completes: F -> {Forward}; B -> {InputGrad}; W -> {WeightGrad};
// BW -> {InputGrad, WeightGrad}.
std::vector<Phase> completes(Op op);

// What must have happened before `a` may start, in a pipeline of `num_stages` stages:
//   F(s, m)  needs F(s-1, m)                     (its input activation)
//   B(s, m)  needs F(s, m) and B(s+1, m)         (its output gradient; the last stage
//                                                 computes the loss from its own F)
//   BW(s, m) the same as B
//   W(s, m)  needs B(s, m)                       (the saved output gradient)
std::vector<Need> needs(const Action& a, int num_stages);

}  // namespace brigade::pipeline
