/**
 * A small signed site made in the test, with WebCrypto's Ed25519: what
 * `tourpack publish` writes (a catalogue, its signature, package.json files
 * and blobs named by SHA-256), in the shapes the Swift types decode. The
 * shared vectors (Tests/Vectors) are the real publisher's output; these
 * sites let the core's own tests change one thing at a time.
 */
import { base64Encode, hex, utf8 } from "../src/crypto.js";
import { TestSite } from "./site.js";

const subtle = globalThis.crypto.subtle;

export async function sha(bytes: Uint8Array): Promise<string> {
  return hex(new Uint8Array(await subtle.digest("SHA-256", bytes)));
}

export interface Signer {
  publicKey: string;
  keyId: string;
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

export async function newSigner(): Promise<Signer> {
  const pair = (await subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const raw = new Uint8Array(await subtle.exportKey("raw", pair.publicKey));
  return {
    publicKey: base64Encode(raw),
    keyId: (await sha(raw)).slice(0, 16),
    sign: async (bytes) => new Uint8Array(await subtle.sign({ name: "Ed25519" }, pair.privateKey, bytes)),
  };
}

export function uuid(n: number): string {
  const digits = n.toString(16).padStart(12, "0");
  return `00000000-0000-4000-8000-${digits}`;
}

function stamp(date: Date): string {
  return date.toISOString().replace(/\.[0-9]{3}Z$/, "Z");
}

export interface TourSpec {
  tourId: string;
  name: string;
  /** Each narration's audio bytes. */
  audio: Uint8Array[];
  captions?: boolean;
  /** A tile pack's bytes (MBTiles), handed out as a Blob. */
  tiles?: Uint8Array;
}

export function bytes(count: number, seed: number): Uint8Array {
  const out = new Uint8Array(count);
  let x = seed * 2654435761 + 1;
  for (let i = 0; i < count; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/** Publishes `tours` into `site` as generation `generation`, signed by `signer`. */
export async function publish(
  site: TestSite,
  signer: Signer,
  tours: TourSpec[],
  options: { generation?: number; now?: Date; ttlDays?: number; packageDays?: number } = {},
): Promise<void> {
  const now = options.now ?? new Date(Math.floor(Date.now() / 1000) * 1000);
  const expires = new Date(now.getTime() + (options.ttlDays ?? 7) * 86400_000);
  const catalogTours = [];
  for (const tour of tours) {
    const packageId = `${tour.tourId.slice(0, 9)}aaaa${tour.tourId.slice(13)}`;
    const pois = tour.audio.map((_, index) => ({ id: uuid(1000 + index), name: `Stop ${index + 1}` }));
    const audio = [];
    let audioBytes = 0;
    for (const [index, body] of tour.audio.entries()) {
      const digest = await sha(body);
      site.files.set(`blobs/sha256/${digest.slice(0, 2)}/${digest}`, body);
      audioBytes += body.length;
      const entry: Record<string, unknown> = {
        poiId: pois[index]!.id,
        phase: "detailed",
        path: `AudioCache/${tour.tourId}/${pois[index]!.id}_Detailed.m4a`,
        sha256: digest,
        sizeBytes: body.length,
        durationSeconds: 1.5,
      };
      if (tour.captions) {
        const vtt = utf8(`WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\n${tour.name} stop ${index + 1}.\n`);
        const captionSHA = await sha(vtt);
        site.files.set(`blobs/sha256/${captionSHA.slice(0, 2)}/${captionSHA}`, vtt);
        entry.captions = { path: `OfflineTours/${packageId}/captions/${pois[index]!.id}_Detailed.vtt`, sha256: captionSHA, sizeBytes: vtt.length };
      }
      audio.push(entry);
    }
    const mapTiles: Record<string, unknown> = {};
    if (tour.tiles !== undefined) {
      const digest = await sha(tour.tiles);
      site.files.set(`blobs/sha256/${digest.slice(0, 2)}/${digest}`, tour.tiles);
      Object.assign(mapTiles, { file: `OfflineTours/${packageId}/tiles.mbtiles`, sha256: digest, sizeBytes: tour.tiles.length, format: "png" });
    }
    const mapBytes = tour.tiles?.length ?? 0;
    const contentHash = (await sha(utf8(JSON.stringify([audio, mapTiles])))).slice(0, 32);
    const packageExpires = new Date(now.getTime() + (options.packageDays ?? 90) * 86400_000);
    const manifest = utf8(
      JSON.stringify({ packageId, tourId: tour.tourId, tourName: tour.name, contentHash, createdAt: stamp(now), expiresAt: stamp(packageExpires), pois, audio, mapTiles }),
    );
    const manifestSHA = await sha(manifest);
    const manifestPath = `packages/${packageId}/${contentHash}.json`;
    site.files.set(manifestPath, manifest);
    catalogTours.push({
      tourId: tour.tourId,
      tourName: tour.name,
      tourVersion: 1,
      language: "en-US",
      packages: [
        {
          packageId,
          tourVersion: 1,
          voice: { provider: "local", name: "en-us", languageCode: "en-US", tier: "local", speakingRate: 1, pitch: 0 },
          format: "aac",
          codec: "aac",
          bitrateKbps: 128,
          quality: "high",
          contentHash,
          manifest: { path: manifestPath, sha256: manifestSHA },
          sizeBytes: audioBytes + mapBytes,
          audioBytes,
          mapBytes,
          durationSeconds: 1.5 * tour.audio.length,
          poiCount: pois.length,
          bounds: { south: 47, west: 12, north: 48, east: 13 },
          createdAt: stamp(now),
          expiresAt: stamp(packageExpires),
        },
      ],
    });
  }
  const catalog = utf8(
    JSON.stringify({ schemaVersion: 1, generation: options.generation ?? 1, publishedAt: stamp(now), expiresAt: stamp(expires), tours: catalogTours, signedBy: signer.keyId }, null, 2) + "\n",
  );
  site.files.set("catalog.json", catalog);
  site.files.set("catalog.json.sig", utf8(JSON.stringify({ algorithm: "ed25519", keyId: signer.keyId, signature: base64Encode(await signer.sign(catalog)) })));
}
