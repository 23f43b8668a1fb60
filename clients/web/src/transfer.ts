/**
 * The site over `fetch`, with the Swift client's bounds (`TransferPolicy`,
 * `ResumableDownload`, `URLSessionSiteSource`): every answer bounded (a
 * file by the size its signed package.json names, a whole object by 32 MiB),
 * a rate floor over a window, a deadline per file, a count of tries that
 * starts afresh only after bytes that could be kept, and resume with
 * `Range` and `If-Range` from the last byte stored.
 */
import { OfflineError, shownURL } from "./errors.js";

export interface TransferPolicy {
  /** Tries of one file without progress before it fails (`networkUnavailable`). */
  maximumAttempts: number;
  /** Below this rate, averaged over `rateWindowSeconds`, a try is abandoned as stalled. */
  minimumBytesPerSecond: number;
  rateWindowSeconds: number;
  /** One file's whole download, every try and wait included. */
  fileDeadlineSeconds: number;
  initialBackoffSeconds: number;
  maximumBackoffSeconds: number;
}

export const defaultPolicy: TransferPolicy = {
  maximumAttempts: 6,
  minimumBytesPerSecond: 1024,
  rateWindowSeconds: 15,
  fileDeadlineSeconds: 3600,
  initialBackoffSeconds: 0.5,
  maximumBackoffSeconds: 20,
};

export type FetchFunction = (url: string, init: RequestInit) => Promise<Response>;

/** Time, injected so tests need not sleep. */
export interface Clock {
  now(): number;
  sleep(milliseconds: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (milliseconds, signal) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(resolve, milliseconds);
      signal?.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(signal.reason);
      }, { once: true });
    }),
};

/** Where a file's bytes wait until they are whole: per blob, resumable across a closed tab. */
export interface PartialFiles {
  partial(sha256: string): Promise<{ bytes: number; validator?: string } | undefined>;
  /** Empties the partial file and records the validator its first bytes came with. */
  startPartial(sha256: string, validator: string | undefined): Promise<void>;
  /** Appends `chunk` at `offset`, which is the partial file's length. */
  appendPartial(sha256: string, offset: number, chunk: Uint8Array): Promise<void>;
  discardPartial(sha256: string): Promise<void>;
}

/** Why a site could not deliver a key, as `SiteSourceFailure` says it. */
export class SiteFailure extends Error {
  constructor(
    readonly kind: "unreachable" | "missing" | "refused" | "offline",
    readonly url: string,
    readonly reason: string,
    readonly status?: number,
  ) {
    super(`${url}: ${status !== undefined ? `HTTP ${status}: ` : ""}${reason}`);
  }

  /** The app's error for the file concerned (`SiteSourceFailure.installError`). */
  installError(file: string, packageName?: string, tilePack = false): OfflineError {
    if (this.kind === "missing") {
      return new OfflineError("integrityFailed", `the site has no ${this.url} (HTTP ${this.status ?? 404}), though the catalogue names it`, {
        file, packageName, url: this.url, status: this.status,
      });
    }
    if (tilePack) return new OfflineError("mapDownloadFailed", this.reason, { file, packageName, url: this.url, status: this.status });
    return new OfflineError("networkUnavailable", `${this.reason} (downloading ${file})`, { file, packageName, url: this.url, status: this.status });
  }
}

class Tries {
  private failures = 0;
  private readonly started: number;

  constructor(readonly policy: TransferPolicy, private readonly clock: Clock) {
    this.started = clock.now();
  }

  progressed(): void {
    this.failures = 0;
  }

  get secondsLeft(): number {
    return this.policy.fileDeadlineSeconds - (this.clock.now() - this.started) / 1000;
  }

  /** The wait before the next try, in seconds; `unreachable` once the tries or the deadline are spent. */
  delay(status: number | undefined, reason: string, retryAfter: number | undefined, url: string): number {
    this.failures += 1;
    const ceiling = Math.min(this.policy.maximumBackoffSeconds, this.policy.initialBackoffSeconds * 2 ** Math.max(0, this.failures - 1));
    let wait = Math.random() * Math.max(ceiling, 0.000001);
    if (retryAfter !== undefined && Number.isFinite(retryAfter) && retryAfter > 0) {
      wait = Math.min(Math.max(wait, retryAfter), this.policy.fileDeadlineSeconds);
    }
    if (this.failures >= this.policy.maximumAttempts || wait >= this.secondsLeft) {
      const spent = this.failures >= this.policy.maximumAttempts ? `${this.failures} tr${this.failures === 1 ? "y" : "ies"}` : "its deadline";
      throw new SiteFailure("unreachable", url, `${reason}; gave up after ${spent}`, status);
    }
    return wait;
  }
}

interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

type Outcome = { answered: Answer } | { failed: { reason: string; status?: number; tooLong?: boolean; offline?: boolean } };

/** Does `Content-Range: bytes a-b/total` continue a file of `have` bytes of `total`? */
export function continues(header: string | null, have: number, total: number): boolean {
  if (header === null || !header.toLowerCase().startsWith("bytes ")) return false;
  const match = /^\s*([0-9]+)\s*-\s*([0-9]+)\s*\/\s*([0-9]+|\*)\s*$/.exec(header.slice(6));
  if (!match) return false;
  const [start, end] = [Number(match[1]), Number(match[2])];
  return start === have && end >= start && end < total && (match[3] === "*" || Number(match[3]) === total);
}

function retryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const value = Number(header.trim());
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

function message(body: Uint8Array): string {
  const text = new TextDecoder().decode(body.slice(0, 400)).replace(/[\u0000-\u001f\u007f]/g, " ").split(" ").filter(Boolean).join(" ");
  if (text === "") return "no message";
  return text.length > 200 ? text.slice(0, 200) + "…" : text;
}

const retryable = new Set([408, 429, 500, 502, 503, 504]);

/** A published site at a base URL (a query, such as a CDN token, is kept on every request and never shown). */
export class SiteTransport {
  readonly base: string;
  private readonly query: string;

  constructor(
    site: string,
    private readonly fetchFunction: FetchFunction,
    readonly policy: TransferPolicy = defaultPolicy,
    private readonly clock: Clock = systemClock,
    /** Whether the device has a network; a try lost to no network never counts as a failed try. */
    private readonly online: () => boolean = () => true,
    /** Resolves when the network is back. */
    private readonly networkBack: (signal?: AbortSignal) => Promise<void> = () => Promise.resolve(),
  ) {
    const url = new URL(site, typeof location === "undefined" ? undefined : location.href);
    this.query = url.search;
    url.search = "";
    url.hash = "";
    let base = url.toString();
    while (base.endsWith("/")) base = base.slice(0, -1);
    if (base.endsWith("/catalog.json")) base = base.slice(0, -"/catalog.json".length);
    this.base = base;
  }

  /** The site as messages and the trust record name it. */
  get location(): string {
    return shownURL(this.base);
  }

  private url(key: string): string {
    return `${this.base}/${key.split("/").map(encodeURIComponent).join("/")}${this.query}`;
  }

  shown(key: string): string {
    return `${this.location}/${key}`;
  }

