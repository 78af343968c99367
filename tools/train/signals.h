// SIGINT / SIGTERM: ask the training loop to stop, never stop it mid-step.
//
// The handler only sets a flag (the one thing a signal handler may safely do); the loop
// checks it between steps (and an evaluation between its test batches), writes a checkpoint if it has a --checkpoint-dir, and exits
// cleanly with status 130 (SIGINT) or 143 (SIGTERM), as a shell reports a killed program.
// A second signal (either of the two) while stopping is the user insisting: the program ends
// at once, killed by that signal, after removing the temporary of any file it was writing
// (engine/output_file.h: remove_unfinished_temporaries), so that a checkpoint interrupted
// mid-write leaves the previous one, or none, and no `checkpoint.safetensors.tmp.<pid>`.
#pragma once

namespace brigade::train {

// Before the training loop: a stop signal ends the program at once, as by default, but first
// removes the temporary of a file it was writing (--save-initial's, a metrics file cut back for
// --resume), so that nothing half-written is left behind.
void install_exit_handlers();
// From the training loop on: the flag, checked between steps and test batches (above).
void install_stop_handlers();
// 0, or the number of the first signal received.
int stop_signal();

}  // namespace brigade::train
