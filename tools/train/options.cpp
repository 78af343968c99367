#include "tools/train/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "pipeline/runtime/step_memory.h"
#include "pipeline/schedule/generators/generators.h"
#include "tools/train/number_flags.h"
#include "tools/train/preflight.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

uint64_t parse_size(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UsageError("invalid size '" + text + "': " + why +
                      " (expected e.g. 256MiB, 1.5GiB, 512MB or a number of bytes)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number = text.substr(0, i), unit = text.substr(i);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.'))
    throw bad("no number");
  struct Unit { const char* name; double factor; };
  static const Unit units[] = {
      {"", 1}, {"B", 1},
      {"K", 1024.0}, {"KiB", 1024.0}, {"k", 1024.0},
      {"M", 1048576.0}, {"MiB", 1048576.0},
      {"G", 1073741824.0}, {"GiB", 1073741824.0},
      {"T", 1099511627776.0}, {"TiB", 1099511627776.0},
      {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  const Unit* found = nullptr;
  for (const Unit& u : units)
    if (unit == u.name) found = &u;
  if (!found) throw bad("unknown unit '" + unit + "'");
  // strtod, not stod: 400 digits are infinity here, where stod throws std::out_of_range.
  const double bytes = std::strtod(number.c_str(), nullptr) * found->factor;
  if (!std::isfinite(bytes) || bytes >= 18446744073709551616.0) throw bad("larger than 2^64 bytes");
  if (bytes != std::floor(bytes)) throw bad("not a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {

// The bound of --synthetic-count and --batch, refused by the flag's name before anything is
// sized by them: past it, the data set's own bound (tools/data/dataset.h) or an allocation
// fails without naming the flag, and a batch near 2^63 overflows the count of batches per
// epoch to 0.
constexpr int64_t kLargestDataSet = int64_t{1} << 31;

// Both data sets are 28x28 grey images with an int32 label.
constexpr uint64_t kPixelsPerSample = 28 * 28;
constexpr uint64_t kStoredSampleBytes = kPixelsPerSample + sizeof(int32_t);  // uint8 pixels

// --synthetic-count within this machine's memory, refused by the flag's name.
void check_synthetic_size(const Options& o) {
  const uint64_t memory = pipeline::machine_memory_bytes();
  // The training set and its test set (a sixth of it), held in memory as bytes.
  const uint64_t samples = static_cast<uint64_t>(o.synthetic_count);
  const uint64_t set_bytes = (samples + samples / 6) * kStoredSampleBytes;
  if (set_bytes > memory)
    throw UsageError("--synthetic-count " + std::to_string(o.synthetic_count) +
                     ": the synthetic training and test sets take " + format_size(set_bytes) +
                     " (" + std::to_string(kStoredSampleBytes) + " bytes a sample), more than " +
                     "this machine's " + format_size(memory) + " of memory");
}

// --threads-per-device within check_threads_per_device's limit; a count above it is refused
// with this run's command given as many threads per device as this machine has cores (under
// --distributed the rank count is mpirun's, unknown here: the limit alone is said).
void check_thread_counts(const Options& o) {
  try {
    for (int threads : o.threads_per_device) check_threads_per_device(threads);
  } catch (const UsageError& e) {
    if (o.distributed) throw;
    std::string counts;
    for (int threads : o.threads_per_device)
      counts += (counts.empty() ? "" : ",") + std::to_string(std::min(threads, hardware_threads()));
    Suggestion fix;
    fix.flags.emplace_back("--threads-per-device", counts);
    throw UsageError(std::string(e.what()) + "; as many threads as cores:\n  " +
                     suggested_command(o, fix));
  }
}

}  // namespace

safetensors::Dtype save_dtype(const Options& o) {
  return o.save_dtype == "bf16" ? safetensors::Dtype::BF16 : safetensors::Dtype::F32;
}

std::optional<Options> parse_options(int argc, const char* const* argv) {
  Options o;
  CLI::App app{
      "brigade-train: train a model file on Fashion-MNIST (or synthetic data), pipelined over\n"
      "the devices of this machine, with progress, evaluation, checkpoints and resume.\n"
      "Example: brigade-train --devices cpu:0,cpu:1,cpu:2 --epochs 5 --metrics run.jsonl"};
  cli::show_defaults(app);
  // A flag given twice: the last one counts.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string device_memory = "0";

  app.add_option("--model", o.model,
                 "model: NAME (tools/models/NAME.model) or a model FILE (tools/models/README.md)");
  app.add_option("--data", o.data, "data set")->check(CLI::IsMember({"fashion-mnist", "synthetic"}));
  app.add_option("--data-dir", o.data_dir,
                 "directory of the Fashion-MNIST IDX files")
      ->default_str("/usr/share/datasets/fashion-mnist");
  app.add_option("--synthetic-count", o.synthetic_count,
                 "training samples of --data synthetic (0: 60000, as Fashion-MNIST)")
      ->check(whole_number<int64_t>(kLargestDataSet, "2^31, the most the data set holds"))
      ->check(at_least(0));

  app.add_option("--devices", o.devices,
                 "auto (the GPUs, at most one per device block of the model, or per layer "
                 "with a --balance by cost; without a GPU one CPU device per block) or a "
                 "list like cpu:0,cpu:1,cpu:2 or cuda:0,cuda:1; fewer devices than blocks "
                 "merge neighbouring blocks, one device trains without a pipeline");
  app.add_option("--threads-per-device", o.threads_per_device,
                 "compute threads of each CPU device, or one count per device of --devices "
                 "(e.g. 2,1: devices of different speeds, cut and scheduled for them); 0: the "
                 "cores shared evenly")
      ->default_str("0")
      ->delimiter(',')
      ->check(whole_number<int>())
      ->check(at_least(0));
  app.add_option("--device-memory", device_memory,
                 "memory capacity of each CPU device, e.g. 256MiB (0: unlimited)");
  app.add_option("--math", o.math,
                 "arithmetic of the GEMMs and convolutions: fp32 (as the CPU devices compute) "
                 "or tf32 (tensor cores through cuBLAS and cuDNN: faster on GPUs since Ampere, "
                 "inputs rounded to 10 mantissa bits; GPUs on the vendor path only)")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  app.add_option("--precision", o.precision,
                 "arithmetic precision: fp32, or bf16 (Dense and Conv2D on GEMM operands rounded "
                 "to bfloat16 with sums in fp32, and every layer's output and input gradient a "
                 "bfloat16 value; parameters, gradients, optimizer, softmax and loss stay fp32; "
                 "on CPU devices with AVX-512 BF16 where the processor has it, on GPUs with "
                 "tensor cores)")
      ->default_str("fp32")
      ->check(CLI::IsMember({"fp32", "bf16"}));

  app.add_option("--schedule", o.schedule,
                 "pipeline schedule: naive, gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, "
                 "zb-h2, zb-auto (zero bubble planned for the stages' FLOPs), interleaved-zb, "
                 "and the V shapes zb-v, v-half, v-min, dualpipe-v (pipeline/README.md)")
      ->check(CLI::IsMember(pipeline::schedule_names()));
  app.add_option("--schedule-file", o.schedule_file,
                 "a schedule file, compute-only or lowered (pipeline/schedule/schedule_text.h; "
                 "brigade-simulate --print-schedule [--lowered] writes one), validated before the "
                 "first step and run as written; its devices, chunks and microbatches must be "
                 "this run's")
      ->default_str(cli::kNotGiven)
      ->check(CLI::ExistingFile)
      ->excludes("--schedule");
  std::string microbatches = "auto";
  app.add_option("--microbatches", microbatches,
                 "micro-batches per step: auto (1 on one stage or with naive, else 2 x stages; "
                 "with --resume, the checkpoint's) or a count");
  app.add_option("--chunks", o.chunks,
                 "stages per device (interleaved-1f1b, looped-bfs, interleaved-zb: default 2; "
                 "the V shapes have 2)")
      ->check(whole_number<int>());
  app.add_option("--max-activations", o.max_activations,
                 "at most this many micro-batches' activations on a device at once (from a "
                 "stage's forward to its weight gradient, in micro-batches of the device's share "
                 "of the model), or one count per device of --devices (e.g. 2,1: a device with "
                 "less memory): zb-auto plans within it, any other schedule is refused if it "
                 "holds more (0: no bound; zb-auto then plans within each device's memory)")
      ->default_str("0")
      ->delimiter(',')
      ->check(whole_number<int>(1 << 20, "2^20"))
      ->check(at_least(0));
  app.add_option("--balance", o.balance,
                 "how stages are cut: blocks (the model's device blocks), or by cost: flops "
                 "(forward FLOPs), time (measured), params, memory (activations)")
      ->check(CLI::IsMember({"blocks", "flops", "time", "params", "memory"}));
  app.add_flag("--recompute", o.recompute, "recompute each stage's forward before its backward");
  app.add_flag("--check-finite", o.check_finite,
               "check every stage's output and the loss for NaN/Inf as they are made, so that a "
               "diverging run names the stage and action where one first appeared (a task per "
               "forward; without it, the run still stops at the first non-finite loss)");

  std::string cuda_graphs = "on";
  app.add_option("--cuda-graphs", cuda_graphs,
                 "on: each compute action of each stage and micro-batch, and each stage's update "
                 "(with its gradients zeroed for the next step), captured as a CUDA graph at the "
                 "second step and replayed at every later one, the same parameters to the bit; "
                 "where every device is a GPU of this "
                 "process, without --clip-grad-norm or replicas. CPU devices ignore it")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();

  // A batch larger than the training set is one batch of all of it, so any --batch up to the
  // largest set is meaningful; past it, the count of batches per epoch overflows.
  app.add_option("--batch", o.batch, "mini-batch size")
      ->check(whole_number<int64_t>(kLargestDataSet,
                                    "2^31, the largest training set brigade-train reads: a "
                                    "batch larger than the training set is one batch of all "
                                    "of it"));
  app.add_option("--epochs", o.epochs, "epochs over the training set")->check(whole_number<int>());
  app.add_option("--steps", o.steps, "stop after this many steps in all (0: no limit)")
      ->check(whole_number<int64_t>())
      ->check(at_least(0));
  app.add_option("--optimizer", o.optimizer, "sgd or adam")->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--lr", o.lr, "learning rate")->check(above_zero());
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(in_zero_one());
  app.add_option("--weight-decay", o.weight_decay, "L2 weight decay (added to the gradient)")
      ->check(at_least(0));
  app.add_option("--clip-grad-norm", o.clip_grad_norm,
                 "clip every step's gradients by their norm over ALL stages, as on one device "
                 "(PyTorch's clip_grad_norm_); 0: no clipping")
      ->check(at_least(0));
  app.add_option("--seed", o.seed, "seed of the initial weights, data order and dropout masks")
      ->check(whole_number<uint64_t>());
  app.add_flag("--no-shuffle", o.no_shuffle, "visit the training set in file order every epoch");

  app.add_option("--eval-every", o.eval_every,
                 "also evaluate on the test set every N steps (0: at the end of each epoch only)")
      ->check(whole_number<int64_t>())
      ->check(at_least(0));
  app.add_option("--print-every", o.print_every,
                 "off a terminal, print one progress line every N steps")
      ->check(whole_number<int64_t>())
      ->check(above_zero());
  app.add_option("--trace", o.trace,
                 "timeline of the last step: FILE.svg (a picture) or FILE.json (Chrome trace)")
      ->default_str(cli::kNotGiven);
  app.add_option("--metrics", o.metrics,
                 "JSON lines: one per step (loss, accuracy, samples/s, peak memory per device) "
                 "and one per evaluation")
      ->default_str(cli::kNotGiven);
  app.add_option("--plot", o.plot,
                 "FILE.svg: loss and accuracy against steps, test points per evaluation, drawn "
                 "at the end (or when stopped); with --metrics, that file's whole history "
                 "(brigade-plot draws old runs, several at once)")
      ->default_str(cli::kNotGiven);
  app.add_option("--save-initial", o.save_initial, "write the initial parameters (safetensors)")
      ->default_str(cli::kNotGiven);
  app.add_option("--save", o.save, "write the final parameters (safetensors)")
      ->default_str(cli::kNotGiven);
  app.add_option("--save-dtype", o.save_dtype,
                 "dtype of the parameters --save writes: fp32 (F32, exact), or bf16 (BF16, each "
                 "value rounded to nearest even: half the size, for inference); --save-initial "
                 "and checkpoints are always fp32")
      ->default_str("fp32")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--init-from", o.init_from,
                 "start from these parameters (safetensors, F32 or BF16: BF16 widened exactly)")
      ->default_str(cli::kNotGiven);
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "write checkpoints here (every --checkpoint-every steps, on SIGINT/SIGTERM, "
                 "at the end)")
      ->default_str(cli::kNotGiven);
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "steps between checkpoints (0: only on a signal and at the end)")
      ->check(whole_number<int64_t>())
      ->check(at_least(0));
  app.add_flag("--resume", o.resume, "continue from the checkpoint in --checkpoint-dir");

  app.add_flag("--distributed", o.distributed,
               "one process per pipeline device under mpirun -np P (x D with --data-parallel)");
  app.add_option("--data-parallel", o.data_parallel,
                 "replicas of the pipeline, each on 1/D of every mini-batch (with --distributed)")
      ->check(whole_number<int>());

  if (!cli::parse(app, argc, argv)) return std::nullopt;  // --help

  for (int i = 0; i < argc; ++i) o.command.push_back(argv[i]);
  // An empty name is how Options says "not given": given, it would be ignored without a word
  // (no file written, the default data read).
  const std::pair<const char*, const std::string*> paths[] = {
      {"--model", &o.model},         {"--data-dir", &o.data_dir},
      {"--trace", &o.trace},         {"--metrics", &o.metrics},
      {"--plot", &o.plot},           {"--save-initial", &o.save_initial},
      {"--save", &o.save},           {"--init-from", &o.init_from},
      {"--checkpoint-dir", &o.checkpoint_dir}};
  for (const auto& [flag, path] : paths)
    if (app.count(flag) && path->empty())
      throw UsageError(std::string(flag) + ": an empty " +
                       (std::string(flag).ends_with("-dir") ? "directory" : "file") + " name");
  try {
    o.device_memory = parse_size(device_memory);
  } catch (const UsageError& e) {
    throw UsageError(std::string("--device-memory: ") + e.what());
  }
  check_thread_counts(o);
  if (o.threads_per_device.size() > 1 && o.distributed)
    throw UsageError("--threads-per-device with one count per device and --distributed: each "
                     "rank runs one device; give one count");
  o.cuda_graphs = cuda_graphs == "on";
  if (microbatches != "auto") {
    const char* end = microbatches.data() + microbatches.size();
    const auto [stop, ec] = std::from_chars(microbatches.data(), end, o.microbatches);
    if (ec != std::errc() || stop != end)
      throw UsageError("--microbatches '" + microbatches + "': expected auto or a count");
    if (o.microbatches < 1)
      throw UsageError("--microbatches " + microbatches + ": a step needs at least 1 micro-batch");
  }
  if (o.batch < 1) throw UsageError("--batch " + std::to_string(o.batch) + ": must be at least 1");
  check_synthetic_size(o);
  if (o.epochs < 1) throw UsageError("--epochs " + std::to_string(o.epochs) + ": must be at least 1");
  if (o.chunks < 1) throw UsageError("--chunks " + std::to_string(o.chunks) + ": must be at least 1");
  // A multi-chunk schedule with one chunk is plain 1F1B (or GPipe): without --chunks, 2, said.
  if (pipeline::default_chunks(o.schedule) > 1 && !app.count("--chunks")) {
    o.chunks = pipeline::default_chunks(o.schedule);
    std::string note = "--schedule " + o.schedule + " without --chunks: " +
                       std::to_string(o.chunks) + " chunks (stages) per device";
    if (!app.count("--balance")) {
      o.balance = "flops";
      note += ", the model cut by forward FLOPs (--balance flops)";
    }
    // A V has exactly two chunks; the others take any count.
    if (pipeline::placement_of(o.schedule) == pipeline::Placement::looped)
      note += "; give --chunks V for another count";
    o.notes.push_back(note);
  }
  if (o.resume && o.checkpoint_dir.empty())
    throw UsageError("--resume needs --checkpoint-dir (where the checkpoint is)");
  // A flag that the rest of the command makes meaningless is refused, not ignored.
  if (app.count("--checkpoint-every") && o.checkpoint_dir.empty())
    throw UsageError("--checkpoint-every needs --checkpoint-dir (where checkpoints go)");
  if (app.count("--synthetic-count") && o.data != "synthetic")
    throw UsageError("--synthetic-count is the size of --data synthetic; this run reads " +
                     o.data);
  if (app.count("--save-dtype") && o.save.empty())
    throw UsageError("--save-dtype is the dtype --save writes; this run has no --save "
                     "(--save-initial and checkpoints are always fp32)");
  if (app.count("--data-dir") && o.data == "synthetic")
    throw UsageError("--data-dir is where Fashion-MNIST is read from; --data synthetic reads "
                     "no files");
  if (o.resume && !o.init_from.empty())
    throw UsageError("--resume and --init-from both set the parameters: give one of them");
  if (o.data_parallel < 1)
    throw UsageError("--data-parallel " + std::to_string(o.data_parallel) + ": must be at least 1");
  if (o.data_parallel > 1 && !o.distributed)
    throw UsageError("--data-parallel " + std::to_string(o.data_parallel) +
                     " needs --distributed (one process per pipeline device and replica, under "
                     "mpirun -np P*D)");
  if (o.optimizer == "adam" && app.count("--momentum"))
    throw UsageError("--momentum is for --optimizer sgd (Adam has its own betas)");
  return o;
}

}  // namespace brigade::train
