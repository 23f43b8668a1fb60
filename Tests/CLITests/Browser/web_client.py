"""Drives the web client's demo app (`tourpack web`) in headless Chromium
(Debian's chromium and chromium-driver, through Selenium), with DevTools
network emulation, through every cell of the offline screens' state matrix,
and writes what it saw as JSON for WebClientTests to judge.

    python3 web_client.py CONFIG_JSON OUT_JSON

CONFIG_JSON names: "url" (the first line `tourpack web` printed), "site" (the
published site folder), "article" (WebClient.md, whose tables hold the
copy), "republish" (argv lists run one after another to publish an edit),
"env" (added to their environment) and "cwd".

The script stops at the first thing that does not happen (an exception,
reported in OUT_JSON as "error" with what it waited for); the checks of
what did happen are WebClientTests'.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

config = json.load(open(sys.argv[1]))
out_path = sys.argv[2]
base = config["url"]
# A probe every second; slower than 1.5 s is "poor" (the emulated latency is 2.5 s); partial files stored every 16 KiB.
start = base + "?probe=1&poor=1500&probeTimeout=4000&flush=16384"
SLOW = 2500

report = {"cells": {}, "steps": [], "console": [], "stats": None, "error": None}


def step(name, **facts):
    report["steps"].append({"step": name, **facts})


# The copy, as the article's tables give it: (pack state, connectivity) -> (copy, buttons).
article = open(config["article"], encoding="utf-8").read()
matrix = {}
for row in re.finditer(r"^\| `([a-z_]+)` \| `([a-z]+)` \| (.+?) \| (.*?) \|$", article, re.M):
    matrix[(row.group(1), row.group(2))] = (row.group(3).strip(), [b.strip() for b in row.group(4).split(",") if b.strip()])
catalogue = {}
for row in re.finditer(r"^\| `catalogue: ([a-z]+)` \| (.+?) \|$", article, re.M):
    catalogue[row.group(1)] = row.group(2).strip()
report["matrixRows"] = len(matrix)
failed_copy = None
for match in re.finditer(r'adds "([^"]+)"', " ".join(article.split())):
    failed_copy = match.group(1)
    break


def copy_pattern(copy):
    return "^" + re.escape(copy).replace(re.escape("{size}"), r"[0-9]+\.[0-9] MB").replace(re.escape("{percent}"), r"[0-9]{1,3}") + "$"


options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100",
             "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio"]:
    options.add_argument(flag)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(30)
driver.set_script_timeout(120)

def network(offline=False, latency=0, kbps=None):
    """DevTools network emulation: offline, or a latency and a download rate."""
    throughput = -1 if kbps is None else int(kbps * 1024)
    driver.set_network_conditions(offline=offline, latency=latency, download_throughput=throughput, upload_throughput=throughput)


def wait_for(what, script, timeout=30, *args):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.execute_script(script, *args)
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError("timed out (%ss) waiting for %s" % (timeout, what))


def tours():
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('[data-tour-id][data-pack-state]')).filter(e => e.tagName === 'LI').map(e => ({
          id: e.dataset.tourId, state: e.dataset.packState, job: e.dataset.job || null, cell: e.dataset.cell,
          copy: e.querySelector('[data-copy]').textContent, failure: (e.querySelector('[data-failure]') || {}).textContent || null,
          failureKind: e.querySelector('[data-failure]') ? e.querySelector('[data-failure]').dataset.failure : null,
          downloaded: Number(e.dataset.downloadedBytes || 0), total: Number(e.dataset.totalBytes || 0),
          actions: Array.from(e.querySelectorAll('button[data-action]')).map(b => b.dataset.action)}));
    """)


def tour(tour_id):
    return next(t for t in tours() if t["id"] == tour_id)


def connectivity():
    return driver.execute_script("return document.body.dataset.connectivity")


def see(tour_id, state, conn, timeout=30):
    """Waits for the tour's cell and records what the page shows in it."""
    wait_for("%s to be %s/%s" % (tour_id, state, conn),
             "const e = document.querySelector('li[data-tour-id=\"' + arguments[0] + '\"]');"
             "return e && e.dataset.cell === arguments[1] + '/' + arguments[2] && document.body.dataset.connectivity === arguments[2];",
             timeout, tour_id, state, conn)
    seen = tour(tour_id)
    expected = matrix.get((state, conn))
    report["cells"]["%s/%s" % (state, conn)] = {
        "copy": seen["copy"], "actions": seen["actions"],
        "expectedCopy": expected[0] if expected else None, "expectedActions": expected[1] if expected else None,
        "copyMatches": bool(expected and re.match(copy_pattern(expected[0]), seen["copy"])),
    }
    return seen


