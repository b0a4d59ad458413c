// Flame graph: folded stacks drawn as an SVG the way flamegraph.pl draws them, in one
// self-contained file (no external resources), interactive in a browser through an embedded
// script: hover shows a frame's name, samples and share on the status line, a click zooms into the
// frame (it then spans the width), "Reset Zoom" / Escape undo it, "Search" / Ctrl-F / ?s=REGEX
// highlight matching frames and show the share of samples under them. Without scripts it is the
// same static picture.
//
// The stacks are merged into a tree whose root, "all", spans the width of the image. A frame's
// width is its share of the samples; its children sit on it (under it when inverted) sorted by
// name, after its own samples (the stacks that end in it), which is where flamegraph.pl puts them
// too: its sorted input has "a 5" before "a;b 3". Frames narrower than min_width_px are left out,
// with everything above them; their samples still count in their parent.
//
// The file is the data and a static picture at once, about 15 bytes per frame (a deep, varied
// profile such as python3's has thousands of frames; one element per frame cost ~240 bytes each):
// frames are drawn in a nested <svg id="frames"> whose user units are samples across and stack
// levels down (viewBox "0 0 TOTAL LEVELS", stretched to the drawing area), one <path> per colour
// and band of 16 levels holding one subpath "M{first sample} {row}h{samples}" per frame, stroked
// with a stroke as thick as a level (less the 1 px gap between levels), so each subpath is the
// frame's rectangle; the path's data-names lists each subpath's name as an index into
// <text id="names">, one <tspan> per name, never shown. (One path per name spanning the depth of
// the graph made a browser go through every frame to paint any part of it.) Labels that fit are
// plain <text> in pixels. A viewer without scripts shows that picture; in a browser it stays the
// graph: the script reads the frames back (exact integers) into arrays, never an element per
// frame, and zooms by narrowing the frames' viewBox; the status line says "NAME (N samples, P%)",
// N with thousands separators.
//
// Labels are cut to the width with "..", assuming characters 0.59 times the 12 px font size
// wide. Colours are flamegraph.pl's "hot" palette with its --hash option: derived from the name,
// so the same function has the same colour in every graph. Names are XML-escaped, and bytes that
// are not valid UTF-8 or not allowed in XML are shown as U+FFFD, so the file stays well-formed
// whatever the symbols hold. No stacks (or only zero counts) give a graph that says so.
#pragma once

#include <iosfwd>
#include <string>

#include "perf/folded.hpp"

namespace ehelf::perf {

struct FlameGraphOptions {
  std::string title = "Flame Graph";
  unsigned width = 1200;      // of the image, in pixels
  unsigned frame_height = 16; // pixels per stack level
  double min_width_px = 0.1;  // narrower frames are left out
  bool inverted = false;      // icicle graph: the root at the top, callees below their callers
  std::string count_name = "samples"; // what the counts are, in the tooltips ("cycles" when
                                      // weighted by period)
};

void write_flamegraph_svg(std::ostream& out, const FoldedStacks& stacks,
                          const FlameGraphOptions& options);

} // namespace ehelf::perf
