// A diverging run (tools/train/divergence.h): it stops at the first non-finite loss with one error
// naming the step and exits 1; no file it writes holds a NaN or an Inf, and the last good
// checkpoint stays; --check-finite names the stage and action; --init-from and --resume refuse
// such a file; the end-of-run summary comes once, and only from a run that ended well.
//
// The diverging recipe: SGD with lr 1e20 on the small model. Step 1's loss is an ordinary
// one; its update makes weights of about 1e19, so step 2's logits overflow float. With
// lr 1e39 the update itself overflows (lr times a gradient is past float's 3.4e38), so the
// weights after step 1 hold Infs while step 1's loss was finite.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/model/safetensors.h"
#include "layers/sequential.h"
#include "tests/tools/train/run_binary.h"
#include "tools/train/checkpoint.h"
#include "tools/train/divergence.h"
#include "tools/train/optimizer.h"
#include "tools/train/options.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;
namespace st = brigade::safetensors;

namespace {

// 10 batches of 32 per epoch, the small model, SGD at `lr`.
std::vector<std::string> recipe(const fs::path& dir, const std::string& devices,
                                const std::string& lr, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "320",
                                   "--batch", "32", "--devices", devices, "--epochs", "5",
                                   "--optimizer", "sgd", "--lr", lr};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The losses of the step lines of a --metrics file.
std::vector<double> losses(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == "step") out.push_back(j["loss"].is_number() ? j["loss"].get<double>() : NAN);
  }
  return out;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The first tensor of a file with a NaN or an Inf, by name; empty if none. (Read here, not
// through the trainer's divergence.h.)
std::string non_finite_tensor(const st::File& file) {
  for (const st::TensorInfo& t : file.tensors) {
    const std::span<const uint8_t> bytes = file.bytes(t);
    for (size_t i = 0; i < bytes.size(); i += sizeof(float)) {
      float v;
      std::memcpy(&v, bytes.data() + i, sizeof v);
      if (!std::isfinite(v)) return t.name;
    }
  }
  return "";
}

// `file`, tensors and metadata, written to `to`.
void write_back(const st::File& file, const fs::path& to) {
  std::vector<st::TensorToWrite> out;
  for (const st::TensorInfo& i : file.tensors)
    out.push_back({i.name, i.dtype, i.shape, file.bytes(i)});
  st::write_file(to.string(), out, file.metadata);
}

// A copy of safetensors file `from` at `to` with element `k` of tensor `name` set to `v`.
void poison(const fs::path& from, const fs::path& to, const std::string& name, size_t k, float v) {
  st::File file = st::read_file(from.string());
  const st::TensorInfo* t = file.find(name);
  REQUIRE_MESSAGE(t != nullptr, "no tensor " << name << " in " << from);
  std::memcpy(file.data.data() + t->begin + k * sizeof(float), &v, sizeof v);
  write_back(file, to);
}

}  // namespace

TEST_CASE("divergence: the run stops at the first non-finite loss, exits 1, keeps the last good "
          "checkpoint and writes no --save") {
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const fs::path dir = temp_dir("diverge-" + std::to_string(devices.size()));
    const fs::path ckpt = dir / "ckpt", save = dir / "final.safetensors";
    const Run r = run_train(recipe(dir, devices, "1e20",
                                   {"--checkpoint-dir", ckpt.string(), "--checkpoint-every", "1",
                                    "--metrics", (dir / "m.jsonl").string(), "--save",
                                    save.string()}));
    CAPTURE(r.output);
    CHECK(r.status == 1);
    // The steps that were reported all had finite losses; the error names the next one.
    const std::vector<double> reported = losses(dir / "m.jsonl");
    CHECK(std::all_of(reported.begin(), reported.end(), [](double l) { return std::isfinite(l); }));
    const int64_t n = static_cast<int64_t>(reported.size()) + 1;
    REQUIRE(n >= 2);  // a good step before: a checkpoint to keep
    CHECK(count(r.output, "training diverged") == 1);
    CHECK(r.output.find("brigade-train: error: step " + std::to_string(n) + ": the loss is ") !=
          std::string::npos);
    CHECK(r.output.find("-nan") == std::string::npos);   // no progress line of a NaN loss
    CHECK(r.output.find("steps in ") == std::string::npos);  // no end-of-run summary
    CHECK_FALSE(fs::exists(save));

    // The checkpoint is that of step n - 1, finite, and byte for byte what a run told to stop
    // after n - 1 steps writes (its own end may then find the diverged test loss: the status
    // is not the point).
    const st::File kept = st::read_file((ckpt / "checkpoint.safetensors").string());
    CHECK(kept.metadata.at("step") == std::to_string(n - 1));
    CHECK(non_finite_tensor(kept) == "");
    const Run shorter = run_train(recipe(dir, devices, "1e20",
                                         {"--steps", std::to_string(n - 1), "--checkpoint-every",
                                          "1", "--checkpoint-dir", (dir / "ckpt2").string()}));
    CAPTURE(shorter.output);
    CHECK((shorter.status == 0 || shorter.output.find("training diverged") != std::string::npos));
    const st::File reference = st::read_file((dir / "ckpt2" / "checkpoint.safetensors").string());
    CHECK(reference.data == kept.data);
    CHECK(reference.metadata == kept.metadata);
  }
}

