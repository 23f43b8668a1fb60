#!/usr/bin/env bash
# `make tour`: start the embedded TTS endpoint on a free port, build the demo
# pipeline against it, and stop the endpoint whatever happens (success,
# failure, Ctrl-C). Extra arguments go to `tourpack build`; SERVE_TTS_ARGS
# go to the server (e.g. SERVE_TTS_ARGS="--latency-ms 150").
set -uo pipefail

bin=${TOURPACK_BIN:-.build/release/tourpack}
pipeline=${PIPELINE:-pipelines/demo.yaml}
documents=${DOCUMENTS:-build/Documents}
mkdir -p build
port_file=build/.serve-tts.port
log=build/serve-tts.log
rm -f "$port_file"

# shellcheck disable=SC2086 # SERVE_TTS_ARGS is a list of flags, e.g. "--latency-ms 150".
"$bin" serve-tts --port 0 ${SERVE_TTS_ARGS:-} >"$port_file" 2>"$log" &
server=$!
stop_server() {
	kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -f "$port_file"
}
trap stop_server EXIT
trap 'exit 130' INT TERM

for _ in $(seq 100); do
	[ -s "$port_file" ] && break
	if ! kill -0 "$server" 2>/dev/null; then
		echo "tour: serve-tts did not start; its log ($log):" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
port=$(head -n 1 "$port_file")
if [ -z "$port" ]; then
	echo "tour: serve-tts printed no port within 10 s; its log is $log" >&2
	exit 1
fi
echo "tour: local voice (serve-tts, espeak-ng) on 127.0.0.1:$port"

"$bin" build "$pipeline" --endpoint "http://127.0.0.1:$port" "$@"
status=$?

if [ -d "$documents/OfflineTours" ]; then
	packages=$(find "$documents/OfflineTours" -name package.json | wc -l)
	files=$(find "$documents/AudioCache" -type f ! -name '.*' | wc -l)
	size=$(du -sh "$documents" | cut -f1)
	example=$(find "$documents/AudioCache" -type f ! -name '.*' | sort | head -n 1)
	echo
	echo "Documents folder: $(cd "$documents" && pwd)"
	echo "  $packages packages, $files audio files, $size"
	[ -n "$example" ] && echo "  listen to one: $example"
fi
exit $status
