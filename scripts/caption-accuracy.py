#!/usr/bin/env python3
"""How close each caption cue of a Documents root starts to speech in its
shipped file, measured without tourpack: ffmpeg decodes every audio file
that lists captions (16 kHz mono), a speech start is the first 10 ms frame
above -40 dBFS after at least 180 ms below it, and each cue (read by
webvtt-py) is compared with the nearest start.

    python3 scripts/caption-accuracy.py build/Documents

Narrations with commas have starts that are no cue's (a clause's pause),
so this is the distance to the nearest start, not a one-to-one match.
"""
import array
import glob
import json
import math
import os
import subprocess
import sys

import webvtt


def speech_starts(path, rate=16000, pause=0.18, floor_db=-40.0):
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-ar", str(rate), "-"],
        capture_output=True, check=True).stdout
    samples = array.array("h")
    samples.frombytes(raw)
    frame = rate // 100
    quiet = 10**6
    starts = []
    for index in range(0, len(samples) - frame, frame):
        energy = sum(x * x for x in samples[index:index + frame]) / frame
        if 10 * math.log10(max(energy, 1e-9) / 32768.0**2) > floor_db:
            if quiet * 0.01 >= pause:
                starts.append(index / rate)
            quiet = 0
        else:
            quiet += 1
    return starts


def seconds(stamp):
    hours, minutes, rest = stamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def main(root):
    errors, files, timing = [], 0, {}
    for manifest_path in sorted(glob.glob(os.path.join(root, "OfflineTours/*/package.json"))):
        with open(manifest_path) as handle:
            manifest = json.load(handle)
        for audio in manifest["audio"]:
            captions = audio.get("captions")
            if not captions:
                continue
            files += 1
            timing[captions["timing"]] = timing.get(captions["timing"], 0) + 1
            starts = speech_starts(os.path.join(root, audio["path"]))
            for cue in webvtt.read(os.path.join(root, captions["path"])):
                errors.append(min(abs(seconds(cue.start) - start) for start in starts))
    if not errors:
        print(f"{root}: no captioned audio")
        return 1
    errors.sort()
    print(f"{files} files, {len(errors)} cues, timing {timing}; |cue - nearest speech start|: "
          f"median {errors[len(errors) // 2] * 1000:.0f} ms, 95th percentile {errors[int(len(errors) * 0.95)] * 1000:.0f} ms, "
          f"max {errors[-1] * 1000:.0f} ms; over 150 ms: {sum(error > 0.15 for error in errors)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/Documents"))
