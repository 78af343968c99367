// The trainer's command line: every flag of brigade-train, its default, and the checks that
// need no model or data (the others run where the model and the devices are known).
//
// parse_options() is CLI11 (libcli11-dev) over an Options struct, parsed the way every tool
// parses (tools/command_line.h); `--help` prints every flag with its default. A user error (an
// unknown flag, a value out of range, a size like "256Mb") becomes a UsageError with one clear
// message; main() prints it and exits with 2.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "tools/command_line.h"

namespace brigade::train {

// A mistake on the command line or a combination that cannot run. what() is the message.
using UsageError = cli::UsageError;

struct Options {
  // What to train, on what.
  std::string model = "seed_cnn";        // NAME (tools/models/NAME.model) or FILE
  std::string data = "fashion-mnist";    // fashion-mnist | synthetic
  std::string data_dir;                  // empty: Debian's /usr/share/datasets/fashion-mnist
  int64_t synthetic_count = 0;           // synthetic training samples; 0 = 60,000

  // Where it runs.
  std::string devices = "auto";          // auto | cpu:0,cpu:1,... | cuda:0,...
  // Compute threads of the CPU devices: one count for all, or one per device in --devices
  // order (devices of different speeds); {} or {0}: the cores shared evenly.
  std::vector<int> threads_per_device;
  uint64_t device_memory = 0;            // bytes per CPU device; 0 = unlimited
  std::string math = "fp32";             // fp32 | tf32 (kernels/math_mode.h): GPUs' vendor path only
  std::string precision = "fp32";        // fp32 | bf16 (kernels/precision.h)

  // How a step is pipelined.
  std::string schedule = "1f1b";
  std::string schedule_file;             // its lists instead of --schedule's (pipeline/schedule/schedule_text.h)
  int microbatches = 0;                  // 0 = not given: 1 on one stage, else 2 x stages
  int chunks = 1;
  std::vector<int> max_activations;      // micro-batches of a device's share: one bound for every
                                         // device or one per device; empty or 0: no bound
  std::string balance = "blocks";        // blocks (the model's device blocks) | flops | time | params | memory
  bool recompute = false;
  bool check_finite = false;             // the runtime checks each stage's output (divergence.h)
  bool cuda_graphs = true;               // each GPU stage's update as a CUDA graph (RuntimeOptions)

  // The recipe.
  int64_t batch = 128;
  int epochs = 5;
  int64_t steps = 0;                     // stop after this many steps in all; 0 = no limit
  std::string optimizer = "adam";        // sgd | adam
  double lr = 1e-3;
  double momentum = 0.0;                 // sgd
  double weight_decay = 0.0;
  double clip_grad_norm = 0.0;           // > 0: gradients clipped by their norm over all stages
  uint64_t seed = 1;
  bool no_shuffle = false;

  // What comes out.
  int64_t eval_every = 0;                // also evaluate every N steps; 0 = only per epoch
  int64_t print_every = 50;              // off a terminal: a plain line every N steps
  std::string trace;                     // FILE.svg | FILE.json
  std::string metrics;                   // JSON lines
  std::string plot;                      // FILE.svg: loss and accuracy against steps (tools/plot)
  std::string save_initial, save, init_from;
  std::string save_dtype = "fp32";       // fp32 | bf16: the dtype --save writes (layers/param_file.h)
  std::string checkpoint_dir;
  int64_t checkpoint_every = 500;        // steps; 0 = only on a signal and at the end
  bool resume = false;

  // What was decided for the user, said on stdout at the start (e.g. interleaved-1f1b
  // without --chunks: 2 chunks per device); and this command's words (argv), for a warning
  // that shows the command to run instead.
  std::vector<std::string> notes;
  std::vector<std::string> command;
  // --microbatches auto under --resume took the checkpoint's count (trainer.cpp): the user did
  // not give it, so a refusal of it says where it came from (checkpoint_count_note).
  bool microbatches_from_checkpoint = false;

  // Beyond one process (tools/train/distributed.h).
  bool distributed = false;              // one rank per pipeline device, under mpirun
  int data_parallel = 1;                 // D replicas of the pipeline: mpirun -np P*D
};

// Parses argv. Returns nullopt when the program should exit 0 (--help was printed);
// throws UsageError for anything wrong.
std::optional<Options> parse_options(int argc, const char* const* argv);

// The safetensors dtype --save writes: F32 for --save-dtype fp32, BF16 for bf16.
safetensors::Dtype save_dtype(const Options& o);

// "256MiB", "1.5GiB", "512MB", "4096" (bytes), "64k": a size in bytes. Binary suffixes
// (KiB, MiB, GiB, TiB; K, M, G, T alone mean the same) and decimal ones (kB, MB, GB, TB).
// Throws UsageError naming the text for garbage, a negative or fractional byte count, or an
// overflow of 64 bits.
uint64_t parse_size(const std::string& text);

// "256.0 MiB"
std::string format_size(uint64_t bytes);
// "%g": "0.001", "1e-05", as a flag's value is written back in messages and titles
std::string format_number(double v);

}  // namespace brigade::train
