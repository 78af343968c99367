#include "tools/train/suggested_command.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include "tools/train/preflight.h"

namespace brigade::train {

namespace {
// A word that starts another option, not a value: "-1" and "-.5" are values (CLI11 reads them so).
bool starts_an_option(const std::string& word) {
  return word.size() > 1 && word[0] == '-' &&
         !std::isdigit(static_cast<unsigned char>(word[1])) && word[1] != '.';
}
}  // namespace

std::vector<std::string> with_option(const std::vector<std::string>& command,
                                     const std::string& flag, const std::string& value) {
  // Every occurrence goes, with all its values: given twice, the last counts (CLI11), and a list
  // may come as several words (`--threads-per-device 1 1 1`); the new one takes the first's place.
  std::vector<std::string> out;
  bool placed = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& word = command[i];
    const bool joined = word.starts_with(flag + "=");
    if (i == 0 || (word != flag && !joined)) {
      out.push_back(word);
      continue;
    }
    if (!joined) {  // its values: the next word whatever it is, then any that start no option
      if (i + 1 < command.size()) ++i;
      while (i + 1 < command.size() && !starts_an_option(command[i + 1])) ++i;
    }
    if (placed) continue;
    placed = true;
    if (joined) {
      out.push_back(flag + "=" + value);
    } else {
      out.push_back(flag);
      out.push_back(value);
    }
  }
  if (!placed) {
    out.push_back(flag);
    out.push_back(value);
  }
  return out;
}

std::string shell_words(const std::vector<std::string>& words) {
  // Bare, only characters no shell gives a meaning: listing the ones that have one missed
  // parentheses, globs, `;`, `&`, `|`, `<`, `~`, `#`, `!` and a newline.
  const auto plain_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  };
  std::string out;
  for (const std::string& w : words) {
    out += out.empty() ? "" : " ";
    if (!w.empty() && std::all_of(w.begin(), w.end(), plain_char)) {
      out += w;
      continue;
    }
    // In single quotes nothing is special but the quote itself, written '\'' (close the
    // quotes, an escaped quote, open them again).
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

namespace {

// The value the words give `flag` (its last, as CLI11 takes it), or nothing.
std::optional<std::string> value_of(const std::vector<std::string>& words,
                                    const std::string& flag) {
  std::optional<std::string> value;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == flag && i + 1 < words.size()) value = words[i + 1];
    if (words[i].starts_with(flag + "=")) value = words[i].substr(flag.size() + 1);
  }
  return value;
}

// --distributed's --devices for a list of devices (which it refuses: each rank runs one device
// of its own, of one kind): cuda where every one is a GPU, else cpu.
std::string kind_of_devices(const std::string& list) {
  if (list == "auto" || list == "cpu" || list == "cuda") return list;
  bool gpus = true;  // every entry `cuda` or `cuda:N` (read as written: no driver asked)
  for (size_t at = 0; at != std::string::npos && gpus;) {
    const size_t comma = list.find(',', at);
    const std::string entry = list.substr(at, comma == std::string::npos ? comma : comma - at);
    gpus = entry == "cuda" || entry.starts_with("cuda:");
    at = comma == std::string::npos ? comma : comma + 1;
  }
  return gpus ? "cuda" : "cpu";
}

// This run's words with the suggestion's changes (without mpirun's launcher).
std::vector<std::string> suggested_words(const Options& o, const Suggestion& s) {
  std::vector<std::string> words = o.command;
  for (const auto& [flag, value] : s.flags) words = with_option(words, flag, value);
  if (s.fewer_devices && !o.distributed) {
    std::string list;
    for (const Device& d : *s.fewer_devices) list += (list.empty() ? "" : ",") + d.str();
    words = with_option(words, "--devices", list);
  }
  // (The words as given: a rank's own options hold the list its rank made, never refused.)
  if (const std::optional<std::string> devices = value_of(o.command, "--devices");
      o.distributed && devices && kind_of_devices(*devices) != *devices)
    words = with_option(words, "--devices", kind_of_devices(*devices));
  // A list given one entry per device keeps the entries of the devices kept (a prefix).
  const size_t devices = s.fewer_devices   ? s.fewer_devices->size()
                         : o.distributed ? static_cast<size_t>(s.pipeline_devices)
                                         : 0;
  const auto prefix = [&](const char* flag, const std::vector<int>& per_device) {
    if (per_device.size() <= 1 || devices == 0 || per_device.size() == devices) return;
    std::string kept;
    for (size_t d = 0; d < devices && d < per_device.size(); ++d)
      kept += (kept.empty() ? "" : ",") + std::to_string(per_device[d]);
    words = with_option(words, flag, kept);
  };
  prefix("--threads-per-device", o.threads_per_device);
  prefix("--max-activations", o.max_activations);
  if (o.resume && s.microbatches > 0)
    words = with_option(words, "--microbatches", std::to_string(s.microbatches));
  return words;
}

std::optional<Options> parse_words(const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

std::optional<Options> suggested_options(const Options& o, const Suggestion& s) {
  try {
    return parse_words(suggested_words(o, s));
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

std::string suggested_command(const Options& o, const Suggestion& s) {
  std::vector<std::string> words = suggested_words(o, s);
  try {
    parse_words(words);
  } catch (const UsageError& e) {
    return "(no command to suggest: `" + shell_words(words) + "` is refused: " + e.what() + ")";
  }
  if (!o.distributed) return shell_words(words);

  const size_t devices = s.fewer_devices ? s.fewer_devices->size() : s.pipeline_devices;
  const int ranks = static_cast<int>(devices) * o.data_parallel;
  std::vector<std::string> launcher = {"mpirun"};
  if (::geteuid() == 0) launcher.push_back("--allow-run-as-root");  // Open MPI refuses root without
  if (ranks > hardware_threads()) launcher.push_back("--oversubscribe");  // ... and more ranks than cores
  launcher.push_back("-np");
  launcher.push_back(std::to_string(ranks));
  words.insert(words.begin(), launcher.begin(), launcher.end());
  return shell_words(words);
}

}  // namespace brigade::train
