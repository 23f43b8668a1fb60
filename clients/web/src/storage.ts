/**
 * What the library keeps on the device, behind one interface, so the same
 * core runs on IndexedDB and Cache Storage in a browser
 * (`browser/browser-storage.ts`), on an app's file system (React Native:
 * see the WebClient article), and in memory for `node --test`.
 *
 * - **State**: small JSON documents by key (the trust record, the last
 *   verified catalogue, the installed packages, the download queue). Each
 *   `writeState` is atomic: a reader sees the old value or the new one.
 *   An update is committed by one `writeState` of `installed`, so the old
 *   version plays until the new one is whole.
 * - **Partial files**, per blob SHA-256: appended in chunks as they arrive
 *   and kept across a closed tab, with the validator (`ETag`) they resume with.
 * - **Verified files**, per blob SHA-256: written only after the bytes
 *   matched the SHA-256 and size their signed package.json names.
 */
import { PartialFiles } from "./transfer.js";

export type StateValue = null | boolean | number | string | StateValue[] | { [key: string]: StateValue };

export interface PackStorage extends PartialFiles {
  readState(key: string): Promise<StateValue | undefined>;
  writeState(key: string, value: StateValue): Promise<void>;
  deleteState(key: string): Promise<void>;

  /** The partial file's bytes, whole. */
  partialBlob(sha256: string): Promise<Blob>;

  /** Keeps a verified file under its SHA-256. */
  putFile(sha256: string, file: Blob): Promise<void>;
  getFile(sha256: string): Promise<Blob | undefined>;
  deleteFile(sha256: string): Promise<void>;
  listFiles(): Promise<string[]>;
  /** Partial files held, by SHA-256. */
  listPartials(): Promise<string[]>;

  /** `navigator.storage.estimate()` where there is one. */
  estimate(): Promise<{ usage?: number; quota?: number }>;
  /** `navigator.storage.persist()`: asks that the browser never evict this origin's data. */
  persist(): Promise<boolean>;
}

/** Everything in memory: `node --test`, and a page that must keep nothing. */
export class MemoryStorage implements PackStorage {
  readonly state = new Map<string, string>();
  readonly files = new Map<string, Blob>();
  readonly partials = new Map<string, { chunks: Uint8Array[]; bytes: number; validator?: string }>();

  async readState(key: string): Promise<StateValue | undefined> {
    const text = this.state.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as StateValue);
  }

  async writeState(key: string, value: StateValue): Promise<void> {
    this.state.set(key, JSON.stringify(value));
  }

  async deleteState(key: string): Promise<void> {
    this.state.delete(key);
  }

  async partial(sha256: string) {
    const held = this.partials.get(sha256);
    return held === undefined ? undefined : { bytes: held.bytes, validator: held.validator };
  }

  async startPartial(sha256: string, validator: string | undefined): Promise<void> {
    this.partials.set(sha256, { chunks: [], bytes: 0, validator });
  }

  async appendPartial(sha256: string, offset: number, chunk: Uint8Array): Promise<void> {
    const held = this.partials.get(sha256) ?? { chunks: [], bytes: 0 };
    if (offset !== held.bytes) throw new Error(`partial ${sha256}: append at ${offset}, but it holds ${held.bytes} bytes`);
    held.chunks.push(chunk.slice());
    held.bytes += chunk.length;
    this.partials.set(sha256, held);
  }

  async discardPartial(sha256: string): Promise<void> {
    this.partials.delete(sha256);
  }

  async partialBlob(sha256: string): Promise<Blob> {
    return new Blob(this.partials.get(sha256)?.chunks ?? []);
  }

  async putFile(sha256: string, file: Blob): Promise<void> {
    this.files.set(sha256, file);
  }

  async getFile(sha256: string): Promise<Blob | undefined> {
    return this.files.get(sha256);
  }

  async deleteFile(sha256: string): Promise<void> {
    this.files.delete(sha256);
  }

  async listFiles(): Promise<string[]> {
    return [...this.files.keys()];
  }

  async listPartials(): Promise<string[]> {
    return [...this.partials.keys()];
  }

  async estimate() {
    let usage = 0;
    for (const file of this.files.values()) usage += file.size;
    for (const partial of this.partials.values()) usage += partial.bytes;
    return { usage };
  }

  async persist(): Promise<boolean> {
    return true;
  }
}
