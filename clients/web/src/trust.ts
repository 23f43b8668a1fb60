/**
 * The catalogue a device works from, read conditionally and checked with
 * exactly the rules of the Swift client's `CatalogReader`:
 *
 * 1. a root anchor walks `roots/<n+1>.json` forward from the newest root
 *    held, each signed by a threshold of the root keys of the version
 *    before and of its own;
 * 2. the catalogue must carry a valid Ed25519 signature by the key, or by
 *    a threshold of the catalogue keys the newest root authorises (a
 *    signature that fails is read again, with the catalogue, once);
 * 3. its generation must not be lower than the highest this device
 *    verified from the site (at the same generation its `expiresAt` must
 *    not be earlier), nor more than 10,000 above it (a fast-forward); that
 *    generation counts only while the newest root authorises one of the
 *    keys whose signatures verified it (never the catalogue's `signedBy`);
 * 4. it must not be past its `expiresAt`.
 *
 * A refused catalogue changes nothing. There is no unsigned mode: the web
 * client always has an anchor.
 */
import { base64Decode, base64Encode, CryptoFacade, verifyingKey, VerifyingKey } from "./crypto.js";
import {
  Catalog,
  CatalogSchemaError,
  checkCatalogNumbers,
  decodeCatalog,
  decodeRoot,
  decodeSignatureDocument,
  maximumCatalogBytes,
  maximumGenerationStep,
  maximumRootBytes,
  Root,
  SiteLayout,
  verifyCatalogByRoot,
  verifyNextRoot,
  verifySignature,
} from "./documents.js";
import { OfflineError } from "./errors.js";
import { timestamp, parseTimestamp } from "./json.js";
import { PackStorage, StateValue } from "./storage.js";
import { SiteFailure, SiteTransport } from "./transfer.js";

/** What a device trusts to sign a site's catalogue. */
export type TrustAnchor = { publicKey: string } | { rootJSON: Uint8Array };

/** What the device remembers of the trust it verified with (`trust.json` in the Swift client). */
export interface TrustRecord {
  anchor: "publicKey" | "root";
  publicKey?: string;
  site: string;
  generation: bigint;
  catalogExpiresAt?: Date;
  verifiedBy: string[];
  rootVersion?: bigint;
}

const int64Max = 2n ** 63n - 1n;
const maximumRootSteps = 1000;

export const StateKeys = {
  trust: "trust",
  heldRoot: "heldRoot",
  catalog: "catalog",
} as const;

/** The record as stored: numbers as decimal text, so no generation loses a digit. */
function encodeRecord(record: TrustRecord): StateValue {
  const value: { [key: string]: StateValue } = {
    schemaVersion: 2,
    anchor: record.anchor,
    site: record.site,
    generation: record.generation.toString(),
    verifiedBy: record.verifiedBy,
  };
  if (record.publicKey !== undefined) value.publicKey = record.publicKey;
  if (record.catalogExpiresAt !== undefined) value.catalogExpiresAt = timestamp(record.catalogExpiresAt);
  if (record.rootVersion !== undefined) value.rootVersion = record.rootVersion.toString();
  return value;
}

/** A record that cannot be relied on refuses every read until a deliberate `resetTrust()`. */
export function damagedTrust(reason: string): OfflineError {
  return OfflineError.integrity(
    "trust record",
    `the device's trust record is damaged (${reason}): without it this device cannot tell a replayed old catalogue from the site's, ` +
      "so nothing was installed or changed. To start over as a new device would, call resetTrust() once the user has confirmed it",
  );
}

function decodeRecord(value: StateValue): TrustRecord {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw damagedTrust("not a trust record");
  const integer = (text: StateValue | undefined, field: string): bigint => {
    if (typeof text !== "string" || !/^-?[0-9]{1,19}$/.test(text)) throw damagedTrust(`${field} is not a number`);
    const number = BigInt(text);
    if (number < 1n || number > int64Max) throw damagedTrust(`${field} ${number}; it starts at 1`);
    return number;
  };
  if (value.schemaVersion !== 2) throw damagedTrust(`schemaVersion ${JSON.stringify(value.schemaVersion)}; this client reads 2`);
  if (value.anchor !== "publicKey" && value.anchor !== "root") throw damagedTrust("no anchor");
  if (typeof value.site !== "string") throw damagedTrust("no site");
  const verifiedBy = value.verifiedBy;
  if (!Array.isArray(verifiedBy) || verifiedBy.length === 0 || !verifiedBy.every((id) => typeof id === "string" && /^[0-9a-f]{16}$/.test(id))) {
    throw damagedTrust("verifiedBy names no key");
  }
  const expires = value.catalogExpiresAt;
  if (expires !== undefined && (typeof expires !== "string" || parseTimestamp(expires) === undefined)) throw damagedTrust("catalogExpiresAt is not a time");
  if (value.anchor === "publicKey" && (typeof value.publicKey !== "string" || base64Decode(value.publicKey)?.length !== 32)) {
    throw damagedTrust("publicKey is not the base64 of an Ed25519 public key");
  }
  return {
    anchor: value.anchor,
    publicKey: typeof value.publicKey === "string" ? value.publicKey : undefined,
    site: value.site,
    generation: integer(value.generation, "generation"),
    catalogExpiresAt: typeof expires === "string" ? parseTimestamp(expires) : undefined,
    verifiedBy: verifiedBy as string[],
    rootVersion: value.rootVersion === undefined ? undefined : integer(value.rootVersion, "rootVersion"),
  };
}

