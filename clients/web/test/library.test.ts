/**
 * The library's core against an in-memory storage and a site served in
 * process: install, verify, update committed whole, resume after a closed
 * tab, the states, the budget, and refusals that keep the installed pack.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { OfflineError } from "../src/errors.js";
import { Connectivity, LibraryOptions, OfflineLibrary } from "../src/library.js";
import { MemoryStorage } from "../src/storage.js";
import { TransferPolicy, defaultPolicy } from "../src/transfer.js";
import { bytes, newSigner, publish, sha, Signer, TourSpec, uuid } from "./publisher.js";
import { TestSite } from "./site.js";

const fast: TransferPolicy = { ...defaultPolicy, maximumAttempts: 2, initialBackoffSeconds: 0.01, maximumBackoffSeconds: 0.02 };

async function setUp(tours: TourSpec[]) {
  const site = new TestSite();
  const signer = await newSigner();
  await publish(site, signer, tours);
  const storage = new MemoryStorage();
  const open = (options: { connectivity?: Connectivity; maxStorageBytes?: number; now?: () => Date; policy?: TransferPolicy; flushBytes?: number } = {}) =>
    new OfflineLibrary({ site: site.base, anchor: { publicKey: signer.publicKey }, storage, fetch: site.fetch, policy: fast, ...options });
  return { site, signer, storage, open };
}

/** The options `open` gives a library, for a test that builds its own. */
function optionsOf(site: TestSite, open: () => OfflineLibrary): LibraryOptions {
  const library = open();
  return { site: site.base, anchor: library.reader.anchor, storage: library.storage, fetch: site.fetch, policy: fast };
}

function tour(n: number, sizes: number[], captions = true): TourSpec {
  return { tourId: uuid(n), name: `Tour ${n}`, audio: sizes.map((size, index) => bytes(size, n * 100 + index)), captions };
}