def click(action, tour_id=None):
    selector = '[data-action="%s"]' % action + ('[data-tour-id="%s"]' % tour_id if tour_id else "")
    driver.execute_script("document.querySelector(arguments[0]).click()", selector)


def stats():
    """Every site request `tourpack web` answered, read from the server itself (not through the emulated network)."""
    with urllib.request.urlopen(base + "debug/stats") as answer:
        return json.loads(answer.read())["requests"]


def play_all(tour_id):
    """Opens the tour's page and plays every narration to its end; each one's duration, cues and captions shown."""
    driver.execute_script("location.hash = '#tour=' + arguments[0]", tour_id)
    wait_for("the tour's narrations", "return document.querySelectorAll('#tour audio[data-poi-id]').length > 0")
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        (async () => {
          const results = [];
          for (const audio of document.querySelectorAll('#tour audio[data-poi-id]')) {
            const track = audio.textTracks[0];
            if (track) track.mode = 'showing';
            let shown = 0;
            if (track) track.addEventListener('cuechange', () => { if (track.activeCues && track.activeCues.length) shown += 1; });
            const error = await new Promise(resolve => {
              if (audio.readyState >= 1) return resolve(null);
              audio.addEventListener('loadedmetadata', () => resolve(null), {once: true});
              audio.addEventListener('error', () => resolve(String(audio.error && audio.error.message || audio.error && audio.error.code)), {once: true});
              audio.load();
            });
            if (error !== null) { results.push({poi: audio.dataset.poiId, phase: audio.dataset.phase, error}); continue; }
            const ended = new Promise(resolve => audio.addEventListener('ended', () => resolve(true), {once: true}));
            audio.playbackRate = 2;
            await audio.play();
            const finished = await Promise.race([ended, new Promise(resolve => setTimeout(() => resolve(false), 60000))]);
            await new Promise(resolve => setTimeout(resolve, 50));
            results.push({poi: audio.dataset.poiId, phase: audio.dataset.phase, src: audio.currentSrc, duration: audio.duration,
                          ended: finished, cues: track && track.cues ? track.cues.length : 0, shown});
          }
          return results;
        })().then(done, e => done({error: String(e)}));
    """)


def page_sha256(tour_id):
    """The SHA-256 of each narration as the page fetches it (through the service worker), by path."""
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        (async () => {
          const found = {};
          for (const audio of document.querySelectorAll('#tour audio[data-poi-id]')) {
            const bytes = await (await fetch(audio.getAttribute('src'))).arrayBuffer();
            const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
            found[decodeURIComponent(audio.getAttribute('src').split('/').slice(2).join('/'))] = Array.from(digest).map(b => b.toString(16).padStart(2, '0')).join('');
          }
          return found;
        })().then(done, e => done({error: String(e)}));
    """)


def site_manifests():
    """Each package's package.json as the site's catalogue names it, by tour."""
    catalog = json.load(open(os.path.join(config["site"], "catalog.json")))
    return {t["tourId"]: json.load(open(os.path.join(config["site"], t["packages"][0]["manifest"]["path"]))) for t in catalog["tours"]}


def reopen():
    driver.get(start)
    wait_for("the page to start", "return document.body.dataset.ready === 'true' || document.body.dataset.startError")
    error = driver.execute_script("return document.body.dataset.startError || null")
    if error:
        raise RuntimeError("the page could not start: " + error)