  /** One request; the body goes to memory (bounded by `cap`) or to `onChunk`. */
  private async exchange(
    key: string,
    headers: Record<string, string>,
    sink: { cap: number } | { accept: (status: number, headers: Headers) => Promise<string | undefined>; chunk: (bytes: Uint8Array) => Promise<void>; limit: number },
    deadlineSeconds: number,
    signal?: AbortSignal,
  ): Promise<Outcome> {
    const controller = new AbortController();
    const abort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", abort, { once: true });
    let why: string | undefined;
    const deadline = setTimeout(() => {
      why = "the file's deadline passed";
      controller.abort();
    }, Math.max(0, deadlineSeconds * 1000));
    const window = this.policy.rateWindowSeconds;
    const samples: { at: number; bytes: number }[] = [];
    let received = 0;
    const watch = setInterval(() => {
      const at = this.clock.now();
      samples.push({ at, bytes: received });
      while (samples.length > 0 && at - samples[0]!.at > window * 1000) samples.shift();
      const first = samples[0]!;
      if (at - first.at >= (window - 1) * 1000 && (received - first.bytes) / window < this.policy.minimumBytesPerSecond) {
        why = `slower than ${this.policy.minimumBytesPerSecond} B/s over ${window} s`;
        controller.abort();
      }
    }, 1000);
    try {
      let response: Response;
      try {
        response = await this.fetchFunction(this.url(key), { headers, cache: "no-store", signal: controller.signal, redirect: "follow" });
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        return { failed: { reason: why ?? `connection failed: ${(error as Error).message}`, offline: why === undefined && !this.online() } };
      }
      const status = response.status;
      let limit: number;
      let accepted = true;
      if ("cap" in sink) {
        limit = sink.cap;
        const length = Number(response.headers.get("content-length"));
        if (status >= 200 && status < 300 && Number.isFinite(length) && length > limit) {
          controller.abort();
          return { failed: { reason: `an answer of ${length} bytes, more than the ${limit} a device reads`, status, tooLong: true } };
        }
      } else {
        const verdict = await sink.accept(status, response.headers);
        if (verdict !== undefined) {
          controller.abort();
          return { failed: { reason: verdict, status } };
        }
        accepted = status >= 200 && status < 300;
        limit = accepted ? sink.limit : 4096;
      }
      const parts: Uint8Array[] = [];
      const reader = response.body?.getReader();
      try {
        while (reader !== undefined) {
          const { value, done } = await reader.read();
          if (done) break;
          if (received + value.length > limit) {
            if (!accepted || !("chunk" in sink)) {
              if ("cap" in sink && status >= 200 && status < 300) {
                controller.abort();
                return { failed: { reason: `an answer longer than the ${limit} bytes a device reads`, status, tooLong: true } };
              }
              parts.push(value.slice(0, limit - received));
              received = limit;
              break;
            }
            controller.abort();
            return { failed: { reason: `an answer longer than the file's ${limit} bytes`, status, tooLong: true } };
          }
          received += value.length;
          if (accepted && "chunk" in sink) await sink.chunk(value);
          else parts.push(value);
        }
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        return { failed: { reason: why ?? `the answer was cut short: ${(error as Error).message}`, status, offline: why === undefined && !this.online() } };
      }
      const body = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
      let at = 0;
      for (const part of parts) {
        body.set(part, at);
        at += part.length;
      }
      return { answered: { status, headers: response.headers, body } };
    } finally {
      clearTimeout(deadline);
      clearInterval(watch);
      signal?.removeEventListener("abort", abort);
    }
  }

  /** A whole object (`catalog.json`, a root, a signature, a package.json), at most `cap` bytes. */
  async whole(key: string, headers: Record<string, string>, expecting: number[], cap: number, signal?: AbortSignal): Promise<Answer> {
    const tries = new Tries(this.policy, this.clock);
    for (;;) {
      const outcome = await this.exchange(key, headers, { cap }, Math.max(1, tries.secondsLeft), signal);
      let failure: { status?: number; reason: string; retryAfter?: number };
      if ("answered" in outcome) {
        const answer = outcome.answered;
        if (expecting.includes(answer.status)) return answer;
        if (!retryable.has(answer.status)) {
          const kind = answer.status === 404 || answer.status === 410 ? "missing" : "refused";
          throw new SiteFailure(kind, this.shown(key), message(answer.body), answer.status);
        }
        failure = { status: answer.status, reason: message(answer.body), retryAfter: retryAfter(answer.headers.get("retry-after")) };
      } else {
        if (outcome.failed.tooLong) throw new SiteFailure("refused", this.shown(key), outcome.failed.reason, outcome.failed.status);
        if (outcome.failed.offline) throw new SiteFailure("offline", this.shown(key), "no network", undefined);
        failure = outcome.failed;
      }
      const wait = tries.delay(failure.status, failure.reason, failure.retryAfter, this.shown(key));
      await this.clock.sleep(wait * 1000, signal);
    }
  }

  /** `catalog.json` unless it is still `version` (`If-None-Match`, else `If-Modified-Since`). */
  async catalog(version: { etag?: string; lastModified?: string } | undefined, cap: number, signal?: AbortSignal) {
    const headers: Record<string, string> = {};
    if (version?.etag !== undefined) headers["If-None-Match"] = version.etag;
    else if (version?.lastModified !== undefined) headers["If-Modified-Since"] = version.lastModified;
    const answer = await this.whole("catalog.json", headers, [200, 304], cap, signal);
    if (answer.status === 304) return { notModified: true as const };
    return {
      notModified: false as const,
      bytes: answer.body,
      version: { etag: answer.headers.get("etag") ?? undefined, lastModified: answer.headers.get("last-modified") ?? undefined },
    };
  }

  /** A small object whole; undefined when the site has none (404, 410). */
  async object(key: string, cap: number, signal?: AbortSignal): Promise<Uint8Array | undefined> {
    try {
      return (await this.whole(key, {}, [200], cap, signal)).body;
    } catch (error) {
      if (error instanceof SiteFailure && error.kind === "missing") return undefined;
      throw error;
    }
  }

