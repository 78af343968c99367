// dualpipe-v beside PyTorch's ScheduleDualPipeV (torch/distributed/pipelining/schedules.py,
// its _calculate_single_rank_operations, transcribed below) over p in {2, 4, 8} and m from 2p
// (DualPipeV needs m >= 2p) to 4p: the same lists.
#include <doctest/doctest.h>

#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

// PyTorch's rank operations, with its own bookkeeping: one counter per (stage, kind), where a
// FULL_BACKWARD advances both the input's and the weight's; a queue of weight actions owed by
// each BACKWARD_INPUT, one popped where the loop asks for a weight (none: nothing). An
// OVERLAP_F_B runs its forward, then its full backward: two actions here. FULL_BACKWARD is
// Brigade's BW, BACKWARD_INPUT its B, BACKWARD_WEIGHT its W.
class PyTorchRank {
 public:
  PyTorchRank(std::vector<bp::Action>& actions, int stage0, int stage1)
      : actions_(actions), stage_{stage0, stage1} {}

  void add(int chunk, bp::Op kind) {
    const int stage = stage_[chunk];
    const bp::Op counted = kind == bp::Op::BW ? bp::Op::B : kind;
    const int mb = counters_[{stage, counted}];
    actions_.push_back({stage, kind, mb});
    if (kind == bp::Op::BW) {
      ++counters_[{stage, bp::Op::B}];
      ++counters_[{stage, bp::Op::W}];
    } else {
      if (kind == bp::Op::B) weight_queue_.emplace_back(stage, mb);
      counters_[{stage, kind}] = mb + 1;
    }
  }
  void overlap_f_b(int forward_chunk, int backward_chunk) {
    add(forward_chunk, bp::Op::F);
    add(backward_chunk, bp::Op::BW);
  }
  void weight_if_pending() {
    if (weight_queue_.empty()) return;
    const auto [stage, mb] = weight_queue_.front();
    weight_queue_.pop_front();
    actions_.push_back({stage, bp::Op::W, mb});
    ++counters_[{stage, bp::Op::W}];
  }

 private:
  std::vector<bp::Action>& actions_;
  int stage_[2];
  std::map<std::pair<int, bp::Op>, int> counters_;
  std::deque<std::pair<int, int>> weight_queue_;
};

bp::Schedule pytorch_dualpipe_v(int num_ranks, int num_chunks) {
  bp::Schedule s;
  s.name = "ScheduleDualPipeV";
  s.devices = num_ranks;
  s.chunks = 2;
  s.microbatches = num_chunks;
  s.placement = bp::Placement::v_shape;
  s.lists.resize(static_cast<size_t>(num_ranks));
  for (int rank = 0; rank < num_ranks; ++rank) {
    PyTorchRank r(s.lists[static_cast<size_t>(rank)], rank, 2 * num_ranks - 1 - rank);
    using bp::Op;
    for (int i = 0; i < (num_ranks - rank - 1) * 2; ++i) r.add(0, Op::F);  // step 1: F0
    for (int i = 0; i < rank + 1; ++i) r.add(0, Op::F), r.add(1, Op::F);   // step 2: F0F1
    for (int i = 0; i < num_ranks - rank - 1; ++i)                          // step 3: I1W1F1
      r.add(1, Op::B), r.weight_if_pending(), r.add(1, Op::F);
    for (int i = 0; i < num_chunks - num_ranks * 2 + rank + 1; ++i) {       // step 4: F0B1-F1B0
      if (i == 0 && rank == num_ranks - 1)
        r.add(0, Op::F), r.add(1, Op::BW);  // not overlapped, "to further reduce bubble size"
      else
        r.overlap_f_b(0, 1);
      r.overlap_f_b(1, 0);
    }
    for (int i = 0; i < num_ranks - rank - 1; ++i)  // step 5: B1-F1B0
      r.add(1, Op::BW), r.overlap_f_b(1, 0);
    const int step_6 = rank + 1;  // step 6: B1B0, the second half zero bubble
    bool enable_zb = false;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && rank % 2 == 1) enable_zb = true;
      r.add(1, enable_zb ? Op::B : Op::BW);
      if (i == step_6 / 2 && rank % 2 == 0) enable_zb = true;
      r.add(0, enable_zb ? Op::B : Op::BW);
    }
    for (int i = 0; i < num_ranks - rank - 1; ++i)  // step 7: W0B0
      r.weight_if_pending(), r.add(0, enable_zb ? Op::B : Op::BW);
    for (int i = 0; i < rank + 1; ++i) r.weight_if_pending();  // step 8: W0
  }
  return s;
}

}  // namespace

TEST_CASE("dualpipe-v is PyTorch's ScheduleDualPipeV, action for action") {
  // So it is as short as PyTorch's at any costs (F = B = W, f = 1, b = 2, w = 1, any comm) and
  // holds what it holds. Brigade's generator is written from DeepSeek's DualPipeV phases.
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 2 * p + 1, 4 * p}) {
      CAPTURE(p);
      CAPTURE(m);
      const bp::Schedule theirs = pytorch_dualpipe_v(p, m);
      REQUIRE_NOTHROW(bp::validate(theirs));
      CHECK(bp::format_lists(bp::make_schedule("dualpipe-v", p, m, 2)) ==
            bp::format_lists(theirs));
    }
}
