/// <reference lib="webworker" />
/**
 * The demo's service worker. It keeps the app's own files (so the page
 * opens with no network) and serves every installed narration and caption
 * file from the verified files, with `Range`, at
 * `offline/<tourId>/<path as package.json names it>`. Nothing else is
 * touched: the site's requests and the connectivity probe go to the
 * network as the page sent them.
 */
import { installedFile } from "../src/library.js";
import { BrowserStorage } from "./browser-storage.js";

declare const self: ServiceWorkerGlobalScope;
/** Set by the build: a new build is a new worker, which replaces the shell. */
declare const SHELL_VERSION: string;

const shell = `tourpack-shell-${SHELL_VERSION}`;
const shellFiles = ["./", "index.html", "app.js", "style.css", "config.json"];
const storage = new BrowserStorage();

self.addEventListener("install", (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(shell);
      await cache.addAll(shellFiles.map((file) => new Request(file, { cache: "reload" })));
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) if (name.startsWith("tourpack-shell-") && name !== shell) await caches.delete(name);
      await self.clients.claim();
    })(),
  );
});

const types: Record<string, string> = { m4a: "audio/mp4", mp3: "audio/mpeg", opus: "audio/ogg", vtt: "text/vtt; charset=utf-8", mbtiles: "application/vnd.sqlite3" };

async function offlineFile(request: Request, tourId: string, path: string): Promise<Response> {
  const blob = await installedFile(storage, tourId, path);
  if (blob === undefined) return new Response(`${path} of tour ${tourId} is not installed`, { status: 404 });
  const type = types[path.split(".").pop() ?? ""] ?? "application/octet-stream";
  const range = request.headers.get("range");
  const match = range === null ? null : /^bytes=([0-9]*)-([0-9]*)$/.exec(range.trim());
  if (match !== null && blob.size > 0) {
    let start = match[1] === "" ? blob.size - Number(match[2]) : Number(match[1]);
    let end = match[1] === "" || match[2] === "" ? blob.size - 1 : Math.min(Number(match[2]), blob.size - 1);
    start = Math.max(0, start);
    if (start >= blob.size || end < start) {
      return new Response(null, { status: 416, headers: { "content-range": `bytes */${blob.size}` } });
    }
    end = Math.min(end, blob.size - 1);
    return new Response(blob.slice(start, end + 1), {
      status: 206,
      headers: { "content-type": type, "content-range": `bytes ${start}-${end}/${blob.size}`, "content-length": String(end - start + 1), "accept-ranges": "bytes" },
    });
  }
  return new Response(blob, { headers: { "content-type": type, "content-length": String(blob.size), "accept-ranges": "bytes" } });
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const scope = new URL(self.registration.scope);
  if (url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname) || event.request.method !== "GET") return;
  const relative = decodeURIComponent(url.pathname.slice(scope.pathname.length));
  const offline = /^offline\/([0-9a-f-]{36})\/(.+)$/.exec(relative);
  if (offline !== null) {
    event.respondWith(offlineFile(event.request, offline[1]!, offline[2]!));
    return;
  }
  if (relative === "" || shellFiles.includes(relative)) {
    event.respondWith(
      (async () => (await (await caches.open(shell)).match(relative === "" ? "./" : relative)) ?? fetch(event.request))(),
    );
  }
});
