/**
 * The web app's offline layer: the verified catalogue, offers with sizes,
 * downloads that resume and verify, the installed packages' files, an LRU
 * budget with pinned tours, and the same states as TourpackClient's
 * `OfflineLibrary`. Pure TypeScript over three small seams (a `PackStorage`,
 * a `fetch`, a `CryptoFacade`), so `node --test` runs it in memory and a
 * React Native app on its own file system.
 */
import { base64Decode, base64Encode, CryptoFacade, sha256Hex, webCrypto } from "./crypto.js";
import { AudioFormat, AudioQuality, Catalog, CatalogPackage, CatalogTour, qualities, SiteLayout } from "./documents.js";
import { ErrorKind, OfflineError, packageName } from "./errors.js";
import { decodeManifest, fetchManifest, Manifest, PackageFile } from "./manifest.js";
import { PackStorage, StateValue } from "./storage.js";
import { CatalogReader, checkExpiry, readTrustRecord, resetTrust, TrustAnchor } from "./trust.js";
import { Clock, defaultPolicy, FetchFunction, SiteFailure, SiteTransport, systemClock, TransferPolicy } from "./transfer.js";

/** A tour's state, as TourpackClient's `PackState` names it. */
export type PackStateKind = "none" | "queued" | "downloading" | "waiting" | "failed" | "cached" | "update_available";

export interface Offer {
  packageId: string;
  format: AudioFormat;
  quality: AudioQuality;
  bitrateKbps: number;
  voice: string;
  sizeBytes: number;
  audioBytes: number;
  mapBytes: number;
}

export interface DownloadJob {
  tourId: string;
  tourName: string;
  packageId: string;
  status: "queued" | "downloading" | "waiting" | "failed";
  totalBytes: number;
  downloadedBytes: number;
  /** Why it failed: the error's kind and message. */
  error?: { kind: ErrorKind; message: string };
  /** The SHA-256 of every file the package needs (kept from the clean-up until it commits). */
  needs: string[];
}

export interface InstalledPackage {
  tourId: string;
  tourName: string;
  packageId: string;
  contentHash: string;
  manifestSHA256: string;
  format: AudioFormat;
  quality: AudioQuality;
  files: PackageFile[];
  sizeBytes: number;
  installedAt: number;
  lastAccessedAt: number;
  pinned: boolean;
  manifest: Manifest;
}

export interface TourState {
  tourId: string;
  tourName: string;
  state: PackStateKind;
  offers: Offer[];
  job?: DownloadJob;
  installed?: InstalledPackage;
  /** The offer that would replace the installed package (an update), whatever the job. */
  update?: Offer;
}

export interface Connectivity {
  isOnline(): boolean;
  /** Resolves when the device has a network again. */
  whenOnline(signal?: AbortSignal): Promise<void>;
}

export const alwaysOnline: Connectivity = { isOnline: () => true, whenOnline: () => Promise.resolve() };

export interface LibraryOptions {
  /** The site's base URL (the folder `catalog.json` is in). */
  site: string;
  anchor: TrustAnchor;
  storage: PackStorage;
  fetch?: FetchFunction;
  crypto?: CryptoFacade;
  now?: () => Date;
  clock?: Clock;
  policy?: TransferPolicy;
  connectivity?: Connectivity;
  /** The budget of installed packages, each shared file counted once: 500 MB by default. */
  maxStorageBytes?: number;
  /** Bytes held in memory before a partial file is written: what a closed tab can lose. */
  flushBytes?: number;
  /**
   * Runs one download's work while no other library on the same storage
   * runs one (another tab, a worker): two never write the same partial
   * file. In a browser, `webLock` (the Web Locks API); by default, this
   * library's own queue only.
   */
  downloadLock?: <T>(work: () => Promise<T>) => Promise<T>;
}

/** `LibraryOptions.downloadLock` over the Web Locks API: every tab of the origin takes turns. */
export function webLock(name = "tourpack-downloads"): <T>(work: () => Promise<T>) => Promise<T> {
  const locks = (globalThis as unknown as { navigator?: { locks?: { request(name: string, work: () => Promise<unknown>): Promise<unknown> } } })
    .navigator?.locks;
  if (locks === undefined) throw new Error("this browser has no Web Locks API (navigator.locks): pass a downloadLock of your own");
  return <T>(work: () => Promise<T>) => locks.request(name, work) as Promise<T>;
}

