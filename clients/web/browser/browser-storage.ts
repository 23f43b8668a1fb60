/**
 * `PackStorage` on the browser's own stores: IndexedDB for the state and
 * the partial downloads (each chunk and the partial's length written in
 * one transaction, so a tab closed mid-chunk keeps every byte before it),
 * and Cache Storage for the verified files, which the service worker
 * serves. Works in a page and in the service worker alike.
 */
import { PackStorage, StateValue } from "../src/storage.js";

const databaseName = "tourpack";
const filesCache = "tourpack-files-v1";
/** Where a verified file sits in Cache Storage: never fetched, only a key. */
export const fileKey = (sha256: string) => new URL(`__tourpack/files/${sha256}`, self.location.href).toString();

function request<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(transaction: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    transaction.oncomplete = () => resolve();
    transaction.onerror = () => reject(transaction.error);
    transaction.onabort = () => reject(transaction.error ?? new Error("IndexedDB transaction aborted"));
  });
}

export class BrowserStorage implements PackStorage {
  private database?: Promise<IDBDatabase>;

  private db(): Promise<IDBDatabase> {
    this.database ??= new Promise((resolve, reject) => {
      const open = indexedDB.open(databaseName, 1);
      open.onupgradeneeded = () => {
        open.result.createObjectStore("state");
        open.result.createObjectStore("partials");
        open.result.createObjectStore("chunks");
      };
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(new Error(`IndexedDB ${databaseName} cannot be opened: ${open.error?.message}`));
    });
    return this.database;
  }

  private async run(stores: string[], mode: IDBTransactionMode, work: (t: IDBTransaction) => void): Promise<void> {
    const transaction = (await this.db()).transaction(stores, mode);
    work(transaction);
    await done(transaction);
  }

  async readState(key: string): Promise<StateValue | undefined> {
    const transaction = (await this.db()).transaction("state", "readonly");
    const text = (await request(transaction.objectStore("state").get(key))) as string | undefined;
    return text === undefined ? undefined : (JSON.parse(text) as StateValue);
  }

  async writeState(key: string, value: StateValue): Promise<void> {
    await this.run(["state"], "readwrite", (t) => t.objectStore("state").put(JSON.stringify(value), key));
  }

  async deleteState(key: string): Promise<void> {
    await this.run(["state"], "readwrite", (t) => t.objectStore("state").delete(key));
  }

  async partial(sha256: string) {
    const transaction = (await this.db()).transaction("partials", "readonly");
    return (await request(transaction.objectStore("partials").get(sha256))) as { bytes: number; validator?: string; chunks: number } | undefined;
  }

  async startPartial(sha256: string, validator: string | undefined): Promise<void> {
    await this.run(["partials", "chunks"], "readwrite", (t) => {
      t.objectStore("chunks").delete(IDBKeyRange.bound([sha256, 0], [sha256, Number.MAX_SAFE_INTEGER]));
      t.objectStore("partials").put({ bytes: 0, validator, chunks: 0 }, sha256);
    });
  }

  async appendPartial(sha256: string, offset: number, chunk: Uint8Array): Promise<void> {
    const transaction = (await this.db()).transaction(["partials", "chunks"], "readwrite");
    const partials = transaction.objectStore("partials");
    const held = ((await request(partials.get(sha256))) as { bytes: number; validator?: string; chunks: number } | undefined) ?? { bytes: 0, chunks: 0 };
    if (held.bytes !== offset) {
      transaction.abort();
      throw new Error(`partial ${sha256}: append at ${offset}, but it holds ${held.bytes} bytes`);
    }
    transaction.objectStore("chunks").put(chunk.slice(), [sha256, held.chunks]);
    partials.put({ ...held, bytes: held.bytes + chunk.length, chunks: held.chunks + 1 }, sha256);
    await done(transaction);
  }

  async discardPartial(sha256: string): Promise<void> {
    await this.run(["partials", "chunks"], "readwrite", (t) => {
      t.objectStore("chunks").delete(IDBKeyRange.bound([sha256, 0], [sha256, Number.MAX_SAFE_INTEGER]));
      t.objectStore("partials").delete(sha256);
    });
  }

  async partialBlob(sha256: string): Promise<Blob> {
    const transaction = (await this.db()).transaction("chunks", "readonly");
    const chunks = (await request(transaction.objectStore("chunks").getAll(IDBKeyRange.bound([sha256, 0], [sha256, Number.MAX_SAFE_INTEGER])))) as Uint8Array[];
    return new Blob(chunks);
  }

  async listPartials(): Promise<string[]> {
    const transaction = (await this.db()).transaction("partials", "readonly");
    return ((await request(transaction.objectStore("partials").getAllKeys())) as string[]).map(String);
  }

  async putFile(sha256: string, file: Blob): Promise<void> {
    const cache = await caches.open(filesCache);
    await cache.put(fileKey(sha256), new Response(file, { headers: { "content-length": String(file.size) } }));
  }

  async getFile(sha256: string): Promise<Blob | undefined> {
    const cache = await caches.open(filesCache);
    const response = await cache.match(fileKey(sha256));
    return response === undefined ? undefined : response.blob();
  }

  async deleteFile(sha256: string): Promise<void> {
    await (await caches.open(filesCache)).delete(fileKey(sha256));
  }

  async listFiles(): Promise<string[]> {
    const keys = await (await caches.open(filesCache)).keys();
    return keys.map((request) => request.url.split("/").pop() ?? "").filter((name) => /^[0-9a-f]{64}$/.test(name));
  }

  async estimate(): Promise<{ usage?: number; quota?: number }> {
    const estimate = await navigator.storage?.estimate?.();
    return { usage: estimate?.usage, quota: estimate?.quota };
  }

  async persist(): Promise<boolean> {
    return (await navigator.storage?.persist?.()) ?? false;
  }
}

/** The device's network as the browser knows it: `navigator.onLine`, and its `online` event. */
export const browserConnectivity = {
  isOnline: () => navigator.onLine,
  whenOnline: (signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      if (navigator.onLine) return resolve();
      const back = () => resolve();
      self.addEventListener("online", back, { once: true });
      signal?.addEventListener("abort", () => {
        self.removeEventListener("online", back);
        reject(signal.reason);
      }, { once: true });
    }),
};
