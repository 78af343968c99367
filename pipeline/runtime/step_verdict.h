// A step's verdict on the GPUs: whether every check of the step passed (step_checks.h says
// which checks), learned by the GPUs themselves, so that the host never waits inside a step
// for it. Used when every device of the step is a GPU of this process; elsewhere the checks'
// host path stays (step_checks.h: CPU devices, --distributed links, data-parallel replicas,
// clipping by the global norm, whose norm the host reads anyway).
//
//   each device d       its word (an int32, kernels/step_verdict.h), the Runtime's across
//                       steps: zeroed (kStepOk) on d's compute stream when made, never zeroed
//                       again; d's checks write their failure into it with atomicMax (NaN/Inf
//                       of a tensor; a bad label, in the launch of Loss::tally that writes the
//                       tally's row). A failed word thus stays failed for the steps enqueued
//                       behind it, whose updates obey it too, until the host has read the
//                       failure and the Runtime makes fresh words;
//   after every list    exchange(): device e's word goes into word e of every device's table
//                       of one word per device (e's stream copies it into a snapshot of the
//                       step after its list; an event after that, a wait and a one-word copy
//                       on the table's compute stream: no host wait). The table is not the
//                       word: e's stream writes its table while others read its snapshot;
//   the update          each stage's optimizer reads its device's table and updates nothing
//                       when a word holds a failure (step_unless_failed);
//   the end             the reader's table (the last stage's device: the tally's) is copied
//                       into page-locked host memory behind its update, as the tally is (one
//                       device's pinned copies only: a pinned block that a faulted GPU
//                       used would fail the next allocation of any device's pinned memory);
//                       the host's wait for the step covers the copy, and then
//                       failure() reads the words: the largest word, the failure the host path
//                       reports (the smallest stage's). The caller undoes the optimizers' step
//                       counts (Optimizer::undo_step) when the step failed.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "kernels/step_verdict.h"
#include "pipeline/runtime/device_streams.h"
#include "pipeline/runtime/step_tally.h"
#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

class StepVerdict {
 public:
  StepVerdict() = default;  // no verdict on the devices: the checks' host path
  // `devices[d]` are the streams of schedule device d, every one a GPU's; `reader`: the
  // device whose table the host reads; `words`: [device] the words across steps (the
  // Runtime's), undefined where start() is to make one.
  StepVerdict(const std::vector<const DeviceStreams*>& devices, int reader,
              std::vector<Tensor>& words);

  bool defined() const { return words_ != nullptr; }
  // On device d's thread, among its first calls of the step (where a GPU that faulted since
  // the last step is named with the step): its word (zeroed: kStepOk), its table, and the
  // table's host copy on the reader.
  void start(int d, const DeviceStreams& streams);

  // On device d's thread, after `a` wrote `t` on `compute`: `check` (output_finite or
  // loss_finite) fails when t holds a NaN or an infinity. `what`: "the output of stage 2".
  void check_finite(int d, const Stream& compute, const Action& a, StepCheck check,
                    const Tensor& t, const std::string& what);
  // The same for the labels of `a`'s loss, whose logits have the shape `output`: the word
  // the loss's tally writes a bad label into (Loss::tally, in the tally's own launch).
  ops::VerdictWord labels_word(int d, const Action& a, const Shape& output);
  // Once every device's list is enqueued: every word into every table (see above).
  void exchange(const std::vector<const DeviceStreams*>& devices);
  // Device d's table, for its optimizers: (devices) int32 words on d.
  const Tensor& table(int d) const { return tables_[static_cast<size_t>(d)]; }
  // Behind the reader's update, on its compute stream: its table into host memory.
  void copy_to_host(const Stream& reader_compute);

  // What a word written by device d means, to say so. A CUDA graph that replays checks
  // (device_graphs.h) keeps the notes its capture made (notes_since) and makes them again
  // at each replay (note), as the checks' launches are made again on the GPU.
  struct Check {
    int32_t word;
    std::string what;
    Shape shape;
  };
  size_t notes(int d) const { return checks_[static_cast<size_t>(d)].size(); }
  std::vector<Check> notes_since(int d, size_t first) const;
  void note(int d, const std::vector<Check>& checks);

  struct Failure {
    int device;
    Action action;
    std::string message;  // "non-finite value in the output of stage 1 (8, 3)"
  };
  // After the step's wait covered copy_to_host: the first failure, or none. `tally`:
  // the step's, read already (a bad label's row and label are in it).
  std::optional<Failure> failure(const StepTally& tally) const;

 private:
  int32_t word_of(const Action& a, StepCheck check) const;

  std::vector<Tensor>* words_ = nullptr;  // [device]: (1) int32, its checks' verdict, on that device
  std::vector<Tensor> tables_;  // [device]: (devices) int32, every device's word, on that device
  std::vector<Tensor> snapshots_;  // [device]: (1) int32, its word as the step left it, on it
  int reader_ = -1;
  Tensor host_;  // the reader's table in page-locked host memory
  std::vector<std::vector<Check>> checks_;  // [device], each written by that device's thread only
};

}  // namespace brigade::pipeline
