"""Drives serve-tts with OpenAI's own client library, as an OpenAI user would.

Usage: python3 openai_client.py PORT OUTDIR

openai with base_url http://127.0.0.1:PORT/v1 and a placeholder key. It
asks for every response_format (and for none, which must mean mp3), speaks
at two speeds, and checks that requests OpenAI refuses raise
openai.BadRequestError. OpenAI's API has no voice list and no SSML, so
neither is tried here (google_client.py covers both).

Writes each answer's audio to OUTDIR and a manifest.json describing them.
Exits non-zero, saying why, on the first thing that is not as expected.
"""
import json
import os
import sys

import openai

TEXT = "The road climbs to the glacier in thirty six hairpin bends."
FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"]


def fail(message):
    print(f"openai_client: {message}", file=sys.stderr)
    sys.exit(1)


def expect_bad_request(what, call):
    try:
        call()
    except openai.BadRequestError as error:
        body = error.body if isinstance(error.body, dict) else {}
        if error.status_code != 400 or body.get("type") != "invalid_request_error":
            fail(f"{what}: refused with {error.status_code} {body}, expected 400 invalid_request_error")
        return {"refused": what, "exception": type(error).__name__, "code": error.status_code, "type": body.get("type"), "message": body.get("message")}
    fail(f"{what}: was accepted, expected openai.BadRequestError")


def main():
    port, outdir = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-not-a-key", max_retries=0)
    manifest = {"files": [], "refusals": []}

    def save(file, response, **details):
        content = response.content
        if not content:
            fail(f"{file}: empty body")
        with open(os.path.join(outdir, file), "wb") as out:
            out.write(content)
        manifest["files"].append({"file": file, "contentType": response.response.headers.get("content-type"), **details})

    for name in FORMATS:
        response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=name)
        save(f"openai-{name}.{name}", response, format=name)

    # No response_format: OpenAI answers mp3.
    response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
    save("openai-default.bin", response, format=None)

    for speed in (1.0, 2.0):
        response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav", speed=speed)
        save(f"openai-speed-{speed}.wav", response, format="wav", speed=speed)

    def speak(text, **options):
        return lambda: client.audio.speech.create(model="tts-1", voice="alloy", input=text, **options)

    manifest["refusals"] = [
        expect_bad_request("6000-byte input", speak("a " * 3000)),
        expect_bad_request("response_format ogg", speak(TEXT, response_format="ogg")),
        expect_bad_request("speed 5", speak(TEXT, speed=5.0)),
    ]

    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
