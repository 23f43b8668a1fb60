#!/usr/bin/env bash
# The issue's outside check, by hand: a Swift package outside tourpack's
# (this folder) depends on it by path, imports TourpackClient, and runs the
# app's flow against the demo site `make tour` published (build/site): refresh,
# offers, download with progress, an audioFile that ffprobe decodes, then an
# edited tour republished, updateAvailable, the update, delete, and storage
# statistics at each step. The tour file is restored and the site republished
# whatever happens. Needs `make tour` (or VOICE=espeak) run once before.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${TOURPACK_BIN:-$repo/.build/release/tourpack}
cd "$repo"
[ -f build/site/catalog.json ] && [ -f build/demo-signing.pub ] || { echo "run make tour first" >&2; exit 2; }
(cd "$here" && swift build -q) || exit 1
work=$(mktemp -d)
tour=tours/furka-grimsel.json
cp "$tour" "$work/tour.bak"
publish() { TOURPACK_BIN=$bin VOICE=${VOICE:-espeak} scripts/tour.sh >"$work/publish.log" 2>&1 && grep -E "^(published|nothing changed)" "$work/publish.log"; }
finish() { cp "$work/tour.bak" "$tour"; publish >/dev/null; exec 7>&- 2>/dev/null; rm -rf "$work"; }
trap finish EXIT
publish || exit 1
mkfifo "$work/in"
"$here/.build/debug/OutsideApp" "file://$repo/build/site" "$work/Documents" "$(cat build/demo-signing.pub)" <"$work/in" >"$work/out" 2>&1 &
app=$!
exec 7>"$work/in"
for _ in $(seq 1 300); do grep -q READY-FOR-REPUBLISH "$work/out" && break; kill -0 $app 2>/dev/null || break; sleep 1; done
audio=$(grep '^AUDIO' "$work/out" | cut -d' ' -f2-)
[ -n "$audio" ] && echo "audioFile decodes: $(ffprobe -v error -show_entries format=format_name,duration -of compact "$audio")"
python3 - "$tour" <<'PY'
import json, sys
path = sys.argv[1]
tour = json.load(open(path))
poi = tour["pois"][0]
phase = next(iter(poi["narrations"]))
poi["narrations"][phase] += " Edited for the outside app."
json.dump(tour, open(path, "w"), ensure_ascii=False, indent=2)
PY
publish || exit 1
echo go >&7
wait $app
status=$?
grep -v '^progress' "$work/out"
echo "progress events: $(grep -c '^progress' "$work/out")"
exit $status
