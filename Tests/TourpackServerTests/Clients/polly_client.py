"""Drives serve-tts with boto3's Polly client, as an AWS user would.

Usage: python3 polly_client.py PORT OUTDIR ACCESS_KEY_ID

boto3's `polly` client with endpoint_url http://127.0.0.1:PORT, region
eu-central-1 and the given access key ID (serve-tts checks it in the SigV4
credential). Calls DescribeVoices, SynthesizeSpeech as pcm (plain text
and SSML, at 8000 and 16000 Hz) and as mp3, and checks that what Polly
refuses raises the error Polly names: TextLengthExceededException,
InvalidSampleRateException, and UnrecognizedClientException for another key.

Writes each answer's audio to OUTDIR and a manifest.json describing them.
Exits non-zero, saying why, on the first thing that is not as expected.
"""
import json
import os
import sys

import boto3
import botocore.config
import botocore.exceptions

TEXT = "The road climbs to the glacier in thirty six hairpin bends."


def fail(message):
    print(f"polly_client: {message}", file=sys.stderr)
    sys.exit(1)


def client(port, access_key):
    return boto3.client(
        "polly", endpoint_url=f"http://127.0.0.1:{port}", region_name="eu-central-1",
        aws_access_key_id=access_key, aws_secret_access_key="not-a-real-secret-0123456789",
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))


def expect_error(what, code, call):
    try:
        call()
    except botocore.exceptions.ClientError as error:
        got = error.response.get("Error", {}).get("Code")
        if got != code:
            fail(f"{what}: refused with {got}, expected {code}")
        return {"refused": what, "code": got, "status": error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")}
    fail(f"{what}: was accepted, expected {code}")


def main():
    port, outdir, access_key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    polly = client(port, access_key)
    manifest = {"files": [], "refusals": []}

    voices = polly.describe_voices()["Voices"]
    if not voices:
        fail("DescribeVoices listed no voice")
    manifest["voices"] = [{"Id": v["Id"], "LanguageCode": v["LanguageCode"]} for v in voices]

    cases = [
        ("polly-pcm-16000.pcm", dict(Text=TEXT, OutputFormat="pcm", SampleRate="16000", VoiceId="en-US", Engine="neural")),
        ("polly-pcm-8000.pcm", dict(Text=TEXT, OutputFormat="pcm", SampleRate="8000", VoiceId="en-US")),
        ("polly-ssml.pcm", dict(Text=f"<speak>{TEXT} <break time=\"2s\"/> {TEXT}</speak>", TextType="ssml",
                                OutputFormat="pcm", SampleRate="16000", VoiceId="en-US", Engine="standard")),
        ("polly-mp3.mp3", dict(Text=TEXT, OutputFormat="mp3", VoiceId="en-US")),
    ]
    for name, arguments in cases:
        answer = polly.synthesize_speech(**arguments)
        audio = answer["AudioStream"].read()
        with open(os.path.join(outdir, name), "wb") as out:
            out.write(audio)
        manifest["files"].append({"file": name, "contentType": answer["ContentType"],
                                  "requestCharacters": answer["RequestCharacters"], "bytes": len(audio)})

    manifest["refusals"].append(expect_error(
        "3001 billed characters", "TextLengthExceededException",
        lambda: polly.synthesize_speech(Text="a" * 3001, OutputFormat="pcm", VoiceId="en-US")))
    manifest["refusals"].append(expect_error(
        "pcm at 22050 Hz", "InvalidSampleRateException",
        lambda: polly.synthesize_speech(Text=TEXT, OutputFormat="pcm", SampleRate="22050", VoiceId="en-US")))
    manifest["refusals"].append(expect_error(
        "another access key", "UnrecognizedClientException",
        lambda: client(port, "AKIDSOMEONEELSE").synthesize_speech(Text=TEXT, OutputFormat="pcm", VoiceId="en-US")))

    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
