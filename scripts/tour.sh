#!/usr/bin/env bash
# `make tour`: start the local voice and the embedded tile server on free
# ports, build the demo pipeline against them, stop both whatever happens
# (success, failure, Ctrl-C), then publish the packages into build/site
# with a catalogue signed by a demo key (made once, kept in
# build/demo-signing.key). The voice is Piper (voices/piper-joe.yaml, its
# HTTP server on a free loopback port); VOICE=espeak speaks with the
# embedded espeak-ng voice (`tourpack serve-tts`) instead. Extra arguments
# go to `tourpack build`; SERVE_TTS_ARGS and SERVE_TILES_ARGS go to the
# servers (e.g. SERVE_TTS_ARGS="--latency-ms 150",
# SERVE_TILES_ARGS="--failure-rate 0.07").
set -uo pipefail

bin=${TOURPACK_BIN:-.build/release/tourpack}
pipeline=${PIPELINE:-pipelines/demo.yaml}
documents=${DOCUMENTS:-build/Documents}
mkdir -p build
port_file=build/.serve-tts.port
log=build/serve-tts.log
tiles_port_file=build/.serve-tiles.port
tiles_log=build/serve-tiles.log
rm -f "$port_file" "$tiles_port_file"

voice=${VOICE:-piper}
case "$voice" in
piper)
	# The pinned voice, checked (scripts/piper-voice.sh); a free loopback
	# port, printed to the port file once Piper answers on it.
	model=$(scripts/piper-voice.sh) || exit 1
	piper_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
	log=build/piper.log
	(
		python3 -m piper.http_server --host 127.0.0.1 --port "$piper_port" -m "$model" --data-dir "$(dirname "$model")" \
			>"$log" 2>&1 &
		piper=$!
		trap 'kill $piper 2>/dev/null; wait $piper 2>/dev/null; exit 0' TERM INT
		for _ in $(seq 600); do
			kill -0 "$piper" 2>/dev/null || exit 1
			if curl -fs -o /dev/null "http://127.0.0.1:$piper_port/info"; then
				echo "$piper_port" >"$port_file"
				break
			fi
			sleep 0.1
		done
		wait "$piper"
	) &
	server=$!
	;;
espeak)
	# shellcheck disable=SC2086 # SERVE_TTS_ARGS is a list of flags, e.g. "--latency-ms 150".
	"$bin" serve-tts --port 0 ${SERVE_TTS_ARGS:-} >"$port_file" 2>"$log" &
	server=$!
	;;
*)
	echo "tour: VOICE is piper or espeak, not $voice" >&2
	exit 2
	;;
esac
# shellcheck disable=SC2086 # SERVE_TILES_ARGS is a list of flags.
"$bin" serve-tiles --port 0 ${SERVE_TILES_ARGS:-} >"$tiles_port_file" 2>"$tiles_log" &
tiles=$!
stop_servers() {
	kill "$server" "$tiles" 2>/dev/null
	wait "$server" "$tiles" 2>/dev/null
	rm -f "$port_file" "$tiles_port_file"
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# wait_for_port NAME PID PORT_FILE LOG: the port a server printed, or exit.
wait_for_port() {
	for _ in $(seq 600); do
		[ -s "$3" ] && break
		if ! kill -0 "$2" 2>/dev/null; then
			echo "tour: $1 did not start; its log ($4):" >&2
			cat "$4" >&2
			exit 1
		fi
		sleep 0.1
	done
	if [ ! -s "$3" ]; then
		echo "tour: $1 printed no port within 60 s; its log is $4" >&2
		exit 1
	fi
	head -n 1 "$3"
}
port=$(wait_for_port "$voice" "$server" "$port_file" "$log") || exit 1
tiles_port=$(wait_for_port serve-tiles "$tiles" "$tiles_port_file" "$tiles_log") || exit 1
voice_args=()
if [ "$voice" = piper ]; then
	echo "tour: local voice (Piper, en_US-joe-medium) on 127.0.0.1:$port"
	# Piper runs on this machine's cores: two requests in flight keep two busy.
	voice_args=(--api piper --voice voices/piper-joe.yaml --concurrency 2)
else
	echo "tour: local voice (serve-tts, espeak-ng) on 127.0.0.1:$port"
fi
echo "tour: local map tiles (serve-tiles, generated z/x/y tiles) on 127.0.0.1:$tiles_port"

"$bin" build "$pipeline" "${voice_args[@]}" --endpoint "http://127.0.0.1:$port" --tiles-url "http://127.0.0.1:$tiles_port/{z}/{x}/{y}.png" "$@"
status=$?

if [ -d "$documents/OfflineTours" ]; then
	packages=$(find "$documents/OfflineTours" -name package.json | wc -l)
	files=$(find "$documents/AudioCache" -type f ! -name '.*' | wc -l)
	size=$(du -sh "$documents" | cut -f1)
	example=$(find "$documents/AudioCache" -type f ! -name '.*' | sort | head -n 1)
	echo
	echo "Documents folder: $(cd "$documents" && pwd)"
	packs=$(find "$documents/OfflineTours" -name tiles.mbtiles | wc -l)
	captions=$(find "$documents/OfflineTours" -path '*/captions/*.vtt' | wc -l)
	echo "  $packages packages, $files audio files, $captions caption files, $packs tile packs, $size"
	[ -n "$example" ] && echo "  listen to one: $example"
	caption=$(find "$documents/OfflineTours" -path '*/captions/*.vtt' | sort | head -n 1)
	[ -n "$caption" ] && echo "  read a narration's captions: $caption"
	echo "  see and hear them, captions playing, in a browser: $bin review $documents --pipeline $pipeline"
	pack=$(find "$documents/OfflineTours" -name tiles.mbtiles | sort | head -n 1)
	[ -n "$pack" ] && echo "  list a map's tiles: sqlite3 '$pack' 'SELECT zoom_level, tile_column, tile_row, length(tile_data) FROM tiles LIMIT 5'"
fi
[ $status -eq 0 ] || exit $status

# The demo's signing key: made once, readable by this user only. A real
# pipeline's key comes from a secret store into TOURPACK_SIGNING_KEY.
key_file=build/demo-signing.key
if [ ! -s "$key_file" ]; then
	(umask 077 && "$bin" keys generate --json >"$key_file.json") || exit 1
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(d["privateKey"]+"\n"); open(sys.argv[3],"w").write(d["publicKey"]+"\n")' \
		"$key_file.json" "$key_file" build/demo-signing.pub || exit 1
	rm -f "$key_file.json"
fi
echo
TOURPACK_SIGNING_KEY=$(cat "$key_file") "$bin" publish "$pipeline" || exit $?
site=${SITE:-build/site}
if [ -f "$site/catalog.json" ]; then
	echo
	echo "Site: $(cd "$site" && pwd)"
	echo "  catalogue: $site/catalog.json (signature: catalog.json.sig, public key: $(cat build/demo-signing.pub))"
	echo "  install it as a device would: $bin install $site --into build/Device --all --public-key build/demo-signing.pub"
	echo "  open it in a browser (the web client's demo: download, play offline, update): make web && $bin web $site --public-key build/demo-signing.pub"
fi
