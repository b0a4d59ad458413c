// The writers for sampled call stacks: folded stacks (fold, write_folded, read_folded) and the
// flame graph SVG, which is checked through Python's XML parser, an independent reader.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "perf/flamegraph.hpp"
#include "perf/folded.hpp"

namespace ehelf::perf {
namespace {

namespace fs = std::filesystem;

StackFrame frame(std::string symbol, std::string module = "/usr/bin/prog", uint64_t pc = 0x401000,
                 uint64_t symbol_offset = 0) {
  return StackFrame{pc, std::move(symbol), symbol_offset, std::move(module)};
}

SampleStack sample(std::vector<StackFrame> frames_innermost_first, std::string comm = "prog",
                   uint64_t period = 1) {
  SampleStack s;
  s.comm = std::move(comm);
  s.pid = 42;
  s.tid = 43;
  s.period = period;
  s.frames = std::move(frames_innermost_first);
  return s;
}

// The only key of a one-stack result.
std::string only_stack(const FoldedStacks& stacks) {
  EXPECT_EQ(stacks.size(), 1u);
  return stacks.empty() ? std::string() : stacks.begin()->first;
}

std::string fold_one(const SampleStack& s, const FoldOptions& options = {}) {
  return only_stack(fold({s}, options));
}

TEST(Folded, OutermostFirstAfterTheCommand) {
  SampleStack s = sample({frame("leaf"), frame("middle"), frame("main"), frame("_start")});
  FoldedStacks stacks = fold({s, s, sample({frame("other"), frame("main")})}, {});
  FoldedStacks expected = {{"prog;_start;main;middle;leaf", 2}, {"prog;main;other", 1}};
  EXPECT_EQ(stacks, expected);
}

TEST(Folded, PidAndTidPrefixes) {
  SampleStack s = sample({frame("main")});
  EXPECT_EQ(fold_one(s, {.include_pid = true}), "prog-42;main");
  EXPECT_EQ(fold_one(s, {.include_tid = true}), "prog-42/43;main"); // the tid brings the pid along
  EXPECT_EQ(fold_one(s, {.include_pid = true, .include_tid = true}), "prog-42/43;main");
  // Spaces in the command become '_', as stackcollapse-perf.pl writes them.
  EXPECT_EQ(fold_one(sample({frame("run")}, "V8 Worker")), "V8_Worker;run");
}

TEST(Folded, CountsSamplesOrPeriods) {
  std::vector<SampleStack> samples = {sample({frame("f")}, "prog", 1000),
                                      sample({frame("f")}, "prog", 250),
                                      sample({frame("g")}, "prog", 7)};
  FoldedStacks by_sample = fold(samples, {});
  EXPECT_EQ(by_sample, (FoldedStacks{{"prog;f", 2}, {"prog;g", 1}}));
  FoldedStacks by_period = fold(samples, {.weight_by_period = true});
  EXPECT_EQ(by_period, (FoldedStacks{{"prog;f", 1250}, {"prog;g", 7}}));

  FoldedStacks running;
  add_folded(running, samples[0], {.weight_by_period = true});
  add_folded(running, samples[0], {.weight_by_period = true});
  EXPECT_EQ(running.at("prog;f"), 2000u);
}

TEST(Folded, UnknownSymbolNamesTheModule) {
  SampleStack s = sample({frame("", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0012345678),
                          frame("", "[vdso]", 0x7ffd1000), frame("main")});
  EXPECT_EQ(fold_one(s), "prog;main;[vdso];[libc.so.6]");
  EXPECT_EQ(fold_one(s, {.addresses = true}),
            "prog;main+0x0;[vdso <0x7ffd1000>];[libc.so.6 <0x7f0012345678>]");
}

TEST(Folded, NothingKnownGivesThePc) {
  EXPECT_EQ(fold_one(sample({frame("", "", 0x401a2b), frame("main")})), "prog;main;0x401a2b");
  // A name that is nothing but separators falls through to what is known next.
  EXPECT_EQ(fold_one(sample({frame("\n", "", 0xdead)})), "prog;0xdead");
}

TEST(Folded, AddressesGiveSymbolOffsets) {
  SampleStack s = sample({frame("leaf", "/usr/bin/prog", 0x401234, 0x1a), frame("main")});
  EXPECT_EQ(fold_one(s, {.addresses = true}), "prog;main+0x0;leaf+0x1a");
}

TEST(Folded, SeparatorsInNamesCannotBreakTheFormat) {
  SampleStack s =
      sample({frame("odd;name\nwith\r\nnewlines"), frame("\ttabbed\tname ")}, "my;comm");
  EXPECT_EQ(fold_one(s), "my:comm;tabbed name;odd:namewithnewlines");
  // Files without a symbol are named by their base name, made safe the same way.
  SampleStack files = sample({frame("", "/tmp/a;b/odd;lib.so"), frame("", "/tmp/ spaced.so\t"),
                              frame("", "[]"), frame("", "/x/[bracketed]")});
  EXPECT_EQ(fold_one(files), "prog;[bracketed];[];[spaced.so];[odd:lib.so]");
}

TEST(Folded, EmptyCommandAndNoFrames) {
  EXPECT_EQ(fold_one(sample({}, "")), "[unknown]");
  EXPECT_EQ(fold_one(sample({}, "idle")), "idle");
}

TEST(Folded, WriteThenReadGivesTheSameStacks) {
  std::vector<SampleStack> samples = {
      sample({frame("operator new(unsigned long)"),
              frame("std::vector<int, std::allocator<int> >::push_back"), frame("main")}),
      sample({frame("(anonymous namespace)::worker"), frame("start_thread")}, "pool worker", 3),
      sample({frame("", "", 0xffffffff81000000), frame("", "[kernel.kallsyms]")}, "swapper"),
      sample({frame("\xe2\x82\xac uro")}, "")};
  FoldedStacks stacks = fold(samples, {.include_tid = true, .weight_by_period = true});
  std::ostringstream text;
  write_folded(text, stacks);
  std::istringstream in(text.str());
  Result<FoldedStacks> back = read_folded(in, "round.folded");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, stacks);

