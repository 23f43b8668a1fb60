/**
 * The site's signed documents, read exactly as the Swift client reads them
 * (`CatalogSignature`, `SignatureSet`, `RootOfTrust`, `Catalog` in
 * TourpackPackage): the same fields, the same bounds, the same refusals.
 */
import { base64Decode, CryptoFacade, verifyingKey, VerifyingKey } from "./crypto.js";
import { OfflineError } from "./errors.js";
import { Fields, JSONError, JSONValue, isObject, kindName, readJSON } from "./json.js";

export const SiteLayout = {
  catalog: "catalog.json",
  catalogSignature: "catalog.json.sig",
  root: (version: bigint) => `roots/${version}.json`,
  signature: (key: string) => `${key}.sig`,
  blob: (sha256: string) => `blobs/sha256/${sha256.slice(0, 2)}/${sha256}`,
};

/** The largest catalogue (and any whole object: a package.json) a device reads: 32 MiB. */
export const maximumCatalogBytes = 32 * 1024 * 1024;
/** The most a root or a signature document may weigh: 64 KiB. */
export const maximumRootBytes = 64 * 1024;
/** How far past the highest generation verified a catalogue may be. */
export const maximumGenerationStep = 10_000n;
/** The most one package may weigh, its files together: 1 TiB. */
export const maximumPackageBytes = 2n ** 40n;

// MARK: Signatures

export interface Signature {
  keyId: string;
  signature: string;
}

/** Why a signature does not verify, in the Swift client's words. */
export class SignatureError extends Error {}

function isKeyId(text: string): boolean {
  return /^[0-9a-f]{16}$/.test(text);
}

function quoted(text: string): string {
  return `"${text.length > 40 ? text.slice(0, 40) + "…" : text}"`;
}

/** One `{"algorithm", "keyId", "signature"}` document, strictly: exactly those three strings. */
export function decodeSignature(value: JSONValue): Signature {
  if (!isObject(value)) throw new SignatureError(`catalogue signature: not a signature document: expected an object, found ${kindName(value)}`);
  const fields: Record<string, string> = {};
  for (const [key, member] of Object.entries(value)) {
    if (!["algorithm", "keyId", "signature"].includes(key)) {
      throw new SignatureError(`catalogue signature: not a signature document: unknown key ${quoted(key)}`);
    }
    if (typeof member !== "string") {
      throw new SignatureError(`catalogue signature: not a signature document: ${key}: expected a string, found ${kindName(member)}`);
    }
    fields[key] = member;
  }
  const missing = ["algorithm", "keyId", "signature"].filter((key) => fields[key] === undefined);
  if (missing.length > 0) throw new SignatureError(`catalogue signature: not a signature document: missing ${missing.join(", ")}`);
  if (fields.algorithm !== "ed25519") {
    throw new SignatureError(`catalogue signature: unknown algorithm ${quoted(fields.algorithm!)}; only ed25519 is known`);
  }
  if (!isKeyId(fields.keyId!)) {
    throw new SignatureError(`catalogue signature: not a signature document: keyId ${quoted(fields.keyId!)} is not 16 lowercase hex digits`);
  }
  return { keyId: fields.keyId!, signature: fields.signature! };
}

function readDocument(bytes: Uint8Array, depth: number): JSONValue {
  try {
    return readJSON(bytes, { maxDepth: depth, refuseDuplicates: true });
  } catch (error) {
    throw new SignatureError(`catalogue signature: not a signature document: not JSON: ${(error as Error).message}`);
  }
}

/** A single signature document (what `catalog.json.sig` holds with a key anchor). */
export function decodeSignatureDocument(bytes: Uint8Array): Signature {
  return decodeSignature(readDocument(bytes, 4));
}

/** Either form: one signature, or `{"signatures": [...]}` with 1 to 16, at most 64 KiB. */
export function decodeSignatureSet(bytes: Uint8Array): Signature[] {
  if (bytes.length > maximumRootBytes) {
    throw new SignatureError(`catalogue signature: not a signature document: ${bytes.length} bytes; a signature document is at most ${maximumRootBytes}`);
  }
  const value = readDocument(bytes, 6);
  if (!isObject(value)) throw new SignatureError(`catalogue signature: not a signature document: expected an object, found ${kindName(value)}`);
  if (!("signatures" in value)) return [decodeSignatureDocument(bytes)];
  const items = value.signatures;
  if (Object.keys(value).length !== 1 || !Array.isArray(items)) {
    throw new SignatureError('catalogue signature: not a signature document: expected exactly {"signatures": [...]}');
  }
  if (items.length < 1 || items.length > 16) {
    throw new SignatureError(`catalogue signature: not a signature document: ${items.length} signatures; 1 to 16 are read`);
  }
  return items.map(decodeSignature);
}

