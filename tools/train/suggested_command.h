// The command a warning gives to run instead of this one (placement.h's imbalance warning): this
// run's own words with some flags set, and only a command that brigade-train accepts.
//
// - A run in one process gets --devices with the fewer devices asked for.
// - A --distributed run keeps its launcher: `mpirun -np N brigade-train --distributed ...`, one
//   rank per device (times --data-parallel's replicas), with the flags Open MPI needs on this
//   machine (--allow-run-as-root as root, --oversubscribe for more ranks than cores), and never
//   a --devices list, which --distributed refuses (a list becomes cuda where every device is a
//   GPU, else cpu).
// - A list of one entry per device (--threads-per-device, --max-activations) keeps the entries
//   of the devices the command keeps.
// - A --resume keeps the micro-batch count its checkpoint fixes, written out: the command says
//   the count it will run (`--microbatches auto` takes the checkpoint's too, trainer.cpp).
// Before it is printed, the suggestion is parsed by parse_options(), the code that will parse
// it when it runs.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "tools/train/options.h"

namespace brigade::train {

// `command` with `flag VALUE` set: the first `flag X...` or `flag=X` replaced, any later one
// removed (with all the words of a list given as several), else appended.
std::vector<std::string> with_option(const std::vector<std::string>& command,
                                     const std::string& flag, const std::string& value);

// Words joined for a shell: a word of letters, digits and _@%+=:,./- alone bare, any other in
// single quotes (a quote inside written '\'').
std::string shell_words(const std::vector<std::string>& words);

struct Suggestion {
  std::vector<std::pair<std::string, std::string>> flags;  // set on this run's words
  std::optional<std::vector<Device>> fewer_devices;         // run on these instead (a prefix)
  int pipeline_devices = 1;   // this run's pipeline devices (ranks of a replica)
  int microbatches = 0;       // this run's micro-batches per step (0: its --microbatches as given)
};

// The command line of `suggestion` for the run of `options`, ready to print, or, should
// parse_options refuse it, a sentence saying so: a suggestion never names a command that fails.
std::string suggested_command(const Options& options, const Suggestion& suggestion);

// The options the command of `suggestion` runs with (parse_options of its words, the same on
// every rank under mpirun), or nothing where parse_options refuses them (suggested_command then
// says so in place of the command). For weighing what the command would do before printing it.
std::optional<Options> suggested_options(const Options& options, const Suggestion& suggestion);

}  // namespace brigade::train
