// brigade-plot: loss and accuracy against steps from brigade-train --metrics files, several
// runs overlaid, as one SVG (tools/plot/plot.h).
//
//   build/tools/brigade-plot adam.jsonl sgd.jsonl -o compare.svg
//
// Exit status: 0 written, 2 a bad command line or metrics file (one line naming file:line),
// 1 the SVG could not be written.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/output_file.h"
#include "tools/command_line.h"
#include "tools/plot/plot.h"

int main(int argc, char** argv) {
  CLI::App app{"brigade-plot: loss and accuracy against steps from brigade-train --metrics "
               "files, several runs overlaid, as one SVG"};
  brigade::cli::show_defaults(app);
  std::vector<std::string> files;
  std::string output, title;
  app.add_option("metrics", files, "metrics files (JSON lines of brigade-train --metrics)")
      ->required();
  app.add_option("-o,--output", output, "the SVG to write")->required();
  app.add_option("--title", title, "the picture's title")->default_str("the files' names");
  if (const auto status = brigade::cli::parse_or_exit_status(app, argc, argv, "brigade-plot"))
    return *status;
  if (!output.ends_with(".svg")) {
    std::fprintf(stderr, "brigade-plot: -o '%s': the name must end in .svg\n", output.c_str());
    return 2;
  }
  try {
    brigade::cli::check_output_file("-o", output);
  } catch (const brigade::cli::UsageError& e) {
    std::fprintf(stderr, "brigade-plot: %s\n", e.what());
    return 2;
  }
  std::vector<brigade::plot::Series> runs;
  try {
    for (const std::string& f : files) runs.push_back(brigade::plot::read_metrics(f));
  } catch (const brigade::plot::MetricsError& e) {
    std::fprintf(stderr, "brigade-plot: %s\n", e.what());
    return 2;
  }
  if (title.empty())
    for (const brigade::plot::Series& r : runs) title += (title.empty() ? "" : " vs ") + r.name;
  try {
    brigade::write_whole_file(output, brigade::plot::render_svg(runs, title));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "brigade-plot: %s in %zu file%s\n", e.what(), files.size(),
                 files.size() == 1 ? "" : "s");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-plot: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s (%zu run%s)\n", output.c_str(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}