TEST_CASE("divergence: a checkpoint that would hold an Inf is refused, the previous one stays") {
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const fs::path dir = temp_dir("refuse-ckpt-" + std::to_string(devices.size()));
    const fs::path ckpt = dir / "ckpt", file = ckpt / "checkpoint.safetensors";
    const Run good = run_train(recipe(dir, devices, "0.01", {"--steps", "1", "--checkpoint-dir",
                                                            ckpt.string()}));
    REQUIRE(good.status == 0);
    // A run may write only into a directory it resumes from, and resumes only its own recipe:
    // the checkpoint's recipe is made lr 1e39's (as recipe_of writes it), the parameters kept.
    st::File recipe_changed = st::read_file(file.string());
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.17g", 1e39);
    recipe_changed.metadata.at("recipe.lr") = lr;
    write_back(recipe_changed, file);
    const std::string before = slurp(file);
    REQUIRE(non_finite_tensor(st::read_file(file.string())) == "");
    // lr 1e39: step 2's loss is finite (step 1's weights), the weights after it are not.
    const Run r = run_train(recipe(dir, devices, "1e39", {"--checkpoint-dir", ckpt.string(),
                                                          "--resume", "--checkpoint-every", "1"}));
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("step 2: refusing to write the checkpoint, ") != std::string::npos);
    CHECK(r.output.find("the previous checkpoint stays in " + file.string()) != std::string::npos);
    CHECK(count(r.output, "training diverged") == 1);
    CHECK(slurp(file) == before);
  }
}

TEST_CASE("divergence: save_checkpoint and --save name the tensor and write nothing") {
  using namespace brigade;
  const fs::path dir = temp_dir("refuse-unit");
  const model::ModelSpec spec = model::parse_model(kSmallModel, "small.model");
  const auto net = layers::Sequential::from_spec(spec, {Device::cpu(0), Device::cpu(0)}, 1);
  const std::vector<layers::Parameter*> params = net->parameters();
  train::Options options;  // Adam: its state tensors are checked too
  const auto adam = train::make_optimizer(options, params);
  const train::Recipe recipe = {{"seed", "1"}};
  train::save_checkpoint(dir.string(), spec, recipe, {1, 0, 1}, params, {adam.get()});
  train::save_if_finite(params, (dir / "p.safetensors").string(), 1);
  const std::string checkpoint = slurp(train::checkpoint_path(dir.string()));
  const std::string saved = slurp(dir / "p.safetensors");

  // Sets element k of `t` to v.
  const auto set = [](const Tensor& t, size_t k, float v) {
    std::vector<float> values = t.to_vector();
    values[k] = v;
    copy_async(t, Tensor::from_vector(values, t.shape(), t.stream()), t.stream());
    t.stream().synchronize();
  };
  struct Case {
    std::string tensor;
    size_t element;
    float value;
    std::string shown;
  };
  const layers::Parameter& dense = *params.back();
  const Tensor m = adam->state().front().tensor;    // adam.m of the first parameter
  for (const Case& c : {Case{dense.name, 7, NAN, "nan"},
                        Case{adam->state().front().name, 2,
                             -std::numeric_limits<float>::infinity(), "-inf"}}) {
    CAPTURE(c.tensor);
    const Tensor& t = c.tensor == dense.name ? dense.value : m;
    set(t, c.element, c.value);
    const std::string says = c.tensor + " " + model::format_dims(t.shape().dims()) + " holds " +
                             c.shown + " at element " + std::to_string(c.element);
    try {
      train::save_checkpoint(dir.string(), spec, recipe, {2, 0, 2}, params, {adam.get()});
      FAIL("a checkpoint with " << c.shown << " was written");
    } catch (const train::CheckpointError& e) {
      CHECK(std::string(e.what()).find("step 2: refusing to write the checkpoint, " + says) == 0);
    }
    CHECK(slurp(train::checkpoint_path(dir.string())) == checkpoint);
    set(t, c.element, 0.5f);
  }
  set(dense.value, 3, std::numeric_limits<float>::infinity());
  const std::string path = (dir / "p.safetensors").string();
  const std::string says = "step 4: refusing to write --save " + path + ", " + dense.name + " " +
                           model::format_dims(dense.value.shape().dims()) +
                           " holds inf at element 3";
  CHECK_THROWS_WITH(train::save_if_finite(params, path, 4), doctest::Contains(says.c_str()));
  CHECK(slurp(dir / "p.safetensors") == saved);
}

