#!/bin/sh
# Builds the web client with Debian's tools alone (no npm): every program
# type-checked by tsc (the library, the browser bindings and demo, the
# service worker), the library and its tests compiled for `node --test`
# into $OUT/node, and the demo app bundled by esbuild into $OUT/app, the
# folder `tourpack web` serves. OUT is build/web unless TOURPACK_WEB_BUILD says.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="${TOURPACK_WEB_BUILD:-$root/build/web}"
for tool in tsc esbuild; do
	command -v "$tool" >/dev/null || { echo "clients/web/build.sh: $tool is missing (make setup-test installs node-typescript and esbuild)" >&2; exit 1; }
done
mkdir -p "$out/node" "$out/app"
tsc -p "$here/tsconfig.json" --outDir "$out/node"
echo '{"type": "module"}' >"$out/node/package.json"
tsc -p "$here/tsconfig.browser.json"
tsc -p "$here/tsconfig.worker.json"
# A new build is a new service worker, which replaces the cached app.
version=$(cat "$here"/src/*.ts "$here"/browser/*.ts "$here"/demo/* | sha256sum | cut -c1-16)
esbuild "$here/demo/app.ts" --bundle --format=esm --target=es2022 --outfile="$out/app/app.js" --log-level=warning
esbuild "$here/browser/sw.ts" --bundle --format=iife --target=es2022 --define:SHELL_VERSION="\"$version\"" --outfile="$out/app/sw.js" --log-level=warning
cp "$here/demo/index.html" "$here/demo/style.css" "$out/app/"
echo "$out"