export async function readTrustRecord(storage: PackStorage): Promise<TrustRecord | undefined> {
  let value: StateValue | undefined;
  try {
    value = await storage.readState(StateKeys.trust);
  } catch (error) {
    throw damagedTrust(`it cannot be read: ${(error as Error).message}`);
  }
  return value === undefined ? undefined : decodeRecord(value);
}

/** The catalogue last verified from the site, with its signature and validators. */
export interface RememberedCatalog {
  site: string;
  bytes: Uint8Array;
  signature?: Uint8Array;
  etag?: string;
  lastModified?: string;
}

export async function rememberedCatalog(storage: PackStorage): Promise<RememberedCatalog | undefined> {
  const value = await storage.readState(StateKeys.catalog);
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const bytes = typeof value.bytes === "string" ? base64Decode(value.bytes) : undefined;
  if (bytes === undefined || typeof value.site !== "string") return undefined;
  return {
    site: value.site,
    bytes,
    signature: typeof value.signature === "string" ? base64Decode(value.signature) : undefined,
    etag: typeof value.etag === "string" ? value.etag : undefined,
    lastModified: typeof value.lastModified === "string" ? value.lastModified : undefined,
  };
}

type Verifier = { key: VerifyingKey } | { root: Root };

async function anchorVerifier(crypto: CryptoFacade, anchor: TrustAnchor): Promise<Verifier> {
  if ("publicKey" in anchor) return { key: await verifyingKey(crypto, anchor.publicKey) };
  try {
    return { root: await decodeRoot(crypto, anchor.rootJSON) };
  } catch (error) {
    throw new OfflineError("invalidInput", (error as Error).message, { file: "root.json" });
  }
}

/** Checks the signature; the ids of the keys whose signatures verified, sorted. */
async function verify(crypto: CryptoFacade, verifier: Verifier, bytes: Uint8Array, signature: Uint8Array | undefined): Promise<string[]> {
  if (signature === undefined) {
    const by = "key" in verifier ? verifier.key.keyId : `root version ${verifier.root.version}`;
    throw OfflineError.integrity(
      SiteLayout.catalog,
      `the site has no ${SiteLayout.catalogSignature}: the catalogue is unsigned, and a signature by ${by} is required`,
    );
  }
  if ("key" in verifier) {
    try {
      await verifySignature(crypto, bytes, decodeSignatureDocument(signature), verifier.key);
    } catch (error) {
      throw OfflineError.integrity(SiteLayout.catalog, (error as Error).message);
    }
    return [verifier.key.keyId];
  }
  return verifyCatalogByRoot(crypto, verifier.root, bytes, signature);
}

function decode(bytes: Uint8Array): Catalog {
  let catalog: Catalog;
  try {
    catalog = decodeCatalog(bytes);
  } catch (error) {
    if (error instanceof CatalogSchemaError) throw new OfflineError("invalidInput", error.message, { file: SiteLayout.catalog });
    throw OfflineError.integrity(SiteLayout.catalog, `not a catalogue tourpack can read: ${(error as Error).message}`);
  }
  checkCatalogNumbers(catalog);
  return catalog;
}

/** `catalogExpired` for a catalogue past its `expiresAt`, or without one. */
export function checkExpiry(catalog: Catalog, now: Date): void {
  if (catalog.expiresAt !== undefined && catalog.expiresAt > now) return;
  const when = catalog.expiresAt === undefined ? "has no expiresAt" : `expired at ${timestamp(catalog.expiresAt)}`;
  throw new OfflineError(
    "catalogExpired",
    `the site's catalogue (generation ${catalog.generation}) ${when}, and it is ${timestamp(now)}: a mirror may be serving a frozen copy, ` +
      "or the publisher has not run `tourpack publish --refresh`; installed packages keep playing, nothing new is downloaded",
    { file: SiteLayout.catalog },
  );
}

export interface VerifiedCatalog {
  catalog: Catalog;
  bytes: Uint8Array;
  notModified: boolean;
  /** The keys whose signatures verified it. */
  verifiedBy: string[];
}

