// Schedule generators: p devices, m micro-batches, v chunks (stages) per device -> Schedule.
// Read them in this order; each file is one schedule, from the question's baseline to the
// zero-bubble one.
//   naive.cpp             the whole mini-batch as ONE micro-batch: forward through every
//                         stage, then backward; one device busy at a time
//   gpipe.cpp             all m forwards, then all m backwards (Huang et al., 2019)
//   one_f_one_b.cpp       PipeDream-Flush: warm-up, one forward one backward, cool-down
//                         (Narayanan et al., 2021)
//   interleaved_1f1b.cpp  Megatron-LM's virtual stages: v chunks per device
//   zb_h1.cpp             Zero Bubble H1 (Qi et al., ICLR 2024): B and W split, W fills the
//                         cool-down bubbles, 1F1B's peak memory
//   registry.cpp          the schedules by name, for the command line
// Every generator throws std::invalid_argument, naming the schedule and the values that
// work, for sizes it cannot serve; every schedule it returns passes validate().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

Schedule naive(int devices, int microbatches, int chunks = 1);
Schedule gpipe(int devices, int microbatches);
Schedule one_f_one_b(int devices, int microbatches);
Schedule interleaved_1f1b(int devices, int microbatches, int chunks);
Schedule zb_h1(int devices, int microbatches);

// Names accepted by make_schedule: "naive", "gpipe", "1f1b", "interleaved-1f1b", "zb-h1".
const std::vector<std::string>& schedule_names();
// v must be 1 for the schedules that place one stage per device.
Schedule make_schedule(std::string_view name, int devices, int microbatches, int chunks = 1);

namespace detail {
// An empty schedule of the right shape, after checking p, m, v >= 1.
Schedule empty_schedule(const char* name, int devices, int microbatches, int chunks);
}  // namespace detail

}  // namespace brigade::pipeline
