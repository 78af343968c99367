// Parameter initialisers, Keras' defaults, deterministic from a seed.
//
// Glorot (Xavier) uniform: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)), with
//   conv (K, C, R, S): fan_in = C·R·S, fan_out = K·R·S;  dense (out, in): fan_in = in,
//   fan_out = out   (Keras' glorot_uniform).
// Element e of the parameters of layer `layer` takes word e % 4 of
//   philox4x32_10(counter = {e / 4, layer, e >> 34, kInitTag},
//                 key = {seed low, seed high ^ kInitTag})
// so values are a pure function of (seed, layer, element), and never coincide with the
// dropout masks drawn from the same seed (their counters carry a step, not this tag).
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::layers {

inline constexpr uint32_t kInitTag = 0x696e6974u;  // "init"

// count values U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
std::vector<float> glorot_uniform(int64_t count, int64_t fan_in, int64_t fan_out, uint64_t seed,
                                  uint32_t layer);

}  // namespace brigade::layers