  std::ostringstream small;
  write_folded(small, {{"b;c", 3}, {"a", 12}});
  EXPECT_EQ(small.str(), "a 12\nb;c 3\n");
}

TEST(Folded, ReadsWhatFlamegraphPlReads) {
  std::istringstream in("a;b 3\r\n\n   \na;b\t2\nc;d e   10  \n a;c 1\n");
  Result<FoldedStacks> stacks = read_folded(in, "in.folded");
  ASSERT_TRUE(stacks.ok()) << stacks.error().to_string();
  EXPECT_EQ(*stacks, (FoldedStacks{{"a;b", 5}, {"c;d e", 10}, {"a;c", 1}}));
}

TEST(Folded, ReadErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string message; // expected in Error::to_string()
  };
  std::vector<Case> cases = {
      {"a;b 1\n\na;b\n", "in.folded: line 3: no count"},
      {"a;b x\n", "in.folded: line 1: count 'x' is not a whole number"},
      {"a;b 1.5\n", "in.folded: line 1: count '1.5' is not a whole number"},
      {"a;b -1\n", "line 1: count '-1' is not a whole number"},
      {"a;b 1\n 5\n", "in.folded: line 2: empty stack"},
      {"a;;b 1\n", "line 1: empty frame name at column 3"},
      {"a;b; 1\n", "line 1: empty frame name at column 5"},
      {"a 99999999999999999999\n", "line 1: count '99999999999999999999' does not fit in 64 bits"},
      {"a 18446744073709551615\na 1\n", "line 2: the counts of 'a' add up to more than 64 bits"},
  };
  for (const Case& c : cases) {
    std::istringstream in(c.text);
    Result<FoldedStacks> stacks = read_folded(in, "in.folded");
    ASSERT_FALSE(stacks.ok()) << c.text;
    EXPECT_NE(stacks.error().to_string().find(c.message), std::string::npos)
        << "input: " << c.text << "\nerror: " << stacks.error().to_string();
  }
}

// ---- Flame graph ----

class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ehelf-flamegraph-test-XXXXXX").string();
    if (char* p = ::mkdtemp(tmpl.data())) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

bool have_python() {
  return std::system("python3 -c '' >/dev/null 2>&1") == 0;
}

std::string svg_of(const FoldedStacks& stacks, const FlameGraphOptions& options = {}) {
  std::ostringstream out;
  write_flamegraph_svg(out, stacks, options);
  return out.str();
}

// One frame as Python's XML parser reads it back from the static picture: the name (its path's
// title), the colour (the path's stroke), its samples, and its rectangle in pixels (the subpath in
// sample and level units through the frames' viewBox), with the label drawn on it.
struct SvgFrame {
  std::string name, fill, label;
  uint64_t samples = 0;
  double x = 0, y = 0, width = 0;
};

struct ParsedSvg {
  bool well_formed = false;
  double width = 0, height = 0;
  size_t labels = 0; // <text> in the labels layer
  std::vector<SvgFrame> frames;