const Keys = { installed: "installed", jobs: "jobs" } as const;

function offer(entry: CatalogPackage): Offer {
  return {
    packageId: entry.packageId,
    format: entry.format,
    quality: entry.quality,
    bitrateKbps: Number(entry.bitrateKbps),
    voice: entry.voiceName,
    sizeBytes: Number(entry.sizeBytes),
    audioBytes: Number(entry.audioBytes),
    mapBytes: Number(entry.mapBytes),
  };
}

function encodeInstalled(pack: InstalledPackage, manifestBytes: Uint8Array): StateValue {
  return {
    tourId: pack.tourId,
    tourName: pack.tourName,
    packageId: pack.packageId,
    contentHash: pack.contentHash,
    manifestSHA256: pack.manifestSHA256,
    format: pack.format,
    quality: pack.quality,
    installedAt: pack.installedAt,
    lastAccessedAt: pack.lastAccessedAt,
    pinned: pack.pinned,
    manifest: base64Encode(manifestBytes),
  };
}

export class OfflineLibrary {
  readonly storage: PackStorage;
  readonly transport: SiteTransport;
  readonly reader: CatalogReader;
  readonly maxStorageBytes: number;
  private readonly crypto: CryptoFacade;
  private readonly now: () => Date;
  private readonly connectivity: Connectivity;
  private readonly flushBytes: number;
  private verified?: Catalog;
  /** Why the last refresh was refused, kept for the screens. */
  lastRefreshError?: OfflineError;
  private listeners = new Set<() => void>();
  private queue: Promise<void> = Promise.resolve();
  private running = new Map<string, AbortController>();
  private playing?: string;
  /** Bytes of the running download, live (the job record is written as files complete). */
  private live = new Map<string, number>();
  private stateLock: Promise<unknown> = Promise.resolve();
  private readonly downloadLock: <T>(work: () => Promise<T>) => Promise<T>;

  constructor(options: LibraryOptions) {
    this.storage = options.storage;
    this.crypto = options.crypto ?? webCrypto();
    this.now = options.now ?? (() => new Date());
    this.connectivity = options.connectivity ?? alwaysOnline;
    this.maxStorageBytes = options.maxStorageBytes ?? 500_000_000;
    this.flushBytes = options.flushBytes ?? 256 * 1024;
    this.downloadLock = options.downloadLock ?? ((work) => work());
    const fetchFunction = options.fetch ?? ((url: string, init: RequestInit) => globalThis.fetch(url, init));
    this.transport = new SiteTransport(
      options.site,
      fetchFunction,
      options.policy ?? defaultPolicy,
      options.clock ?? systemClock,
      () => this.connectivity.isOnline(),
      (signal) => this.connectivity.whenOnline(signal),
    );
    this.reader = new CatalogReader(this.transport, this.storage, options.anchor, this.crypto, this.now);
  }

  /** Hears every change of a tour's state. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  // MARK: The catalogue

  /** Reads and verifies the site's catalogue; a refused one changes nothing and the last verified stays. */
  async refreshCatalog(): Promise<Catalog> {
    if (!this.connectivity.isOnline()) {
      throw new OfflineError("networkUnavailable", "the device has no network; the catalogue verified last stays in use", { file: SiteLayout.catalog });
    }
    try {
      const read = await this.reader.read();
      this.verified = read.catalog;
      this.lastRefreshError = undefined;
      return read.catalog;
    } catch (error) {
      if (error instanceof OfflineError) this.lastRefreshError = error;
      throw error;
    } finally {
      this.changed();
    }
  }

  /** The catalogue verified last: this session's, or the one kept on the device, checked again against the anchor. */
  async catalog(): Promise<Catalog | undefined> {
    if (this.verified === undefined) {
      try {
        this.verified = await this.reader.checkRemembered();
      } catch {
        this.verified = undefined;
      }
    }
    return this.verified;
  }