/** Throws `SignatureError` unless `signature` is `key`'s valid signature of `bytes`. */
export async function verifySignature(crypto: CryptoFacade, bytes: Uint8Array, signature: Signature, key: VerifyingKey): Promise<void> {
  const raw = base64Decode(signature.signature);
  if (raw === undefined || raw.length !== 64) {
    throw new SignatureError("catalogue signature: not a signature document: signature is not the base64 of a 64-byte Ed25519 signature");
  }
  if (signature.keyId !== key.keyId) {
    throw new SignatureError(`catalogue signature: signed by key ${signature.keyId}, not by the expected key ${key.keyId}`);
  }
  if (!(await crypto.verifyEd25519(key.raw, raw, bytes))) {
    throw new SignatureError(`catalogue signature: the signature by key ${signature.keyId} does not match the catalogue's bytes`);
  }
}

// MARK: Roots of trust

export interface Role {
  keyIds: string[];
  threshold: bigint;
}

/** `root.json`: which keys may sign the catalogue, and which the next root. */
export interface Root {
  version: bigint;
  keys: Map<string, VerifyingKey>;
  roles: { root: Role; catalog: Role };
  bytes: Uint8Array;
}

export class RootError extends Error {}

/** Reads a root and checks it hangs together, as `RootOfTrust.decode` does. */
export async function decodeRoot(crypto: CryptoFacade, bytes: Uint8Array): Promise<Root> {
  if (bytes.length > maximumRootBytes) throw new RootError(`root.json: ${bytes.length} bytes; a root is at most ${maximumRootBytes}`);
  let fields: Fields;
  let schemaVersion: bigint;
  let version: bigint;
  const keys = new Map<string, VerifyingKey>();
  const roles: { root?: Role; catalog?: Role } = {};
  try {
    fields = Fields.of(readJSON(bytes), "");
    schemaVersion = fields.int("schemaVersion");
    version = fields.int("version");
    fields.timestamp("publishedAt");
    const keyFields = fields.object_("keys");
    const rolesFields = fields.object_("roles");
    for (const name of ["root", "catalog"] as const) {
      const role = rolesFields.object_(name);
      const ids = role.array("keyIds").map((id, index) => {
        if (typeof id !== "string") throw new JSONError(`roles.${name}.keyIds[${index}]: expected a string, found ${kindName(id)}`);
        return id;
      });
      roles[name] = { keyIds: ids, threshold: role.int("threshold") };
    }
    for (const id of keyFields.keys()) {
      const key = keyFields.object_(id);
      const algorithm = key.string("algorithm");
      const publicKey = key.string("publicKey");
      if (schemaVersion === 1n && algorithm !== "ed25519") {
        throw new RootError(`root.json: keys.${id}.algorithm "${algorithm}"; only ed25519 is known`);
      }
      let verifying: VerifyingKey;
      try {
        verifying = await verifyingKey(crypto, publicKey);
      } catch (error) {
        throw new RootError(`root.json: ${(error as Error).message}`);
      }
      if (verifying.keyId !== id) throw new RootError(`root.json: keys.${id} is the key ${verifying.keyId}, not the one its id names`);
      keys.set(id, verifying);
    }
  } catch (error) {
    if (error instanceof RootError) throw error;
    throw new RootError(`root.json: not a root of trust: ${(error as Error).message}`);
  }
  if (schemaVersion !== 1n) throw new RootError(`root.json: schemaVersion ${schemaVersion}; this tourpack reads version 1 only`);
  if (version < 1n) throw new RootError(`root.json: version ${version}; versions start at 1`);
  for (const name of ["root", "catalog"] as const) {
    const role = roles[name]!;
    for (const id of role.keyIds) {
      if (!keys.has(id)) throw new RootError(`root.json: roles.${name}.keyIds names ${id}, which keys does not list`);
    }
    const count = BigInt(role.keyIds.length);
    if (new Set(role.keyIds).size !== role.keyIds.length || role.threshold < 1n || role.threshold > (count > 1n ? count : 1n) || count === 0n) {
      throw new RootError(`root.json: roles.${name}: threshold ${role.threshold} of ${role.keyIds.length} distinct key(s); it must be 1 to the key count`);
    }
  }
  return { version, keys, roles: { root: roles.root!, catalog: roles.catalog! }, bytes };
}

