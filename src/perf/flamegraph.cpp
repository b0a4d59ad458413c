#include "perf/flamegraph.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <ostream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace ehelf::perf {
namespace {

// flamegraph.pl's layout constants, so that graphs look the same side by side.
constexpr double kFontSize = 12;
constexpr double kTitleFontSize = kFontSize + 5;
constexpr double kFontWidth = 0.59; // average character width, relative to the font size
constexpr double kSidePad = 10;
constexpr double kTopPad = kFontSize * 3;         // the title
constexpr double kBottomPad = kFontSize * 2 + 10; // flamegraph.pl's status line, kept for the look
constexpr unsigned kBandLevels = 16;              // levels per path: 256 px at 16 px a level

// One frame of the merged tree. Names are views into the FoldedStacks keys.
struct FrameNode {
  std::string_view name;
  uint64_t total = 0;                          // samples of the stacks through this frame
  uint64_t self = 0;                           // samples of the stacks that end here
  unsigned depth = 0;                          // the root is 0
  std::map<std::string_view, size_t> children; // name -> index in the tree; sorted by name
};

std::vector<FrameNode> merge_stacks(const FoldedStacks& stacks) {
  std::vector<FrameNode> tree(1);
  tree[0].name = "all";
  for (const auto& [stack, count] : stacks) {
    if (count == 0) continue;
    size_t node = 0;
    tree[0].total += count;
    std::string_view rest = stack;
    for (bool more = true; more;) {
      size_t semicolon = rest.find(';');
      more = semicolon != std::string_view::npos;
      std::string_view name = rest.substr(0, semicolon);
      if (more) rest.remove_prefix(semicolon + 1);
      auto [it, inserted] = tree[node].children.try_emplace(name, tree.size());
      size_t child = it->second; // before push_back moves the map
      if (inserted) tree.push_back(FrameNode{name, 0, 0, tree[node].depth + 1, {}});
      node = child;
      tree[node].total += count;
    }
    tree[node].self += count;
  }
  return tree;
}

struct PlacedFrame {
  size_t node = 0;
  uint64_t start = 0; // samples to the left of the frame
};

// The frames wide enough to draw, parents before children and siblings in name order. Iterative:
// a folded file can hold stacks thousands of frames deep.
std::vector<PlacedFrame> place_frames(const std::vector<FrameNode>& tree, double px_per_sample,
                                      double min_width_px) {
  std::vector<PlacedFrame> placed;
  if (tree[0].total == 0) return placed;
  std::vector<PlacedFrame> todo{{0, 0}};
  while (!todo.empty()) {
    PlacedFrame frame = todo.back();
    todo.pop_back();
    const FrameNode& node = tree[frame.node];
    if (static_cast<double>(node.total) * px_per_sample < min_width_px) continue;
    placed.push_back(frame);
    uint64_t start = frame.start + node.self;
    size_t first_child = todo.size();
    for (const auto& [name, child] : node.children) {
      todo.push_back({child, start});
      start += tree[child].total;
    }
    std::reverse(todo.begin() + static_cast<ptrdiff_t>(first_child), todo.end());
  }
  return placed;
}

// flamegraph.pl's namehash: a number in [0, 1] from the first three characters, the earlier ones
// weighing more, so that similar names get similar colours. A "module`" prefix (DTrace stacks) is
// skipped as flamegraph.pl does.
double name_hash(std::string_view name) {
  if (size_t tick = name.find('`', 1); tick != std::string_view::npos) name.remove_prefix(tick + 1);
  double vector = 0, weight = 1, max = 1;
  int mod = 10;
  for (unsigned char c : name) {
    vector += (c % mod) / static_cast<double>(mod - 1) * weight;
    ++mod;
    max += weight;
    weight *= 0.70;
    if (mod > 12) break;
  }
  return 1 - vector / max;
}

// flamegraph.pl --colors hot --hash, written #rrggbb (flamegraph.pl writes rgb(r,g,b): the same
// colour in 7 characters instead of up to 16, once per name).
std::string hot_color(std::string_view name) {
  if (name == "-") return "#a0a0a0"; // flamegraph.pl draws "-" separator frames grey (160)
  std::string reversed(name.rbegin(), name.rend());
  double v1 = name_hash(name), v2 = name_hash(reversed), v3 = v2;
  return fmt::format("#{:02x}{:02x}{:02x}", 205 + static_cast<int>(50 * v3),
                     static_cast<int>(230 * v1), static_cast<int>(55 * v2));
}

// Length of the UTF-8 sequence at s[i] if it is valid and a character XML allows, else 0.
size_t xml_char_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  auto continuation = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xbf) {
    return byte(k) >= lo && byte(k) <= hi;
  };
  unsigned b0 = byte(0);
  if (b0 < 0x20) return b0 == '\t' || b0 == '\n' || b0 == '\r' ? 1 : 0;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return continuation(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80,
             hi = b0 == 0xed ? 0x9f : 0xbf; // no overlong, surrogates
    if (!continuation(1, lo, hi) || !continuation(2)) return 0;
    bool non_character = b0 == 0xef && byte(1) == 0xbf && byte(2) >= 0xbe; // U+FFFE, U+FFFF
    return non_character ? 0 : 3;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    unsigned lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf; // up to U+10FFFF
    return continuation(1, lo, hi) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

// The characters of a name as XML can hold them: anything else becomes U+FFFD.
std::vector<std::string_view> xml_characters(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";
  std::vector<std::string_view> characters;
  characters.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t length = xml_char_length(s, i);
    characters.push_back(length ? s.substr(i, length) : kReplacement);
    i += length ? length : 1;
  }
  return characters;
}