  /** Whether the catalogue verified last has expired: installed packages play, no update is offered. */
  async isStale(): Promise<boolean> {
    const catalog = await this.catalog();
    return catalog === undefined || catalog.expiresAt === undefined || catalog.expiresAt <= this.now();
  }

  /** Forgets the trust record on a person's deliberate word (a damaged record refuses every refresh until then). */
  async resetTrust(): Promise<void> {
    await resetTrust(this.storage);
    this.changed();
  }

  // MARK: What is on the device

  async installed(): Promise<InstalledPackage[]> {
    return installedPackages(this.storage);
  }

  async jobs(): Promise<DownloadJob[]> {
    const value = await this.storage.readState(Keys.jobs);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
    return Object.values(value as { [key: string]: StateValue }).map((job) => {
      const held = job as unknown as DownloadJob;
      const live = this.live.get(held.tourId);
      return live === undefined ? held : { ...held, downloadedBytes: live };
    });
  }

  private async writeJob(tourId: string, job: DownloadJob | undefined): Promise<void> {
    await this.exclusive(async () => {
      const value = ((await this.storage.readState(Keys.jobs)) ?? {}) as { [key: string]: StateValue };
      if (job === undefined) delete value[tourId];
      else value[tourId] = job as unknown as StateValue;
      await this.storage.writeState(Keys.jobs, value);
    });
    this.changed();
  }

  /** Every read-modify-write of the state, one at a time: no change is lost to another. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.stateLock.then(work);
    this.stateLock = run.catch(() => undefined);
    return run;
  }

  /** Every tour the catalogue offers or the device holds, with its state. Reads only the device. */
  async tours(): Promise<TourState[]> {
    const catalog = await this.catalog();
    const ids = new Set<string>(catalog?.tours.map((tour) => tour.tourId) ?? []);
    for (const pack of await this.installed()) ids.add(pack.tourId);
    const states: TourState[] = [];
    for (const id of ids) states.push(await this.state(id));
    return states;
  }

  /** One tour's state, from the device alone: never waits on the network. */
  async state(tourId: string): Promise<TourState> {
    const catalog = await this.catalog();
    const tour = catalog?.tours.find((each) => each.tourId === tourId);
    const offers = tour?.packages.map(offer) ?? [];
    const installed = (await this.installed()).find((pack) => pack.tourId === tourId);
    const job = (await this.jobs()).find((each) => each.tourId === tourId);
    const tourName = tour?.tourName ?? installed?.tourName ?? tourId;
    let update: Offer | undefined;
    if (installed !== undefined && tour !== undefined && !(await this.isStale())) {
      const entry = this.choose(tour, installed);
      if (entry !== undefined && entry.expiresAt > this.now() && entry.contentHash !== installed.contentHash) update = offer(entry);
    }
    if (job !== undefined) return { tourId, tourName, state: job.status, offers, job, installed, update };
    if (installed !== undefined) return { tourId, tourName, state: update === undefined ? "cached" : "update_available", offers, installed, update };
    return { tourId, tourName, state: "none", offers };
  }

  /** One package per tour: the installed format, else AAC, else the first; the installed quality, else the best. */
  private choose(tour: CatalogTour, installed?: InstalledPackage, format?: AudioFormat, quality?: AudioQuality): CatalogPackage | undefined {
    const formats = tour.packages.map((entry) => entry.format);
    const chosenFormat = format ?? (installed !== undefined && formats.includes(installed.format) ? installed.format : formats.includes("aac") ? "aac" : formats[0]);
    const inFormat = tour.packages.filter((entry) => entry.format === chosenFormat);
    const wanted = quality ?? installed?.quality;
    return inFormat.find((entry) => entry.quality === wanted) ?? [...inFormat].sort((a, b) => qualities.indexOf(a.quality) - qualities.indexOf(b.quality))[0];
  }

  // MARK: Files

  /** An installed file of the tour, by its package.json path: only whole and verified, and marks the tour accessed. */
  async file(tourId: string, path: string): Promise<Blob | undefined> {
    return installedFile(this.storage, tourId, path);
  }

  /** The tour's tile pack (MBTiles) as a Blob, when its package has one and it is installed whole; drawing it is the app's. */
  async tilePack(tourId: string): Promise<Blob | undefined> {
    const pack = (await this.installed()).find((each) => each.tourId === tourId);
    const entry = pack?.files.find((file) => file.kind === "tilePack");
    return entry === undefined ? undefined : this.file(tourId, entry.path);
  }