/** The ids of `role`'s keys whose signature in `document` matches `bytes`. */
export async function signers(crypto: CryptoFacade, root: Root, bytes: Uint8Array, document: Uint8Array, role: Role): Promise<Set<string>> {
  const signatures = decodeSignatureSet(document);
  const valid = new Set<string>();
  for (const id of role.keyIds) {
    const key = root.keys.get(id);
    if (key === undefined) continue;
    for (const signature of signatures) {
      if (signature.keyId !== key.keyId) continue;
      try {
        await verifySignature(crypto, bytes, signature, key);
        valid.add(key.keyId);
      } catch {
        // Not valid: counts for nothing.
      }
    }
  }
  return valid;
}

const int64Max = 2n ** 63n - 1n;

/** Root `version + 1`, checked as `RootOfTrust.verifyNext` checks it; `file` names it in errors. */
export async function verifyNextRoot(crypto: CryptoFacade, current: Root, bytes: Uint8Array, document: Uint8Array): Promise<Root> {
  if (current.version >= int64Max) {
    throw OfflineError.integrity(SiteLayout.root(current.version), `root version ${current.version} is the last there can be; no root follows it`);
  }
  const expected = current.version + 1n;
  const file = SiteLayout.root(expected);
  let next: Root;
  try {
    next = await decodeRoot(crypto, bytes);
  } catch (error) {
    throw OfflineError.integrity(file, (error as Error).message);
  }
  if (next.version !== expected) throw OfflineError.integrity(file, `holds root version ${next.version}, not ${expected}`);
  for (const [signer, role, name] of [
    [current, current.roles.root, `version ${current.version}`],
    [next, next.roles.root, `version ${next.version}`],
  ] as const) {
    let valid: Set<string>;
    try {
      valid = await signers(crypto, signer, bytes, document, role);
    } catch (error) {
      throw OfflineError.integrity(file, (error as Error).message);
    }
    if (BigInt(valid.size) < role.threshold) {
      throw OfflineError.integrity(
        file,
        `needs ${role.threshold} signature(s) by root ${name}'s root keys (${role.keyIds.join(", ")}), found ${valid.size}`,
      );
    }
  }
  return next;
}

/** The ids of the catalogue keys whose signatures verified `bytes`, at least the role's threshold, sorted. */
export async function verifyCatalogByRoot(crypto: CryptoFacade, root: Root, bytes: Uint8Array, document: Uint8Array): Promise<string[]> {
  let valid: Set<string>;
  try {
    valid = await signers(crypto, root, bytes, document, root.roles.catalog);
  } catch (error) {
    throw OfflineError.integrity(SiteLayout.catalog, (error as Error).message);
  }
  if (BigInt(valid.size) < root.roles.catalog.threshold) {
    let named: string[] = [];
    try {
      named = decodeSignatureSet(document).map((signature) => signature.keyId);
    } catch {
      named = [];
    }
    throw OfflineError.integrity(
      SiteLayout.catalog,
      `signed by ${named.length === 0 ? "no key" : "key(s) " + named.join(", ")}; root version ${root.version} needs ` +
        `${root.roles.catalog.threshold} valid signature(s) by ${root.roles.catalog.keyIds.join(", ")}, found ${valid.size}`,
    );
  }
  return [...valid].sort();
}

// MARK: The catalogue

export type AudioFormat = "aac" | "mp3" | "opus";
export type AudioQuality = "high" | "medium" | "low";
export const qualities: AudioQuality[] = ["high", "medium", "low"];

export interface CatalogPackage {
  packageId: string;
  tourVersion: bigint;
  format: AudioFormat;
  codec: string;
  bitrateKbps: bigint;
  quality: AudioQuality;
  contentHash: string;
  voiceName: string;
  manifest: { path: string; sha256: string };
  sizeBytes: bigint;
  audioBytes: bigint;
  mapBytes: bigint;
  durationSeconds: number;
  poiCount: bigint;
  createdAt: Date;
  expiresAt: Date;
}

export interface CatalogTour {
  tourId: string;
  tourName: string;
  tourVersion: bigint;
  language: string;
  packages: CatalogPackage[];
}

export interface Catalog {
  generation: bigint;
  previousGeneration?: bigint;
  publishedAt: Date;
  expiresAt?: Date;
  tours: CatalogTour[];
  signedBy?: string;
}

