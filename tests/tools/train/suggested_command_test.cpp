// The words of a command brigade-train prints (tools/train/suggested_command.h): with_option
// changes one flag of this run's words, shell_words writes them for a shell to read back as
// they were. suggestions_test.cpp runs the commands themselves.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"
#include "tools/train/suggested_command.h"

using namespace brigade::train;
using brigade::train::test::Run;
using brigade::train::test::run_command;

TEST_CASE("suggested command: with_option replaces or adds a flag; shell_words quotes as needed") {
  CHECK(with_option({"x", "--a", "1"}, "--a", "2") == std::vector<std::string>{"x", "--a", "2"});
  CHECK(with_option({"x", "--a=1"}, "--a", "2") == std::vector<std::string>{"x", "--a=2"});
  CHECK(with_option({"x"}, "--a", "2") == std::vector<std::string>{"x", "--a", "2"});
  // Given twice, the last counts: both go, or the command would run with the old value. A list
  // written as several words goes whole; a negative number is a value, not the next option.
  CHECK(with_option({"x", "--a", "1", "--b", "3", "--a=4"}, "--a", "2") ==
        std::vector<std::string>{"x", "--a", "2", "--b", "3"});
  CHECK(with_option({"x", "--a=1", "--a", "4"}, "--a", "2") ==
        std::vector<std::string>{"x", "--a=2"});
  CHECK(with_option({"x", "--a", "1", "1", "1", "--b", "-1", "--a", "-.5", "-2", "--c"}, "--a",
                    "2") == std::vector<std::string>{"x", "--a", "2", "--b", "-1", "--c"});
  CHECK(shell_words({"x", "--model", "my model.model", "--lr", "1e-3"}) ==
        "x --model 'my model.model' --lr 1e-3");
  // A word is bare only when every character is one no shell treats specially; else quoted,
  // a quote inside written '\''. Once `run(1).jsonl` came bare (a syntax error in bash) and
  // `it's.jsonl` as 'it's.jsonl' (a quote left open).
  CHECK(shell_words({"--metrics", "/tmp/x/run(1).jsonl"}) == "--metrics '/tmp/x/run(1).jsonl'");
  CHECK(shell_words({"it's.jsonl"}) == "'it'\\''s.jsonl'");
  CHECK(shell_words({"a_b@c%d+e=f:g,h./-9", ""}) == "a_b@c%d+e=f:g,h./-9 ''");
}

// Every word comes back from the shell as it went in: each printed between brackets by
// printf, itself given through shell_words.
TEST_CASE("suggested command: shell_words' words reach the program as they were, through sh") {
  const std::vector<std::string> words = {
      "run(1).jsonl", "it's.jsonl", "a b", "$HOME", "`id`", "\\n", "*", "~", "!x", "a;b", "a&b",
      "a|b", "<a>", "#a", "x\ny", "\"q\"", "", "{a,b}", "[ab]", "a\tb", "'"};
  std::vector<std::string> command = {"printf", "[%s]\\n"};
  command.insert(command.end(), words.begin(), words.end());
  const Run r = run_command(shell_words(command));
  CAPTURE(shell_words(command));
  std::string expected;
  for (const std::string& w : words) expected += "[" + w + "]\n";
  CHECK(r.status == 0);
  CHECK(r.output == expected);
}

// Under --distributed each rank runs one device of one kind: a device list (which it refuses)
// becomes cuda where every device is a GPU, else cpu; a list per device keeps the ranks'
// entries. (suggestions_mpirun_test.cpp runs such a command under mpirun.)
TEST_CASE("suggested command: under --distributed, --devices of one kind, lists per rank") {
  const auto command_for = [](std::vector<const char*> argv, int ranks) {
    argv.insert(argv.begin(), "brigade-train");
    const std::optional<Options> options =
        parse_options(static_cast<int>(argv.size()), argv.data());
    REQUIRE(options);
    Suggestion s;
    s.pipeline_devices = ranks;
    return suggested_command(*options, s);
  };
  const std::string gpus = command_for({"--distributed", "--devices", "cuda,cuda:1"}, 2);
  CAPTURE(gpus);
  CHECK(gpus.ends_with(" -np 2 brigade-train --distributed --devices cuda"));
  const std::string cpus =
      command_for({"--distributed", "--devices", "cuda:0,cpu:1", "--max-activations", "3,2,1"}, 2);
  CAPTURE(cpus);
  CHECK(cpus.ends_with(" -np 2 brigade-train --distributed --devices cpu --max-activations 3,2"));
  const std::string kept = command_for({"--distributed", "--devices", "cpu"}, 3);
  CHECK(kept.ends_with(" -np 3 brigade-train --distributed --devices cpu"));
}
