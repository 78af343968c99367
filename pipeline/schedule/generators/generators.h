// Schedule generators: p devices, m micro-batches, v chunks (stages) per device -> Schedule.
// Read them in this order; each file is one schedule, from the question's baseline to the
// zero-bubble one.
//   naive.cpp             one micro-batch at a time: forward through every stage, then
//                         backward; one device busy at a time
//   gpipe.cpp             all m forwards, then all m backwards (Huang et al., 2019)
//   one_f_one_b.cpp       PipeDream-Flush: warm-up, one forward one backward, cool-down
//                         (Narayanan et al., 2021)
//   interleaved_1f1b.cpp  Megatron-LM's virtual stages: v chunks per device
//   looped_bfs.cpp        the same chunks breadth first: each chunk a GPipe of its own
//                         (Lamy-Poirier, 2023)
//   zb_h1.cpp             Zero Bubble H1 (Qi et al., ICLR 2024): B and W split, W fills the
//                         cool-down bubbles, 1F1B's peak memory
//   zero_bubble_heuristic.h  the same authors' automatic scheduler (its heuristic, not its ILP),
//                         whose orders zb-h1, zb-h2 and zb-auto also try for their costs
//   list_scheduler.h      the greedy list scheduler under a memory budget that the next ones are
//   squeeze.h             its pass that moves actions into earlier idle units within memory,
//                         and the V-Half / V-Min authors' reordering of their building block
//   zb_auto.cpp           zero bubble cut to measured costs: W's where a device would wait, B
//                         and W fused where splitting buys nothing
//   zb_h2.cpp             Zero Bubble H2: ZB-H1 with twice the memory, no idle inside a device
//   interleaved_zb.cpp    interleaved placement, split backward, 1F1B's memory
//   v_shapes.cpp          two chunks in a V (schedule.h's v-shape placement): ZB-V at 1F1B's
//                         memory, V-Half at half of it, V-Min at a third (Qi et al., 2024)
//   dualpipe_v.cpp        DeepSeek's DualPipeV, its eight phases per device
//   registry.cpp          one table of every schedule by name, for the tools
// Every generator throws std::invalid_argument, naming the schedule and the values that
// work, for sizes it cannot serve (a MicrobatchCountError where the micro-batch count is the
// one refused); every schedule it returns passes validate().
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

// A count of micro-batches the schedule cannot run on these devices (below 1; interleaved-1f1b:
// not a multiple of p; dualpipe-v: below 2p): its own type, so that a tool that chose the count
// for the user (brigade-train's --resume keeps its checkpoint's) can say where it came from,
// and not say it of a refusal of the devices, chunks or bounds.
class MicrobatchCountError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

Schedule naive(int devices, int microbatches, int chunks = 1);
Schedule gpipe(int devices, int microbatches);
Schedule one_f_one_b(int devices, int microbatches);
Schedule interleaved_1f1b(int devices, int microbatches, int chunks);
Schedule looped_bfs(int devices, int microbatches, int chunks);
// zb-h1 and zb-h2 plan for `costs` too (the authors' ZB-H1 and ZB-H2 are their automatic
// scheduler at p and 2p micro-batches): each keeps its own order unless the authors' heuristic
// (zero_bubble_heuristic.h) is shorter for those costs. With the default costs (F = B = W, no
// comm) they are the orders their files draw.
Schedule zb_h1(int devices, int microbatches, const CostModel& costs = {});
// For the costs of its p stages (CostModel::stages, or `uniform`; `bw` may differ from b + w):
// the fastest of its list-scheduler policies, 1f1b, zb-h1 and the authors' heuristic, by the
// simulator. No device holds
// more than max_in_flight micro-batches from F to W (0: p).
Schedule zb_auto(int devices, int microbatches, const CostModel& costs, int max_in_flight = 0);
// The same with a bound per device: [device] micro-batches, each at least 1.
Schedule zb_auto(int devices, int microbatches, const CostModel& costs,
                 const std::vector<int>& max_in_flight);
Schedule zb_h2(int devices, int microbatches, const CostModel& costs = {});
Schedule interleaved_zb(int devices, int microbatches, int chunks);
Schedule zb_v(int devices, int microbatches);    // two chunks, v-shape placement
Schedule v_half(int devices, int microbatches);  // two chunks, v-shape placement
Schedule v_min(int devices, int microbatches);   // two chunks, v-shape placement
Schedule dualpipe_v(int devices, int microbatches);  // two chunks, v-shape; m >= 2p

// The registry: every schedule by name, one row each. How many chunks per device it takes
// (exactly one, exactly two — the V shapes —, or any), the chunks a tool gives it when none
// are asked for, where it places its stages (schedule.h), whether it is planned for the
// stages' costs (zb-auto: a tool that cuts the model first passes them), and its generator.
enum class Chunks { one, two, any };
struct ScheduleKind {
  std::string_view name;
  Chunks chunks;
  int default_chunks;
  Placement placement;
  bool needs_costs;
  Schedule (*make)(int devices, int microbatches, int chunks, const CostModel& costs,
                   const std::vector<int>& max_in_flight);
};
// "naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-auto",
// "interleaved-zb", "zb-v", "v-half", "v-min", "dualpipe-v".
const std::vector<ScheduleKind>& schedule_kinds();
// The row of `name`; throws std::invalid_argument naming the known ones.
const ScheduleKind& schedule_kind(std::string_view name);

// The names, in the registry's order.
const std::vector<std::string>& schedule_names();
// The registry's default chunks of `name` (1 for a name it does not know).
int default_chunks(std::string_view name);
// The registry's placement of `name` (looped for a name it does not know). A tool that cuts
// the model before it makes the schedule needs it to balance the devices
// (pipeline/runtime/partition.h).
Placement placement_of(std::string_view name);
// The schedule of `name`: v must be 1 for the schedules that place one stage per device and 2
// for the V shapes. `costs` and `max_in_flight` ([device]) matter only to the schedules that
// need costs (zb-auto), which plan for them (by default F = B = W = 1 on every stage, and p
// micro-batches per device); the other schedules hold what they hold (validate.h's peak_live
// says how much). Throws std::invalid_argument for an unknown name or sizes it cannot serve.
Schedule make_schedule(std::string_view name, int devices, int microbatches, int chunks = 1,
                       const CostModel& costs = {}, const std::vector<int>& max_in_flight = {});

namespace detail {
// An empty schedule of the right shape, after checking p, m, v >= 1.
Schedule empty_schedule(const char* name, int devices, int microbatches, int chunks);
}  // namespace detail

}  // namespace brigade::pipeline