  /** Records a play: the least recently accessed packages go first when the budget needs room. */
  async markAccessed(tourId: string): Promise<void> {
    await this.updateInstalled(tourId, (record) => {
      record.lastAccessedAt = this.now().getTime();
    });
  }

  /** A pinned tour is never evicted by the budget. */
  async setPinned(tourId: string, pinned: boolean): Promise<void> {
    await this.updateInstalled(tourId, (record) => {
      record.pinned = pinned;
    });
  }

  /** The tour playing now is never evicted. */
  setPlaying(tourId: string | undefined): void {
    this.playing = tourId;
  }

  private async updateInstalled(tourId: string, change: (record: { [key: string]: StateValue }) => void): Promise<void> {
    await this.exclusive(async () => {
      const value = ((await this.storage.readState(Keys.installed)) ?? {}) as { [key: string]: { [key: string]: StateValue } };
      for (const record of Object.values(value)) if (record.tourId === tourId) change(record);
      await this.storage.writeState(Keys.installed, value as StateValue);
    });
    this.changed();
  }

  /** What the browser says this origin uses, and what the installed packages take (each shared file once). */
  async storageUse(): Promise<{ usage?: number; quota?: number; packageBytes: number }> {
    const estimate = await this.storage.estimate();
    return { ...estimate, packageBytes: this.bytesOf(await this.installed()) };
  }

  /** Asks the browser to keep this origin's data (`navigator.storage.persist()`). */
  requestPersistence(): Promise<boolean> {
    return this.storage.persist();
  }

  private bytesOf(packages: InstalledPackage[], extra: PackageFile[] = []): number {
    const sizes = new Map<string, number>();
    for (const file of [...packages.flatMap((pack) => pack.files), ...extra]) sizes.set(file.sha256, file.sizeBytes);
    return [...sizes.values()].reduce((sum, size) => sum + size, 0);
  }

  /** Removes a tour's packages (and any download of it); its files go unless another package names them. */
  async delete(tourId: string): Promise<void> {
    await this.cancel(tourId);
    await this.exclusive(async () => {
      const value = ((await this.storage.readState(Keys.installed)) ?? {}) as { [key: string]: { [key: string]: StateValue } };
      for (const [id, record] of Object.entries(value)) if (record.tourId === tourId) delete value[id];
      await this.storage.writeState(Keys.installed, value as StateValue);
    });
    await this.collectGarbage();
    this.changed();
  }

  /** Files no installed package and no download names. */
  private async collectGarbage(): Promise<void> {
    const kept = new Set<string>();
    for (const pack of await this.installed()) for (const file of pack.files) kept.add(file.sha256);
    const jobs = await this.jobs();
    for (const job of jobs) for (const sha of job.needs) kept.add(sha);
    for (const sha of await this.storage.listFiles()) if (!kept.has(sha)) await this.storage.deleteFile(sha);
    for (const sha of await this.storage.listPartials()) if (!kept.has(sha)) await this.storage.discardPartial(sha);
  }

  // MARK: Downloads

  /**
   * Puts the tour in the queue and resolves when its package is committed
   * (or rejects with the error the job keeps as `failed`). One download runs
   * at a time; the queue is kept on the device, so a reopened tab continues
   * it (`resumeDownloads`) from the last byte stored.
   */
  async download(tourId: string, choice: { format?: AudioFormat; quality?: AudioQuality } = {}): Promise<void> {
    const existing = (await this.jobs()).find((job) => job.tourId === tourId);
    if (existing !== undefined && existing.status !== "failed" && this.running.has(tourId)) {
      throw new OfflineError("alreadyDownloading", `tour ${tourId} is downloading already`);
    }
    const catalog = await this.catalog();
    const tour = catalog?.tours.find((each) => each.tourId === tourId);
    if (catalog === undefined || tour === undefined) throw new OfflineError("notOffered", `tour ${tourId} is not in the catalogue verified last`);
    const installed = (await this.installed()).find((pack) => pack.tourId === tourId);
    const entry = this.choose(tour, installed, choice.format, choice.quality);
    if (entry === undefined) throw new OfflineError("notOffered", `tour ${tour.tourName} is not offered in ${choice.format ?? "any format"}`);
    await this.writeJob(tourId, {
      tourId, tourName: tour.tourName, packageId: entry.packageId, status: "queued", totalBytes: Number(entry.sizeBytes), downloadedBytes: 0, needs: existing?.needs ?? [],
    });
    return this.enqueue(tourId, choice);
  }

