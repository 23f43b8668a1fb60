#!/usr/bin/env python3
"""`make lint`'s check that the app's library changes its API on purpose.

An app compiles against TourpackClient (and its tests against
TourpackClientTesting), so every public declaration of theirs is a promise.
This check builds the two modules (`swift build --target
TourpackClientTesting`: TourpackPackage, the client, the testing library and
swift-crypto, none of the pipeline and none of its C libraries), asks the
compiler for their symbol graphs (`swift symbolgraph-extract` on the built
modules, public symbols, no members synthesized from protocols), and
compares them with the committed list, Sources/TourpackClient/PublicAPI.txt.

The list is one declaration a line, as the symbol graph spells it, with the
name qualified by its type (`func OfflineLibrary.delete(tourId: UUID) async
throws`), a type's conformances after its name, and `@available` where the
symbol has one. Types of this package's other modules are named with their
module (`TourpackPackage.AudioFormat`). No USRs, no paths: it reads the same
on every machine with the same toolchain. It has three sections:
TourpackClient, TourpackClientTesting, and TourpackPackage as an app reaches
it through the client: the types the client's API names, with their members,
and TourpackPackage's extensions of the standard library, whose members an
app sees without importing TourpackPackage (unless it builds with
MemberImportVisibility).

On a difference it prints the lines added and removed, section by section,
and exits 1; `--update` rewrites the list.
"""
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = "Sources/TourpackClient/PublicAPI.txt"
MODULES = ["TourpackClient", "TourpackClientTesting"]
# The module under the client whose types the client's API may name.
BELOW = "TourpackPackage"
# Conformances every type has, or that only some toolchains spell out.
IMPLIED = {"Copyable", "Escapable", "SendableMetatype"}
# The same as the Makefile's BUILD_FLAGS, so this build is the one `make build` and `make test` reuse.
BUILD = ["swift", "build", "--explicit-target-dependency-import-check", "error", "--target", "TourpackClientTesting"]
HEADER = f"""\
# The public API of the app's library, as `make lint` checks it
# (scripts/check-client-api.py). One declaration a line, from the compiler's
# symbol graph, sorted by symbol. A change here is a change every app sees:
# make it on purpose, then run `python3 scripts/check-client-api.py --update`.
"""


def run(command: list, **options) -> str:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, **options)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"check-client-api: `{' '.join(command)}` failed (exit {result.returncode})")
    return result.stdout


def symbol_graphs(output: str) -> dict:
    """Builds the client's modules and extracts their symbol graphs; returns {file name: graph}."""
    run(BUILD)
    binaries = run(BUILD[:2] + ["--show-bin-path"]).strip()
    modules = os.path.join(binaries, "Modules")  # SwiftPM 6 keeps .swiftmodule files here; 5.x beside the binaries
    if not os.path.isdir(modules):
        modules = binaries
    triple = json.loads(run(["swift", "-print-target-info"]))["target"]["triple"]
    extract = ["swift", "symbolgraph-extract", "-target", triple, "-I", modules, "-minimum-access-level", "public",
               "-skip-synthesized-members", "-output-dir", output]
    if sys.platform == "darwin":
        extract += ["-sdk", run(["xcrun", "--show-sdk-path"]).strip()]
    for module in MODULES + [BELOW]:
        run(extract + ["-module-name", module])
    graphs = {}
    for name in sorted(os.listdir(output)):
        with open(os.path.join(output, name), encoding="utf-8") as handle:
            graphs[name] = json.load(handle)
    return graphs


class API:
    """The symbols of every graph, indexed, and the lines they render as."""

    def __init__(self, graphs: dict):
        self.graphs = graphs
        self.symbols = {}  # precise identifier -> (module, symbol)
        self.conformances = {}  # precise identifier of a type -> [names]
        self.superclass = {}
        self.defaults = set()
        self.named = {}  # precise identifier -> the types it conforms to or inherits from, by identifier
        for name, graph in graphs.items():
            module = name.split("@")[0].split(".")[0]
            for symbol in graph["symbols"]:
                self.symbols[symbol["identifier"]["precise"]] = (module, symbol)
        for graph in graphs.values():
            for relation in graph["relationships"]:
                kind, source = relation["kind"], relation["source"]
                if kind in ("conformsTo", "inheritsFrom"):
                    self.named.setdefault(source, []).append(relation["target"])
                if kind == "conformsTo":
                    target = self.name_of(relation["target"], relation.get("targetFallback"))
                    if target in IMPLIED:
                        continue
                    if relation.get("swiftConstraints"):
                        target += " (where " + constraints(relation["swiftConstraints"]) + ")"
                    self.conformances.setdefault(source, []).append(target)
                elif kind == "inheritsFrom":
                    self.superclass[source] = self.name_of(relation["target"], relation.get("targetFallback"))
                elif kind == "defaultImplementationOf":
                    self.defaults.add(source)

    def name_of(self, precise: str, fallback) -> str:
        if precise in self.symbols:
            return ".".join(self.symbols[precise][1]["pathComponents"])
        # "Swift.Sendable": the standard library's and Foundation's names are unambiguous without the module.
        return (fallback or precise).split(".", 1)[-1]

    def module_symbols(self, module: str, own: bool = True, extensions: bool = True) -> list:
        """The symbols of `module`'s own graph, of its graphs of extensions to other modules' types, or both."""
        found = []
        for name, graph in self.graphs.items():
            owner, _, extended = name[: -len(".symbols.json")].partition("@")
            if owner == module and (extensions if extended else own):
                found.extend(graph["symbols"])
        return found

    def line(self, symbol: dict, module: str) -> str:
        parent = symbol["pathComponents"][:-1]
        text, qualified = [], not parent
        for fragment in symbol["declarationFragments"]:
            spelling = fragment["spelling"]
            if not qualified and (fragment["kind"] == "identifier"
                                  or fragment["kind"] == "keyword" and spelling in ("init", "subscript", "deinit")):
                spelling, qualified = ".".join(parent) + "." + spelling, True
            elif fragment["kind"] == "typeIdentifier":
                owner = self.symbols.get(fragment.get("preciseIdentifier", ""), (None,))[0]
                if owner == BELOW != module:  # what the client's API takes from the module under it, said so
                    spelling = owner + "." + spelling
            text.append(spelling)
        declaration = re.sub(r"\s+", " ", "".join(text)).strip()
        precise = symbol["identifier"]["precise"]
        if symbol["kind"]["identifier"] != "swift.protocol":  # a protocol's declaration already names what it refines
            inherited = ([self.superclass[precise]] if precise in self.superclass else []) + sorted(
                set(self.conformances.get(precise, [])))
            if inherited:
                declaration += ": " + ", ".join(inherited)
        extension = symbol.get("swiftExtension", {})
        if extension.get("constraints") and " where " not in declaration:
            declaration += " where " + constraints(extension["constraints"])
        if precise in self.defaults:
            declaration += " (default implementation)"
        return availability(symbol) + declaration


