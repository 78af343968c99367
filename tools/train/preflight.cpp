#include "tools/train/preflight.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "engine/allocator.h"
#include "kernels/cuda/path.h"
#include "layers/model/safetensors.h"
#include "layers/optimizers.h"
#include "layers/param_file.h"
#include "tools/train/checkpoint.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

namespace fs = std::filesystem;

namespace {

// The nearest existing ancestor of `path` (itself if it exists): where it would be created.
fs::path existing_ancestor(const fs::path& path) {
  std::error_code ec;
  fs::path p = path.empty() ? fs::path(".") : path;
  while (!fs::exists(p, ec)) {
    const fs::path parent = p.has_parent_path() && p.parent_path() != p ? p.parent_path()
                                                                        : fs::path(".");
    if (parent == p) break;
    p = parent;
  }
  return p;
}

bool writable(const fs::path& p) { return ::access(p.c_str(), W_OK) == 0; }

// A directory in which this process may create, remove and rename files.
bool writable_directory(const fs::path& dir) { return ::access(dir.c_str(), W_OK | X_OK) == 0; }

// Whether a rename may replace `file` in `dir`: in a sticky directory (/tmp) only the owner of
// the file or of the directory may (and root).
bool replaceable(const fs::path& dir, const fs::path& file) {
  struct stat d {}, f {};
  if (::stat(dir.c_str(), &d) != 0 || ::stat(file.c_str(), &f) != 0) return true;
  const uid_t me = ::geteuid();
  return !(d.st_mode & S_ISVTX) || me == 0 || me == f.st_uid || me == d.st_uid;
}

std::string quoted(const std::string& flag, const std::string& path) {
  return flag + " '" + path + "'";
}

// The file a path names for a comparison: absolute, "." and ".." resolved, symbolic links
// followed as far as they exist.
fs::path resolved(const fs::path& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec).lexically_normal();
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute : canonical;
}

// Two outputs naming one file (under any spelling) would each be written in turn, and the
// last would win: a checkpoint replaced by --save, a trace by the plot, the metrics by a trace.
void check_distinct_outputs(const Options& o) {
  struct Output {
    const char* flag;
    std::string given;  // as the flag has it
    fs::path file;      // the file it writes, resolved
  };
  std::vector<Output> outputs;
  const auto add = [&](const char* flag, const std::string& given, const std::string& file) {
    if (!given.empty()) outputs.push_back({flag, given, resolved(file)});
  };
  add("--save", o.save, o.save);
  add("--save-initial", o.save_initial, o.save_initial);
  add("--trace", o.trace, o.trace);
  add("--metrics", o.metrics, o.metrics);
  add("--plot", o.plot, o.plot);
  add("--checkpoint-dir", o.checkpoint_dir, checkpoint_path(o.checkpoint_dir));
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (outputs[i].file == outputs[j].file)
        throw UsageError(quoted(outputs[i].flag, outputs[i].given) + " and " +
                         quoted(outputs[j].flag, outputs[j].given) + " write the same file (" +
                         outputs[i].file.string() +
                         "): one would replace the other; give each its own");
}

// --init-from given a checkpoint: what continues its run instead, as words a shell runs.
// --resume reads --checkpoint-dir's checkpoint.safetensors alone, so a checkpoint under
// another name is copied into a directory of its own first (mkdir refuses one that exists:
// nothing is overwritten, and the file given stays as it is while the run saves over its copy).
std::string checkpoint_not_parameters(const std::string& file) {
  const fs::path path(file);
  const std::string head = quoted("--init-from", file) +
                           " is a checkpoint (parameters, optimizer state, the step): ";
  const std::string tail = "; --init-from takes parameters written by --save or --save-initial";
  if (path.filename() == "checkpoint.safetensors") {
    const std::string dir = path.has_parent_path() ? path.parent_path().string() : ".";
    return head + "to continue that run, give " +
           shell_words({"--checkpoint-dir", dir, "--resume"}) + tail;
  }
  const std::string own = (path.parent_path() / (path.stem().string() + "-resume")).string();
  return head + "--resume reads only a --checkpoint-dir's checkpoint.safetensors; to continue " +
         "that run, copy it into a directory of its own: " + shell_words({"mkdir", own}) +
         " && " + shell_words({"cp", file, checkpoint_path(own)}) + ", then give " +
         shell_words({"--checkpoint-dir", own, "--resume"}) + tail;
}

}  // namespace