async function until(check: () => Promise<boolean>, what: string, seconds = 10): Promise<void> {
  const end = Date.now() + seconds * 1000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("a tour installs with every file verified, and plays from the device with no site", async () => {
  const spec = tour(1, [40_000, 52_000]);
  const { site, storage, open } = await setUp([spec]);
  const library = open();
  await library.refreshCatalog();
  const before = await library.state(spec.tourId);
  assert.equal(before.state, "none");
  assert.equal(before.offers[0]?.sizeBytes, 92_000, "the offer carries the catalogue's size");
  await library.download(spec.tourId);
  const after = await library.state(spec.tourId);
  assert.equal(after.state, "cached");
  const narration = after.installed!.manifest.narrations[0]!;
  const played = await library.file(spec.tourId, narration.audio.path);
  assert.deepEqual(new Uint8Array(await played!.arrayBuffer()), spec.audio[0]);
  assert.ok(await library.file(spec.tourId, narration.captions!.path), "captions are installed too");

  // Downloading it again asks the site for nothing: it is up to date.
  const asked = site.log.length;
  await library.download(spec.tourId);
  assert.equal(site.log.length, asked, "an up-to-date package costs no request");

  // A new page with no network: the catalogue is read back from the device and checked again.
  site.files.clear();
  let online = false;
  const offline = open({ connectivity: { isOnline: () => online, whenOnline: async () => undefined } });
  await assert.rejects(offline.refreshCatalog(), (error: unknown) => error instanceof OfflineError && error.kind === "networkUnavailable");
  assert.equal((await offline.state(spec.tourId)).state, "cached");
  assert.ok(await offline.file(spec.tourId, narration.audio.path));
  assert.equal((await offline.storageUse()).packageBytes, (await storage.estimate()).usage);
  online = true;
});

test("the tile pack is verified and handed out as a Blob", async () => {
  const spec = { ...tour(14, [5_000]), tiles: bytes(70_000, 1414) };
  const { open } = await setUp([spec]);
  const library = open();
  await library.refreshCatalog();
  assert.equal((await library.state(spec.tourId)).offers[0]?.mapBytes, 70_000);
  assert.equal(await library.tilePack(spec.tourId), undefined, "nothing before it is installed");
  await library.download(spec.tourId);
  const pack = await library.tilePack(spec.tourId);
  assert.ok(pack instanceof Blob);
  assert.deepEqual(new Uint8Array(await pack.arrayBuffer()), spec.tiles);
});

test("an update is committed whole: the old version plays until the new one is complete", async () => {
  const first = tour(2, [30_000, 30_000]);
  const { site, signer, open } = await setUp([first]);
  const library = open();
  await library.refreshCatalog();
  await library.download(first.tourId);
  const oldPath = (await library.state(first.tourId)).installed!.manifest.narrations[0]!.audio.path;

  const second = { ...first, audio: [bytes(31_000, 777), first.audio[1]!] };
  await publish(site, signer, [second], { generation: 2 });
  await library.refreshCatalog();
  const offered = await library.state(first.tourId);
  assert.equal(offered.state, "update_available");
  const newBlob = `blobs/sha256/${(await sha(second.audio[0]!)).slice(0, 2)}/${await sha(second.audio[0]!)}`;
  site.cuts.set(newBlob, 10_000);
  await assert.rejects(library.download(first.tourId), (error: unknown) => error instanceof OfflineError && error.kind === "networkUnavailable" && error.file === oldPath);
  const failed = await library.state(first.tourId);
  assert.equal(failed.state, "failed");
  assert.equal(failed.job?.error?.kind, "networkUnavailable");
  const playing = await library.file(first.tourId, oldPath);
  assert.deepEqual(new Uint8Array(await playing!.arrayBuffer()), first.audio[0], "the old version still plays");

  site.cuts.clear();
  await library.download(first.tourId);
  assert.equal((await library.state(first.tourId)).state, "cached");
  assert.deepEqual(new Uint8Array(await (await library.file(first.tourId, oldPath))!.arrayBuffer()), second.audio[0]);
  const unchanged = `blobs/sha256/${(await sha(first.audio[1]!)).slice(0, 2)}/${await sha(first.audio[1]!)}`;
  assert.equal(site.log.filter((entry) => entry.key === unchanged).length, 1, "a file that did not change is not fetched again");
});

test("a tab closed mid-download resumes from the last byte stored: no byte is fetched twice", async () => {
  const spec = tour(3, [600_000], false);
  const { site, storage, open } = await setUp([spec]);
  const digest = await sha(spec.audio[0]!);
  const blob = `blobs/sha256/${digest.slice(0, 2)}/${digest}`;
  site.hangs.set(blob, 5 * 65_536);
  const first = open({ flushBytes: 65_536 });
  await first.refreshCatalog();
  const running = first.download(spec.tourId).catch((error: unknown) => error);
  await until(async () => (await storage.partial(digest))?.bytes === 5 * 65_536, "the first bytes to be stored");
  assert.equal((await first.state(spec.tourId)).state, "downloading");
  first.close();
  assert.ok((await running) instanceof OfflineError);
  assert.equal((await open().state(spec.tourId)).state, "downloading", "the queue outlives the tab");

  site.hangs.clear();
  const second = open({ flushBytes: 65_536 });
  assert.deepEqual(await second.resumeDownloads(), [spec.tourId]);
  await until(async () => (await second.state(spec.tourId)).state === "cached", "the resumed download");
  const requests = site.log.filter((entry) => entry.key === blob);
  assert.equal(requests.length, 2);
  assert.equal(requests[1]!.headers["range"], `bytes=${5 * 65_536}-`);
  assert.ok(requests[1]!.headers["if-range"], "resumed with If-Range");
  assert.equal(requests.reduce((sum, entry) => sum + entry.bytes, 0), 600_000, "every byte fetched once");
});

test("nothing is returned before its SHA-256 matches", async () => {
  const spec = tour(4, [20_000]);
  const { site, storage, open } = await setUp([spec]);
  const digest = await sha(spec.audio[0]!);
  site.files.set(`blobs/sha256/${digest.slice(0, 2)}/${digest}`, bytes(20_000, 999));
  const library = open();
  await library.refreshCatalog();
  await assert.rejects(library.download(spec.tourId), (error: unknown) => {
    assert.ok(error instanceof OfflineError);
    assert.equal(error.kind, "integrityFailed");
    assert.match(error.message, new RegExp(`AudioCache/${spec.tourId}/`));
    return true;
  });
  assert.equal((await storage.listFiles()).includes(digest), false, "the tampered bytes were not kept");
  const state = await library.state(spec.tourId);
  assert.equal(state.state, "failed");
  assert.equal(state.installed, undefined);
});

test("a refused catalogue changes nothing and the installed pack plays", async () => {
  const spec = tour(5, [10_000]);
  const { site, open } = await setUp([spec]);
  const library = open();
  await library.refreshCatalog();
  await library.download(spec.tourId);
  const catalog = site.files.get("catalog.json")!;
  const flipped = catalog.slice();
  flipped[40] = flipped[40]! ^ 1;
  site.files.set("catalog.json", flipped);
  const fresh = open();
  await assert.rejects(fresh.refreshCatalog(), (error: unknown) => error instanceof OfflineError && error.kind === "integrityFailed" && error.file === "catalog.json");
  assert.equal(fresh.lastRefreshError?.kind, "integrityFailed");
  const state = await fresh.state(spec.tourId);
  assert.equal(state.state, "cached");
  assert.ok(await fresh.file(spec.tourId, state.installed!.manifest.narrations[0]!.audio.path));
});

test("the budget evicts the least recently accessed tour, never a pinned one", async () => {
  const specs = [tour(6, [100_000], false), tour(7, [100_000], false), tour(8, [100_000], false)];
  const { open } = await setUp(specs);
  let clock = 1_000_000;
  const library = open({ maxStorageBytes: 250_000, now: () => new Date(clock) });
  await library.refreshCatalog();
  await library.download(specs[0]!.tourId);
  clock += 1000;
  await library.download(specs[1]!.tourId);
  clock += 1000;
  await library.markAccessed(specs[0]!.tourId);
  clock += 1000;
  await library.download(specs[2]!.tourId);
  assert.equal((await library.state(specs[1]!.tourId)).state, "none", "the least recently accessed went");
  assert.equal((await library.state(specs[0]!.tourId)).installed?.lastAccessedAt, 1_002_000);
  await library.setPinned(specs[0]!.tourId, true);
  await library.setPinned(specs[2]!.tourId, true);
  await assert.rejects(library.download(specs[1]!.tourId), (error: unknown) => error instanceof OfflineError && error.kind === "storageFailed");
  await library.setPinned(specs[2]!.tourId, false);
  await library.download(specs[1]!.tourId);
  assert.equal((await library.state(specs[2]!.tourId)).state, "none");
  assert.equal((await library.state(specs[0]!.tourId)).state, "cached", "the pinned tour stays");
  await library.delete(specs[0]!.tourId);
  assert.equal((await library.storageUse()).packageBytes, 100_000);
  assert.equal(await library.requestPersistence(), true);
});

test("a download with no network waits, then resumes; a second one queues behind it", async () => {
  const specs = [tour(9, [20_000]), tour(10, [20_000])];
  const { open } = await setUp(specs);
  let online = true;
  let back: (() => void) | undefined;
  const connectivity: Connectivity = {
    isOnline: () => online,
    whenOnline: () => (online ? Promise.resolve() : new Promise<void>((resolve) => (back = resolve))),
  };
  const library = open({ connectivity });
  await library.refreshCatalog();
  online = false;
  const first = library.download(specs[0]!.tourId);
  const second = library.download(specs[1]!.tourId);
  await until(async () => (await library.state(specs[0]!.tourId)).state === "waiting", "waiting for a network");
  assert.equal((await library.state(specs[1]!.tourId)).state, "queued");
  online = true;
  back?.();
  await first;
  await second;
  assert.equal((await library.state(specs[1]!.tourId)).state, "cached");
});

test("a stalled answer is given up by the rate floor within its tries", { timeout: 20_000 }, async () => {
  const spec = tour(11, [50_000]);
  const { site, open } = await setUp([spec]);
  const digest = await sha(spec.audio[0]!);
  site.hangs.set(`blobs/sha256/${digest.slice(0, 2)}/${digest}`, 1000);
  const library = open({ policy: { ...fast, rateWindowSeconds: 1, minimumBytesPerSecond: 1024 } });
  await library.refreshCatalog();
  await assert.rejects(library.download(spec.tourId), (error: unknown) => {
    assert.ok(error instanceof OfflineError);
    assert.equal(error.kind, "networkUnavailable");
    assert.match(error.message, /slower than 1024 B\/s/);
    return true;
  });
});

test("a damaged trust record refuses every refresh until a deliberate reset", async () => {
  const spec = tour(12, [1000]);
  const { storage, open } = await setUp([spec]);
  await open().refreshCatalog();
  await storage.writeState("trust", { schemaVersion: 2, anchor: "publicKey", generation: "many" });
  await assert.rejects(open().refreshCatalog(), (error: unknown) => error instanceof OfflineError && error.kind === "integrityFailed" && /trust record is damaged/.test(error.message));
  const library = open();
  await library.resetTrust();
  assert.equal((await library.refreshCatalog()).generation, 1n);
});

test("a key that does not match refuses the catalogue, naming it", async () => {
  const spec = tour(13, [1000]);
  const { site } = await setUp([spec]);
  const stranger: Signer = await newSigner();
  const library = new OfflineLibrary({ site: site.base, anchor: { publicKey: stranger.publicKey }, storage: new MemoryStorage(), fetch: site.fetch });
  await assert.rejects(library.refreshCatalog(), (error: unknown) => error instanceof OfflineError && error.kind === "integrityFailed" && /not by the expected key/.test(error.message));
});

test("two tabs on one storage take turns: each file is fetched once, and both see the tour cached", async () => {
  const spec = tour(15, [60_000, 60_000]);
  const { site, open } = await setUp([spec]);
  let held: Promise<unknown> = Promise.resolve();
  const downloadLock = <T>(work: () => Promise<T>): Promise<T> => {
    const run = held.then(work);
    held = run.catch(() => undefined);
    return run;
  };
  const first = new OfflineLibrary({ ...optionsOf(site, open), downloadLock });
  const second = new OfflineLibrary({ ...optionsOf(site, open), downloadLock });
  await first.refreshCatalog();
  await second.refreshCatalog();
  await Promise.all([first.download(spec.tourId), second.download(spec.tourId)]);
  assert.equal((await second.state(spec.tourId)).state, "cached");
  for (const audio of spec.audio) {
    const digest = await sha(audio);
    assert.equal(site.log.filter((entry) => entry.key.endsWith(digest)).length, 1, "fetched once");
  }
});

test("a download uses the catalogue another tab verified since", async () => {
  const spec = tour(16, [10_000]);
  const { site, signer, open } = await setUp([spec]);
  const stale = open();
  await stale.refreshCatalog();
  const changed = { ...spec, audio: [bytes(11_000, 1616)] };
  await publish(site, signer, [changed], { generation: 2 });
  await open().refreshCatalog();
  await stale.download(spec.tourId);
  const installed = (await stale.state(spec.tourId)).installed!;
  const file = await stale.file(spec.tourId, installed.manifest.narrations[0]!.audio.path);
  assert.deepEqual(new Uint8Array(await file!.arrayBuffer()), changed.audio[0], "generation 2's file, not generation 1's");
});
