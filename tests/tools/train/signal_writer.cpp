// signal_writer DIR FIRST SECOND: the program signals_test.cpp interrupts. It installs
// brigade-train's stop handlers, starts DIR/checkpoint.safetensors exactly as save_checkpoint
// does (engine/output_file.h's WholeFile), and is sent signal FIRST ("please stop": it goes
// on writing) and then SECOND ("stop now") in the middle of the file. A program of its own,
// started by exec, not a fork of the test process: a fork of a process with threads (the
// test's devices) inherits what a sanitizer made of them, and ThreadSanitizer there no longer
// delivers signals as a fresh process does.
//
// Exits 3 if the first signal did not set the stop flag, 4 if it survived the second: the
// test wants neither, but the second signal's death.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "engine/output_file.h"
#include "tools/train/signals.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::filesystem::path dir = argv[1];
  const int first = std::atoi(argv[2]), second = std::atoi(argv[3]);
  brigade::train::install_stop_handlers();
  brigade::WholeFile file((dir / "checkpoint.safetensors").string());
  file.write("the first tensors of a checkpoint");
  std::raise(first);
  if (brigade::train::stop_signal() != first) ::_exit(3);
  file.write("more tensors");
  std::raise(second);
  ::_exit(4);
}
