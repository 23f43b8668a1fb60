#!/usr/bin/env python3
"""`make lint`'s check that the declared architecture is the real one.

SwiftPM's `--explicit-target-dependency-import-check error` accepts any
module a target reaches through its dependencies, so a target can import a
layer it never declared and the graph in Package.swift stops telling the
truth. This check reads `swift package dump-package` and every target's
sources, and fails on an import of a module the target does not declare
itself (one of its target dependencies, or a product it names: a product's
module has the product's name here, as every product this package uses
does), and on a declared dependency that none of its sources imports. The
toolchain's own modules are always allowed. Prints what breaks a rule, with
the file and line of an import, and exits 1.

The package is read with TOURPACK_BENCH=1 and TOURPACK_FUZZ=1 set, so the
targets those flags add (the benches, the libFuzzer entry) are checked
too, whatever the caller's environment.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLCHAIN = {
    "Foundation", "FoundationNetworking", "FoundationEssentials", "FoundationXML", "Dispatch", "Glibc", "Musl",
    "Darwin", "Android", "Bionic", "WinSDK", "ucrt", "CoreFoundation", "Synchronization", "Observation",
    "_Concurrency", "_StringProcessing", "RegexBuilder", "Testing", "XCTest", "os", "Swift", "PackageDescription",
    # Apple's SDK frameworks, behind `#if canImport(...)` in TourpackClient's one Darwin-only file.
    "Network",
}
IMPORT = re.compile(
    r"\s*(?:@[\w()\"., ]+\s+)*(?:public |package |internal |fileprivate |private )?import\s+"
    r"(?:typealias |struct |class |enum |protocol |let |var |func )?([A-Za-z_][\w]*)")


def declared(target: dict) -> set:
    modules = {target["name"]}
    for dependency in target["dependencies"]:
        for kind in ("byName", "target", "product"):
            if kind in dependency:
                modules.add(dependency[kind][0])
    return modules


def main() -> int:
    environment = dict(os.environ, TOURPACK_BENCH="1", TOURPACK_FUZZ="1")
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True,
                                     capture_output=True, text=True, env=environment).stdout)
    problems = []
    checked = 0
    for target in dump["targets"]:
        if target["type"] in ("system", "binary", "plugin"):
            continue
        folder = os.path.join(ROOT, target.get("path") or
                              ("Tests" if target["type"] == "test" else "Sources") + "/" + target["name"])
        allowed = declared(target) | TOOLCHAIN
        imported = set()
        swift_sources = 0
        for base, _, files in os.walk(folder):
            for file in sorted(files):
                if not file.endswith(".swift"):
                    continue
                path = os.path.join(base, file)
                swift_sources += 1
                with open(path, encoding="utf-8") as handle:
                    in_string = False  # inside a multi-line string literal (a Python script, say)
                    for number, line in enumerate(handle, 1):
                        starts_inside = in_string
                        if line.count('"""') % 2 == 1:
                            in_string = not in_string
                        if starts_inside:
                            continue
                        match = IMPORT.match(line)
                        if not match or line.lstrip().startswith("//"):
                            continue
                        checked += 1
                        module = match.group(1)
                        imported.add(module)
                        if module not in allowed:
                            problems.append(f"{os.path.relpath(path, ROOT)}:{number}: {target['name']} imports {module}, "
                                            f"which it does not declare in Package.swift")
        # A C target (a shim) declares its headers' library for the include path, not an import.
        for unused in sorted(declared(target) - imported - {target["name"]}) if swift_sources else []:
            problems.append(f"{target['name']} declares {unused} in Package.swift but none of its sources imports it")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-imports: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-imports: every target declares what it imports ({checked} imports in {len(dump['targets'])} targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
