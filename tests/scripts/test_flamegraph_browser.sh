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
import re, sys, xml.etree.ElementTree as E
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

path = sys.argv[1]
# The oracle for "Matched": the samples under path_b, from the graph's own titles.
ns = '{http://www.w3.org/2000/svg}'
root = E.parse(path).getroot()
counts = {}
for g in root.iter(ns + 'g'):
    t = g.find(ns + 'title').text
    m = re.match(r'(.*) \(([\d,]+) samples', t)
    counts.setdefault(m.group(1), []).append(int(m.group(2).replace(',', '')))
total = counts['all'][0]
b_share = 100 * sum(counts['path_b']) / total

opts = webdriver.ChromeOptions()
opts.binary_location = '/usr/bin/chromium'
for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
try:
    driver.set_window_size(1300, 700)
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
    assert details.startswith('Function: path_b ('), details
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
    print(f'zoom, reset, search (path_b {shown_share}% of {total} samples), ?s= ({matched})')
finally:
    driver.quit()
PY
[ -n "${EHELF_KEEP_SCREENSHOTS:-}" ] && cp "$work"/*.png "$EHELF_KEEP_SCREENSHOTS"/ 2> /dev/null
exit $fail
