// SVG timeline pictures, in the spirit of the GPipe and Zero Bubble papers' figures: one
// row per device (and per lane, when a timeline has several), time to the right, each action
// a box coloured by its op (F, B, W, BW) and labelled with its micro-batch; later chunks of
// an interleaved schedule are drawn lighter. Bubbles are left empty. A time axis and a
// legend come with it. Several timelines (one per schedule) stack as panels on one shared
// time scale, so that their lengths compare by eye.
//
// Render to PNG with `rsvg-convert -o out.png out.svg`.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

std::string timeline_svg(const std::vector<Timeline>& panels);
// Writes timeline_svg(panels) to path; throws std::runtime_error naming the path on failure.
void write_svg(const std::vector<Timeline>& panels, const std::string& path);

}  // namespace brigade::pipeline