try:
    network()
    reopen()
    report["webCrypto"] = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        crypto.subtle.generateKey({name: 'Ed25519'}, false, ['sign', 'verify']).then(() => done('Ed25519'), e => done(String(e)));
    """)
    listed = tours()
    step("listed", tours=listed)
    by_size = sorted(listed, key=lambda t: -int(re.search(r"([0-9.]+) MB", t["copy"]).group(1).replace(".", "")))
    big, small = by_size[0]["id"], by_size[-1]["id"]

    # none: online, poor (a slow probe), offline (the browser's own offline).
    see(big, "none", "online")
    network(latency=SLOW)
    see(big, "none", "poor")
    network(offline=True)
    see(big, "none", "offline")
    step("offline", onLine=driver.execute_script("return navigator.onLine"))
    network()
    see(big, "none", "online")

    # A download cancelled, then one throttled: downloading online, poor and offline.
    network(kbps=4)
    click("download", small)
    wait_for("the small tour to download", "return document.querySelector('li[data-tour-id=\"' + arguments[0] + '\"]').dataset.packState === 'downloading'", 30, small)
    click("cancel", small)
    see(small, "none", "online")
    step("cancelled", tour=tour(small))
    network(kbps=12)

    # A download, its tab closed once a file holds at least 8 KiB in IndexedDB with at least 16 KiB
    # still to come (at 4 KB/s, seconds away); the page opened again resumes it from the last byte stored.
    network(kbps=4)
    click("download", big)
    see(big, "downloading", "online")
    sizes = {entry["sha256"]: entry["sizeBytes"] for entry in site_manifests()[big]["audio"]}
    deadline = time.time() + 90
    held = None
    while time.time() < deadline:
        held = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            (async () => {
              const storage = globalThis.tourpack.library.storage;
              const partials = {};
              for (const sha of await storage.listPartials()) partials[sha] = ((await storage.partial(sha)) || {bytes: 0}).bytes;
              return {partials, files: await storage.listFiles()};
            })().then(done, e => done({error: String(e)}));
        """)
        target = [sha for sha, count in held.get("partials", {}).items() if count >= 8192 and sizes.get(sha, 0) - count >= 16384]
        if target:
            report["resumeTarget"] = {"sha256": target[0], "bytes": held["partials"][target[0]]}
            report["filesAtClose"] = held["files"]
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("no file held 8 KiB with 16 KiB to come: %s" % held)
    before_close = tour(big)
    requests_before = stats()
    old = driver.current_window_handle
    driver.switch_to.new_window("tab")
    fresh = driver.current_window_handle
    driver.switch_to.window(old)
    # The tab goes at once, mid-file, as when the browser kills it: no script of it runs after this.
    try:
        driver.execute_cdp_cmd("Page.crash", {})
    except Exception:
        pass
    report["requestsAtCrash"] = len(stats())
    driver.close()
    driver.switch_to.window(fresh)
    network(kbps=12)
    reopen()
    step("closed", before=before_close, requestsBefore=len(requests_before))
    report["requestsBeforeClose"] = len(requests_before)
    report["closedAt"] = before_close

    # The resumed download, online, poor and offline.
    see(big, "downloading", "online")
    network(latency=SLOW, kbps=12)
    see(big, "downloading", "poor")
    network(offline=True)
    see(big, "downloading", "offline")
    network()
    see(big, "cached", "online", timeout=90)
    report["afterResume"] = stats()

    # Cached, in every connectivity.
    network(latency=SLOW)
    see(big, "cached", "poor")
    network(offline=True)
    see(big, "cached", "offline")

    # Reload with the network off: the service worker opens the page and plays every narration, captions showing.
    driver.refresh()
    wait_for("the page offline", "return document.body.dataset.ready === 'true' || document.body.dataset.startError")
    step("offline reload", connectivity=connectivity(), onLine=driver.execute_script("return navigator.onLine"))
    report["offlinePlay"] = play_all(big)
    report["installedBefore"] = page_sha256(big)
    report["siteBefore"] = site_manifests()
    driver.execute_script("location.hash = ''")

    # A republished edit: update_available everywhere, then the update.
    network()
    for argv in config["republish"]:
        run = subprocess.run(argv, cwd=config["cwd"], env={**os.environ, **config["env"]}, capture_output=True, text=True)
        step("republish", argv=argv[:2], status=run.returncode, stderr=run.stderr[-2000:])
        if run.returncode != 0:
            raise RuntimeError("republishing failed: %s" % run.stderr[-2000:])
    report["siteAfter"] = site_manifests()
    click("refresh")
    see(big, "update_available", "online")
    network(latency=SLOW)
    see(big, "update_available", "poor")
    network(offline=True)
    see(big, "update_available", "offline")
    network()
    see(big, "update_available", "online")
    click("update", big)
    see(big, "cached", "online", timeout=90)
    driver.execute_script("location.hash = '#tour=' + arguments[0]", big)
    wait_for("the updated narrations", "return document.querySelectorAll('#tour audio[data-poi-id]').length > 0")
    report["installedAfter"] = page_sha256(big)
    driver.execute_script("location.hash = ''")

    # A catalogue with one flipped byte, then a replay of generation 1: refused with the banner's copy, the pack still plays.
    live = os.path.join(config["site"], "catalog.json")
    saved = open(live, "rb").read(), open(live + ".sig", "rb").read()
    flipped = bytearray(saved[0])
    flipped[len(flipped) // 2] ^= 0x01
    open(live, "wb").write(bytes(flipped))
    click("refresh")
    wait_for("the refusal", "return document.body.dataset.catalogState === 'refused'")
    report["tampered"] = driver.execute_script(
        "const b = document.getElementById('catalog-banner'); return {text: b.textContent, kind: b.dataset.errorKind, title: b.title};")
    report["tamperedExpected"] = catalogue.get("refused")
    report["tamperedState"] = tour(big)
    report["tamperedPlay"] = play_all(big)
    driver.execute_script("location.hash = ''")
    shutil.copyfile(os.path.join(config["site"], "generations", "1.json"), live)
    shutil.copyfile(os.path.join(config["site"], "generations", "1.json.sig"), live + ".sig")
    click("refresh")
    wait_for("the rollback's refusal", "return document.getElementById('catalog-banner').dataset.errorKind === 'rollbackRefused'")
    report["rollback"] = driver.execute_script(
        "const b = document.getElementById('catalog-banner'); return {text: b.textContent, kind: b.dataset.errorKind, state: document.body.dataset.catalogState};")
    report["rollbackPlay"] = play_all(big)
    driver.execute_script("location.hash = ''")
    open(live, "wb").write(saved[0])
    open(live + ".sig", "wb").write(saved[1])
    click("refresh")
    wait_for("the catalogue verified again", "return document.body.dataset.catalogState === 'verified'")

    # Delete: back to none; storage use from navigator.storage.estimate().
    click("delete", big)
    see(big, "none", "online")
    report["storage"] = driver.execute_script("const s = document.getElementById('storage'); return {...s.dataset, text: s.textContent};")

    # Queued behind another download, then failed (a blob that is not its SHA-256), then retried.
    small_audio = site_manifests()[small]["audio"][0]
    blob = os.path.join(config["site"], "blobs", "sha256", small_audio["sha256"][:2], small_audio["sha256"])
    original = open(blob, "rb").read()
    open(blob, "wb").write(bytes((b + 1) % 256 for b in original))
    network(kbps=16)
    click("download", big)
    click("download", small)
    wait_for("the second download to queue", "return document.querySelector('li[data-tour-id=\"' + arguments[0] + '\"]').dataset.job === 'queued'", 30, small)
    report["queued"] = tour(small)
    network()
    see(big, "cached", "online", timeout=90)
    wait_for("the failure", "return document.querySelector('li[data-tour-id=\"' + arguments[0] + '\"]').dataset.job === 'failed'", 60, small)
    report["failed"] = tour(small)
    report["failedPattern"] = copy_pattern(failed_copy).replace(re.escape("{reason}"), ".+") if failed_copy else None
    report["failedMatches"] = bool(failed_copy and re.match(report["failedPattern"], report["failed"]["failure"] or ""))
    open(blob, "wb").write(original)
    click("download", small)
    report["retried"] = see(small, "cached", "online", timeout=60)
    report["stats"] = stats()
except Exception as error:  # reported, judged by the Swift test
    report["error"] = "%s: %s" % (type(error).__name__, error)
    try:
        report["lastTours"] = tours()
        report["body"] = driver.execute_script("return {...document.body.dataset, banner: document.getElementById('catalog-banner').textContent}")
    except Exception:
        pass
finally:
    try:
        for entry in driver.get_log("browser"):
            report["console"].append({"level": entry.get("level"), "message": entry.get("message")})
    except Exception:
        pass
    driver.quit()
    json.dump(report, open(out_path, "w"), indent=2)