void check_output_file(const std::string& flag, const std::string& path, Writing writing) {
  if (path.empty()) throw UsageError(flag + ": an empty file name");
  std::error_code ec;
  const fs::path p(path);
  if (path.ends_with('/') || fs::is_directory(p, ec))
    throw UsageError(quoted(flag, path) + " is a directory: give a file name in it, e.g. " +
                     (fs::path(path) / "out").string());
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::exists(dir, ec))
    throw UsageError(quoted(flag, path) + ": the directory '" + dir.string() +
                     "' does not exist (create it first: brigade-train creates no "
                     "directories, and checks every output before the first step rather than "
                     "fail on one later)");
  if (!fs::is_directory(dir, ec))
    throw UsageError(quoted(flag, path) + ": '" + dir.string() + "' is not a directory");
  // The file replaced is the one a symbolic link names, in that file's directory.
  const fs::path target = fs::is_symlink(p, ec) && fs::exists(p, ec) ? fs::canonical(p, ec) : p;
  const bool exists = fs::exists(target, ec);
  // A device or a pipe (/dev/null) is written in place, as a growing file is once it exists:
  // the file itself must allow it.
  const bool in_place =
      exists && (writing == Writing::in_place || !fs::is_regular_file(target, ec));
  if (in_place) {
    if (!writable(target))
      throw UsageError(quoted(flag, path) + ": not writable (the file does not allow it)");
    return;
  }
  // Otherwise the file is made in its directory: a new one, or (replaced) a temporary beside
  // the old one renamed over it, whether or not the old file itself is writable.
  const fs::path target_dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!writable_directory(target_dir))
    throw UsageError(quoted(flag, path) + ": not writable (the directory '" +
                     target_dir.string() + "' does not allow " +
                     (exists ? "replacing the file" : "creating it") + ")");
  if (exists && !replaceable(target_dir, target))
    throw UsageError(quoted(flag, path) + ": not writable (the directory '" +
                     target_dir.string() + "' is sticky and the file is another user's: it " +
                     "cannot be replaced)");
}

void check_checkpoint_dir(const std::string& dir, bool resume) {
  if (dir.empty()) throw UsageError("--checkpoint-dir: an empty directory name");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      throw UsageError(quoted("--checkpoint-dir", dir) +
                       " is a file, not a directory (checkpoints go into DIR/checkpoint.safetensors)");
    if (!writable(dir)) throw UsageError(quoted("--checkpoint-dir", dir) + " is not writable");
    if (!resume && fs::exists(checkpoint_path(dir), ec)) {
      const std::string why = not_a_checkpoint(checkpoint_path(dir));
      // A file that is none cannot be resumed, and is not this program's to replace.
      if (!why.empty())
        throw UsageError(quoted("--checkpoint-dir", dir) + " holds " + checkpoint_path(dir) +
                         ", which does not read as a brigade-train checkpoint (" + why +
                         "): a new run would replace it; remove it, or give another directory");
      throw UsageError(quoted("--checkpoint-dir", dir) + " already holds a checkpoint (" +
                       checkpoint_path(dir) + "): add --resume to continue that run, or give "
                       "another directory; a new run would replace it");
    }
    return;
  }
  const fs::path base = existing_ancestor(dir);
  if (!fs::is_directory(base, ec))
    throw UsageError(quoted("--checkpoint-dir", dir) + ": '" + base.string() +
                     "' is a file, so the directory cannot be made");
  if (!writable(base))
    throw UsageError(quoted("--checkpoint-dir", dir) + ": cannot be made in '" + base.string() +
                     "' (not writable)");
}

