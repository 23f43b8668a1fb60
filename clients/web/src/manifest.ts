/**
 * A package's package.json, checked as the Swift client checks it
 * (`PackagePlanner.fetchManifest`, `PackageFiles.of`): the SHA-256 the
 * signed catalogue names, then that it is the package and content the
 * catalogue says, then that every file it names sits at its place in the
 * layout, with a 64-digit SHA-256, once, the package at most 1 TiB. So one
 * signature covers every byte a device keeps.
 */
import { CryptoFacade, sha256Hex } from "./crypto.js";
import { CatalogPackage, CatalogTour, maximumCatalogBytes, maximumPackageBytes, namesItsManifestWhereItBelongs } from "./documents.js";
import { OfflineError, packageName } from "./errors.js";
import { Fields, readJSON } from "./json.js";
import { SiteFailure, SiteTransport } from "./transfer.js";

export type FileKind = "audio" | "captions" | "tilePack";

export interface PackageFile {
  /** Relative to the Documents root, as package.json names it. */
  path: string;
  sha256: string;
  sizeBytes: number;
  kind: FileKind;
}

export interface Narration {
  poiId: string;
  poiName: string;
  phase: string;
  audio: PackageFile;
  captions?: PackageFile;
  durationSeconds: number;
}

export interface Manifest {
  packageId: string;
  tourId: string;
  tourName: string;
  contentHash: string;
  createdAt: Date;
  expiresAt: Date;
  narrations: Narration[];
  files: PackageFile[];
}

const phaseLabels: Record<string, string> = { approaching: "Approaching", detailed: "Detailed", guidedTour: "Guided Tour" };
const extensions = ["m4a", "mp3", "opus"];

function isUUID(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(text);
}

/** `AudioCache/<tourId>/<poiId>_<Phase>.<ext>`, parsed as `Layout.parseAudioPath` does. */
function parseAudioPath(path: string): { tourId: string; poiId: string; label: string } | undefined {
  const parts = path.split("/");
  if (parts.length !== 3 || parts[0] !== "AudioCache" || !isUUID(parts[1]!)) return undefined;
  const name = parts[2]!;
  const dot = name.lastIndexOf(".");
  const underscore = name.indexOf("_");
  if (dot < 0 || underscore < 0 || underscore >= dot) return undefined;
  const poiId = name.slice(0, underscore);
  const label = name.slice(underscore + 1, dot);
  if (!isUUID(poiId) || !Object.values(phaseLabels).includes(label) || !extensions.includes(name.slice(dot + 1))) return undefined;
  return { tourId: parts[1]!, poiId, label };
}