  /** Continues every download the device's queue holds (not the failed ones): call it when the page opens. */
  async resumeDownloads(): Promise<string[]> {
    const resumed: string[] = [];
    for (const job of await this.jobs()) {
      if (job.status === "failed" || this.running.has(job.tourId)) continue;
      resumed.push(job.tourId);
      void this.enqueue(job.tourId, {}).catch(() => undefined);
    }
    return resumed;
  }

  /** Stops a download and forgets its bytes; the installed package stays. */
  async cancel(tourId: string): Promise<void> {
    this.running.get(tourId)?.abort(new OfflineError("cancelled", `the download of tour ${tourId} was cancelled`));
    const job = (await this.jobs()).find((each) => each.tourId === tourId);
    if (job === undefined) return;
    await this.writeJob(tourId, undefined);
    await this.collectGarbage();
  }

  /**
   * Stops every running download as a closed tab does: the queue and the
   * bytes stored stay, and the next library on the storage continues them
   * (`resumeDownloads`).
   */
  close(): void {
    for (const controller of this.running.values()) controller.abort(new OfflineError("cancelled", "the library was closed; the download resumes when it opens again"));
    this.running.clear();
  }

  /** Forgets a failed download's failure (its bytes stay for a retry). */
  async dismissFailure(tourId: string): Promise<void> {
    const job = (await this.jobs()).find((each) => each.tourId === tourId);
    if (job?.status === "failed") await this.writeJob(tourId, undefined);
  }

  private enqueue(tourId: string, choice: { format?: AudioFormat; quality?: AudioQuality }): Promise<void> {
    const controller = new AbortController();
    this.running.set(tourId, controller);
    const run = this.queue.then(() => this.run(tourId, choice, controller.signal));
    this.queue = run.catch(() => undefined);
    return run.finally(() => {
      if (this.running.get(tourId) === controller) this.running.delete(tourId);
      this.live.delete(tourId);
    });
  }

  private async run(tourId: string, choice: { format?: AudioFormat; quality?: AudioQuality }, signal: AbortSignal): Promise<void> {
    let job = (await this.jobs()).find((each) => each.tourId === tourId);
    if (job === undefined || signal.aborted) throw new OfflineError("cancelled", `the download of tour ${tourId} was cancelled`);
    const update = async (change: Partial<DownloadJob>) => {
      if (signal.aborted) return;
      job = { ...job!, ...change };
      await this.writeJob(tourId, job);
    };
    try {
      await this.downloadLock(() => this.install(tourId, choice, signal, update));
      if (!signal.aborted) await this.writeJob(tourId, undefined);
      await this.collectGarbage();
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      const failure = error instanceof OfflineError ? error : new OfflineError("storageFailed", (error as Error).message);
      await update({ status: "failed", error: { kind: failure.kind, message: failure.message } });
      throw failure;
    }
  }