  /**
   * Downloads `key` into the partial file of `sha256` until it holds `size`
   * bytes, continuing what is there (`Range` with `If-Range`). Chunks are
   * stored as they arrive, at least every `flushBytes`, so a tab closed
   * mid-file resumes from the last byte stored.
   */
  async download(
    key: string,
    sha256: string,
    size: number,
    files: PartialFiles,
    observe: (event: { bytes: number } | { retrying: number; reason: string } | { waitingForNetwork: true }) => void,
    signal?: AbortSignal,
    flushBytes = 256 * 1024,
  ): Promise<void> {
    const tries = new Tries(this.policy, this.clock);
    const start = await files.partial(sha256);
    let mostHeld = start !== undefined && start.bytes <= size && start.validator !== undefined ? start.bytes : 0;
    for (;;) {
      let held = await files.partial(sha256);
      if (held !== undefined && (held.bytes > size || (held.bytes > 0 && held.validator === undefined))) {
        await files.discardPartial(sha256);
        held = undefined;
      }
      const have = held?.bytes ?? 0;
      if (size === 0) {
        await files.startPartial(sha256, held?.validator);
        return;
      }
      if (have === size) return;
      observe({ bytes: have });
      const headers: Record<string, string> = {};
      if (have > 0 && held?.validator !== undefined) {
        headers.Range = `bytes=${have}-`;
        headers["If-Range"] = held.validator;
      }
      let length = have;
      let pending: Uint8Array[] = [];
      let pendingBytes = 0;
      let flushed = have;
      const flush = async () => {
        if (pendingBytes === 0) return;
        const chunk = new Uint8Array(pendingBytes);
        let at = 0;
        for (const part of pending) {
          chunk.set(part, at);
          at += part.length;
        }
        pending = [];
        pendingBytes = 0;
        await files.appendPartial(sha256, flushed, chunk);
        flushed += chunk.length;
        observe({ bytes: flushed });
      };
      const outcome = await this.exchange(
        key,
        headers,
        {
          limit: size - have,
          accept: async (status, answerHeaders) => {
            if (status < 200 || status >= 300) return undefined;
            if (status === 206) {
              if (have === 0 || !continues(answerHeaders.get("content-range"), have, size)) {
                return `a range that does not continue the file at byte ${have} (Content-Range: ${answerHeaders.get("content-range") ?? "none"})`;
              }
            } else if (status !== 200) {
              return `HTTP ${status} is not a file's answer`;
            }
            const validator = answerHeaders.get("etag") ?? answerHeaders.get("last-modified") ?? undefined;
            if (status === 200) {
              await files.startPartial(sha256, validator);
              length = 0;
              flushed = 0;
            }
            return undefined;
          },
          chunk: async (bytes) => {
            pending.push(bytes);
            pendingBytes += bytes.length;
            length += bytes.length;
            if (pendingBytes >= flushBytes) await flush();
          },
        },
        Math.max(0.001, tries.secondsLeft),
        signal,
      ).catch(async (error) => {
        await flush();
        throw error;
      });
      await flush();
      const now = length;
      if (now > mostHeld) {
        mostHeld = now;
        tries.progressed();
      }
      let status: number | undefined;
      let reason: string;
      let after: number | undefined;
      if ("answered" in outcome) {
        const answer = outcome.answered;
        if (answer.status >= 200 && answer.status < 300) {
          if (now === size) return;
          [status, reason] = [answer.status, `the answer ended at byte ${now} of ${size}`];
        } else if (answer.status === 416) {
          await files.discardPartial(sha256);
          [status, reason] = [416, "the range asked for is not satisfiable"];
        } else if (retryable.has(answer.status)) {
          [status, reason, after] = [answer.status, message(answer.body), retryAfter(answer.headers.get("retry-after"))];
        } else {
          const kind = answer.status === 404 || answer.status === 410 ? "missing" : "refused";
          throw new SiteFailure(kind, this.shown(key), message(answer.body), answer.status);
        }
      } else {
        if (outcome.failed.tooLong) throw new SiteFailure("refused", this.shown(key), outcome.failed.reason, outcome.failed.status);
        if (outcome.failed.offline) {
          // No network is no failed try: wait for it, then resume from the last byte.
          observe({ waitingForNetwork: true });
          await this.networkBack(signal);
          continue;
        }
        [status, reason] = [outcome.failed.status, outcome.failed.reason];
      }
      const wait = tries.delay(status, reason, after, this.shown(key));
      observe({ retrying: wait, reason });
      await this.clock.sleep(wait * 1000, signal);
    }
  }
}