export class CatalogReader {
  constructor(
    readonly transport: SiteTransport,
    readonly storage: PackStorage,
    readonly anchor: TrustAnchor,
    readonly crypto: CryptoFacade,
    readonly now: () => Date = () => new Date(),
  ) {}

  /** The catalogue in force, checked; what it taught is remembered only once it is accepted. */
  async read(signal?: AbortSignal): Promise<VerifiedCatalog> {
    const site = this.transport.location;
    const record = await readTrustRecord(this.storage);
    const remembered = await rememberedCatalog(this.storage).then((held) => (held?.site === site ? held : undefined));
    let verifier = await anchorVerifier(this.crypto, this.anchor);
    let walked: Root | undefined;
    if ("root" in verifier) {
      walked = await this.walkRoots(verifier.root, record, signal);
      verifier = { root: walked };
    }
    let bytes: Uint8Array;
    let signature: Uint8Array | undefined;
    let version: { etag?: string; lastModified?: string };
    let notModified = false;
    const usable = remembered !== undefined && (remembered.etag !== undefined || remembered.lastModified !== undefined) ? remembered : undefined;
    const first = await this.fetchCatalog(usable, signal);
    if (first.notModified && remembered !== undefined) {
      ({ bytes, signature } = remembered);
      version = { etag: remembered.etag, lastModified: remembered.lastModified };
      notModified = true;
    } else if (first.notModified) {
      ({ bytes, version } = await this.fetchWhole(signal));
      signature = await this.fetchObject(SiteLayout.catalogSignature, signal);
    } else {
      ({ bytes, version } = first);
      signature = await this.fetchObject(SiteLayout.catalogSignature, signal);
    }
    this.checkSize(bytes);
    let verifiedBy: string[];
    try {
      verifiedBy = await verify(this.crypto, verifier, bytes, signature);
    } catch {
      // Perhaps caught between the catalogue's write and its signature's: both once more.
      ({ bytes, version } = await this.fetchWhole(signal));
      signature = await this.fetchObject(SiteLayout.catalogSignature, signal);
      notModified = false;
      this.checkSize(bytes);
      verifiedBy = await verify(this.crypto, verifier, bytes, signature);
    }
    const catalog = decode(bytes);
    const next = this.checkFreshness(catalog, record, verifier, verifiedBy, site);
    if (!notModified) {
      const value: { [key: string]: StateValue } = { site, bytes: base64Encode(bytes) };
      if (signature !== undefined) value.signature = base64Encode(signature);
      if (version.etag !== undefined) value.etag = version.etag;
      if (version.lastModified !== undefined) value.lastModified = version.lastModified;
      await this.storage.writeState(StateKeys.catalog, value);
    }
    if (walked !== undefined) {
      const held = await this.heldRoot();
      if (held === undefined || walked.version > held.version) await this.storage.writeState(StateKeys.heldRoot, base64Encode(walked.bytes));
    }
    await this.storage.writeState(StateKeys.trust, encodeRecord(next));
    return { catalog, bytes, notModified, verifiedBy };
  }

  /** Rules 3 and 4; the record to keep once the catalogue is accepted. */
  private checkFreshness(catalog: Catalog, record: TrustRecord | undefined, verifier: Verifier, verifiedBy: string[], site: string): TrustRecord {
    let floor: { generation: bigint; expiresAt?: Date } | undefined;
    if (record !== undefined && record.site === site) {
      floor = { generation: record.generation, expiresAt: record.catalogExpiresAt };
      // A root that authorises none of the keys that verified the remembered generation revoked them all.
      if ("root" in verifier && !record.verifiedBy.some((id) => verifier.root.roles.catalog.keyIds.includes(id))) floor = undefined;
    }
    if (floor !== undefined) {
      if (catalog.generation < floor.generation) {
        throw new OfflineError(
          "rollbackRefused",
          `the site's catalogue is generation ${catalog.generation}, older than generation ${floor.generation} this device verified: ` +
            "a mirror may be replaying an old catalogue; nothing was changed",
          { file: SiteLayout.catalog },
        );
      }
      if (catalog.generation === floor.generation && floor.expiresAt !== undefined && (catalog.expiresAt?.getTime() ?? -Infinity) < floor.expiresAt.getTime()) {
        throw new OfflineError(
          "rollbackRefused",
          `the site's catalogue is generation ${catalog.generation} with an earlier expiry than the copy this device verified ` +
            `(${catalog.expiresAt === undefined ? "none" : timestamp(catalog.expiresAt)} < ${timestamp(floor.expiresAt)}): an older signing of it; nothing was changed`,
          { file: SiteLayout.catalog },
        );
      }
      const ceiling = floor.generation + maximumGenerationStep;
      if (ceiling <= int64Max && catalog.generation > ceiling) {
        throw new OfflineError(
          "rollbackRefused",
          `the site's catalogue is generation ${catalog.generation}, more than ${maximumGenerationStep} past generation ${floor.generation} ` +
            "this device verified: refused as a fast-forward; nothing was changed",
          { file: SiteLayout.catalog },
        );
      }
    } else if (catalog.generation > maximumGenerationStep) {
      throw new OfflineError(
        "rollbackRefused",
        `the site's catalogue is generation ${catalog.generation}; a device that verified none accepts at most ${maximumGenerationStep}: ` +
          "refused as a fast-forward; nothing was changed",
        { file: SiteLayout.catalog },
      );
    }
    checkExpiry(catalog, this.now());
    return {
      anchor: record?.anchor ?? ("key" in verifier ? "publicKey" : "root"),
      publicKey: record !== undefined ? record.publicKey : "key" in verifier ? verifier.key.base64 : undefined,
      site,
      generation: catalog.generation,
      catalogExpiresAt: catalog.expiresAt,
      verifiedBy,
      rootVersion: "root" in verifier ? verifier.root.version : record?.rootVersion,
    };
  }