  private async install(
    tourId: string,
    choice: { format?: AudioFormat; quality?: AudioQuality },
    signal: AbortSignal,
    update: (change: Partial<DownloadJob>) => Promise<void>,
  ): Promise<void> {
    // Another tab may have verified a newer catalogue since: the one the device remembers wins.
    const record = await readTrustRecord(this.storage);
    if (record !== undefined && this.verified !== undefined && record.generation !== this.verified.generation) this.verified = undefined;
    const catalog = await this.catalog();
    const tour = catalog?.tours.find((each) => each.tourId === tourId);
    if (catalog === undefined || tour === undefined) throw new OfflineError("notOffered", `tour ${tourId} is not in the catalogue verified last`);
    checkExpiry(catalog, this.now());
    const all = await this.installed();
    const installed = all.find((pack) => pack.tourId === tourId);
    const entry = this.choose(tour, installed, choice.format, choice.quality)!;
    const name = packageName(entry.packageId, tour.tourName);
    if (entry.expiresAt <= this.now()) {
      throw new OfflineError("catalogExpired", `${name} expired at ${entry.expiresAt.toISOString()}: an expired package is never installed`, {
        packageName: name,
      });
    }
    // Up to date: the installed package.json is the one the catalogue names and every file is whole. No request at all.
    if (installed !== undefined && installed.manifestSHA256 === entry.manifest.sha256) {
      const held = new Set(await this.storage.listFiles());
      if (installed.files.every((file) => held.has(file.sha256))) return;
    }
    if (!this.connectivity.isOnline()) {
      await update({ status: "waiting" });
      await this.connectivity.whenOnline(signal);
    }
    await update({ status: "downloading" });
    const { bytes, manifest } = await fetchManifest(this.transport, this.crypto, tour, entry, signal);
    const manifestSHA256 = entry.manifest.sha256;
    const needed = new Map<string, PackageFile>();
    for (const file of manifest.files) needed.set(file.sha256, file);
    const held = new Set(await this.storage.listFiles());
    const downloads = [...needed.values()].filter((file) => !held.has(file.sha256));
    const totalBytes = downloads.reduce((sum, file) => sum + file.sizeBytes, 0);
    await update({ needs: [...needed.keys()], totalBytes, downloadedBytes: 0 });
    await this.makeRoom(tourId, manifest.files, name);
    let done = 0;
    for (const file of downloads) {
      await this.fetchFile(file, name, signal, (bytes) => {
        this.live.set(tourId, done + bytes);
        void update({ status: "downloading", downloadedBytes: done + bytes });
      }, () => void update({ status: "waiting" }));
      done += file.sizeBytes;
      this.live.set(tourId, done);
      await update({ downloadedBytes: done });
    }
    if (signal.aborted) throw signal.reason;
    // The commit: one write of the installed list. The old version played until now.
    await this.exclusive(() => this.commit(tourId, tour, entry, installed, manifest, manifestSHA256, bytes));
  }

  private async commit(
    tourId: string,
    tour: CatalogTour,
    entry: CatalogPackage,
    installed: InstalledPackage | undefined,
    manifest: Manifest,
    manifestSHA256: string,
    bytes: Uint8Array,
  ): Promise<void> {
    const value = ((await this.storage.readState(Keys.installed)) ?? {}) as { [key: string]: StateValue };
    const previous = installed === undefined ? undefined : (value[installed.packageId] as { [key: string]: StateValue } | undefined);
    for (const [id, record] of Object.entries(value)) {
      if ((record as { [key: string]: StateValue }).tourId === tourId) delete value[id];
    }
    const at = this.now().getTime();
    value[entry.packageId] = encodeInstalled(
      {
        tourId, tourName: tour.tourName, packageId: entry.packageId, contentHash: entry.contentHash, manifestSHA256, format: entry.format,
        quality: entry.quality, files: manifest.files, sizeBytes: 0, installedAt: at,
        lastAccessedAt: typeof previous?.lastAccessedAt === "number" ? previous.lastAccessedAt : at,
        pinned: previous?.pinned === true, manifest,
      },
      bytes,
    );
    await this.storage.writeState(Keys.installed, value);
  }