void append_escaped(fmt::memory_buffer& out, std::string_view character) {
  std::string_view text = character == "&"    ? "&amp;"
                          : character == "<"  ? "&lt;"
                          : character == ">"  ? "&gt;"
                          : character == "\"" ? "&quot;"
                          : character == "'"  ? "&apos;"
                                              : character;
  out.append(text.data(), text.data() + text.size());
}

void append_xml(fmt::memory_buffer& out, std::string_view text) {
  for (std::string_view character : xml_characters(text))
    append_escaped(out, character);
}

// The label that fits a frame of `width_px`: flamegraph.pl's rule, counting characters (not
// bytes, so a multi-byte character is never cut) of kFontWidth * kFontSize pixels; nothing below
// three characters (one and the two dots).
void append_label(fmt::memory_buffer& out, std::string_view name, double width_px) {
  size_t room = static_cast<size_t>(std::max(0.0, width_px / (kFontSize * kFontWidth)));
  if (room < 3) return;
  std::vector<std::string_view> characters = xml_characters(name);
  if (characters.size() <= room) {
    for (std::string_view character : characters)
      append_escaped(out, character);
    return;
  }
  for (size_t i = 0; i < room - 2; ++i)
    append_escaped(out, characters[i]);
  out.append(std::string_view(".."));
}