uint64_t free_bytes(const std::string& path) {
  struct statvfs s {};
  if (::statvfs(existing_ancestor(path).c_str(), &s) != 0) return UINT64_MAX;  // unknown: no limit
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

void check_space(const std::string& flag, const std::string& path, uint64_t bytes,
                 const std::string& what) {
  // The kernel's views (/proc, /sys) report no blocks at all: no file is written there, whatever
  // their 0 bytes free would suggest.
  const fs::path where = existing_ancestor(path);
  struct statvfs s {};
  if (::statvfs(where.c_str(), &s) == 0 && s.f_blocks == 0)
    throw UsageError(quoted(flag, path) + ": '" + where.string() + "' is on a file system that " +
                     "reports no storage at all (as /proc and /sys do, where no file is written)");
  const uint64_t free = free_bytes(path);
  if (bytes > free)
    throw UsageError(quoted(flag, path) + ": " + what + " needs " + format_size(bytes) +
                     " but its file system has " + format_size(free) + " free");
}

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

void check_threads_per_device(int threads) {
  const int cores = hardware_threads(), limit = kMaxThreadsPerCore * cores;
  if (threads > limit)
    throw UsageError("--threads-per-device " + std::to_string(threads) + ": at most " +
                     std::to_string(limit) + " (" + std::to_string(kMaxThreadsPerCore) + " x the " +
                     std::to_string(cores) + " hardware threads of this machine): more threads " +
                     "than cores only take turns on them");
}

std::vector<pipeline::DeviceLoad> loads_per_device(const std::vector<pipeline::DeviceLoad>& loads) {
  std::vector<pipeline::DeviceLoad> per_device;
  for (const pipeline::DeviceLoad& l : loads) {
    auto same = std::find_if(per_device.begin(), per_device.end(),
                             [&](const pipeline::DeviceLoad& p) { return p.device == l.device; });
    if (same == per_device.end()) {
      per_device.push_back(l);
      continue;
    }
    same->activation_bytes += l.activation_bytes;
    same->parameter_bytes += l.parameter_bytes;
    same->staged_bytes += l.staged_bytes;
    same->workspace_bytes += l.workspace_bytes;  // each stage's stream keeps its own
    same->lowering_bytes += l.lowering_bytes;    // and lowers beside the others
  }
  return per_device;
}

std::optional<std::string> step_refusal(const std::vector<pipeline::DeviceLoad>& loads,
                                        int64_t step_rows, int64_t batch_flag) {
  const std::string batch = "--batch " + std::to_string(batch_flag) +
                            (batch_flag > step_rows
                                 ? " (" + std::to_string(step_rows) + " samples: the whole set)"
                                 : std::string());
  // Each device against its own capacity (a GPU's memory, a CPU device's --device-memory),
  // with the loads of every pipeline device it runs summed: stages that share a GPU share its
  // memory.
  for (const pipeline::DeviceLoad& l : loads_per_device(loads)) {
    const uint64_t capacity = Allocator::of(l.device).stats().capacity;
    const uint64_t need = l.bytes();
    if (capacity != 0 && need > capacity)
      return batch + ": " + l.device.str() + " would hold about " + format_size(need) + " (" +
             format_size(l.activation_bytes) + " of activations, " +
             format_size(l.parameter_bytes) + " of parameters, gradients and optimizer state" +
             (l.staged_bytes ? ", " + format_size(l.staged_bytes) + " of staged batches"
                             : std::string()) +
             (l.workspace_bytes
                  ? ", " + format_size(l.workspace_bytes) +
                        (cuda_path() == CudaPath::vendor ? " of cuBLAS workspace"
                                                         : " of split-K scratch")
                  : std::string()) +
             (l.lowering_bytes
                  ? ", " + format_size(l.lowering_bytes) + " of a convolution's im2col columns"
                  : std::string()) +
             ") but has " + format_size(capacity) + " (" +
             (l.device.is_cpu() ? "--device-memory" : "its memory") + ")";
  }
  // CPU devices share this machine's memory; a step may take 3/4 of it (the rest is the
  // system's, the data's and the evaluation's: past it, the kernel's OOM killer ends the run).
  uint64_t activations = 0, parameters = 0;
  for (const pipeline::DeviceLoad& l : loads)
    if (l.device.is_cpu())
      activations += l.activation_bytes + l.staged_bytes, parameters += l.parameter_bytes;
  const uint64_t memory = pipeline::machine_memory_bytes(), limit = memory / 4 * 3;
  if (activations + parameters > limit)
    return batch + ": one step would hold about " + format_size(activations + parameters) +
           " in CPU devices (" + format_size(activations) + " of activations, " +
           format_size(parameters) + " of parameters, gradients and optimizer state), more " +
           "than 3/4 of this machine's " + format_size(memory) + " of memory";
  return std::nullopt;
}

void check_step_fits(const std::vector<pipeline::DeviceLoad>& loads, int64_t step_rows,
                     int64_t batch_flag) {
  if (const std::optional<std::string> refusal = step_refusal(loads, step_rows, batch_flag))
    throw UsageError(*refusal + ": use a smaller --batch, more --microbatches or more devices");
}

std::vector<std::string_view> optimizer_state_prefixes(const Options& o) {
  using layers::Adam, layers::SGD;
  if (o.optimizer == "adam") return {Adam::kFirstMomentPrefix, Adam::kSecondMomentPrefix};
  if (o.momentum != 0) return {SGD::kMomentumPrefix};
  return {};
}

int optimizer_states(const Options& o) { return static_cast<int>(optimizer_state_prefixes(o).size()); }

void check_outputs(const Options& o) {
  check_distinct_outputs(o);
  if (!o.save.empty()) check_output_file("--save", o.save);
  if (!o.save_initial.empty()) check_output_file("--save-initial", o.save_initial);
  if (!o.trace.empty()) check_output_file("--trace", o.trace);
  if (!o.metrics.empty()) check_output_file("--metrics", o.metrics, Writing::in_place);
  if (!o.plot.empty()) {
    if (!o.plot.ends_with(".svg"))
      throw UsageError("--plot '" + o.plot + "': the name must end in .svg");
    check_output_file("--plot", o.plot);
  }
  if (!o.checkpoint_dir.empty()) check_checkpoint_dir(o.checkpoint_dir, o.resume);
  if (!o.init_from.empty() && is_checkpoint_file(o.init_from))
    throw UsageError(checkpoint_not_parameters(o.init_from));
}

void check_output_space(const Options& o, const model::ModelSpec& spec, const Recipe& recipe) {
  if (!o.checkpoint_dir.empty()) {
    const uint64_t checkpoint = checkpoint_file_size(spec, recipe, optimizer_state_prefixes(o));
    // Each checkpoint is written beside the one before and then renamed over it. One already
    // in the directory (--resume) is on the disk now; the run's own first one is not, and
    // from its second save on the run holds two at once. A run saves more than once unless
    // --checkpoint-every is 0 (the end, or a stop signal) or beyond its --steps.
    std::error_code ec;
    const bool saves_again =
        o.checkpoint_every > 0 && (o.steps == 0 || o.steps >= o.checkpoint_every);
    if (saves_again && !std::filesystem::exists(checkpoint_path(o.checkpoint_dir), ec))
      check_space("--checkpoint-dir", o.checkpoint_dir, 2 * checkpoint,
                  "a second checkpoint written beside the first (two at once)");
    else
      check_space("--checkpoint-dir", o.checkpoint_dir, checkpoint,
                  "a checkpoint (parameters and optimizer state)");
  }
  if (o.save.empty() && o.save_initial.empty()) return;
  if (!o.save.empty())
    check_space("--save", o.save,
                safetensors::file_size(layers::parameter_layout(spec, save_dtype(o))), "the parameters' file");
  if (!o.save_initial.empty())
    check_space("--save-initial", o.save_initial,
                safetensors::file_size(layers::parameter_layout(spec)), "the parameters' file");
}

}  // namespace brigade::train
