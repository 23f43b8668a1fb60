"""Opens POI pages of `tourpack review` in headless Chromium (through
Selenium) and writes what their caption tracks did as JSON, for
ReviewCommandTests to hold against package.json and the .vtt files.

    python3 review_captions.py OUT_JSON POI_URL...

For each page: every player's `<track>` (its attributes, the content type
the server sent it with, its cues once loaded in `hidden` mode), and the
text the page shows under the player once it is moved into each cue; the
console too. The script asserts nothing itself.
"""

import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

out, pages = sys.argv[1], sys.argv[2:]

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100",
             "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-default-apps"]:
    options.add_argument(flag)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(30)

report = {"pages": {}, "console": []}


def wait_for(script, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if driver.execute_script(script):
            return True
        time.sleep(0.1)
    return False


try:
    for url in pages:
        driver.get(url)
        players = driver.execute_script("return document.querySelectorAll('audio').length")
        # The players need their metadata before they can be moved into a cue.
        wait_for("return Array.from(document.querySelectorAll('audio')).every(a => a.error || a.readyState >= 1)", timeout=30)
        # Every track loaded (or failed): hidden mode, as the page's script sets it, loads and times the cues.
        wait_for("""return Array.from(document.querySelectorAll('audio')).every(a => {
                      if (a.textTracks.length === 0) { return true; }
                      const track = a.querySelector('track');
                      return track.readyState >= 2 && a.textTracks[0].cues !== null;
                    })""")
        phases = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const sections = Array.from(document.querySelectorAll('section.phase'));
            Promise.all(sections.map(async section => {
              const audio = section.querySelector('audio');
              const element = audio.querySelector('track');
              const line = section.querySelector('.caption-cue');
              const phase = {phase: section.dataset.phase, tracks: audio.textTracks.length, captionLine: line !== null};
              if (!element) { return phase; }
              const track = audio.textTracks[0];
              phase.kind = element.kind;
              phase.srclang = element.srclang;
              phase.label = element.label;
              phase.isDefault = element.default;
              phase.src = element.src;
              phase.readyState = element.readyState;
              phase.mode = track.mode;
              try {
                const answer = await fetch(element.src);
                phase.contentType = answer.headers.get('content-type');
              } catch (error) {
                phase.contentType = 'fetch failed: ' + error;
              }
              phase.cues = track.cues ? track.cues.length : null;
              phase.cueTexts = track.cues ? Array.from(track.cues).map(cue => cue.getCueAsHTML().textContent) : [];
              // The line under the player follows the playhead: into each cue in turn.
              phase.shown = [];
              const cues = track.cues ? Array.from(track.cues) : [];
              for (const cue of cues) {
                await new Promise(resolve => {
                  const settle = () => setTimeout(resolve, 150);
                  const timer = setTimeout(resolve, 3000);
                  track.addEventListener('cuechange', () => { clearTimeout(timer); settle(); }, {once: true});
                  audio.currentTime = (cue.startTime + cue.endTime) / 2;
                });
                phase.shown.push({text: line.textContent, elements: line.children.length});
              }
              return phase;
            })).then(done, error => done({error: String(error)}));""")
        report["pages"][url] = {
            "title": driver.execute_script("return document.querySelector('h1').textContent"),
            "players": players,
            "phases": phases,
        }
    for entry in driver.get_log("browser"):
        report["console"].append({"level": entry.get("level"), "message": entry.get("message")})
finally:
    driver.quit()

with open(out, "w") as handle:
    json.dump(report, handle, indent=1, sort_keys=True)
print("pages: %d" % len(report["pages"]))