export class CatalogSchemaError extends Error {}

function oneOf<T extends string>(value: string, allowed: readonly T[], field: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw new JSONError(`${field}: "${value.slice(0, 40)}" is not one of ${allowed.join(", ")}`);
  return value as T;
}

/**
 * catalog.json's bytes as `Catalog.decode` reads them: every field the
 * Swift type declares, with its type; unknown keys ignored; another
 * `schemaVersion` refused (`CatalogSchemaError`).
 */
export function decodeCatalog(bytes: Uint8Array): Catalog {
  const root = Fields.of(readJSON(bytes), "");
  const schemaVersion = root.int("schemaVersion");
  const catalog: Catalog = {
    generation: root.int("generation"),
    previousGeneration: root.optionalInt("previousGeneration"),
    publishedAt: root.timestamp("publishedAt"),
    expiresAt: root.optionalTimestamp("expiresAt"),
    signedBy: root.optionalString("signedBy"),
    tours: root.array("tours").map((tourValue, t) => {
      const tour = Fields.of(tourValue, `tours[${t}]`);
      return {
        tourId: tour.string("tourId"),
        tourName: tour.string("tourName"),
        tourVersion: tour.int("tourVersion"),
        language: tour.string("language"),
        packages: tour.array("packages").map((packageValue, p) => {
          const path = `tours[${t}].packages[${p}]`;
          const entry = Fields.of(packageValue, path);
          const voice = entry.object_("voice");
          voice.string("provider");
          voice.string("languageCode");
          voice.string("tier");
          voice.number("speakingRate");
          voice.number("pitch");
          const manifest = entry.object_("manifest");
          const bounds = entry.object_("bounds");
          for (const side of ["south", "west", "north", "east"]) bounds.number(side);
          return {
            packageId: entry.string("packageId"),
            tourVersion: entry.int("tourVersion"),
            format: oneOf(entry.string("format"), ["aac", "mp3", "opus"] as const, `${path}.format`),
            codec: entry.string("codec"),
            bitrateKbps: entry.int("bitrateKbps"),
            quality: oneOf(entry.string("quality"), qualities, `${path}.quality`),
            contentHash: entry.string("contentHash"),
            voiceName: voice.string("name"),
            manifest: { path: manifest.string("path"), sha256: manifest.string("sha256").toLowerCase() },
            sizeBytes: entry.int("sizeBytes"),
            audioBytes: entry.int("audioBytes"),
            mapBytes: entry.int("mapBytes"),
            durationSeconds: entry.number("durationSeconds"),
            poiCount: entry.int("poiCount"),
            createdAt: entry.timestamp("createdAt"),
            expiresAt: entry.timestamp("expiresAt"),
          };
        }),
      };
    }),
  };
  root.optionalBool("unsigned");
  if (schemaVersion !== 1n) throw new CatalogSchemaError(`catalog.json: schemaVersion ${schemaVersion}; this tourpack reads version 1 only`);
  return catalog;
}

/**
 * The numbers a device adds up or compares, in range: a generation of 1 or
 * more, each package's sizes from 0 to 1 TiB (`CatalogReader.checkNumbers`).
 */
export function checkCatalogNumbers(catalog: Catalog): void {
  if (catalog.generation < 1n) throw OfflineError.integrity(SiteLayout.catalog, `generation ${catalog.generation}: generations start at 1`);
  catalog.tours.forEach((tour, t) =>
    tour.packages.forEach((entry, p) => {
      for (const field of ["sizeBytes", "audioBytes", "mapBytes"] as const) {
        const value = entry[field];
        if (value < 0n || value > maximumPackageBytes) {
          throw OfflineError.integrity(
            SiteLayout.catalog,
            `tours[${t}].packages[${p}].${field} is ${value}; a package weighs 0 to ${maximumPackageBytes} bytes`,
            { packageName: `package ${entry.packageId} (${tour.tourName})` },
          );
        }
      }
    }),
  );
}

/** Whether a package names its package.json where it belongs: `packages/<id>/<contentHash>[.<12 hex of its sha256>].json`. */
export function namesItsManifestWhereItBelongs(entry: CatalogPackage): boolean {
  const base = `packages/${entry.packageId}/${entry.contentHash}`;
  return entry.manifest.path === `${base}.json` || entry.manifest.path === `${base}.${entry.manifest.sha256.slice(0, 12)}.json`;
}