  private async heldRoot(): Promise<Root | undefined> {
    const value = await this.storage.readState(StateKeys.heldRoot);
    const bytes = typeof value === "string" ? base64Decode(value) : undefined;
    if (bytes === undefined) return undefined;
    try {
      return await decodeRoot(this.crypto, bytes);
    } catch {
      return undefined;
    }
  }

  /** The newest root the site holds past the one this device holds. */
  private async walkRoots(pinned: Root, record: TrustRecord | undefined, signal?: AbortSignal): Promise<Root> {
    let current = pinned;
    if (record?.anchor === "root") {
      const held = await this.heldRoot();
      if (held !== undefined && held.version > pinned.version) current = held;
    }
    for (let step = 0; step < maximumRootSteps; step++) {
      if (current.version >= int64Max) return current;
      const key = SiteLayout.root(current.version + 1n);
      const bytes = await this.fetchObject(key, signal);
      if (bytes === undefined) return current;
      const signature = await this.fetchObject(SiteLayout.signature(key), signal);
      if (signature === undefined) throw OfflineError.integrity(key, `the site has no ${SiteLayout.signature(key)} for it`);
      current = await verifyNextRoot(this.crypto, current, bytes, signature);
    }
    return current;
  }

  /** A root or signature document, at most 64 KiB; undefined when the site has none. */
  private async fetchObject(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined> {
    let bytes: Uint8Array | undefined;
    try {
      bytes = await this.transport.object(key, maximumCatalogBytes, signal);
    } catch (error) {
      if (error instanceof SiteFailure) throw error.installError(key);
      throw error;
    }
    if (bytes !== undefined && bytes.length > maximumRootBytes) {
      throw OfflineError.integrity(key, `${bytes.length} bytes, more than the ${maximumRootBytes} a device reads`);
    }
    return bytes;
  }

  private checkSize(bytes: Uint8Array): void {
    if (bytes.length > maximumCatalogBytes) {
      throw OfflineError.integrity(SiteLayout.catalog, `${bytes.length} bytes, more than the ${maximumCatalogBytes} a device reads`);
    }
  }

  private async fetchCatalog(version: { etag?: string; lastModified?: string } | undefined, signal?: AbortSignal) {
    try {
      return await this.transport.catalog(version, maximumCatalogBytes, signal);
    } catch (error) {
      if (error instanceof SiteFailure) {
        if (error.kind === "missing") {
          throw new OfflineError("invalidInput", `${this.transport.location}: no catalog.json (${error.message}); is this a published site?`, {
            file: SiteLayout.catalog,
          });
        }
        throw error.installError(SiteLayout.catalog);
      }
      throw error;
    }
  }

  private async fetchWhole(signal?: AbortSignal) {
    const read = await this.fetchCatalog(undefined, signal);
    if (read.notModified) throw OfflineError.integrity(SiteLayout.catalog, "the site answered 304 to a request without If-None-Match");
    return read;
  }

  /** The remembered catalogue checked again against the anchor (the newest root held), as `CatalogReader.check` does. */
  async checkRemembered(): Promise<Catalog | undefined> {
    const held = await rememberedCatalog(this.storage);
    if (held === undefined || held.site !== this.transport.location) return undefined;
    let verifier = await anchorVerifier(this.crypto, this.anchor);
    if ("root" in verifier) {
      const root = await this.heldRoot();
      if (root !== undefined && root.version > verifier.root.version) verifier = { root };
    }
    await verify(this.crypto, verifier, held.bytes, held.signature);
    return decode(held.bytes);
  }
}

/** Forgets the trust record, the newest root and the remembered catalogue: only on a person's deliberate word. */
export async function resetTrust(storage: PackStorage): Promise<void> {
  for (const key of [StateKeys.trust, StateKeys.heldRoot]) await storage.deleteState(key);
}
