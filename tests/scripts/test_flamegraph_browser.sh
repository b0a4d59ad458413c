#!/usr/bin/env bash
# The flame graph as a person sees it, in headless Chromium driven by Selenium (Debian's
# chromium, chromium-driver, python3-selenium): it renders; hovering a frame names it on the
# status line; clicking a frame zooms (the frame spans the width, its siblings hide); Reset Zoom
# undoes it; Ctrl-F asks for a pattern and highlights the matches with the share of samples under
# them (compared with the folded stacks of the same recording); ?s= in the URL does the same.
source "$(dirname "$0")/common.sh" "$@"
build=$(cd "$build" && pwd)
cd "$work" || exit 1
py=/usr/bin/python3 # Debian's, with python3-selenium (another python3 first on PATH may lack it)
if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null ||
  ! "$py" -c 'import selenium' 2> /dev/null; then
  echo "SKIP: chromium, chromium-driver or python3-selenium is missing (scripts/setup.sh installs them)"
  exit 0
fi
if ! "$ehelf" record -q -f folded -o flame.folded -- "$build/tests/fixtures/record_target" split 200 2> rec.err; then
  grep -q perf_event_paranoid rec.err && { echo "SKIP: $(cat rec.err)"; exit 0; }
  bad "record: $(cat rec.err)"
  exit 1
fi
# The same profile as a graph: ehelf record writes it from the same stacks as the folded file.
"$ehelf" record -q -o flame.svg -- "$build/tests/fixtures/record_target" split 200 2> rec.err ||
  bad "record svg: $(cat rec.err)"
"$py" - "$work/flame.svg" << 'PY' && ok "browser: renders, hover, click zooms, reset, Ctrl-F and ?s= search" || bad "browser"
import re, struct, sys, zlib, xml.etree.ElementTree as E
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
path = sys.argv[1]
# The oracle: the frames as the file stores them (one path per name, a subpath
# "M{first sample} {row}h{samples}" per frame, in the nested svg's sample and level units).
ns = '{http://www.w3.org/2000/svg}'
root = E.parse(path).getroot()
area = next(s for s in root.iter(ns + 'svg') if s.get('id') == 'frames')
total, levels = map(int, area.get('viewBox').split()[2:])
frames = {}
for p in area.iter(ns + 'path'):
    for s, row, n in re.findall(r'M(\d+) (\d+)h(\d+)', p.get('d')):
        frames.setdefault(p.find(ns + 'title').text, []).append((int(s), int(row), int(n), p.get('stroke')))
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

def browser(scripts):
    opts = webdriver.ChromeOptions()
    opts.binary_location = '/usr/bin/chromium'
    for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
        opts.add_argument(a)
    if not scripts:
        opts.add_experimental_option('prefs', {'profile.managed_default_content_settings.javascript': 2})
    d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
    d.set_window_size(1300, int(root.get('height')) + 200)
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

# With scripts: the interactive graph, built from the same data.
driver = browser(True)
try:
    driver.get('file://' + path)
    def frame(name):
        for g in driver.find_elements(By.CSS_SELECTOR, 'g.func_g'):
            if g.find_element(By.TAG_NAME, 'title').get_attribute('textContent').startswith(name + ' ('):
                return g
        raise AssertionError('no frame ' + name)

    def width(name):
        return float(frame(name).find_element(By.TAG_NAME, 'rect').get_attribute('width'))

    def shown(name):  # any frame of that name is displayed
        return any(g.value_of_css_property('display') != 'none'
                   for g in driver.find_elements(By.CSS_SELECTOR, 'g.func_g')
                   if g.find_element(By.TAG_NAME, 'title').get_attribute('textContent').startswith(name + ' ('))

    assert len(driver.find_elements(By.CSS_SELECTOR, 'g.func_g')) >= 6
    driver.save_screenshot('rendered.png')
    before_a, before_b = width('path_a'), width('path_b')
    assert 0 < before_b < before_a < 1180, (before_a, before_b)
    # Hover names the frame on the status line.
    ActionChains(driver).move_to_element(frame('path_b').find_element(By.TAG_NAME, 'rect')).perform()
    details = driver.find_element(By.ID, 'details').text
    assert details in [f'Function: path_b ({n:,} samples, {100 * n / total:.2f}%)'
                       for s, row, n, colour in frames['path_b']], details
    # A click zooms: path_b spans the width, path_a (a sibling) hides, main (an ancestor) stays.
    frame('path_b').find_element(By.TAG_NAME, 'rect').click()
    assert abs(width('path_b') - 1180) < 0.5, width('path_b')
    assert not shown('path_a') and shown('main') and shown('spin')
    assert driver.find_element(By.ID, 'unzoom').is_displayed()
    driver.save_screenshot('zoomed.png')
    driver.find_element(By.ID, 'unzoom').click()
    assert abs(width('path_a') - before_a) < 0.5 and shown('path_a')
    # Ctrl-F asks for a pattern; the matches turn magenta and the share of samples shows.
    ActionChains(driver).key_down(Keys.CONTROL).send_keys('f').key_up(Keys.CONTROL).perform()
    alert = driver.switch_to.alert
    alert.send_keys('^path_b$')
    alert.accept()
    fill = frame('path_b').find_element(By.TAG_NAME, 'rect').get_attribute('fill')
    assert fill == 'rgb(230,0,230)', fill
    assert frame('main').find_element(By.TAG_NAME, 'rect').get_attribute('fill') != fill
    matched = driver.find_element(By.ID, 'matched').text
    shown_share = float(re.match(r'Matched: ([\d.]+)%', matched).group(1))
    assert abs(shown_share - b_share) <= 0.051 and 5 < b_share < 60, (matched, b_share)
    driver.save_screenshot('searched.png')
    # Escape clears it; ?s= in the URL searches on load.
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    assert frame('path_b').find_element(By.TAG_NAME, 'rect').get_attribute('fill') != fill
    driver.get('file://' + path + '?s=path_')
    matched = driver.find_element(By.ID, 'matched').text
    assert matched.startswith('Matched: '), matched
    print(f'static picture ({checked} frames where the file puts them), zoom, reset, search (path_b {shown_share}% of {total} samples), ?s= ({matched})')
finally:
    driver.quit()
PY
[ -n "${EHELF_KEEP_SCREENSHOTS:-}" ] && cp "$work"/*.png "$EHELF_KEEP_SCREENSHOTS"/ 2> /dev/null
exit $fail
