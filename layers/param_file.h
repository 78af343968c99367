// A model's parameters in a safetensors file (layers/model/safetensors.h), under PyTorch's names
// and layouts: `<layer>.weight` (conv OIHW (K, C, R, S), dense (out, in)) and `<layer>.bias`,
// so torch.nn.Module.load_state_dict takes them after a name map.
//
// Two dtypes, one per file:
//   F32   the parameters as they are: the round trip is bit-exact, bytes in, the same bytes out
//         (--save-initial, checkpoints, and --save by default).
//   BF16  each value rounded to bfloat16, to nearest with ties to even, NaN kept NaN
//         (kernels/cpu/bf16.h): half the size, for inference (--save-dtype bf16). Reading
//         widens exactly (16 zero bits appended), so save, load, save again gives the same file.
//
// save_parameters waits for the values (a blocking copy to the host, on each parameter's
// stream) and writes the file atomically (temporary file, fsync, rename). load_parameters
// checks the file against the parameters first — every missing, unexpected, mis-shaped or
// mis-typed tensor reported in one error naming the file — and only then copies the values in,
// so a bad file changes nothing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/model/safetensors.h"
#include "layers/tape.h"

namespace brigade::layers {

// `dtype` is F32 or BF16; any other throws safetensors::Error before anything is written.
void save_parameters(const std::vector<Parameter*>& params, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {},
                     safetensors::Dtype dtype = safetensors::Dtype::F32);

// Reads a file of F32 or of BF16 tensors (not both) and returns which. A tensor of another
// dtype, or one whose dtype differs from the first parameter's, is a mismatch.
safetensors::Dtype load_parameters(const std::vector<Parameter*>& params, const std::string& path);

// The tensors save_parameters writes for `spec`'s parameters (names, dtypes and shapes, in its
// order), from the model's description alone: safetensors::file_size gives what the file will
// need before any parameter exists.
std::vector<safetensors::Expected> parameter_layout(const model::ModelSpec& spec,
                                                    safetensors::Dtype dtype = safetensors::Dtype::F32);

}  // namespace brigade::layers
