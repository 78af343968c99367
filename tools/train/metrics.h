// --metrics FILE: JSON lines (nlohmann-json), one object per line, each written to the file
// at once (brigade::GrowingFile), so a run that is stopped leaves a readable file and
// `jq`/pandas read it as it grows. A line that cannot be written (a full disk) throws naming
// the file and the reason, and the run stops there: the file keeps its whole lines only.
//
//   {"kind":"step","step":12,"epoch":0,"batch":12,"loss":0.71,"accuracy":0.77,
//    "samples_per_s":1450.2,"sent_bytes":1048576,"peak_memory":{"cpu:0":31457280,"cpu:1":...}}
//   {"kind":"eval","step":469,"epoch":0,"test_loss":0.41,"test_accuracy":0.851}
//
// "step" counts from 1 (the steps done so far); "loss" is written with 17 significant digits,
// enough to read back the float32 exactly, so two runs compare bit for bit. "accuracy" is the
// training mini-batch's; "sent_bytes" counts the bytes this process's devices sent to other
// devices in the step (activations and input gradients between stages; 0 on one device; a
// --precision bf16 run sends half an fp32 run's); "peak_memory" names the devices this process
// runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "engine/output_file.h"

namespace brigade::train {

class MetricsWriter {
 public:
  MetricsWriter() = default;  // writes nothing
  // A new file at `path`; or, for a run resumed after step `resumed_at`, the file as it is,
  // first cut back to its lines of steps up to `resumed_at` (a run stopped without its last
  // steps' checkpoint, killed, wrote lines of steps the resumed run does again): the cut file
  // replaces the old one whole (WholeFile), and the new lines follow. Throws naming the path.
  MetricsWriter(const std::string& path, std::optional<int64_t> resumed_at);

  void step(int64_t step, int64_t epoch, int64_t batch, double loss,
            double accuracy, double samples_per_s, uint64_t sent_bytes,
            const std::map<std::string, uint64_t>& peak_memory);
  void eval(int64_t step, int64_t epoch, double test_loss, double test_accuracy);
  // The run's end: the file synced and closed, checked. Before reading it back (--plot).
  void close() { out_.close(); }

 private:
  GrowingFile out_;
};

}  // namespace brigade::train
