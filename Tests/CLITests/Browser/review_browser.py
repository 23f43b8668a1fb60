"""Walks `tourpack review`'s pages in headless Chromium (Debian's chromium and
chromium-driver, through Selenium) and writes what the browser saw as JSON,
for ReviewCommandTests to hold against package.json and the tile packs.

    python3 review_browser.py START_URL OUT_JSON [SCREENSHOT_PNG]

START_URL is the packages page (http://127.0.0.1:PORT/ or file:///…/index.html).
The script asserts nothing itself: it reports the packages table, each tour
page (markers, trigger circles, route, coverage, tiles as drawn), each POI
page (every audio element's decoded duration, findings), the console and
every request the browser sent.
"""

import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

start, out = sys.argv[1], sys.argv[2]
screenshot = sys.argv[3] if len(sys.argv) > 3 else None

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100",
             "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-default-apps"]:
    options.add_argument(flag)
options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(30)

report = {"packages": [], "tours": {}, "pois": {}, "console": [], "requests": []}


def drain_logs():
    for entry in driver.get_log("browser"):
        report["console"].append({"level": entry.get("level"), "message": entry.get("message")})
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            report["requests"].append(message["params"]["request"]["url"])


def wait_for(script, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if driver.execute_script(script):
            return True
        time.sleep(0.1)
    return False


try:
    driver.get(start)
    report["packages"] = driver.execute_script("""
        return Array.from(document.querySelectorAll('tr.package')).map(row => {
          const cells = {};
          row.querySelectorAll('td').forEach(td => {
            const data = Object.assign({}, td.dataset);
            cells[td.classList[0]] = {text: td.textContent.trim(), data: data};
          });
          return {package: row.dataset.package, href: row.querySelector('td.tour a').href, cells: cells};
        });""")
    report["summary"] = driver.execute_script("return document.querySelector('p.summary').textContent")
    drain_logs()

    for row in report["packages"]:
        driver.get(row["href"])
        ready = wait_for("return document.body.dataset.mapReady === 'true'")
        # Every tile image Leaflet made has finished (loaded, or failed).
        wait_for("""return Array.from(document.querySelectorAll('img.leaflet-tile'))
                    .every(img => img.complete)""")
        time.sleep(0.3)
        tour = driver.execute_script("""
            const tiles = Array.from(document.querySelectorAll('img.leaflet-tile'))
              .filter(img => !img.src.startsWith('data:'))
              .map(img => ({src: img.src, loaded: img.complete && img.naturalWidth > 0, width: img.naturalWidth}));
            return {
              title: document.querySelector('h1').textContent,
              markers: document.querySelectorAll('img.leaflet-marker-icon').length,
              markerTitles: Array.from(document.querySelectorAll('img.leaflet-marker-icon')).map(m => m.title),
              triggers: document.querySelectorAll('path.trigger').length,
              routes: document.querySelectorAll('path.route').length,
              coverage: document.querySelectorAll('path.coverage').length,
              noTiles: document.querySelectorAll('.no-tiles').length,
              tiles: tiles,
              poiLinks: Array.from(document.querySelectorAll('tr.poi a')).map(a => a.href),
              zoom: null
            };""")
        tour["ready"] = ready
        report["tours"][row["package"]] = tour
        if screenshot and tour["tiles"] and not report.get("screenshot"):
            driver.save_screenshot(screenshot)
            report["screenshot"] = screenshot
        drain_logs()

        for link in tour["poiLinks"]:
            driver.get(link)
            # Ask every player for its metadata, then wait until each has it or failed.
            driver.execute_script("document.querySelectorAll('audio').forEach(a => { a.preload = 'auto'; a.load(); })")
            wait_for("""return Array.from(document.querySelectorAll('audio'))
                        .every(a => a.error || (a.readyState >= 1 && isFinite(a.duration)))""", timeout=30)
            # Then play each one's last 0.3 s to its end: the decoder must reach the last frame.
            driver.execute_script("""
                document.querySelectorAll('audio').forEach(a => {
                  a.dataset.ended = 'false';
                  if (a.error || !isFinite(a.duration)) { return; }
                  a.muted = true;
                  a.addEventListener('ended', () => { a.dataset.ended = 'true'; });
                  a.currentTime = Math.max(0, a.duration - 0.3);
                  a.play().catch(e => { a.dataset.playError = String(e); });
                });""")
            wait_for("""return Array.from(document.querySelectorAll('audio'))
                        .every(a => a.error || a.dataset.ended === 'true' || a.dataset.playError)""", timeout=15)
            page = driver.execute_script("""
                return {
                  title: document.querySelector('h1').textContent,
                  phases: Array.from(document.querySelectorAll('section.phase')).map(section => {
                    const audio = section.querySelector('audio');
                    return {
                      phase: section.dataset.phase,
                      highlighted: section.classList.contains('has-findings'),
                      narration: section.querySelector('.narration').textContent,
                      narrationMissing: section.querySelector('.narration').classList.contains('missing'),
                      src: audio.src,
                      expected: parseFloat(audio.dataset.duration),
                      duration: isFinite(audio.duration) ? audio.duration : null,
                      error: audio.error ? audio.error.code : null,
                      ended: audio.dataset.ended === 'true',
                      playError: audio.dataset.playError || null,
                      facts: Object.fromEntries(Array.from(section.querySelectorAll('dl.facts dd'))
                               .map(dd => [dd.className, dd.textContent])),
                      findings: Array.from(section.querySelectorAll('li.finding'))
                                  .map(li => ({path: li.dataset.path, check: li.dataset.check, text: li.textContent}))
                    };
                  })
                };""")
            report["pois"][link] = page
            drain_logs()
finally:
    try:
        drain_logs()
    finally:
        driver.quit()

with open(out, "w") as handle:
    json.dump(report, handle, indent=1, sort_keys=True)
print("pages: %d tours, %d POIs, %d requests, %d console entries" % (
    len(report["tours"]), len(report["pois"]), len(report["requests"]), len(report["console"])))
