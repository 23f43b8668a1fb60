#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target of the sanitizer build for
# FUZZ_SECONDS, starting from its seeds in Fuzz/Corpus/<target>/ and from
# what earlier runs found, and prints one line per target.
#
#   scripts/fuzz.sh <tourpack-fuzz binary> <target>...
#
# New corpus entries go to $FUZZ_WORK/corpus/<target>/ (build/fuzz by
# default, never committed); a crashing, hanging (over FUZZ_TIMEOUT seconds)
# or memory-hungry input goes to $FUZZ_WORK/crashes/<target>-crash-<sha1>
# (or -timeout-, -oom-), with libFuzzer's log beside it in
# $FUZZ_WORK/logs/<target>.log. Exits 1 when any target found one.
set -uo pipefail

binary=$1
shift
seconds=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-10}
work=${FUZZ_WORK:-build/fuzz}
mkdir -p "$work/crashes" "$work/logs"

# LeakSanitizer is off: the Swift runtime's caches read as leaks at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
# Swift's own crash backtracer trips over AddressSanitizer; libFuzzer prints the stack.
export SWIFT_BACKTRACE=enable=no

printf '%-18s %10s %12s %8s %8s\n' target execs/s execs corpus crashes
failed=0
for target in "$@"; do
	corpus="$work/corpus/$target"
	log="$work/logs/$target.log"
	mkdir -p "$corpus"
	before=$(find "$work/crashes" -name "$target-*" | wc -l)
	# The first folder receives new entries; the committed seeds are read only.
	TOURPACK_FUZZ_TARGET=$target "$binary" "$corpus" "Fuzz/Corpus/$target" \
		-max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -detect_leaks=0 \
		-print_final_stats=1 -artifact_prefix="$work/crashes/$target-" >"$log" 2>&1
	status=$?
	after=$(find "$work/crashes" -name "$target-*" | wc -l)
	crashes=$((after - before))
	if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	# libFuzzer's own count of the inputs it keeps (seeds and new entries,
	# minimised); the files on disk when the run stopped early.
	size=$(sed -n 's/.*DONE .* corp: \([0-9]*\).*/\1/p' "$log" | tail -1)
	[ -n "$size" ] || size=$(find "$corpus" "Fuzz/Corpus/$target" -type f | wc -l)
	printf '%-18s %10s %12s %8s %8s\n' "$target" "${rate:--}" "${execs:--}" "$size" "$crashes"
	if [ "$crashes" -ne 0 ]; then
		failed=1
		echo "  $target: see $log; inputs: $(find "$work/crashes" -name "$target-*" | tr '\n' ' ')" >&2
	fi
done
exit "$failed"
