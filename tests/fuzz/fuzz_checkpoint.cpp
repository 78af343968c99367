// Fuzz target: brigade-train's checkpoint loader (tools/train/checkpoint.h), which reads a
// file from disk: the input is written to DIR/checkpoint.safetensors and resumed into a
// small fixed run (model "input 4 / dense units=2", Adam, a two-setting recipe).
//
// Any input either loads or throws CheckpointError with a printable message (a corrupt
// file's message is the safetensors reader's, a wrong one's lists what differs). An input
// that loads must have put exactly the file's bytes into the parameters, as the safetensors
// reader parses them independently here.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "layers/optimizers.h"
#include "layers/model/safetensors.h"
#include "tests/fuzz/fuzz_check.h"
#include "tools/train/checkpoint.h"

namespace train = brigade::train;
namespace st = brigade::safetensors;
using brigade::fuzz::require;

namespace {

// The run a checkpoint must match; built once, its parameters overwritten by each load.
struct Run {
  std::string dir;
  brigade::model::ModelSpec model = brigade::model::parse_model("input 4\ndense units=2\n", "fuzz");
  train::Recipe recipe = {{"seed", "1"}, {"batch", "8"}};
  brigade::layers::Parameter weight{"dense_1.weight", brigade::Tensor::zeros({2, 4}, brigade::Device::cpu(0)), {}};
  brigade::layers::Parameter bias{"dense_1.bias", brigade::Tensor::zeros({2}, brigade::Device::cpu(0)), {}};
  std::vector<brigade::layers::Parameter*> params = {&weight, &bias};
  brigade::layers::Adam adam{params, brigade::AdamParams{}};

  Run() {
    dir = (std::filesystem::temp_directory_path() / ("brigade-fuzz-checkpoint-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
  }
  ~Run() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run;
  {
    std::ofstream out(train::checkpoint_path(run.dir), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    require(static_cast<bool>(out), "the input is written to the checkpoint file");
  }
  std::vector<brigade::layers::Optimizer*> optimizers = {&run.adam};
  try {
    train::load_checkpoint(run.dir, run.model, run.recipe, run.params, optimizers);
  } catch (const train::CheckpointError& e) {
    brigade::fuzz::check_message(e.what(), 4096, /*multi_line=*/true);
    return 0;
  }
  const st::File file = st::parse({data, size}, "again");
  for (const brigade::layers::Parameter* p : run.params) {
    const std::vector<float> got = p->value.to_vector();
    const std::span<const uint8_t> want = file.bytes(*file.find(p->name));
    require(want.size() == got.size() * sizeof(float) && std::memcmp(want.data(), got.data(), want.size()) == 0,
            "a loaded parameter holds the file's bytes");
  }
  return 0;
}