  /**
   * One file into the verified files: downloaded (resuming its partial),
   * then its size and SHA-256 checked against its signed package.json.
   * Nothing is kept, and nothing returned, before they match. A resumed
   * file that does not match is fetched once more from its first byte
   * (as the Swift client does); one fetched whole that does not match is
   * `integrityFailed`, naming the file.
   */
  private async fetchFile(file: PackageFile, name: string, signal: AbortSignal, bytes: (count: number) => void, waiting: () => void): Promise<void> {
    const key = SiteLayout.blob(file.sha256);
    let fromScratch = ((await this.storage.partial(file.sha256))?.bytes ?? 0) === 0;
    for (;;) {
      try {
        await this.transport.download(
          key,
          file.sha256,
          file.sizeBytes,
          this.storage,
          (event) => {
            if ("bytes" in event) bytes(event.bytes);
            else if ("waitingForNetwork" in event) waiting();
          },
          signal,
          this.flushBytes,
        );
      } catch (error) {
        if (error instanceof SiteFailure) throw error.installError(file.path, name, file.kind === "tilePack");
        throw error;
      }
      const blob = await this.storage.partialBlob(file.sha256);
      const digest = blob.size === file.sizeBytes ? await sha256Hex(this.crypto, new Uint8Array(await blob.arrayBuffer())) : "";
      if (digest === file.sha256) {
        await this.storage.putFile(file.sha256, blob);
        await this.storage.discardPartial(file.sha256);
        return;
      }
      await this.storage.discardPartial(file.sha256);
      bytes(0);
      if (fromScratch) {
        const found = digest === "" ? "another size" : `SHA-256 ${digest}`;
        throw OfflineError.integrity(
          file.path,
          `the site's ${key} is ${blob.size} bytes with ${found}; package.json names ${file.sizeBytes} bytes with SHA-256 ${file.sha256}`,
          { packageName: name },
        );
      }
      fromScratch = true;
    }
  }

  /**
   * The budget: the packages with the new one in place of the tour's
   * current one must fit `maxStorageBytes`; the least recently accessed go
   * first, never a pinned one, the one playing or one downloading. When
   * only those stand in the way, `storageFailed`.
   */
  private async makeRoom(tourId: string, files: PackageFile[], name: string): Promise<void> {
    let others = (await this.installed()).filter((pack) => pack.tourId !== tourId);
    const downloading = new Set((await this.jobs()).map((job) => job.tourId));
    while (this.bytesOf(others, files) > this.maxStorageBytes) {
      const victim = others
        .filter((pack) => !pack.pinned && pack.tourId !== this.playing && !downloading.has(pack.tourId))
        .sort((a, b) => a.lastAccessedAt - b.lastAccessedAt)[0];
      if (victim === undefined) {
        const short = this.bytesOf(others, files) - this.maxStorageBytes;
        throw new OfflineError(
          "storageFailed",
          `the budget of ${this.maxStorageBytes} bytes is ${short} bytes short, and only pinned, playing or downloading tours stand in the way`,
          { packageName: name },
        );
      }
      await this.delete(victim.tourId);
      others = others.filter((pack) => pack.packageId !== victim.packageId);
    }
  }
}

/** The packages installed on `storage`, each with its checked package.json. */
export async function installedPackages(storage: PackStorage): Promise<InstalledPackage[]> {
  const value = await storage.readState(Keys.installed);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
  const packages: InstalledPackage[] = [];
  for (const [id, record] of Object.entries(value)) {
    if (typeof record !== "object" || record === null || Array.isArray(record)) continue;
    const bytes = typeof record.manifest === "string" ? base64Decode(record.manifest) : undefined;
    if (bytes === undefined) continue;
    let manifest: Manifest;
    try {
      manifest = decodeManifest(bytes, `installed ${id}`, packageName(id));
    } catch {
      continue;
    }
    packages.push({
      tourId: String(record.tourId),
      tourName: String(record.tourName),
      packageId: id,
      contentHash: String(record.contentHash),
      manifestSHA256: String(record.manifestSHA256),
      format: record.format as AudioFormat,
      quality: record.quality as AudioQuality,
      files: manifest.files,
      sizeBytes: manifest.files.reduce((sum, file) => sum + file.sizeBytes, 0),
      installedAt: Number(record.installedAt),
      lastAccessedAt: Number(record.lastAccessedAt),
      pinned: record.pinned === true,
      manifest,
    });
  }
  return packages.sort((a, b) => a.packageId.localeCompare(b.packageId));
}

/**
 * An installed file of the tour, by its package.json path: only whole and
 * verified (a file is kept only after its SHA-256 matched). What the
 * service worker serves.
 */
export async function installedFile(storage: PackStorage, tourId: string, path: string): Promise<Blob | undefined> {
  const pack = (await installedPackages(storage)).find((each) => each.tourId === tourId);
  const entry = pack?.files.find((file) => file.path === path);
  if (entry === undefined) return undefined;
  const blob = await storage.getFile(entry.sha256);
  return blob !== undefined && blob.size === entry.sizeBytes ? blob : undefined;
}
