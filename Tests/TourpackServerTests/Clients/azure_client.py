"""Drives serve-tts as Azure Speech's REST API, with a plain HTTP client.

Usage: python3 azure_client.py PORT OUTDIR API_KEY

Azure has no Python SDK that reaches a custom REST endpoint (the Speech
SDK speaks its own WebSocket protocol), so this sends what the REST
reference shows: POST /cognitiveservices/v1 with Ocp-Apim-Subscription-Key,
Content-Type application/ssml+xml, X-Microsoft-OutputFormat and a
User-Agent, and GET /cognitiveservices/voices/list. It asks for raw and
RIFF PCM at two rates, with and without prosody, and checks the refusals:
a wrong key (401), a missing output format (400), and a body that is not
SSML (415).

Writes each answer's audio to OUTDIR and a manifest.json describing them.
Exits non-zero, saying why, on the first thing that is not as expected.
"""
import json
import os
import sys
import urllib.error
import urllib.request

TEXT = "The road climbs to the glacier in thirty six hairpin bends."


def fail(message):
    print(f"azure_client: {message}", file=sys.stderr)
    sys.exit(1)


def ssml(content, voice="en-US"):
    return (f"<speak version='1.0' xml:lang='en-US'><voice xml:lang='en-US' xml:gender='Female' name='{voice}'>"
            f"{content}</voice></speak>")


def call(base, path, key, body=None, headers=None):
    request = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET")
    request.add_header("Ocp-Apim-Subscription-Key", key)
    request.add_header("User-Agent", "tourpack-tests")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, answer.headers.get("Content-Type"), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), error.read()


def main():
    port, outdir, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    base = f"http://127.0.0.1:{port}"
    manifest = {"files": [], "refusals": []}

    status, _, body = call(base, "/cognitiveservices/voices/list", key)
    if status != 200:
        fail(f"voices/list answered {status}")
    voices = json.loads(body)
    if not voices or not all("ShortName" in v and "Locale" in v for v in voices):
        fail(f"voices/list is not Azure's list: {voices[:2]}")
    manifest["voices"] = [v["ShortName"] for v in voices]

    cases = [
        ("azure-raw-24khz.pcm", "raw-24khz-16bit-mono-pcm", TEXT),
        ("azure-raw-16khz.pcm", "raw-16khz-16bit-mono-pcm", TEXT),
        ("azure-riff-24khz.wav", "riff-24khz-16bit-mono-pcm", TEXT),
        ("azure-prosody.pcm", "raw-24khz-16bit-mono-pcm", f"<prosody rate='2'>{TEXT}</prosody>"),
    ]
    for name, output, content in cases:
        status, content_type, audio = call(base, "/cognitiveservices/v1", key, ssml(content).encode(), {
            "Content-Type": "application/ssml+xml", "X-Microsoft-OutputFormat": output})
        if status != 200:
            fail(f"{name}: answered {status} {audio[:200]!r}")
        with open(os.path.join(outdir, name), "wb") as out:
            out.write(audio)
        manifest["files"].append({"file": name, "contentType": content_type, "bytes": len(audio)})

    refusals = [
        ("another key", 401, "someone-else", {"Content-Type": "application/ssml+xml",
                                              "X-Microsoft-OutputFormat": "raw-24khz-16bit-mono-pcm"}, ssml(TEXT)),
        ("no output format", 400, key, {"Content-Type": "application/ssml+xml"}, ssml(TEXT)),
        ("plain text body", 415, key, {"Content-Type": "text/plain",
                                       "X-Microsoft-OutputFormat": "raw-24khz-16bit-mono-pcm"}, TEXT),
    ]
    for what, expected, used_key, headers, body in refusals:
        status, _, answer = call(base, "/cognitiveservices/v1", used_key, body.encode(), headers)
        if status != expected:
            fail(f"{what}: answered {status}, expected {expected}")
        manifest["refusals"].append({"refused": what, "status": status})

    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
