"""Opens `tourpack web`'s demo app in headless Chromium and reports what it
verified: for WebClientTests' root-of-trust case (the page walks the site's
roots with WebCrypto, then takes or refuses the catalogue).

    python3 web_root.py URL OUT_JSON [REFRESH_AFTER_FILE]

Once the page has started, the script writes OUT_JSON.first. With
REFRESH_AFTER_FILE, it then waits until that file exists, presses "Check
for updates" and reports again.
"""

import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

url, out = sys.argv[1], sys.argv[2]
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]:
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(30)
report = {"error": None, "seen": []}


def seen():
    return driver.execute_script("""
        const b = document.getElementById('catalog-banner');
        return {catalog: document.body.dataset.catalogState, kind: b.dataset.errorKind || null, message: b.title || null,
                tours: Array.from(document.querySelectorAll('li[data-tour-id]')).map(e => e.dataset.cell)};
    """)


try:
    driver.get(url)
    deadline = time.time() + 30
    while driver.execute_script("return document.body.dataset.ready") != "true" and time.time() < deadline:
        time.sleep(0.1)
    report["seen"].append(seen())
    json.dump(report, open(out + ".first", "w"))
    if len(sys.argv) > 3:
        while not os.path.exists(sys.argv[3]) and time.time() < deadline + 60:
            time.sleep(0.1)
        driver.execute_script("document.querySelector('[data-action=refresh]').click()")
        deadline = time.time() + 30
        while driver.execute_script("return document.body.dataset.catalogState") == "verified" and time.time() < deadline:
            time.sleep(0.1)
        report["seen"].append(seen())
except Exception as error:
    report["error"] = "%s: %s" % (type(error).__name__, error)
finally:
    driver.quit()
    json.dump(report, open(out, "w"))