/** package.json's bytes read and its files checked; `file` names it in errors. */
export function decodeManifest(bytes: Uint8Array, file: string, name: string): Manifest {
  const refuse = (why: string) => OfflineError.integrity(file, why, { packageName: name });
  let fields: Fields;
  try {
    fields = Fields.of(readJSON(bytes), "");
    const packageId = fields.string("packageId");
    const tourId = fields.string("tourId");
    if (!isUUID(packageId) || !isUUID(tourId)) throw refuse("packageId and tourId must be lowercase UUIDs");
    const poiNames = new Map<string, string>();
    for (const poi of fields.array("pois")) {
      const poiFields = Fields.of(poi, "pois[]");
      poiNames.set(poiFields.string("id"), poiFields.string("name"));
    }
    const files: PackageFile[] = [];
    const narrations: Narration[] = [];
    const captions: PackageFile[] = [];
    fields.array("audio").forEach((value, index) => {
      const entry = Fields.of(value, `audio[${index}]`);
      const path = entry.string("path");
      const parsed = parseAudioPath(path);
      if (parsed === undefined || parsed.tourId !== tourId) throw refuse(`audio path ${path} is not AudioCache/${tourId}/<poiId>_<Phase>.<ext>`);
      const audio: PackageFile = { path, sha256: entry.string("sha256"), sizeBytes: Number(entry.int("sizeBytes")), kind: "audio" };
      files.push(audio);
      let caption: PackageFile | undefined;
      if (entry.has("captions")) {
        const captionFields = entry.object_("captions");
        const expected = `OfflineTours/${packageId}/captions/${parsed.poiId}_${parsed.label}.vtt`;
        const captionPath = captionFields.string("path");
        if (captionPath !== expected) throw refuse(`captions path ${captionPath} is not ${expected}`);
        caption = { path: captionPath, sha256: captionFields.string("sha256"), sizeBytes: Number(captionFields.int("sizeBytes")), kind: "captions" };
        captions.push(caption);
      }
      narrations.push({
        poiId: entry.string("poiId"),
        poiName: poiNames.get(entry.string("poiId")) ?? entry.string("poiId"),
        phase: entry.string("phase"),
        audio,
        captions: caption,
        durationSeconds: entry.number("durationSeconds"),
      });
    });
    files.push(...captions);
    const map = fields.object_("mapTiles");
    if (map.has("file")) {
      const path = map.string("file");
      const expected = `OfflineTours/${packageId}/tiles.mbtiles`;
      if (path !== expected) throw refuse(`mapTiles.file ${path} is not ${expected}`);
      if (!map.has("sha256") || !map.has("sizeBytes")) throw refuse("mapTiles names a file without its sha256 and sizeBytes");
      files.push({ path, sha256: map.string("sha256"), sizeBytes: Number(map.int("sizeBytes")), kind: "tilePack" });
    }
    const seen = new Set<string>();
    let total = 0n;
    for (const each of files) {
      if (!/^[0-9a-f]{64}$/.test(each.sha256)) throw refuse(`${each.path}: sha256 is not 64 lowercase hex digits`);
      if (each.sizeBytes < 0) throw refuse(`${each.path}: negative sizeBytes`);
      if (seen.has(each.path)) throw refuse(`${each.path} is named twice`);
      seen.add(each.path);
      if (BigInt(each.sizeBytes) > maximumPackageBytes - total) {
        throw refuse(`${each.path}: sizeBytes ${each.sizeBytes} takes the package's files past ${maximumPackageBytes} bytes`);
      }
      total += BigInt(each.sizeBytes);
    }
    return {
      packageId,
      tourId,
      tourName: fields.string("tourName"),
      contentHash: fields.string("contentHash"),
      createdAt: fields.timestamp("createdAt"),
      expiresAt: fields.timestamp("expiresAt"),
      narrations,
      files,
    };
  } catch (error) {
    if (error instanceof OfflineError) throw error;
    throw refuse(`not a package.json: ${(error as Error).message}`);
  }
}

/** The package.json the catalogue names, fetched (at most 32 MiB) and checked; nothing of it is used before its SHA-256 matches. */
export async function fetchManifest(
  transport: SiteTransport,
  crypto: CryptoFacade,
  tour: CatalogTour,
  entry: CatalogPackage,
  signal?: AbortSignal,
): Promise<{ bytes: Uint8Array; manifest: Manifest }> {
  const name = packageName(entry.packageId, tour.tourName);
  const path = entry.manifest.path;
  if (!namesItsManifestWhereItBelongs(entry)) {
    throw OfflineError.integrity(path, "the catalogue names a package.json outside packages/<packageId>/<contentHash>[.<sha256 prefix>].json", {
      packageName: name,
    });
  }
  let bytes: Uint8Array | undefined;
  try {
    bytes = await transport.object(path, maximumCatalogBytes, signal);
  } catch (error) {
    if (error instanceof SiteFailure) throw error.installError(path, name);
    throw error;
  }
  if (bytes === undefined) throw OfflineError.integrity(path, `the site has no ${path}, though the catalogue names it`, { packageName: name });
  const digest = await sha256Hex(crypto, bytes);
  if (digest !== entry.manifest.sha256) {
    throw OfflineError.integrity(path, `SHA-256 ${digest}, but the catalogue names ${entry.manifest.sha256}`, { packageName: name });
  }
  const manifest = decodeManifest(bytes, path, name);
  if (manifest.packageId !== entry.packageId || manifest.tourId !== tour.tourId || manifest.contentHash !== entry.contentHash) {
    throw OfflineError.integrity(path, "its packageId, tourId or contentHash is not the catalogue's", { packageName: name });
  }
  return { bytes, manifest };
}
