// PyTorch's schedule CSV (pipeline/schedule/pytorch_csv.h): every generator's lists written
// and read back, compute-only and lowered; files written by hand in PyTorch's words (its
// kinds, bubbles, per-stage actions, a V, an overlapped pair) read as the lists they mean;
// and what Brigade cannot run as PyTorch would, refused with the file, line and reason.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/pytorch_csv.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

bp::ScheduleText read(const std::string& csv) { return bp::parse_pytorch_csv(csv, "t.csv"); }

// The lists a file means, in Brigade's words, one "dN: ..." line per device.
std::string meaning(const std::string& csv) { return bp::format_lists(read(csv).lists); }

std::string refusal(const std::string& csv) {
  try {
    read(csv);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("PyTorch CSV: every generator's lists round-trip, compute-only and lowered") {
  for (const std::string& name : bp::schedule_names())
    for (const std::pair<int, int>& p_m : {std::pair{1, 2}, std::pair{2, 4}, std::pair{4, 8}}) {
      const int p = p_m.first, m = p_m.second;
      CAPTURE(name);
      CAPTURE(p);
      const bp::Schedule s = bp::make_schedule(name, p, m, bp::default_chunks(name));
      const bp::ScheduleText back = read(bp::format_pytorch_csv(s));
      CHECK_FALSE(back.lowered());
      const bp::Schedule again = bp::compute_only(back.lists);
      CHECK(again.lists == s.lists);
      CHECK(again.devices == s.devices);
      CHECK(again.chunks == s.chunks);
      CHECK(again.microbatches == s.microbatches);
      // p = 1: one device holds every stage, so the V and the looped placement are the same.
      if (p > 1) CHECK(again.placement == s.placement);
      const bp::LoweredSchedule lowered = bp::lower(s);
      const bp::ScheduleText lowered_back = read(bp::format_pytorch_csv(lowered));
      CHECK(lowered_back.lowered() == (p > 1));
      CHECK(lowered_back.lists.lists == lowered.lists);
    }
}

TEST_CASE("PyTorch CSV: the kinds, written as PyTorch writes them") {
  // 1F1B on two ranks, split backward on stage 1 (I then W), fused on stage 0 (B).
  bp::Schedule s = bp::make_schedule("1f1b", 2, 2);
  s.lists[1] = {{1, bp::Op::F, 0}, {1, bp::Op::B, 0}, {1, bp::Op::W, 0},
                {1, bp::Op::F, 1}, {1, bp::Op::B, 1}, {1, bp::Op::W, 1}};
  bp::validate(s);
  CHECK(bp::format_pytorch_csv(s) ==
        "0F0,0F1,0B0,0B1\n"
        "1F0,1I0,1W0,1F1,1I1,1W1\n");
  // Lowered: PyTorch's SEND/RECV kinds, and a REDUCE_GRAD after each stage's last backward
  // for the weights, where PyTorch's own lowering puts it.
  CHECK(bp::format_pytorch_csv(bp::lower(s)) ==
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD\n"
        "1RECV_F0,1F0,1I0,1SEND_B0,1W0,1RECV_F1,1F1,1I1,1SEND_B1,1W1,1REDUCE_GRAD\n");
}

TEST_CASE("PyTorch CSV: a hand-written file with bubbles, per-stage actions and split backwards") {
  // Empty cells are PyTorch's None (bubbles); UNSHARD/RESHARD (FSDP) do nothing here;
  // REDUCE_GRAD after the stage's last W; I is the backward for the input; \r\n row ends.
  const std::string csv =
      "0UNSHARD,0F0,0F1,,0I0,0W0,0I1,0W1,0REDUCE_GRAD,0RESHARD\r\n"
      "1UNSHARD,,1F0,1I0,1F1,1I1,1W0,1W1,1REDUCE_GRAD,1RESHARD\r\n";
  CHECK(meaning(csv) ==
        "d0: 0F0 0F1 0B0 0W0 0B1 0W1\n"
        "d1: 1F0 1B0 1F1 1B1 1W0 1W1\n");
  const bp::ScheduleText t = read(csv);
  CHECK(t.lists.devices == 2);
  CHECK(t.lists.chunks == 1);
  CHECK(t.lists.microbatches == 2);
  CHECK(t.line_of_device == std::vector<int>{1, 2});
  CHECK_NOTHROW(bp::validate(bp::compute_only(t.lists)));
}

TEST_CASE("PyTorch CSV: the placement is inferred — looped, or a V") {
  // Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2: a V (ZBVZeroBubble's, DualPipeV's).
  const bp::ScheduleText v = read("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n");
  CHECK(v.lists.placement == bp::Placement::v_shape);
  CHECK(v.lists.chunks == 2);
  CHECK(bp::format_lists(v.lists) == "d0: 0F0 3F0 3BW0 0BW0\nd1: 1F0 2F0 2BW0 1BW0\n");
  CHECK_NOTHROW(bp::validate(bp::compute_only(v.lists)));
  // Rank 0 stages 0 and 2, rank 1 stages 1 and 3: Megatron's interleaving.
  CHECK(read("0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n").lists.placement == bp::Placement::looped);
  // DualPipe's overlapped pair: its two actions, one after the other.
  CHECK(meaning("0F0,3F0,(0F1;3B0)OVERLAP_F_B,3F1,3B1,0B0,0B1\n"
                "1F0,2F0,1F1,2B0,2F1,2B1,1B0,1B1\n") ==
        "d0: 0F0 3F0 0F1 3BW0 3F1 3BW1 0BW0 0BW1\n"
        "d1: 1F0 2F0 1F1 2BW0 2F1 2BW1 1BW0 1BW1\n");
}

TEST_CASE("PyTorch CSV: what Brigade cannot run as PyTorch would is refused, with line and reason") {
  CHECK(refusal("0F0,0Q0\n") ==
        "t.csv:1: cell 2: '0Q0': unknown kind 'Q0' (PyTorch's are F, I, W, B, SEND_F, RECV_F, "
        "SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD and (..;..)OVERLAP_F_B)");
  CHECK(refusal("0F0,0B\n") ==
        "t.csv:1: cell 2: '0B': B needs a micro-batch number after it, got ''");
  CHECK(refusal("0F0,0B0,0UNSHARD1\n") ==
        "t.csv:1: cell 3: '0UNSHARD1': UNSHARD takes no micro-batch");
  CHECK(refusal("0F0,0F0x\n") ==
        "t.csv:1: cell 2: '0F0x': F needs a micro-batch number after it, got '0x'");
  CHECK(refusal("0F0,1F0,1B0,0B0\n1F1\n") ==
        "t.csv:2: cell 1: stage 1 is on rank 1 and on rank 0 (line 1): a stage lives on one "
        "rank, in PyTorch as here");
  // Stages 0 and 1 on rank 0, 2 and 3 on rank 1: PyTorch takes any map, Brigade two shapes.
  CHECK(refusal("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n") ==
        "t.csv:1: 4 stages on 2 ranks placed neither looped (stage s on rank s mod p) nor in a "
        "V (schedule.h), the two shapes Brigade cuts a model into; stage 1 is on rank 0 (line "
        "1), looped places it on rank 1; stage 1 is on rank 0 (line 1), a V places it on rank 1");
  CHECK(refusal("0F0,1F0,2F0,2B0,1B0,0B0\n") == "");  // one rank holds every stage: fine
  CHECK(refusal("0F0,2F0,2B0,0B0\n1F0,1B0\n") != "");  // 3 stages on 2 ranks
  CHECK(refusal("0F0,0B0\n\n1F0,1B0\n") ==
        "t.csv:2: rank 1 has no actions (each row of PyTorch's CSV is a rank, an empty one too)");
  CHECK(refusal("0F0,0F1,0B0,0REDUCE_GRAD,0B1\n") ==
        "t.csv:1: cell 4: 0REDUCE_GRAD comes before 0B1: PyTorch would reduce the stage's "
        "gradients before they are complete; Brigade reduces them after its last W or B");
  CHECK(refusal("0F0,0B0,0REDUCE_GRAD,0REDUCE_GRAD\n") ==
        "t.csv:1: cell 4: a second REDUCE_GRAD for stage 0");
  CHECK(refusal("(0F0;0SEND_F0)OVERLAP_F_B\n") ==
        "t.csv:1: cell 1: '(0F0;0SEND_F0)OVERLAP_F_B': OVERLAP_F_B holds compute actions only "
        "(F, I, W, B)");
}

TEST_CASE("PyTorch CSV: a file that reads but does not validate names its line and action") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "brigade-pytorch-csv-test-broken.csv").string();
  std::ofstream(path) << "0F0,0B0\n1B0,1F0\n";  // rank 1's backward before its forward
  std::string message;
  try {
    bp::load_schedule(path);
  } catch (const bp::ScheduleError& e) {
    message = e.what();
  }
  std::remove(path.c_str());
  CHECK(message.rfind(path + ":2: 1BW0: schedule", 0) == 0);
}
