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

// The picture as text. Writing it is the program's business (engine/output_file.h): this
// library makes data and text only, and stands on no other Brigade library.
std::string timeline_svg(const std::vector<Timeline>& panels);

}  // namespace brigade::pipeline
