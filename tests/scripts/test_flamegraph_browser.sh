#!/usr/bin/env bash
# The flame graph as a person sees it, in headless Chromium driven by Selenium (Debian's
# chromium, chromium-driver, python3-selenium): it renders; hovering a frame names it on the
# status line; clicking a frame zooms (the frame spans the width, its siblings hide); Reset Zoom
# undoes it; Ctrl-F asks for a pattern and highlights the matches with the share of samples under
# them (compared with the folded stacks of the same recording); ?s= in the URL does the same.
# (Recorded with --unwind user: the graph's behaviour is tested here, on the same stacks as before.)
source "$(dirname "$0")/common.sh" "$@"
build=$(cd "$build" && pwd)
cd "$work" || exit 1
py=/usr/bin/python3 # Debian's, with python3-selenium (another python3 first on PATH may lack it)
if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null ||
  ! "$py" -c 'import selenium' 2> /dev/null; then
  echo "SKIP: chromium, chromium-driver or python3-selenium is missing (scripts/setup.sh installs them)"
  exit 77
fi
# Installed but unable to start here (no display libraries, a sandbox refused...): a skip too.
if ! timeout 120 "$py" - > browser.err 2>&1 << 'PY'; then
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
opts = webdriver.ChromeOptions()
opts.binary_location = '/usr/bin/chromium'
for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
    opts.add_argument(a)
webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts).quit()
PY
  echo "SKIP: Chromium cannot start here: $(tail -1 browser.err)"
  exit 77
fi
if ! "$ehelf" record -q --unwind user -f folded -o flame.folded -- "$build/tests/fixtures/record_target" split 200 2> rec.err; then
  grep -q perf_event_paranoid rec.err && { echo "SKIP: $(cat rec.err)"; exit 77; }
  bad "record: $(cat rec.err)"
  exit 1
fi
# The same profile as a graph: ehelf record writes it from the same stacks as the folded file.
"$ehelf" record -q --unwind user -o flame.svg -- "$build/tests/fixtures/record_target" split 200 2> rec.err ||
  bad "record svg: $(cat rec.err)"
"$ehelf" record -q --unwind user --inverted -o icicle.svg -- "$build/tests/fixtures/record_target" split 200 2> rec.err ||
  bad "record --inverted: $(cat rec.err)"
"$py" - "$work/flame.svg" "$work/icicle.svg" << 'PY' && ok "browser: renders, hover, click zooms, reset, Ctrl-F and ?s= search; the same in an icicle graph" || bad "browser"
import re, struct, sys, zlib, xml.etree.ElementTree as E
from decimal import Decimal, ROUND_HALF_UP
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
path = sys.argv[1]
# The oracle: the frames as the file stores them (a subpath "M{first sample} {row}h{samples}" per
# frame, in the nested svg's sample and level units, its name by the path's data-names).
ns = '{http://www.w3.org/2000/svg}'
root = E.parse(path).getroot()
area = next(s for s in root.iter(ns + 'svg') if s.get('id') == 'frames')
total, levels = map(int, area.get('viewBox').split()[2:])
def to_fixed(x, digits):
    # JavaScript's toFixed: the double's exact value, a tie rounded up (Python's format rounds a
    # tie to even: 63 of 224 samples is 28.125%, shown as 28.13%, formatted 28.12).
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
def read_frames(root, area):
    names = [t.text for e in root.iter(ns + 'text') if e.get('id') == 'names' for t in e.iter(ns + 'tspan')]
    frames = {}
    for p in area.iter(ns + 'path'):
        for i, (s, row, n) in zip(p.get('data-names').split(), re.findall(r'M(\d+) (\d+)h(\d+)', p.get('d'))):
            frames.setdefault(names[int(i)], []).append((int(s), int(row), int(n), p.get('stroke')))
    return frames
frames = read_frames(root, area)
assert [f[2] for f in frames['all']] == [total], frames['all']
b_share = 100 * sum(f[2] for f in frames['path_b']) / total

