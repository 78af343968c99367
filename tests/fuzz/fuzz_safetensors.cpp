// Fuzz target: the safetensors reader (layers/model/safetensors.h), on a whole file in memory.
//
// Any input either parses or throws safetensors::Error with a short, printable message. An
// input that parses must keep the reader's promises: the tensors tile the byte buffer in
// order, each holds exactly product(shape) * dtype_size bytes, names are unique, and a file
// compared with its own description has no mismatch.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "layers/model/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace st = brigade::safetensors;
using brigade::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  st::File file;
  try {
    file = st::parse({data, size}, "fuzz.safetensors");
  } catch (const st::Error& e) {
    brigade::fuzz::check_message(e.what(), 2048);
    return 0;
  }
  uint64_t covered = 0;
  std::vector<st::Expected> described;
  for (const st::TensorInfo& t : file.tensors) {
    require(t.begin == covered || t.begin == t.end, "tensors tile the buffer in offset order");
    if (t.end > t.begin) covered = t.end;
    uint64_t bytes = st::dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);  // the reader checked overflow
    require(file.bytes(t).size() == bytes, "a tensor's bytes are product(shape) * dtype size");
    require(file.find(t.name) == &t, "tensor names are unique");
    described.push_back({t.name, t.dtype, t.shape});
  }
  require(covered == file.data.size(), "the tensors cover the whole buffer");
  require(st::mismatches(file, described).empty(), "a file matches its own description");

  // The mismatch report on what a small model expects: every message short and printable.
  const std::vector<st::Expected> model = {{"dense_1.weight", st::Dtype::F32, {10, 4}},
                                           {"dense_1.bias", st::Dtype::F32, {10}}};
  for (const std::string& m : st::mismatches(file, model))
    brigade::fuzz::check_message(m, 1024);
  return 0;
}
