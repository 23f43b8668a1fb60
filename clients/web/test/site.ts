/**
 * A published site served to the library's `fetch` in process: the HTTP a
 * CDN speaks (ETag and `If-None-Match` 304, `Range` with `If-Range`, 206,
 * 416, 404), over a map of keys to bytes, with a log of every request and
 * the bytes sent. The browser tests use the real `tourpack web` server.
 */
import { FetchFunction } from "../src/transfer.js";

export interface Logged {
  key: string;
  headers: Record<string, string>;
  status: number;
  bytes: number;
}

function etag(bytes: Uint8Array): string {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return `"${bytes.length}-${hash.toString(16)}"`;
}

export class TestSite {
  readonly files = new Map<string, Uint8Array>();
  readonly log: Logged[] = [];
  /** Keys whose answers are cut after this many body bytes (the connection lost). */
  readonly cuts = new Map<string, number>();
  /** Keys whose answers stop at this byte of the file and never end (until the request is aborted): a tab closed mid-file. */
  readonly hangs = new Map<string, number>();
  /** Keys answered with this status instead. */
  readonly statuses = new Map<string, number>();

  constructor(readonly base = "https://site.test/tours") {}

  readonly fetch: FetchFunction = async (url, init) => {
    const path = decodeURIComponent(new URL(url).pathname);
    const prefix = new URL(this.base).pathname + "/";
    const key = path.startsWith(prefix) ? path.slice(prefix.length) : path;
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    const answer = (status: number, body: Uint8Array, extra: Record<string, string> = {}, offset = 0) => {
      const hang = this.hangs.get(key);
      if (hang !== undefined && status >= 200 && status < 300 && hang - offset < body.length) {
        const sent = Math.max(0, hang - offset);
        this.log.push({ key, headers, status, bytes: sent });
        const signal = init.signal;
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            if (sent > 0) controller.enqueue(body.slice(0, sent));
            signal?.addEventListener("abort", () => controller.error(new TypeError("aborted")), { once: true });
          },
        });
        return new Response(stream, { status, headers: { "content-length": String(body.length), ...extra } });
      }
      const cut = this.cuts.get(key);
      const sent = cut !== undefined && cut < body.length ? body.slice(0, cut) : body;
      this.log.push({ key, headers, status, bytes: sent.length });
      if (cut !== undefined && cut < body.length) {
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(sent);
            controller.error(new TypeError("the connection was lost"));
          },
        });
        return new Response(stream, { status, headers: { "content-length": String(body.length), ...extra } });
      }
      return new Response(status === 304 ? null : body, { status, headers: { "content-length": String(body.length), ...extra } });
    };
    const forced = this.statuses.get(key);
    if (forced !== undefined) return answer(forced, new TextEncoder().encode(`status ${forced}`));
    const bytes = this.files.get(key);
    if (bytes === undefined) return answer(404, new TextEncoder().encode("not found"));
    const tag = etag(bytes);
    if (headers["if-none-match"] === tag) return answer(304, new Uint8Array(0), { etag: tag });
    const range = headers["range"];
    if (range !== undefined && (headers["if-range"] === undefined || headers["if-range"] === tag)) {
      const match = /^bytes=([0-9]+)-$/.exec(range);
      const start = match ? Number(match[1]) : NaN;
      if (!(start < bytes.length)) return answer(416, new Uint8Array(0), { "content-range": `bytes */${bytes.length}` });
      return answer(206, bytes.slice(start), { etag: tag, "content-range": `bytes ${start}-${bytes.length - 1}/${bytes.length}` }, start);
    }
    return answer(200, bytes, { etag: tag, "accept-ranges": "bytes" });
  };
}