def png_pixels(data): # 8-bit RGB(A), non-interlaced: what Chromium's screenshots are
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    pos, idat = 8, b''
    while pos < len(data):
        size, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if kind == b'IHDR':
            w, h, depth, colour = struct.unpack('>IIBB', body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b'IDAT':
            idat += body
        pos += 12 + size
    raw, rows, prev = zlib.decompress(idat), [], bytearray(w * bpp)
    for y in range(h):
        line = raw[y * (w * bpp + 1):(y + 1) * (w * bpp + 1)]
        f, cur = line[0], bytearray(line[1:])
        for i in range(len(cur)):
            a = cur[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: cur[i] = (cur[i] + a) & 255
            elif f == 2: cur[i] = (cur[i] + b) & 255
            elif f == 3: cur[i] = (cur[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(cur)
        prev = cur
    return lambda x, y: tuple(rows[y][x * bpp:x * bpp + 3])

def browser(scripts, graph=None):
    opts = webdriver.ChromeOptions()
    opts.binary_location = '/usr/bin/chromium'
    for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
        opts.add_argument(a)
    if not scripts:
        opts.add_experimental_option('prefs', {'profile.managed_default_content_settings.javascript': 2})
    d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
    d.set_window_size(1300, int((graph if graph is not None else root).get('height')) + 200)
    return d

# Without scripts the static picture is the graph: the middle of each wide frame has its
# name's colour, where the file's geometry puts it.
x0, y0 = float(area.get('x')), float(area.get('y'))
px, fh = float(area.get('width')) / total, float(area.get('height')) / levels
driver = browser(False)
try:
    driver.get('file://' + path)
    assert not driver.find_elements(By.CSS_SELECTOR, 'g.func_g') # nothing built: no script ran
    pixel = png_pixels(driver.get_screenshot_as_png())
    checked = 0
    for name, fs in frames.items():
        for s, row, n, colour in fs:
            if n * px < 8: continue
            want = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
            # (the frame's last pixel row: under the label's descenders)
            got = pixel(int(x0 + (s + n / 2) * px), int(y0 + (row + 0.95) * fh))
            assert max(abs(a - b) for a, b in zip(got, want)) <= 2, (name, got, want)
            checked += 1
    assert checked >= 6, checked
finally:
    driver.quit()

# With scripts: the interactive graph over the same picture (no element per frame: the script
# reads the frames back from the paths). Every check compares with the file's own geometry.
from selenium.webdriver.common.actions.action_builder import ActionBuilder
def interactive(path, inverted):
    root = E.parse(path).getroot()
    area = next(s for s in root.iter(ns + 'svg') if s.get('id') == 'frames')
    total, levels = map(int, area.get('viewBox').split()[2:])
    assert (area.get('data-inverted') == '1') == inverted
    frames = read_frames(root, area)
    x0, y0, aw = float(area.get('x')), float(area.get('y')), float(area.get('width'))
    fh = float(area.get('height')) / levels
    inside = 0.88 if inverted else 0.95  # a frame's last pixel rows: under its label, above the gap
    rgb = lambda c: tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))
    near = lambda got, want, tol=3: max(abs(a - b) for a, b in zip(got, want)) <= tol
    driver = browser(True, root)
    try:
        driver.get('file://' + path)
        assert driver.find_elements(By.ID, 'matches')  # the script ran
        def view():
            box = driver.execute_script("return document.getElementById('frames').getAttribute('viewBox')")
            return [float(v) for v in box.split()]
        def at(name, fraction=0.5):  # a point of the first frame of that name, in the current view
            s, row, n, colour = frames[name][0]
            vx, _, vw, _ = view()
            return int(x0 + (s + n * fraction - vx) * aw / vw), int(y0 + (row + inside) * fh)
        def move(x, y):
            actions = ActionBuilder(driver)
            actions.pointer_action.move_to_location(x, y)
            actions.perform()
        def click(x, y):
            actions = ActionBuilder(driver)
            actions.pointer_action.move_to_location(x, y).click()
            actions.perform()
        def pixels():
            return png_pixels(driver.get_screenshot_as_png())
        # The root on the top row when inverted, on the bottom row otherwise.
        assert frames['all'][0][1] == (0 if inverted else levels - 1)
        pixel = pixels()
        for name in ['all', 'main', 'path_a', 'path_b']:
            assert near(pixel(*at(name)), rgb(frames[name][0][3])), (name, pixel(*at(name)))
        # Hover names the frame on the status line.
        move(*at('path_b'))
        details = driver.find_element(By.ID, 'details').text
        assert details in [f'Function: path_b ({n:,} samples, {to_fixed(100 * n / total, 2)}%)'
                           for s, row, n, colour in frames['path_b']], details
        # A click zooms: path_b spans the width (its whole row is path_b: path_a, its sibling, is
        # cut away), its callee spin is drawn under it, main (an ancestor) stays full width behind
        # a half-white veil; a label names path_b.
        s, row, n, colour = frames['path_b'][0]
        click(*at('path_b'))
        assert view() == [s, 0, n, levels], (view(), s, n)
        assert driver.find_element(By.ID, 'unzoom').is_displayed()
        pixel = pixels()
        y = int(y0 + (row + inside) * fh)
        for x in [x0 + 2, x0 + aw / 3, x0 + aw - 3]:
            assert near(pixel(int(x), y), rgb(colour)), (x, pixel(int(x), y), colour)
        spin = [f for f in frames['spin'] if s <= f[0] < s + n and f[1] == row + (1 if inverted else -1)]
        assert spin and near(pixel(int(x0 + (spin[0][0] - s + spin[0][2] / 2) * aw / n),
                                   int(y0 + (spin[0][1] + inside) * fh)), rgb(spin[0][3]))
        main_colour = rgb(frames['main'][0][3])
        veiled = tuple((c + 255) / 2 for c in main_colour)
        mx, my = int(x0 + aw - 3), int(y0 + (frames['main'][0][1] + inside) * fh)
        assert near(pixel(mx, my), veiled, 4), (pixel(mx, my), veiled)
        texts = [t.get_attribute('textContent') for t in driver.find_elements(By.TAG_NAME, 'text')
                 if t.is_displayed()]
        assert 'path_b' in texts and 'path_a' not in texts, texts
        driver.save_screenshot(('icicle-' if inverted else '') + 'zoomed.png')
        # Reset Zoom: the whole graph again, path_a where the file puts it.
        driver.find_element(By.ID, 'unzoom').click()
        assert view() == [0, 0, total, levels], view()
        assert near(pixels()(*at('path_a')), rgb(frames['path_a'][0][3]))
        # Ctrl-F asks for a pattern; the matches turn magenta and the share of samples shows.
        b_share = 100 * sum(f[2] for f in frames['path_b']) / total
        ActionChains(driver).key_down(Keys.CONTROL).send_keys('f').key_up(Keys.CONTROL).perform()
        alert = driver.switch_to.alert
        alert.send_keys('^path_b$')
        alert.accept()
        marks = driver.find_element(By.ID, 'matches').get_attribute('d')
        assert sorted(re.findall(r'M\d+ \d+h\d+', marks)) == sorted(
            f'M{s} {row}h{n}' for s, row, n, c in frames['path_b']), marks
        pixel = pixels()
        assert near(pixel(*at('path_b')), (230, 0, 230)), pixel(*at('path_b'))
        assert not near(pixel(*at('main')), (230, 0, 230), 40)
        matched = driver.find_element(By.ID, 'matched').text
        shown_share = float(re.match(r'Matched: ([\d.]+)%', matched).group(1))
        assert abs(shown_share - b_share) <= 0.051 and 5 < b_share < 60, (matched, b_share)
        driver.save_screenshot(('icicle-' if inverted else '') + 'searched.png')
        # Escape clears it; ?s= in the URL searches on load.
        ActionChains(driver).send_keys(Keys.ESCAPE).perform()
        assert driver.find_element(By.ID, 'matches').get_attribute('d') == ''
        assert near(pixels()(*at('path_b')), rgb(colour))
        driver.get('file://' + path + '?s=path_')
        matched = driver.find_element(By.ID, 'matched').text
        assert matched.startswith('Matched: '), matched
        return f'zoom, reset, search (path_b {shown_share}% of {total} samples), ?s= ({matched})'
    finally:
        driver.quit()

said = interactive(path, False)
print(f'static picture ({checked} frames where the file puts them); {said}')
print('icicle: ' + interactive(sys.argv[2], True))
PY
[ -n "${EHELF_KEEP_SCREENSHOTS:-}" ] && cp "$work"/*.png "$EHELF_KEEP_SCREENSHOTS"/ 2> /dev/null
exit $fail
