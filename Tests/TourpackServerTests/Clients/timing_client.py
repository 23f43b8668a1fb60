"""Asks serve-tts for timings with the providers' own clients, as a user would.

Usage: python3 timing_client.py PORT OUTDIR API_KEY

- Google: google-cloud-texttospeech's texttospeech_v1beta1 over REST, with
  enable_time_pointing=[SSML_MARK], for SSML with a <mark> before each
  sentence, marks with odd names, no marks, an empty list, plain text, and
  a long document with a mark per sentence.
- ElevenLabs: text_to_speech.convert_with_timestamps, for plain sentences,
  multibyte text and a long text, and stream_with_timestamps.
- Polly: boto3 synthesize_speech(OutputFormat="json", SpeechMarkTypes=...),
  for sentences (with the same text as pcm, to compare), sentences and words
  of multibyte text, SSML marks, and the requests Polly refuses.

Writes each answer's audio to OUTDIR and a manifest.json with the timings
exactly as the clients parsed them. Exits non-zero, saying why, on the
first thing a client cannot parse or that is not as expected.
"""
import base64
import json
import os
import sys

import boto3
import botocore.config
import botocore.exceptions
from elevenlabs.client import ElevenLabs
from google.cloud import texttospeech_v1beta1 as tts

SENTENCES = "The road climbs to the glacier. Marmots whistle from the rocks above. At the top the view opens wide."
MULTIBYTE = "Café crème in Genève. 日本 is far away. Ünïcödé ends here."
ODD_NAMES = ['say "cheese"', "it's", "日本語 é", "<tag>", "a&b", "x>y"]


def fail(message):
    print(f"timing_client: {message}", file=sys.stderr)
    sys.exit(1)