TEST_CASE("divergence: --check-finite names the step, stage and action; healthy losses unchanged") {
  const Run help = run_train({"--help"});
  CHECK(help.output.find("--check-finite") != std::string::npos);
  // Under mpirun too (tests/pipeline/distributed/parity_test.cpp runs it: a failed check on one rank
  // ends every rank with its cause).
  const char* distributed[] = {"brigade-train", "--distributed", "--check-finite"};
  CHECK(brigade::train::parse_options(3, distributed)->check_finite);
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const fs::path dir = temp_dir("check-finite-" + std::to_string(devices.size()));
    // The step at which the loss is the first non-finite one, from a run without the check.
    Run r = run_train(recipe(dir, devices, "1e20", {"--metrics", (dir / "m.jsonl").string()}));
    REQUIRE(r.status == 1);
    const std::string step = "step " + std::to_string(losses(dir / "m.jsonl").size() + 1) + ": ";
    r = run_train(recipe(dir, devices, "1e20", {"--check-finite"}));
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("brigade-train: error: " + step) != std::string::npos);
    CHECK(r.output.find(", stage ") != std::string::npos);
    CHECK(r.output.find(", action ") != std::string::npos);
    CHECK(r.output.find("non-finite value") != std::string::npos);
    CHECK(count(r.output, "training diverged (try a smaller --lr)") == 1);
    // The first cause first: the failed check, then the streams it passed through.
    CHECK(r.output.find("task failed: non-finite value") != std::string::npos);
    const size_t route = r.output.find("passed on by the waits of");
    if (devices != "cpu:0") CHECK(route != std::string::npos);  // the loss's check is on cpu:1
    if (route != std::string::npos) CHECK(r.output.find("non-finite value") < route);
    CHECK(r.output.find("whose work failed") == std::string::npos);

    // A run that does not diverge: the check only reads, the losses are those without it
    // (cpu:0 with the check runs through the runtime, one micro-batch: equal within rounding).
    const auto healthy = [&](std::vector<std::string> extra) {
      extra.insert(extra.end(), {"--steps", "3", "--metrics", (dir / "h.jsonl").string()});
      const Run h = run_train(recipe(dir, devices, "0.01", extra));
      CAPTURE(h.output);
      REQUIRE(h.status == 0);
      return losses(dir / "h.jsonl");
    };
    const std::vector<double> plain = healthy({}), checked = healthy({"--check-finite"});
    REQUIRE(checked.size() == 3);
    REQUIRE(plain.size() == 3);
    for (size_t i = 0; i < plain.size(); ++i)
      CHECK(std::abs(checked[i] - plain[i]) <= (devices == "cpu:0" ? 1e-5 * plain[i] : 0.0));
  }
}

TEST_CASE("divergence: --init-from and --resume refuse a file with a NaN or an Inf, naming it") {
  const fs::path dir = temp_dir("refuse-files");
  const fs::path init = dir / "init.safetensors", ckpt = dir / "ckpt";
  const Run good = run_train(recipe(dir, "cpu:0", "0.01",
                                    {"--steps", "2", "--save-initial", init.string(),
                                     "--checkpoint-dir", ckpt.string()}));
  REQUIRE(good.status == 0);

  const fs::path bad_init = dir / "bad-init.safetensors";
  poison(init, bad_init, "dense_1.weight", 7, NAN);
  Run r = run_train(
      recipe(dir, "cpu:0", "0.01", {"--steps", "1", "--init-from", bad_init.string()}));
  CAPTURE(r.output);
  CHECK(r.status == 2);  // refused before the first step: bad input
  CHECK(r.output.find("--init-from " + bad_init.string() + ": dense_1.weight (10, 144) holds nan "
                      "at element 7") != std::string::npos);

  const fs::path file = ckpt / "checkpoint.safetensors";
  poison(file, file, "conv2d_1.bias", 0, std::numeric_limits<float>::infinity());
  r = run_train(recipe(dir, "cpu:0", "0.01",
                       {"--steps", "3", "--checkpoint-dir", ckpt.string(), "--resume"}));
  CAPTURE(r.output);
  CHECK(r.status == 2);  // refused before the first step: bad input
  CHECK(r.output.find(file.string() + ": conv2d_1.bias (4) holds inf at element 0") !=
        std::string::npos);
}

TEST_CASE("divergence: the end-of-run summary is printed once") {
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const fs::path dir = temp_dir("summary-" + std::to_string(devices.size()));
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"--steps", "4"}, std::vector<std::string>{"--epochs", "1"}}) {
      const Run r = run_train(recipe(dir, devices, "0.01", extra));
      CAPTURE(r.output);
      REQUIRE(r.status == 0);
      CHECK(count(r.output, " steps in ") == 1);
      CHECK(count(r.output, "measured bubble") == 1);
    }
  }
}