def constraints(items: list) -> str:
    operator = {"conformance": ": ", "superclass": ": ", "sameType": " == "}
    return ", ".join(item["lhs"] + operator.get(item["kind"], " ? ") + item["rhs"] for item in items)


def availability(symbol: dict) -> str:
    attributes = []
    for entry in symbol.get("availability", []):
        domain = entry.get("domain", "*")
        if entry.get("isUnconditionallyUnavailable"):
            attributes.append(f"@available({domain}, unavailable)")
            continue
        parts = [domain]
        for key in ("introduced", "deprecated", "obsoleted"):
            if key in entry:
                version = entry[key]
                parts.append(f"{key}: " + ".".join(str(version.get(k, 0)) for k in ("major", "minor", "patch")
                                                     if k in version))
        if entry.get("isUnconditionallyDeprecated"):
            parts.append("deprecated")
        for key in ("renamed", "message"):
            if key in entry:
                parts.append(f"{key}: {json.dumps(entry[key])}")
        attributes.append("@available(" + ", ".join(parts) + ")")
    return "".join(attribute + " " for attribute in attributes)


def referenced(symbols: list, api: API, module: str) -> set:
    """The precise identifiers of `module`'s symbols that these symbols' declarations or conformances name."""
    found = set()
    for symbol in symbols:
        names = [f.get("preciseIdentifier") for f in symbol["declarationFragments"]]
        names += api.named.get(symbol["identifier"]["precise"], [])
        found.update(name for name in names if name and api.symbols.get(name, (None,))[0] == module)
    return found


def below(api: API, shown: list) -> list:
    """BELOW's types the shown symbols name, each with its members, followed to what those name in turn, and
    BELOW's members of the standard library's types, which an app sees unless it builds with MemberImportVisibility."""
    own = api.module_symbols(BELOW, extensions=False)

    def inside(types: set) -> list:
        paths = {tuple(api.symbols[precise][1]["pathComponents"]) for precise in types}
        return [s for s in own if any(tuple(s["pathComponents"][: len(path)]) == path for path in paths)]

    types, frontier = set(), referenced(shown, api, BELOW)
    while frontier:
        types |= frontier
        frontier = referenced(inside(types), api, BELOW) - types
    return inside(types) + api.module_symbols(BELOW, own=False)


def render(graphs: dict) -> str:
    api = API(graphs)
    sections, shown = [], []
    for module in MODULES:
        symbols = api.module_symbols(module)
        shown += symbols
        sections.append((module, symbols))
    sections.append((f"{BELOW}, as an app reaches it through {MODULES[0]}", below(api, shown)))
    text = HEADER
    for title, symbols in sections:
        module = title.split(",")[0]
        lines = sorted((tuple(s["pathComponents"]), api.line(s, module)) for s in symbols)
        text += f"\n## {title}\n" + "".join(line + "\n" for _, line in lines)
    return text


def report(old: str, new: str) -> None:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    section = None
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        heading = next((line for line in reversed(new_lines[:b1 + 1]) if line.startswith("## ")), None)
        if heading != section and heading:
            print(heading)
            section = heading
        for line in old_lines[a1:a2]:
            print(f"- {line}")
        for line in new_lines[b1:b2]:
            print(f"+ {line}")


def main() -> int:
    update = "--update" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="client-api-") as output:
        new = render(symbol_graphs(output))
    path = os.path.join(ROOT, LIST)
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    count = sum(1 for line in new.splitlines() if line and not line.startswith("#"))
    if update:
        if old != new:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(new)
            if old:
                report(old, new)
        print(f"check-client-api: {LIST} {'rewritten' if old != new else 'already up to date'} ({count} symbols)")
        return 0
    if old == new:
        print(f"check-client-api: the public API matches {LIST} ({count} symbols)")
        return 0
    print(f"check-client-api: the public API differs from {LIST}:")
    report(old, new)
    sys.stdout.flush()
    print("check-client-api: if the change is meant, run `python3 scripts/check-client-api.py --update` "
          "and commit the list with it", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