// The graph's behaviour, for viewers that run scripts (browsers). The picture stays what it is
// (see flamegraph.hpp): the script reads the frames back from its paths and the names table
// (exact integers: first sample, samples, row and name) into arrays, one row's frames sorted by
// first sample, and never makes an element per frame, so that a graph of many thousand frames opens
// and zooms at once. Hover says on the status line what frame is under the pointer (found from the
// pointer's sample and row by a binary search in that row); a click zooms so that the frame spans
// the width: the frames' viewBox narrows to its samples, which leaves its ancestors full width (a
// half-white veil over their rows) and cuts away everything else; labels are made again for the
// frames then wide enough. "Reset Zoom", a click on the root or Escape undoes it; "Search", Ctrl-F
// or the URL's ?s=REGEX tests each name once and draws the matching frames over the picture in
// magenta (one path, id "matches", in the picture's units) and shows the share of samples under
// them (nested matches counted once); Escape or a second click on "Search" clears it.
constexpr std::string_view kScript = R"JS(
(function () {
  var svg = document.documentElement, NS = 'http://www.w3.org/2000/svg';
  var PAD = 10, CHAR = 0.59 * 12;
  var WIDTH = +svg.getAttribute('width'), DRAW = WIDTH - 2 * PAD;
  var area = document.getElementById('frames'), labels = document.getElementById('labels');
  var details = document.getElementById('details');
  var unzoom = document.getElementById('unzoom');
  var searchButton = document.getElementById('search');
  var matched = document.getElementById('matched');
  var S = [], N = [], ROW = [], NAME = [], names = [], rows = [];
  var total = 0, levels = 0, inverted = false, unit = '', top = 0, fh = 0, gap = 0;
  var marks = null, veil = null, searching = false;
  var view = { s: 0, n: 0, d: 0 };
  function commas(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  if (area) {
    var box = area.viewBox.baseVal;
    total = box.width; levels = box.height;
    inverted = area.getAttribute('data-inverted') === '1';
    unit = area.getAttribute('data-unit');
    top = +area.getAttribute('y'); fh = +area.getAttribute('height') / levels;
    gap = fh > 1 ? 1 : 0;
    for (var r = 0; r < levels; ++r) rows.push([]);
    Array.prototype.forEach.call(document.getElementById('names').children, function (t) {
      names.push(t.textContent);
    });
    Array.prototype.forEach.call(area.querySelectorAll('path'), function (path) {
      var re = /M(\d+) (\d+)h(\d+)/g, d = path.getAttribute('d'), m, k = 0;
      var named = path.getAttribute('data-names').split(' ');
      while ((m = re.exec(d))) {
        rows[+m[2]].push(S.length);
        S.push(+m[1]); ROW.push(+m[2]); N.push(+m[3]); NAME.push(+named[k++]);
      }
    });
    rows.forEach(function (row) { row.sort(function (a, b) { return S[a] - S[b]; }); });
    marks = document.createElementNS(NS, 'path');
    marks.setAttribute('id', 'matches');
    marks.setAttribute('stroke', 'rgb(230,0,230)');
    area.querySelector('g').appendChild(marks);
    veil = document.createElementNS(NS, 'rect');
    veil.setAttribute('x', PAD); veil.setAttribute('width', DRAW);
    veil.setAttribute('fill', '#ffffff'); veil.setAttribute('fill-opacity', '0.5');
    veil.style.display = 'none';
    veil.style.pointerEvents = 'none';
    svg.insertBefore(veil, labels);
  }
  view.n = total;
  function depth(i) { return inverted ? ROW[i] : levels - 1 - ROW[i]; }
  function describe(i) {
    return names[NAME[i]] + ' (' + commas(N[i]) + ' ' + unit + ', ' +
        (depth(i) === 0 ? '100%' : (100 * N[i] / total).toFixed(2) + '%') + ')';
  }
  // The first frame of `row` (sorted, disjoint) that ends after `sample`.
  function firstAfter(row, sample) {
    var lo = 0, hi = row.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1, i = row[mid];
      if (S[i] + N[i] <= sample) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  // The frame under the pointer, or -1.
  function frameAt(e) {
    if (!area) return -1;
    var p = svg.createSVGPoint();
    p.x = e.clientX; p.y = e.clientY;
    p = p.matrixTransform(svg.getScreenCTM().inverse());
    var r = Math.floor((p.y - top) / fh);
    if (r < 0 || r >= levels || p.x < PAD || p.x >= PAD + DRAW) return -1;
    var sample = view.s + (p.x - PAD) / DRAW * view.n, row = rows[r];
    var j = firstAfter(row, sample);
    return j < row.length && S[row[j]] <= sample ? row[j] : -1;
  }
  function label(name, width) {
    var room = Math.floor(width / CHAR);
    return room < 3 ? '' : name.length <= room ? name : name.substring(0, room - 2) + '..';
  }
  // Labels for the frames wide enough in the current view, made in one fragment; the whole
  // graph's are the file's own, hidden while zoomed.
  var zoomedLabels = document.createElementNS(NS, 'g');
  if (labels) labels.parentNode.insertBefore(zoomedLabels, labels);
  function relabel() {
    labels.style.display = view.d > 0 ? 'none' : '';
    zoomedLabels.textContent = '';
    if (view.d === 0) return;
    var scale = DRAW / view.n, end = view.s + view.n, made = document.createDocumentFragment();
    for (var r = 0; r < levels; ++r) {
      var row = rows[r];
      for (var j = firstAfter(row, view.s); j < row.length && S[row[j]] < end; ++j) {
        var i = row[j], a = Math.max(S[i], view.s), w = (Math.min(S[i] + N[i], end) - a) * scale;
        if (w < 3 * CHAR) continue;
        var text = document.createElementNS(NS, 'text'), x = PAD + (a - view.s) * scale;
        text.setAttribute('x', (x + 3).toFixed(2));
        text.setAttribute('y', (3 + top + r * fh + (inverted ? 0 : gap) + (fh - gap) / 2).toFixed(2));
        text.textContent = label(names[NAME[i]], w);
        made.appendChild(text);
      }
    }
    zoomedLabels.appendChild(made);
  }
  function zoom(start, count, d) {
    if (!area) return;
    view = { s: start, n: count, d: d };
    area.setAttribute('viewBox', start + ' 0 ' + count + ' ' + levels);
    if (d > 0) { // the ancestors' rows: below the frame in a flame graph, above it when inverted
      veil.setAttribute('y', (top + (inverted ? 0 : (levels - d) * fh)).toFixed(1));
      veil.setAttribute('height', (d * fh).toFixed(1));
    }
    veil.style.display = d > 0 ? '' : 'none';
    relabel();
    unzoom.style.display = d > 0 ? '' : 'none';
  }
  function reset() { if (view.d > 0) zoom(0, total, 0); }
  svg.addEventListener('mousemove', function (e) {
    var i = frameAt(e);
    details.textContent = i < 0 ? ' ' : 'Function: ' + describe(i);
    svg.style.cursor = i < 0 ? '' : 'pointer';
  });
  svg.addEventListener('mouseleave', function () { details.textContent = ' '; });
  svg.addEventListener('click', function (e) {
    if (e.target === unzoom || e.target === searchButton) return;
    var i = frameAt(e);
    if (i < 0) return;
    if (depth(i) === 0) reset(); else zoom(S[i], N[i], depth(i));
  });
  function clearSearch() {
    if (marks) marks.setAttribute('d', '');
    matched.textContent = ' ';
    searchButton.textContent = 'Search';
    searching = false;
  }
  function search(pattern) {
    var re;
    try { re = new RegExp(pattern); } catch (e) { matched.textContent = 'Bad expression'; return; }
    clearSearch();
    var hit = names.map(function (name) { return re.test(name); }), d = [], spans = [];
    for (var i = 0; i < S.length; ++i) {
      if (!hit[NAME[i]]) continue;
      d.push('M' + S[i] + ' ' + ROW[i] + 'h' + N[i]);
      spans.push([S[i], S[i] + N[i]]);
    }
    if (marks) marks.setAttribute('d', d.join(''));
    spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var covered = 0, end = -1;
    spans.forEach(function (s) {
      if (s[1] <= end) return;
      covered += s[1] - Math.max(s[0], end);
      end = s[1];
    });
    matched.textContent = 'Matched: ' + (total ? 100 * covered / total : 0).toFixed(1) + '%';
    searchButton.textContent = 'Reset Search';
    searching = true;
  }
  function askSearch() {
    if (searching) { clearSearch(); return; }
    var pattern = window.prompt('Search for (regular expression):', '');
    if (pattern) search(pattern);
  }
  unzoom.addEventListener('click', reset);
  searchButton.addEventListener('click', askSearch);
  document.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) {
      e.preventDefault();
      askSearch();
    } else if (e.key === 'Escape') {
      reset();
      clearSearch();
    }
  });
  var query = /[?&]s=([^&]*)/.exec(window.location.search);
  if (query) search(decodeURIComponent(query[1]));
})();
)JS";

} // namespace

