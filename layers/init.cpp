#include "layers/init.h"

#include <cmath>

#include "engine/philox.h"

namespace brigade::layers {

std::vector<float> glorot_uniform(int64_t count, int64_t fan_in, int64_t fan_out, uint64_t seed,
                                  uint32_t layer) {
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    const Philox4x32 r =
        philox4x32_10(static_cast<uint32_t>(e / 4), layer, static_cast<uint32_t>(e >> 34),
                      kInitTag, static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32) ^ kInitTag);
    const double u = philox_uniform(r.v[e % 4]);  // [0, 1)
    values[static_cast<size_t>(e)] = static_cast<float>((2.0 * u - 1.0) * limit);
  }
  return values;
}

}  // namespace brigade::layers
