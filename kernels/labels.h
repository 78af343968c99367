// Class labels: int32 in [0, classes). The check every loss kernel (reference, CPU, CUDA) and
// the data loader make, so that bad data fails loudly, naming the row, instead of indexing
// wildly.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace brigade {

// Throws std::out_of_range unless 0 <= label < classes.
inline void check_label(int32_t label, int64_t row, int64_t classes) {
  if (label < 0 || label >= classes) {
    std::ostringstream m;
    m << "softmax_cross_entropy: label " << label << " of row " << row << " is outside [0, "
      << classes << ")";
    throw std::out_of_range(m.str());
  }
}

}  // namespace brigade