void write_flamegraph_svg(std::ostream& out, const FoldedStacks& stacks,
                          const FlameGraphOptions& options) {
  const std::vector<FrameNode> tree = merge_stacks(stacks);
  const uint64_t total = tree[0].total;
  const double width = options.width, frame_height = options.frame_height;
  const double drawing_width = std::max(0.0, width - 2 * kSidePad);
  const double px_per_sample = total ? drawing_width / static_cast<double>(total) : 0;
  const std::vector<PlacedFrame> placed = place_frames(tree, px_per_sample, options.min_width_px);

  unsigned max_depth = 0;
  for (const PlacedFrame& frame : placed)
    max_depth = std::max(max_depth, tree[frame.node].depth);
  const double height = (max_depth + 1) * frame_height + kTopPad + kBottomPad;
  const double frame_gap = frame_height > 1 ? 1 : 0; // a line between levels, as flamegraph.pl

  fmt::memory_buffer svg;
  auto text = std::back_inserter(svg);
  fmt::format_to(
      text,
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n"
      "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
      "<stop stop-color=\"#eeeeee\" offset=\"5%\"/>"
      "<stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient></defs>\n"
      "<style type=\"text/css\">\n"
      "text {{ font-family:Verdana; font-size:{2}px; fill:rgb(0,0,0); }}\n"
      ".centered {{ text-anchor:middle; }}\n"
      ".func_g:hover {{ stroke:black; stroke-width:0.5; cursor:pointer; }}\n"
      ".control {{ cursor:pointer; }}\n"
      "</style>\n"
      "<rect x=\"0.0\" y=\"0.0\" width=\"{0}\" height=\"{1}\" fill=\"url(#background)\"/>\n"
      "<text class=\"centered\" x=\"{3:.2f}\" y=\"{4:.2f}\" style=\"font-size:{5}px\">",
      width, height, kFontSize, width / 2, kFontSize * 2, kTitleFontSize);
  append_xml(svg, options.title);
  svg.append(std::string_view("</text>\n"));
  // The controls and the status line the script drives (plain text where scripts do not run).
  fmt::format_to(text,
                 "<text id=\"unzoom\" class=\"control\" x=\"{0:.2f}\" y=\"{1:.2f}\" "
                 "style=\"display:none\">Reset Zoom</text>\n"
                 "<text id=\"search\" class=\"control\" x=\"{2:.2f}\" y=\"{1:.2f}\" "
                 "style=\"text-anchor:end\">Search</text>\n"
                 "<text id=\"details\" x=\"{0:.2f}\" y=\"{3:.2f}\"> </text>\n"
                 "<text id=\"matched\" x=\"{2:.2f}\" y=\"{3:.2f}\" "
                 "style=\"text-anchor:end\"> </text>\n",
                 kSidePad, kFontSize * 2, width - kSidePad, height - kBottomPad / 2);
  if (placed.empty()) {
    fmt::format_to(text, "<text class=\"centered\" x=\"{:.2f}\" y=\"{:.2f}\">No stacks</text>\n",
                   width / 2, kTopPad + frame_height / 2);
  }

  // The frames: one path per colour and band of kBandLevels levels, in the order they are first
  // placed (parents before children), its subpaths in sample and level units and its data-names
  // the index of each subpath's name in the names table (see flamegraph.hpp). Bands, because a
  // browser paints a region by going through every path whose box meets it: with one path per
  // name, most spanning the depth of a deep graph, each region went through every frame.
  const unsigned levels = max_depth + 1;
  const auto row_of = [&](const FrameNode& node) {
    return options.inverted ? node.depth : max_depth - node.depth;
  };
  std::vector<std::string_view> names;
  std::unordered_map<std::string_view, size_t> name_index;
  struct Band {
    std::string colour;
    fmt::memory_buffer d, names;
  };
  std::vector<Band> bands;
  std::unordered_map<std::string, size_t> band_index; // "colour band" -> index in bands
  std::unordered_map<std::string_view, std::string> colours;
  for (const PlacedFrame& frame : placed) {
    const FrameNode& node = tree[frame.node];
    auto [named, new_name] = name_index.try_emplace(node.name, names.size());
    if (new_name) {
      names.push_back(node.name);
      colours.emplace(node.name, hot_color(node.name));
    }
    const std::string& colour = colours.at(node.name);
    const unsigned row = row_of(node);
    auto [banded, new_band] =
        band_index.try_emplace(fmt::format("{} {}", colour, row / kBandLevels), bands.size());
    if (new_band) {
      bands.emplace_back();
      bands.back().colour = colour;
    }
    Band& band = bands[banded->second];
    fmt::format_to(std::back_inserter(band.d), "M{} {}h{}", frame.start, row, node.total);
    fmt::format_to(std::back_inserter(band.names), "{}{}", band.names.size() ? " " : "",
                   named->second);
  }
  if (!placed.empty()) {
    // A level is 1 unit high; its stroke is the frame (the level less the gap, which lies above
    // the frame in a flame graph and below it in an icicle graph) around the stroke's centre line.
    const double thickness = (frame_height - frame_gap) / frame_height;
    const double centre = options.inverted ? thickness / 2 : 1 - thickness / 2;
    fmt::format_to(text,
                   "<svg id=\"frames\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                   "viewBox=\"0 0 {} {}\" preserveAspectRatio=\"none\" data-inverted=\"{}\" "
                   "data-unit=\"",
                   kSidePad, kTopPad, drawing_width, levels * frame_height, total, levels,
                   options.inverted ? 1 : 0);
    append_xml(svg, options.count_name);
    fmt::format_to(text,
                   "\">\n<g fill=\"none\" stroke-width=\"{}\" transform=\"translate(0 {})\">\n",
                   thickness, centre);
    for (const Band& band : bands) {
      fmt::format_to(text, "<path stroke=\"{}\" data-names=\"", band.colour);
      svg.append(band.names);
      svg.append(std::string_view("\" d=\""));
      svg.append(band.d);
      svg.append(std::string_view("\"/>\n"));
    }
    svg.append(std::string_view("</g>\n</svg>\n"));
    // The names, one <tspan> each, never shown.
    svg.append(std::string_view("<text id=\"names\" style=\"display:none\">"));
    for (std::string_view name : names) {
      svg.append(std::string_view("<tspan>"));
      append_xml(svg, name);
      svg.append(std::string_view("</tspan>"));
    }
    svg.append(std::string_view("</text>\n"));
  }
  // Labels where they fit, in pixels.
  svg.append(std::string_view("<g id=\"labels\">\n"));
  for (const PlacedFrame& frame : placed) {
    const FrameNode& node = tree[frame.node];
    const double x1 = kSidePad + static_cast<double>(frame.start) * px_per_sample;
    const double frame_width = static_cast<double>(node.total) * px_per_sample;
    if (frame_width / (kFontSize * kFontWidth) < 3) continue;
    const double y1 = kTopPad + row_of(node) * frame_height + (options.inverted ? 0 : frame_gap);
    fmt::format_to(text, "<text x=\"{:.2f}\" y=\"{:.2f}\">", x1 + 3,
                   3 + y1 + (frame_height - frame_gap) / 2);
    append_label(svg, node.name, frame_width);
    svg.append(std::string_view("</text>\n"));
  }
  svg.append(std::string_view("</g>\n"));
  svg.append(std::string_view("<script type=\"text/ecmascript\"><![CDATA["));
  svg.append(kScript);
  svg.append(std::string_view("]]></script>\n</svg>\n"));
  out.write(svg.data(), static_cast<std::streamsize>(svg.size()));
}

} // namespace ehelf::perf
