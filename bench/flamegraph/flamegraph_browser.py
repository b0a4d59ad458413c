#!/usr/bin/env python3
"""How long ehelf's flame-graph SVG takes in Chromium (headless, Selenium), by size.

For each size it generates folded stacks (seeded, so each run draws the same graphs): a deep
profile whose merged tree has about FRAMES frames wide enough to draw, up to DEPTH levels (an
80,000-frame, 375-level graph is 6,000 px tall), draws them with bench_flamegraph_svg (ehelf's
writer, flame and icicle layouts), and measures in Chromium:
  - load: from navigation start to the first frame painted after the load event (the page's
    script has built the interactive graph by then), performance.now() in the page;
  - zoom: from a click on a frame (dispatched at its centre, on whatever element is there) to the
    next frame painted; the click is on the widest frame half-way down the stack;
  - reset: Escape back to the whole graph, likewise.
Each the median of --runs fresh page loads. Writes a JSON and a Markdown table."""
import argparse, json, os, re, platform, random, statistics, subprocess, sys, tempfile, time


def generate(frames, depth, seed):
    """Folded stacks whose tree has about `frames` frames, `depth` levels deep at most."""
    rng = random.Random(seed)
    names = [f'function_{i:05d}' for i in range(4000)]
    lines, made = {}, 0
    # Each stack shares a random prefix of an earlier one and goes deeper with new frames: a tree
    # of long chains, as deep recursive or layered code gives.
    stacks = [['main']]
    while made < frames:
        base = rng.choice(stacks)
        keep = rng.randint(1, len(base))
        extra = rng.randint(20, 120)
        stack = base[:keep] + [rng.choice(names) for _ in range(min(extra, depth - keep))]
        if len(stack) <= keep:
            continue
        stacks.append(stack)
        made += len(stack) - keep
        lines[';'.join(stack)] = rng.randint(200, 2000)
    return ''.join(f'{s} {n}\n' for s, n in lines.items())


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = '/usr/bin/chromium'
    for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
    d.set_window_size(1300, 900)
    d.set_script_timeout(120)
    d.set_page_load_timeout(300)
    return d


PAINTED = 'var done = arguments[arguments.length - 1];' \
          'requestAnimationFrame(function () { requestAnimationFrame(function () { done(performance.now()); }); });'
# The widest frame half-way down: its centre in page pixels, from the file's own geometry.
PICK = '''
var area = document.getElementById('frames'), box = area.viewBox.baseVal, best = null;
area.querySelectorAll('path').forEach(function (p) {
  var re = /M(\\d+) (\\d+)h(\\d+)/g, m;
  while ((m = re.exec(p.getAttribute('d')))) {
    var row = +m[2], n = +m[3];
    if (Math.abs(row - box.height / 2) < 3 && (!best || n > best.n)) best = {s: +m[1], row: row, n: n};
  }
});
var x = +area.getAttribute('x'), y = +area.getAttribute('y');
var w = +area.getAttribute('width') / box.width, h = +area.getAttribute('height') / box.height;
return [x + (best.s + best.n / 2) * w, y + (best.row + 0.9) * h];'''
CLICK = '''
var x = arguments[0], y = arguments[1], done = arguments[arguments.length - 1];
window.scrollTo(0, Math.max(0, y - 400));
var t0 = performance.now(), vx = x - window.scrollX, vy = y - window.scrollY;
var target = document.elementFromPoint(vx, vy);
target.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: vx, clientY: vy}));
requestAnimationFrame(function () { requestAnimationFrame(function () { done(performance.now() - t0); }); });'''
RESET = '''
var done = arguments[arguments.length - 1], t0 = performance.now();
document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
requestAnimationFrame(function () { requestAnimationFrame(function () { done(performance.now() - t0); }); });'''


def measure(path, runs):
    loads, zooms, resets = [], [], []
    d = browser()
    try:
        for _ in range(runs):
            d.get('about:blank')
            d.get('file://' + path)
            loads.append(d.execute_async_script(PAINTED))
            x, y = d.execute_script(PICK)
            zooms.append(d.execute_async_script(CLICK, x, y))
            resets.append(d.execute_async_script(RESET))
    finally:
        d.quit()
    return {'load_ms': statistics.median(loads), 'zoom_ms': statistics.median(zooms),
            'reset_ms': statistics.median(resets), 'runs': runs}


def rerun(a):
    """The command that makes this table again: run_flamegraph.sh with the arguments that differ."""
    extra = [f'--{k} {v}' for k, v, default in [('frames', a.frames, '10000,80000'),
                                                ('depth', a.depth, 375), ('runs', a.runs, 3)]
             if v != default]
    return ' '.join(['bash bench/run_flamegraph.sh'] + extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--writer', required=True, help='bench_flamegraph_svg')
    ap.add_argument('--ehelf', required=True, help='for the version line')
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    ap.add_argument('--frames', default='10000,80000')
    ap.add_argument('--depth', type=int, default=375)
    ap.add_argument('--runs', type=int, default=3)
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for frames in map(int, a.frames.split(',')):
            folded = os.path.join(tmp, f'{frames}.folded')
            with open(folded, 'w') as f:
                f.write(generate(frames, a.depth, seed=frames))
            for layout in ['flame', 'icicle']:
                svg = os.path.join(tmp, f'{frames}-{layout}.svg')
                subprocess.run([a.writer, folded, svg] + (['--inverted'] if layout == 'icicle' else []),
                               check=True)
                with open(svg) as f:
                    text = f.read()
                height = int(text.split('height="', 1)[1].split('"', 1)[0])
                r = measure(svg, a.runs)
                r.update(frames=frames, layout=layout, height_px=height, svg_bytes=len(text),
                         drawn_frames=len(re.findall(r'M\d+ \d+h\d+', text)))  # a subpath a frame
                print(json.dumps(r), file=sys.stderr)
                results.append(r)
    chromium = subprocess.run(['/usr/bin/chromium', '--version'], capture_output=True, text=True).stdout.strip()
    meta = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'machine': platform.node(),
            'kernel': platform.release(), 'cpus': os.cpu_count(), 'chromium': chromium,
            'depth': a.depth, 'command': rerun(a)}
    with open(a.json, 'w') as f:
        json.dump({'meta': meta, 'results': results}, f, indent=1)
    with open(a.md, 'w') as f:
        f.write(f"ehelf's flame-graph SVG in {chromium} (headless), {meta['date']}, {meta['cpus']} CPUs "
                f"(shared), median of {a.runs} page loads; rerun: `{meta['command']}`\n\n")
        f.write('| frames drawn | layout | height px | SVG KiB | load ms | click-zoom ms | reset ms |\n')
        f.write('|---|---|---|---|---|---|---|\n')
        for r in results:
            f.write(f"| {r['drawn_frames']:,} | {r['layout']} | {r['height_px']:,} | {r['svg_bytes'] // 1024:,} "
                    f"| {r['load_ms']:.0f} | {r['zoom_ms']:.0f} | {r['reset_ms']:.0f} |\n")


if __name__ == '__main__':
    main()
