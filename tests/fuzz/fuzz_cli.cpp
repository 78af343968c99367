// Fuzz target: brigade-train's command line (tools/train/options.h).
//
// The input is argv[1..] separated by NUL bytes. Any command line either parses, asks for
// --help (nullopt), or throws UsageError; any other exception — a std::out_of_range from a
// number conversion, say — would escape main() as a crash, and is a bug. A command line that
// parses must satisfy the checks parse_options promises.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "tools/train/options.h"

namespace train = brigade::train;
using brigade::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words(1, "brigade-train");  // empty input: no arguments
  for (size_t i = 0; size > 0 && i <= size && words.size() < 64;) {
    const void* nul = std::memchr(data + i, 0, size - i);
    const size_t end = nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - data) : size;
    words.emplace_back(reinterpret_cast<const char*>(data) + i, end - i);
    i = end + 1;
  }
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());

  std::optional<train::Options> o;
  try {
    o = train::parse_options(static_cast<int>(argv.size()), argv.data());
  } catch (const train::UsageError&) {
    return 0;  // the user's own text comes back in the message: no bound on it here
  }
  if (!o) return 0;  // --help
  require(o->batch >= 1 && o->epochs >= 1 && o->chunks >= 1, "batch, epochs, chunks >= 1");
  require(!o->resume || !o->checkpoint_dir.empty(), "--resume has a --checkpoint-dir");
  require(o->lr > 0, "--lr is positive");
  require(o->momentum >= 0 && o->momentum < 1, "--momentum in [0, 1)");
  require(o->steps >= 0 && o->eval_every >= 0 && o->print_every >= 1, "counts are in range");
  return 0;
}
