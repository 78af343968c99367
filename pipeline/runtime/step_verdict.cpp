#include "pipeline/runtime/step_verdict.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/error.h"
#include "engine/event.h"
#include "kernels/labels.h"
#include "kernels/ops.h"

namespace brigade::pipeline {

StepVerdict::StepVerdict(const std::vector<const DeviceStreams*>& devices, int reader,
                         std::vector<Tensor>& words)
    : words_(&words), reader_(reader) {
  for (const DeviceStreams* s : devices) {
    BRIGADE_CHECK(s && s->compute.device().is_cuda() && s->check,
                  "a step's verdict on the devices needs every device to be a GPU of this process");
  }
  BRIGADE_CHECK(words.size() == devices.size(),
                "a step's verdict: " << words.size() << " words for " << devices.size() << " devices");
  tables_.resize(devices.size());
  checks_.resize(devices.size());
}

void StepVerdict::start(int d, const DeviceStreams& streams) {
  const size_t i = static_cast<size_t>(d);
  Tensor& word = (*words_)[i];
  if (!word.defined()) word = Tensor::zeros(Shape({1}), streams.compute);  // kStepOk: a memset
  tables_[i] = Tensor::empty(Shape({static_cast<int64_t>(tables_.size())}), streams.compute);
  if (d == reader_)
    host_ = Tensor::empty_pinned(Shape({static_cast<int64_t>(tables_.size())}), *streams.check);
}

int32_t StepVerdict::word_of(const Action& a, StepCheck check) const {
  BRIGADE_CHECK(a.stage < kStepCheckStages && a.microbatch < kStepCheckMicroBatches,
                "a step's verdict on the devices names up to " << kStepCheckStages << " stages and "
                    << kStepCheckMicroBatches << " micro-batches, not " << to_string(a));
  return step_check_word(a.stage, a.microbatch, check);
}

void StepVerdict::check_finite(int d, const Stream& compute, const Action& a, StepCheck check,
                               const Tensor& t, const std::string& what) {
  const int32_t failed = word_of(a, check);
  checks_[static_cast<size_t>(d)].push_back({failed, what, t.shape()});
  ops::step_verdict_check_finite(t, (*words_)[static_cast<size_t>(d)], 0, failed, compute);
}

ops::VerdictWord StepVerdict::labels_word(int d, const Action& a, const Shape& output) {
  const int32_t failed = word_of(a, StepCheck::labels);
  checks_[static_cast<size_t>(d)].push_back({failed, "the loss", output});
  return {(*words_)[static_cast<size_t>(d)], 0, failed};
}

std::vector<StepVerdict::Check> StepVerdict::notes_since(int d, size_t first) const {
  const std::vector<Check>& made = checks_[static_cast<size_t>(d)];
  return {made.begin() + static_cast<std::ptrdiff_t>(first), made.end()};
}

void StepVerdict::note(int d, const std::vector<Check>& checks) {
  std::vector<Check>& made = checks_[static_cast<size_t>(d)];
  made.insert(made.end(), checks.begin(), checks.end());
}

void StepVerdict::exchange(const std::vector<const DeviceStreams*>& devices) {
  // Another device reads a word through a snapshot of this step, copied on the word's own
  // device by its own stream: the word lives across steps, and no other device's stream is
  // ever a user of its block (a GPU that faults would keep that block from being reused). A
  // device reads its own word directly, in its stream's order; one device needs no snapshot.
  const bool others = devices.size() > 1;
  std::vector<Tensor> snapshots(devices.size());  // [e]: (1) int32, e's word, on e
  std::vector<Event> checked(devices.size());  // [e]: after device e's list, its checks included
  for (size_t e = 0; e < devices.size() && others; ++e) {
    snapshots[e] = Tensor::empty(Shape({1}), devices[e]->compute);
    copy_async(snapshots[e], (*words_)[e], devices[e]->compute);
    checked[e].record(devices[e]->compute);
  }
  for (size_t d = 0; d < devices.size(); ++d)
    for (size_t e = 0; e < devices.size(); ++e) {
      const Stream& compute = devices[d]->compute;
      if (e != d) compute.wait(checked[e]);
      copy_async(tables_[d], static_cast<int64_t>(e), e == d ? (*words_)[e] : snapshots[e], 0, 1,
                 compute);
    }
  snapshots_ = std::move(snapshots);  // read until the tables are written: kept with the step
}

void StepVerdict::copy_to_host(const Stream& reader_compute) {
  copy_async(host_, tables_[static_cast<size_t>(reader_)], reader_compute);
}

std::optional<StepVerdict::Failure> StepVerdict::failure(const StepTally& tally) const {
  int device = -1;
  int32_t first = kStepOk;  // the largest word: the first failure
  for (size_t d = 0; d < tables_.size(); ++d) {
    int32_t word;  // device d's word
    std::memcpy(&word, host_.data<float>() + d, sizeof(word));
    if (word > first) {
      first = word;
      device = static_cast<int>(d);
    }
  }
  if (device < 0) return std::nullopt;
  const StepCheckFailure f = step_check_failure(first);
  const Action action{f.stage, Op::F, f.microbatch};
  const std::vector<Check>& made = checks_[static_cast<size_t>(device)];
  const auto check = std::find_if(made.begin(), made.end(),
                                  [&](const Check& c) { return c.word == first; });
  BRIGADE_CHECK(check != made.end(), "device " << device << "'s verdict names a check it never made: "
                                               << to_string(action) << ", check "
                                               << static_cast<int>(f.check));
  if (f.check != StepCheck::labels)
    return Failure{device, action,
                   "non-finite value in " + check->what + " " + check->shape.str()};
  const MicroBatchTally row = tally.row(f.microbatch);
  std::string why = "a label outside the classes";
  try {
    check_label(row.bad_label, row.bad_row, check->shape[1]);
  } catch (const std::out_of_range& e) {
    why = e.what();
  }
  return Failure{device, action, "the loss: " + why};
}

}  // namespace brigade::pipeline