def ssml_escape(text):
    """XML-escapes a mark name, but leaves ">" bare, as XML allows in an attribute value."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace("'", "&apos;")


def google(port, outdir, key, manifest):
    client = tts.TextToSpeechClient(
        transport="rest", client_options={"api_endpoint": f"http://127.0.0.1:{port}", "api_key": key})
    voice = tts.VoiceSelectionParams(language_code="en-US")
    marks = [tts.SynthesizeSpeechRequest.TimepointType.SSML_MARK]

    def ask(label, synthesis_input, pointing=marks, save=False):
        response = client.synthesize_speech(request=tts.SynthesizeSpeechRequest(
            input=synthesis_input, voice=voice, enable_time_pointing=pointing,
            audio_config=tts.AudioConfig(audio_encoding=tts.AudioEncoding.LINEAR16)))
        if not response.audio_content:
            fail(f"google {label}: empty audioContent")
        entry = {"label": label, "timepoints": [{"markName": t.mark_name, "timeSeconds": t.time_seconds} for t in response.timepoints],
                 "audioEncoding": response.audio_config.audio_encoding.name,
                 "sampleRateHertz": response.audio_config.sample_rate_hertz}
        if save:
            entry["file"] = f"google-{label}.wav"
            with open(os.path.join(outdir, entry["file"]), "wb") as out:
                out.write(response.audio_content)
        manifest["google"].append(entry)

    sentences = SENTENCES.split(". ")
    marked = "".join(f'<mark name="s{i + 1}"/>{s}{"" if s.endswith(".") else "."} ' for i, s in enumerate(sentences))
    ask("sentences", tts.SynthesisInput(ssml=f"<speak>{marked}</speak>"), save=True)
    odd = " ".join(f'word <mark name="{ssml_escape(name)}"/>' for name in ODD_NAMES)
    ask("odd-names", tts.SynthesisInput(ssml=f"<speak>{odd} end.</speak>"))
    ask("no-marks", tts.SynthesisInput(ssml="<speak>Nothing is marked here.</speak>"))
    ask("empty-list", tts.SynthesisInput(ssml=f"<speak>{marked}</speak>"), pointing=[])
    ask("plain-text", tts.SynthesisInput(text="Plain text has no marks."))
    long = "".join(f'<mark name="m{i}"/>Sentence number {i} walks on. ' for i in range(120))
    ssml = f"<speak>{long}</speak>"
    if len(ssml.encode()) > 5000:
        ssml = ssml[: ssml.rfind("<mark", 0, 4980)] + "</speak>"
    ask("long", tts.SynthesisInput(ssml=ssml))
    manifest["googleLongMarks"] = ssml.count("<mark ")


def elevenlabs(port, outdir, key, manifest):
    client = ElevenLabs(api_key=key, base_url=f"http://127.0.0.1:{port}")
    long = " ".join(f"Step {i} of the climb is steep." for i in range(100))
    for label, text in [("sentences", SENTENCES), ("multibyte", MULTIBYTE), ("long", long)]:
        answer = client.text_to_speech.convert_with_timestamps(voice_id="en-US", text=text, output_format="pcm_24000")
        alignment, normalized = answer.alignment, answer.normalized_alignment
        if alignment is None or normalized is None:
            fail(f"elevenlabs {label}: no alignment")
        audio = base64.b64decode(answer.audio_base_64)
        file = f"eleven-{label}.pcm"
        with open(os.path.join(outdir, file), "wb") as out:
            out.write(audio)
        manifest["elevenlabs"].append({
            "label": label, "text": text, "file": file, "characters": list(alignment.characters),
            "starts": list(alignment.character_start_times_seconds), "ends": list(alignment.character_end_times_seconds),
            "normalizedCharacters": list(normalized.characters)})
    chunks = list(client.text_to_speech.stream_with_timestamps(voice_id="en-US", text=SENTENCES, output_format="pcm_24000"))
    manifest["elevenlabsStream"] = {
        "chunks": len(chunks), "characters": [c for chunk in chunks for c in (chunk.alignment.characters if chunk.alignment else [])],
        "bytes": sum(len(base64.b64decode(chunk.audio_base_64 or "")) for chunk in chunks)}


def polly(port, outdir, key, manifest):
    client = boto3.client(
        "polly", endpoint_url=f"http://127.0.0.1:{port}", region_name="eu-central-1",
        aws_access_key_id=key, aws_secret_access_key="not-a-real-secret-0123456789",
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))

    def marks(label, **arguments):
        answer = client.synthesize_speech(OutputFormat="json", VoiceId="en-US", **arguments)
        lines = answer["AudioStream"].read().decode("utf-8").splitlines()
        manifest["polly"].append({"label": label, "text": arguments["Text"], "contentType": answer["ContentType"],
                                  "requestCharacters": answer["RequestCharacters"],
                                  "marks": [json.loads(line) for line in lines if line]})

    marks("sentences", Text=SENTENCES, SpeechMarkTypes=["sentence"])
    audio = client.synthesize_speech(OutputFormat="pcm", SampleRate="16000", VoiceId="en-US", Text=SENTENCES)["AudioStream"].read()
    with open(os.path.join(outdir, "polly-sentences.pcm"), "wb") as out:
        out.write(audio)
    marks("multibyte", Text=MULTIBYTE, SpeechMarkTypes=["sentence", "word"])
    marks("ssml", Text='<speak>Café <mark name="here"/>first. <mark name="日本"/>Second one.</speak>', TextType="ssml",
          SpeechMarkTypes=["sentence", "ssml", "word"])

    def refused(what, code, **arguments):
        try:
            client.synthesize_speech(VoiceId="en-US", Text=SENTENCES, **arguments)
        except botocore.exceptions.ClientError as error:
            got = error.response.get("Error", {}).get("Code")
            if got != code:
                fail(f"polly {what}: refused with {got}, expected {code}")
            manifest["pollyRefusals"].append({"refused": what, "code": got})
            return
        fail(f"polly {what}: was accepted, expected {code}")

    refused("json without marks", "MarksNotSupportedForFormatException", OutputFormat="json")
    refused("marks with pcm", "MarksNotSupportedForFormatException", OutputFormat="pcm", SpeechMarkTypes=["sentence"])
    refused("ssml marks for text", "SsmlMarksNotSupportedForTextTypeException", OutputFormat="json", SpeechMarkTypes=["ssml"])
    refused("visemes", "ValidationException", OutputFormat="json", SpeechMarkTypes=["viseme"])


def main():
    port, outdir, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    manifest = {"google": [], "elevenlabs": [], "polly": [], "pollyRefusals": []}
    google(port, outdir, key, manifest)
    elevenlabs(port, outdir, key, manifest)
    polly(port, outdir, key, manifest)
    with open(os.path.join(outdir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=2, sort_keys=True, ensure_ascii=False)


if __name__ == "__main__":
    main()