  const SvgFrame* find(const std::string& name) const {
    for (const SvgFrame& f : frames)
      if (f.name == name) return &f;
    return nullptr;
  }
};

// Writes the SVG to a file, checks it is well-formed XML with the plain ElementTree parse, then
// reads back the frames through ElementTree (entities resolved).
ParsedSvg parse_svg(const std::string& svg) {
  TempDir dir;
  const std::string svg_path = dir / "graph.svg", script_path = dir / "frames.py";
  std::ofstream(svg_path, std::ios::binary) << svg;
  ParsedSvg parsed;
  std::string check =
      "python3 -c 'import xml.etree.ElementTree as E,sys; E.parse(sys.argv[1])' " + svg_path;
  parsed.well_formed = std::system(check.c_str()) == 0;
  if (!parsed.well_formed) return parsed;

  std::ofstream(script_path) << R"(import re, sys, xml.etree.ElementTree as E
sys.stdout.reconfigure(encoding='utf-8')
ns = '{http://www.w3.org/2000/svg}'
root = E.parse(sys.argv[1]).getroot()
labels = [(float(t.get('x')), float(t.get('y')), t.text or '')
          for g in root.iter(ns + 'g') if g.get('id') == 'labels' for t in g.iter(ns + 'text')]
print(root.get('width'), root.get('height'), len(labels))
area = next((s for s in root.iter(ns + 'svg') if s.get('id') == 'frames'), None)
if area is not None:
    total, levels = map(int, area.get('viewBox').split()[2:])
    x0, y0, w, h = (float(area.get(k)) for k in ('x', 'y', 'width', 'height'))
    fh = h / levels
    gap = 0 if area.get('data-inverted') == '1' or fh <= 1 else 1
    table = next(t for t in root.iter(ns + 'text') if t.get('id') == 'names')
    names = [t.text for t in table.iter(ns + 'tspan')]
    for path in area.iter(ns + 'path'):
        named = path.get('data-names').split()
        for k, (s, row, n) in enumerate(re.findall(r'M(\d+) (\d+)h(\d+)', path.get('d'))):
            x, y, width = x0 + int(s) * w / total, y0 + int(row) * fh + gap, int(n) * w / total
            label = [l for lx, ly, l in labels if abs(lx - x - 3) < 0.01 and y < ly < y + fh]
            print('\t'.join([names[int(named[k])], path.get('stroke'), ''.join(label), n,
                             repr(x), repr(y), repr(width)]))
)";
  std::istringstream lines(test::run_command("python3 " + script_path + " " + svg_path));
  lines >> parsed.width >> parsed.height >> parsed.labels;
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');)
      fields.push_back(field);
    if (fields.size() != 7) {
      ADD_FAILURE() << "unexpected line from the parser: " << line;
      continue;
    }
    parsed.frames.push_back({fields[0], fields[1], fields[2], std::stoull(fields[3]),
                             std::stod(fields[4]), std::stod(fields[5]), std::stod(fields[6])});
  }
  return parsed;
}

#define REQUIRE_PYTHON()                                                                           \
  if (!have_python()) GTEST_SKIP() << "python3 is needed to parse the SVG"

TEST(FlameGraph, OneFramePerTreeNode) {
  REQUIRE_PYTHON();
  // Tree: all, prog, a, b, c, d (a appears in two stacks but is one node).
  FoldedStacks stacks = {{"prog;a;b", 3}, {"prog;a;c", 1}, {"prog;d", 4}};
  ParsedSvg svg = parse_svg(svg_of(stacks));
  ASSERT_TRUE(svg.well_formed);
  EXPECT_EQ(svg.frames.size(), 6u);
  ASSERT_NE(svg.find("all"), nullptr);
  EXPECT_EQ(svg.find("all")->samples, 8u);
  ASSERT_NE(svg.find("a"), nullptr);
  EXPECT_EQ(svg.find("a")->samples, 4u);
  EXPECT_EQ(svg.find("c")->samples, 1u);
  // Depth 3 (all, prog, a, b): 4 levels of 16 px plus flamegraph.pl's 36 px top and 34 px bottom.
  EXPECT_EQ(svg.width, 1200);
  EXPECT_EQ(svg.height, 4 * 16 + 36 + 34);
}

