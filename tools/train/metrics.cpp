#include "tools/train/metrics.h"

#include <nlohmann/json.hpp>

namespace brigade::train {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : out_(path, append) {}

void MetricsWriter::step(int64_t step, int64_t epoch, int64_t batch, double loss,
                         double accuracy, double samples_per_s, uint64_t sent_bytes,
                         const std::map<std::string, uint64_t>& peak_memory) {
  if (!out_.is_open()) return;
  nlohmann::json j = {{"kind", "step"},         {"step", step},
                      {"epoch", epoch},         {"batch", batch},
                      {"loss", loss},           {"samples_per_s", samples_per_s},
                      {"accuracy", accuracy},   {"sent_bytes", sent_bytes},
                      {"peak_memory", peak_memory}};
  out_.append(j.dump() + '\n');
}

void MetricsWriter::eval(int64_t step, int64_t epoch, double test_loss, double test_accuracy) {
  if (!out_.is_open()) return;
  const nlohmann::json j = {{"kind", "eval"},
                            {"step", step},
                            {"epoch", epoch},
                            {"test_loss", test_loss},
                            {"test_accuracy", test_accuracy}};
  out_.append(j.dump() + '\n');
}

}  // namespace brigade::train
