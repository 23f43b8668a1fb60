#!/usr/bin/env python3
"""`make lint`'s check that the app's library stays embeddable.

TourpackClient is what an iOS or macOS app links, under Apache-2.0. So its
target graph (read from `swift package dump-package`) may reach only this
package's Swift targets and swift-crypto: no C target (no libcurl, FFmpeg,
libespeak-ng, whose GPL would bind the app), no swift-nio, no GRDB. And the
sources of those targets may import only what every Apple platform and
Linux have: Foundation (FoundationNetworking on Linux), Dispatch, the C
library, Crypto, and each other. Prints what breaks a rule and exits 1.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = "TourpackClient"
ALLOWED_PRODUCTS = {("Crypto", "swift-crypto")}
# Network: NWPathMonitor, in the one Darwin-only file, behind `#if canImport(Network)`.
ALLOWED_IMPORTS = {"Foundation", "FoundationNetworking", "Dispatch", "Glibc", "Musl", "Darwin", "Network", "Crypto"}


def main() -> int:
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True,
                                     capture_output=True, text=True).stdout)
    targets = {t["name"]: t for t in dump["targets"]}
    problems, reached, queue = [], set(), [LIBRARY]
    while queue:
        name = queue.pop()
        if name in reached:
            continue
        reached.add(name)
        target = targets.get(name)
        if target is None:
            problems.append(f"{name}: not a target of this package")
            continue
        if target["type"] != "regular":
            problems.append(f"{LIBRARY} reaches {name}, a {target['type']} target (C code the app would link)")
        for dependency in target["dependencies"]:
            if "byName" in dependency:
                queue.append(dependency["byName"][0])
            elif "target" in dependency:
                queue.append(dependency["target"][0])
            elif "product" in dependency:
                product, package = dependency["product"][0], dependency["product"][1]
                if (product, package) not in ALLOWED_PRODUCTS:
                    problems.append(f"{name} depends on {product} ({package}); {LIBRARY} may reach only swift-crypto")
    for name in sorted(reached):
        folder = os.path.join(ROOT, targets[name].get("path") or f"Sources/{name}")
        for base, _, files in os.walk(folder):
            for file in sorted(files):
                if not file.endswith(".swift"):
                    continue
                path = os.path.join(base, file)
                with open(path, encoding="utf-8") as handle:
                    for number, line in enumerate(handle, 1):
                        match = re.match(r"\s*(?:@\w+\s+)*(?:public |package |internal )?import\s+(?:\w+\s+)?([A-Za-z_][\w.]*)", line)
                        if match:
                            module = match.group(1).split(".")[0]
                            if module not in ALLOWED_IMPORTS and module not in reached:
                                problems.append(f"{os.path.relpath(path, ROOT)}:{number}: imports {module}, outside what {LIBRARY} may link")
    for problem in problems:
        print(f"check-client: {problem}", file=sys.stderr)
    if not problems:
        print(f"check-client: {LIBRARY} reaches {', '.join(sorted(reached))} and swift-crypto only")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