TEST(FlameGraph, NarrowFramesAreLeftOutWithWhatIsAboveThem) {
  REQUIRE_PYTHON();
  // 1 sample out of 1,000,000 is 0.00118 px wide in a 1180 px drawing area.
  FoldedStacks stacks = {{"prog;big", 999'999}, {"prog;tiny;deeper;deepest", 1}};
  ParsedSvg svg = parse_svg(svg_of(stacks));
  ASSERT_TRUE(svg.well_formed);
  EXPECT_EQ(svg.frames.size(), 3u); // all, prog, big
  EXPECT_EQ(svg.find("tiny"), nullptr);
  EXPECT_EQ(svg.height, 3 * 16 + 36 + 34); // the depth of what is drawn
  EXPECT_EQ(svg.find("prog")->samples, 1'000'000u);

  ParsedSvg everything = parse_svg(svg_of(stacks, {.min_width_px = 0}));
  EXPECT_EQ(everything.frames.size(), 6u);
  EXPECT_EQ(everything.height, 5 * 16 + 36 + 34);
}

TEST(FlameGraph, WidthsAreProportionalToCounts) {
  REQUIRE_PYTHON();
  // 4 samples over 1180 px: 295 px each. The parent's own sample comes first (left), then its
  // children sorted by name, as in flamegraph.pl.
  FoldedStacks stacks = {{"p;zeta", 1}, {"p;alpha", 2}, {"p", 1}};
  ParsedSvg svg = parse_svg(svg_of(stacks));
  ASSERT_TRUE(svg.well_formed);
  const SvgFrame *all = svg.find("all"), *p = svg.find("p"), *alpha = svg.find("alpha"),
                 *zeta = svg.find("zeta");
  ASSERT_TRUE(all && p && alpha && zeta);
  EXPECT_DOUBLE_EQ(all->x, 10);
  EXPECT_DOUBLE_EQ(all->width, 1180);
  EXPECT_DOUBLE_EQ(p->width, 1180);
  EXPECT_DOUBLE_EQ(alpha->width, 590);
  EXPECT_DOUBLE_EQ(zeta->width, 295);
  EXPECT_DOUBLE_EQ(alpha->x, 10 + 295);
  EXPECT_DOUBLE_EQ(zeta->x, 10 + 295 + 590);
  // Flame: children above (smaller y) their parent.
  EXPECT_LT(p->y, all->y);
  EXPECT_LT(alpha->y, p->y);
  EXPECT_DOUBLE_EQ(all->y - p->y, 16);

  // Counts that do not divide evenly: widths still follow the counts to the 0.1 px rounding.
  ParsedSvg odd = parse_svg(svg_of({{"x;one", 7}, {"x;two", 3}}, {.width = 1000}));
  const SvgFrame *one = odd.find("one"), *two = odd.find("two");
  ASSERT_TRUE(one && two);
  EXPECT_NEAR(one->width / two->width, 7.0 / 3.0, 0.01);
  EXPECT_NEAR(one->width + two->width, 980, 0.11);
}

TEST(FlameGraph, InvertedPutsTheRootOnTop) {
  REQUIRE_PYTHON();
  ParsedSvg svg = parse_svg(svg_of({{"p;a", 1}}, {.inverted = true}));
  ASSERT_TRUE(svg.well_formed);
  const SvgFrame *all = svg.find("all"), *p = svg.find("p"), *a = svg.find("a");
  ASSERT_TRUE(all && p && a);
  EXPECT_DOUBLE_EQ(all->y, 36);
  EXPECT_DOUBLE_EQ(p->y, 36 + 16);
  EXPECT_DOUBLE_EQ(a->y, 36 + 32);
}

TEST(FlameGraph, NamesAreEscaped) {
  REQUIRE_PYTHON();
  const std::string name = "operator<<(std::ostream&, \"quoted\" 'x') > 0";
  FoldedStacks stacks = {{"prog;" + name, 1}};
  std::string text = svg_of(stacks, {.title = "A & B <test>"});
  EXPECT_NE(text.find("operator&lt;&lt;(std::ostream&amp;, &quot;quoted&quot; &apos;x&apos;) "
                      "&gt; 0"),
            std::string::npos);
  ParsedSvg svg = parse_svg(text);
  ASSERT_TRUE(svg.well_formed);
  const SvgFrame* frame = svg.find(name); // the parser decodes the entities back to the name
  ASSERT_NE(frame, nullptr);
  EXPECT_EQ(frame->samples, 1u);
  EXPECT_EQ(frame->label, name);
  EXPECT_NE(text.find(">A &amp; B &lt;test&gt;</text>"), std::string::npos);
}

TEST(FlameGraph, BytesXmlCannotHoldBecomeReplacementCharacters) {
  REQUIRE_PYTHON();
  // Invalid UTF-8, a control character, a surrogate encoded in UTF-8, and valid multi-byte text.
  FoldedStacks stacks = {{"prog;bad\xff\x01name;\xed\xa0\x80;caf\xc3\xa9", 1}};
  ParsedSvg svg = parse_svg(svg_of(stacks));
  ASSERT_TRUE(svg.well_formed);
  EXPECT_NE(svg.find("bad\xef\xbf\xbd\xef\xbf\xbdname"), nullptr);
  EXPECT_NE(svg.find("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), nullptr);
  EXPECT_NE(svg.find("caf\xc3\xa9"), nullptr);
}

TEST(FlameGraph, LabelsAreCutToTheFrame) {
  REQUIRE_PYTHON();
  // 4 samples over 1180 px: "narrow" is 295 px, room for int(295 / 7.08) = 41 characters.
  const std::string long_name(60, 'x');
  const std::string wide_accented = "\xc3\xa9" + std::string(59, 'e'); // 60 characters, 61 bytes
  FoldedStacks stacks = {
      {"p;" + long_name, 1}, {"p;" + wide_accented, 1}, {"p;short", 1}, {"p;tiny", 1}};
  ParsedSvg svg = parse_svg(svg_of(stacks));
  ASSERT_TRUE(svg.well_formed);
  EXPECT_EQ(svg.find(long_name)->label, std::string(39, 'x') + "..");
  EXPECT_EQ(svg.find(wide_accented)->label, "\xc3\xa9" + std::string(38, 'e') + "..");
  EXPECT_EQ(svg.find("short")->label, "short");

  // Under three characters of room, no label: 1 sample of 1000 is 1.18 px.
  ParsedSvg crowded = parse_svg(svg_of({{"p;a", 999}, {"p;b", 1}}));
  EXPECT_EQ(crowded.find("b")->label, "");
}

TEST(FlameGraph, HotColoursComeFromTheName) {
  REQUIRE_PYTHON();
  FoldedStacks stacks = {{"prog;main;compute", 2}, {"prog;main;-;kernel_fn", 1}};
  ParsedSvg first = parse_svg(svg_of(stacks));
  ParsedSvg second = parse_svg(svg_of({{"other;main", 5}}));
  ASSERT_TRUE(first.well_formed && second.well_formed);
  // flamegraph.pl's hash by hand for "main": 'm','a','i' give 1 - (9/9 + 0.7*9/10 + 0.49*9/11)
  // / 3.19 = 0.36335; reversed "niam" gives 0.85438: rgb(205 + int(50*0.854), int(230*0.363),
  // int(55*0.854)).
  EXPECT_EQ(first.find("main")->fill, "#f7532e"); // rgb(247,83,46)
  EXPECT_EQ(second.find("main")->fill, first.find("main")->fill);
  EXPECT_EQ(first.find("-")->fill, "#a0a0a0");
  for (const SvgFrame& f : first.frames) {
    unsigned r = 0, g = 0, b = 0;
    ASSERT_EQ(std::sscanf(f.fill.c_str(), "#%2x%2x%2x", &r, &g, &b), 3) << f.fill;
    if (f.name == "-") continue;
    EXPECT_TRUE(r >= 205 && r <= 255 && g <= 230 && b <= 55) << f.name << ": " << f.fill;
  }
}

TEST(FlameGraph, NoStacksStillGiveAValidGraph) {
  REQUIRE_PYTHON();
  for (const FoldedStacks& stacks : {FoldedStacks{}, FoldedStacks{{"prog;f", 0}}}) {
    std::string text = svg_of(stacks);
    ParsedSvg svg = parse_svg(text);
    ASSERT_TRUE(svg.well_formed) << text;
    EXPECT_EQ(svg.frames.size(), 0u);
    EXPECT_EQ(svg.labels, 0u);
    EXPECT_NE(text.find("No stacks"), std::string::npos);
  }
}

TEST(FlameGraph, DrawsFoldedInputReadBack) {
  REQUIRE_PYTHON();
  std::istringstream folded("swapper;start_kernel;cpu_idle 30\nprog;main;work 70\n");
  Result<FoldedStacks> stacks = read_folded(folded, "in.folded");
  ASSERT_TRUE(stacks.ok());
  ParsedSvg svg = parse_svg(svg_of(*stacks, {.title = "cycles", .count_name = "cycles"}));
  ASSERT_TRUE(svg.well_formed);
  EXPECT_EQ(svg.frames.size(), 7u);
  EXPECT_EQ(svg.find("work")->samples, 70u);
  EXPECT_NE(svg_of(*stacks, {.count_name = "cycles"}).find("data-unit=\"cycles\""),
            std::string::npos);
}

} // namespace
} // namespace ehelf::perf
