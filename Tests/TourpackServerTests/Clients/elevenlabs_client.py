"""Drives serve-tts with ElevenLabs' own Python SDK, as an ElevenLabs user would.

Usage: python3 elevenlabs_client.py PORT OUTDIR API_KEY

elevenlabs.ElevenLabs with base_url http://127.0.0.1:PORT and the given key.
Lists the voices, converts text as pcm_24000 and pcm_16000 (with
previous_text and next_text, as a long-form producer sends them), as
mp3_44100_128, and at speed 1.2, and checks that a text over the model's
limit and another key are refused with ElevenLabs' status codes.

Writes each answer's audio to OUTDIR and a manifest.json describing them.
Exits non-zero, saying why, on the first thing that is not as expected.
"""
import json
import os
import sys

from elevenlabs.client import ElevenLabs
from elevenlabs.core.api_error import ApiError
from elevenlabs.types import VoiceSettings

TEXT = "The road climbs to the glacier in thirty six hairpin bends."


def fail(message):
    print(f"elevenlabs_client: {message}", file=sys.stderr)
    sys.exit(1)


def expect_error(what, status, call):
    try:
        b"".join(call())
    except ApiError as error:
        if error.status_code != status:
            fail(f"{what}: refused with {error.status_code} {error.body}, expected {status}")
        detail = error.body.get("detail", {}) if isinstance(error.body, dict) else {}
        return {"refused": what, "status": error.status_code,
                "code": detail.get("status") if isinstance(detail, dict) else None}
    fail(f"{what}: was accepted, expected {status}")


def main():
    port, outdir, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    base = f"http://127.0.0.1:{port}"
    client = ElevenLabs(api_key=key, base_url=base)
    manifest = {"files": [], "refusals": []}

    voices = client.voices.get_all().voices
    if not voices:
        fail("the voice list is empty")
    manifest["voices"] = [v.voice_id for v in voices]
    voice = "en-US" if "en-US" in manifest["voices"] else voices[0].voice_id

    cases = [
        ("eleven-pcm_24000.pcm", dict(output_format="pcm_24000", model_id="eleven_multilingual_v2",
                                      previous_text="We leave Heiligenblut.", next_text="At the top the view opens.")),
        ("eleven-pcm_16000.pcm", dict(output_format="pcm_16000", model_id="eleven_flash_v2_5")),
        ("eleven-mp3.mp3", dict(output_format="mp3_44100_128")),
        ("eleven-speed-1.2.pcm", dict(output_format="pcm_24000",
                                      voice_settings=VoiceSettings(stability=0.5, similarity_boost=0.75, speed=1.2))),
    ]
    for name, arguments in cases:
        audio = b"".join(client.text_to_speech.convert(voice_id=voice, text=TEXT, **arguments))
        with open(os.path.join(outdir, name), "wb") as out:
            out.write(audio)
        manifest["files"].append({"file": name, "bytes": len(audio)})

    manifest["refusals"].append(expect_error(
        "5001 characters for eleven_v3", 400,
        lambda: client.text_to_speech.convert(voice_id=voice, text="a" * 5001, model_id="eleven_v3", output_format="pcm_24000")))
    manifest["refusals"].append(expect_error(
        "another key", 401,
        lambda: ElevenLabs(api_key="someone-else", base_url=base).text_to_speech.convert(voice_id=voice, text=TEXT)))

    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
