#include "tools/train/metrics.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace brigade::train {

namespace {

// Cuts the metrics file at `path` back to its lines of steps up to `step`, when it holds any
// after it. Only a regular file: a device or a pipe (/dev/stdout) is not read back. A line
// that names no step is kept: it is not this run's to judge. A last line without its newline
// is a record cut short (the run before was killed as it wrote): it goes, or the first line
// appended would be glued to it. A line that is no JSON object at all means the file is not
// --metrics output: refused before the run, which would append to it and leave a file that
// brigade-plot refuses.
void keep_through_step(const std::string& path, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the metrics file to resume it");
  std::string kept;
  bool cut = false;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (in.eof()) {  // no newline after it
      cut = true;
      break;
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw Error(path + ":" + std::to_string(number) +
                  ": not a line of brigade-train's --metrics output, so not this run's to "
                  "continue with --resume: give --metrics the file of the run that wrote the "
                  "checkpoint, or a new file");
    if (j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step) {
      cut = true;
      continue;
    }
    kept += line + '\n';
  }
  if (cut) write_whole_file(path, kept);
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, std::optional<int64_t> resumed_at) {
  if (resumed_at) keep_through_step(path, *resumed_at);
  out_ = GrowingFile(path, resumed_at.has_value());
}

void MetricsWriter::step(int64_t step, int64_t epoch, int64_t batch, double loss,
                         double accuracy, double samples_per_s, uint64_t sent_bytes,
                         const std::map<std::string, uint64_t>& peak_memory) {
  if (!out_.is_open()) return;
  // ordered_json: the fields in this order, as metrics.h and the README show them (plain json
  // sorts them by name).
  const nlohmann::ordered_json j = {{"kind", "step"},
                                    {"step", step},
                                    {"epoch", epoch},
                                    {"batch", batch},
                                    {"loss", loss},
                                    {"accuracy", accuracy},
                                    {"samples_per_s", samples_per_s},
                                    {"sent_bytes", sent_bytes},
                                    {"peak_memory", peak_memory}};
  out_.append(j.dump() + '\n');
}

void MetricsWriter::eval(int64_t step, int64_t epoch, double test_loss, double test_accuracy) {
  if (!out_.is_open()) return;
  const nlohmann::ordered_json j = {{"kind", "eval"},
                            {"step", step},
                            {"epoch", epoch},
                            {"test_loss", test_loss},
                            {"test_accuracy", test_accuracy}};
  out_.append(j.dump() + '\n');
}

}  // namespace brigade::train
