"""Drives serve-tts with Google's own client library, as a Cloud user would.

Usage: python3 google_client.py PORT OUTDIR

google-cloud-texttospeech over its REST transport, with anonymous
credentials, pointed at http://127.0.0.1:PORT through client_options'
api_endpoint: the REST transport keeps a scheme given in the endpoint
(otherwise it prefixes its url_scheme, "https"). It lists voices,
synthesizes every encoding, speaks SSML with a <break>, and checks that
requests Google refuses are refused with INVALID_ARGUMENT.

Writes each answer's audio to OUTDIR and a manifest.json describing them.
Exits non-zero, saying why, on the first thing that is not as expected.
"""
import json
import os
import sys

from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import texttospeech as tts

TEXT = "The road climbs to the glacier in thirty six hairpin bends."
ENCODINGS = [
    # (name, sample rate asked for or None for the default, file extension)
    ("LINEAR16", None, "wav"),
    ("LINEAR16", 16000, "wav"),
    ("MP3", None, "mp3"),
    ("MP3", 22050, "mp3"),
    ("OGG_OPUS", None, "opus"),
    ("OGG_OPUS", 48000, "opus"),
    ("MULAW", 8000, "wav"),
    ("ALAW", 8000, "wav"),
    ("MULAW", None, "wav"),
    ("PCM", None, "pcm"),
    ("M4A", None, "m4a"),
]


def fail(message):
    print(f"google_client: {message}", file=sys.stderr)
    sys.exit(1)


def expect_invalid_argument(what, call):
    """The REST transport maps HTTP 400 to BadRequest (InvalidArgument is the
    gRPC transport's subclass of it); the body must still say INVALID_ARGUMENT."""
    try:
        call()
    except exceptions.BadRequest as error:
        status = error.response.json().get("error", {}).get("status") if error.response is not None else None
        if error.code != 400 or status != "INVALID_ARGUMENT":
            fail(f"{what}: refused with code {error.code} status {status}, expected 400 INVALID_ARGUMENT")
        return {"refused": what, "exception": type(error).__name__, "code": error.code, "status": status, "message": error.message}
    fail(f"{what}: was accepted, expected INVALID_ARGUMENT")


def main():
    port, outdir = sys.argv[1], sys.argv[2]
    client = tts.TextToSpeechClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options={"api_endpoint": f"http://127.0.0.1:{port}"},
    )
    manifest = {"voices": [], "files": [], "refusals": []}

    voices = client.list_voices(language_code="en-US").voices
    if not voices:
        fail("list_voices(en-US) returned no voices")
    manifest["voices"] = [
        {"name": v.name, "languageCodes": list(v.language_codes), "naturalSampleRateHertz": v.natural_sample_rate_hertz}
        for v in voices
    ]
    voice = tts.VoiceSelectionParams(language_code="en-US", name=voices[0].name)

    for name, rate, extension in ENCODINGS:
        config = tts.AudioConfig(audio_encoding=tts.AudioEncoding[name])
        if rate:
            config.sample_rate_hertz = rate
        response = client.synthesize_speech(input=tts.SynthesisInput(text=TEXT), voice=voice, audio_config=config)
        if not response.audio_content:
            fail(f"{name} at {rate}: empty audioContent")
        file = f"google-{name}-{rate or 'default'}.{extension}"
        with open(os.path.join(outdir, file), "wb") as out:
            out.write(response.audio_content)
        manifest["files"].append({"file": file, "encoding": name, "sampleRateHertz": rate})

    # The same sentence pair, with and without a two-second <break> between them.
    for label, ssml in [
        ("ssml-plain", "<speak>Before the pause. After the pause.</speak>"),
        ("ssml-break", '<speak>Before the pause. <break time="2s"/> After the pause.</speak>'),
    ]:
        config = tts.AudioConfig(audio_encoding=tts.AudioEncoding.LINEAR16)
        response = client.synthesize_speech(input=tts.SynthesisInput(ssml=ssml), voice=voice, audio_config=config)
        file = f"google-{label}.wav"
        with open(os.path.join(outdir, file), "wb") as out:
            out.write(response.audio_content)
        manifest["files"].append({"file": file, "encoding": "LINEAR16", "sampleRateHertz": None, "ssml": ssml})

    def synthesize(text, encoding, rate=None):
        config = tts.AudioConfig(audio_encoding=encoding)
        if rate:
            config.sample_rate_hertz = rate
        return lambda: client.synthesize_speech(input=tts.SynthesisInput(text=text), voice=voice, audio_config=config)

    manifest["refusals"] = [
        expect_invalid_argument("6000-byte input", synthesize("a " * 3000, tts.AudioEncoding.LINEAR16)),
        expect_invalid_argument("AUDIO_ENCODING_UNSPECIFIED", synthesize(TEXT, tts.AudioEncoding.AUDIO_ENCODING_UNSPECIFIED)),
        expect_invalid_argument("OGG_OPUS at 44100 Hz", synthesize(TEXT, tts.AudioEncoding.OGG_OPUS, 44100)),
    ]

    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
