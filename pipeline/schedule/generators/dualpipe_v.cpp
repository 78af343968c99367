// dualpipe-v: DeepSeek's DualPipe cut in half (DeepSeek-V3 technical report, 2024, section
// 3.2.1; the "V" variant of github.com/deepseek-ai/DualPipe). Two chunks per device in the
// v-shape placement (schedule.h): device r holds stages r and 2p-1-r. Each device walks eight
// phases, written here as in DualPipe's own per-rank loop, with chunk 0 its first stage and
// chunk 1 its second (F1 = forward on chunk 1, B0 = backward on chunk 0):
//
//   1. (p-r-1)·2 × F0                 fill the way down
//   2. r+1 × (F0 F1)                  the first micro-batches turn at device p-1 and come back
//   3. p-r-1 × (B1 W1 F1)             first backwards, split, the W right after its B
//   4. m-2p+r+1 × (F0 B1 F1 B0)       the steady state: a forward and a backward of the two
//                                     chunks in turn (DualPipe overlaps each F with the B next
//                                     to it, one micro-batch's compute with another's
//                                     communication; here they run one after the other)
//   5. p-r-1 × (B1 F1 B0)             the last forwards
//   6. r+1 × (B1 B0)                  backwards; from the middle one on, split (B now, W later)
//   7. p-r-1 × (W B0)                 W's fill the wait for the last input gradients
//   8. r+1 × W                        the W's left
//
// A backward is fused (BW) unless it is split, and split W's run oldest first, so each stage
// adds its weight gradients in micro-batch order. It needs m >= 2p micro-batches (phase 4
// runs at least once on every device), as DualPipeV asserts.
#include <deque>
#include <stdexcept>
#include <string>

#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

namespace {

// One device's list, built phase by phase.
class DualPipeVDevice {
 public:
  DualPipeVDevice(std::vector<Action>& list, int p, int r) : list_(list), stage_{r, 2 * p - 1 - r} {}

  void forward(int chunk) { list_.push_back({stage_[chunk], Op::F, next_f_[chunk]++}); }
  void backward(int chunk, bool split) {
    const Action b{stage_[chunk], split ? Op::B : Op::BW, next_b_[chunk]++};
    list_.push_back(b);
    if (split) pending_w_.push_back({b.stage, Op::W, b.microbatch});
  }
  void weight() {
    list_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }

 private:
  std::vector<Action>& list_;
  int stage_[2];
  int next_f_[2] = {0, 0}, next_b_[2] = {0, 0};
  std::deque<Action> pending_w_;
};

}  // namespace

Schedule dualpipe_v(int devices, int microbatches) {
  Schedule s = detail::empty_schedule("dualpipe-v", devices, microbatches, 2);
  const int p = devices, m = microbatches;
  if (m < 2 * p)
    throw MicrobatchCountError("dualpipe-v: needs at least 2p = " + std::to_string(2 * p) +
                               " micro-batches for " + std::to_string(p) + " devices, got " +
                               std::to_string(m) + "; try m=" + std::to_string(2 * p));
  s.placement = Placement::v_shape;
  for (int r = 0; r < p; ++r) {
    DualPipeVDevice d(s.lists[static_cast<size_t>(r)], p, r);
    for (int i = 0; i < (p - r - 1) * 2; ++i) d.forward(0);
    for (int i = 0; i < r + 1; ++i) d.forward(0), d.forward(1);
    for (int i = 0; i < p - r - 1; ++i) d.backward(1, true), d.weight(), d.forward(1);
    for (int i = 0; i < m - 2 * p + r + 1; ++i)
      d.forward(0), d.backward(1, false), d.forward(1), d.backward(0, false);
    for (int i = 0; i < p - r - 1; ++i) d.backward(1, false), d.forward(1), d.backward(0, false);
    // Phase 6: the split starts at the middle backward, on chunk 1 for odd devices and on
    // chunk 0 for even ones (DualPipeV staggers it so neighbours do not split together).
    bool split = false;
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) split = true;
      d.backward(1, split);
      if (i == (r + 1) / 2 && r % 2 == 0) split = true;
      d.backward(0, split);
    }
    for (int i = 0; i < p - r - 1; ++i) d.weight(), d.backward(0, true);
    for (int i = 0; i < r + 1; ++i) d.weight();
  }
  return s;
}

}  // namespace brigade::pipeline
