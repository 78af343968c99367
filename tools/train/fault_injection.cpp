// See fault_injection.h.
#include "tools/train/fault_injection.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/stream.h"

namespace brigade::train {

std::optional<NanInjection> nan_injection_from_environment() {
  const char* text = std::getenv("BRIGADE_INJECT_NAN");
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string value = text;
  const size_t colon = value.find(':');
  NanInjection injection;
  bool ok = colon != std::string::npos;
  if (ok) try {
      size_t used_rank = 0, used_step = 0;
      injection.rank = std::stoi(value.substr(0, colon), &used_rank);
      injection.step = std::stoll(value.substr(colon + 1), &used_step);
      ok = used_rank == colon && used_step == value.size() - colon - 1 && injection.rank >= 0 &&
           injection.step >= 1;
    } catch (const std::exception&) {
      ok = false;
    }
  BRIGADE_CHECK(ok, "BRIGADE_INJECT_NAN=\"" << printable(value)
                                            << "\": expected RANK:STEP, e.g. 1:3 (rank 1 writes "
                                               "a NaN into a weight before step 3)");
  return injection;
}

bool write_nan_into(const std::vector<layers::Parameter*>& params) {
  for (layers::Parameter* p : params) {
    const Tensor& t = p->value;
    if (t.numel() == 0) continue;
    std::vector<float> values = t.to_vector();
    values[0] = std::numeric_limits<float>::quiet_NaN();
    const Stream s = Stream::default_for(t.device());
    copy_async(t, Tensor::from_vector(values, t.shape(), s), s);
    s.synchronize();
    return true;
  }
  return false;
}

}  // namespace brigade::train
