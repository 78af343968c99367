// signal_writer DIR FIRST SECOND: the program signals_test.cpp interrupts. It installs
// brigade-train's stop handlers, starts DIR/checkpoint.safetensors exactly as save_checkpoint
// does (engine/output_file.h's WholeFile), and is sent signal FIRST ("please stop": it goes
// on writing) and then SECOND ("stop now") in the middle of the file. A program of its own,
// started by exec, not a fork of the test process: a fork of a process with threads (the
// test's devices) inherits what a sanitizer made of them, and ThreadSanitizer there no longer
// delivers signals as a fresh process does.
//
// signal_writer DIR SIGNAL: the same before the training loop (brigade-train's handlers of
// that time, install_exit_handlers), while it writes DIR/initial.safetensors as --save-initial
// does: the one signal ends it.
//
// Exits 3 if the first signal did not set the stop flag, 4 if it survived the signal meant to
// end it: the test wants neither, but that signal's death.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "engine/output_file.h"
#include "tools/train/signals.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const std::filesystem::path dir = argv[1];
  if (argc == 3) {
    brigade::train::install_exit_handlers();
    brigade::WholeFile file((dir / "initial.safetensors").string());
    file.write("the first tensors of the initial parameters");
    std::raise(std::atoi(argv[2]));
    ::_exit(4);
  }
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
