/**
 * The demo web app: the library's tours on the offline screens' state
 * matrix (copy.ts), each tour's narrations playable from the service
 * worker. Its state is in the DOM for people and tests alike:
 * `body[data-connectivity]`, `body[data-catalog-state]`, each tour's
 * `[data-tour-id][data-pack-state]`, buttons with `data-action`, and one
 * `audio[data-poi-id][data-phase]` per narration with its caption track.
 */
import { browserConnectivity, BrowserStorage } from "../browser/browser-storage.js";
import { base64Decode } from "../src/crypto.js";
import { OfflineError } from "../src/errors.js";
import { OfflineLibrary, TourState, webLock } from "../src/library.js";
import { TrustAnchor } from "../src/trust.js";
import { Action, catalogueCopy, Connectivity, failedCopy, fill, matrix, MatrixState, megabytes } from "./copy.js";

interface Config {
  site: string;
  publicKey?: string;
  rootJSON?: string;
}

const params = new URLSearchParams(location.search);
/** How often the probe runs, and how slow an answer is "poor" (tests shorten both). */
const probeSeconds = Number(params.get("probe") ?? "5");
const poorMilliseconds = Number(params.get("poor") ?? "1500");
const probeTimeoutMilliseconds = Number(params.get("probeTimeout") ?? "4000");
/** Bytes held in memory before a partial file is stored: what a closed tab can lose. */
const flushBytes = Number(params.get("flush") ?? String(64 * 1024));

const labels: Record<Action, string> = { download: "Download", update: "Update", delete: "Delete", cancel: "Cancel" };
const phases: Record<string, string> = { approaching: "Approaching", detailed: "Detailed", guidedTour: "Guided Tour" };

let connectivity: Connectivity = navigator.onLine ? "online" : "offline";
let library: OfflineLibrary;
let shownTour: { tourId: string; packageId: string } | undefined;

function element<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function setConnectivity(next: Connectivity): void {
  const changed = next !== connectivity;
  connectivity = next;
  document.body.dataset.connectivity = next;
  document.getElementById("connectivity")!.textContent = { online: "Online", poor: "Weak connection", offline: "Offline" }[next];
  if (changed) scheduleRender();
}

/** `navigator.onLine`, then a small request: slow or timing out is `poor`. */
async function probe(): Promise<void> {
  if (!navigator.onLine) return setConnectivity("offline");
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), probeTimeoutMilliseconds);
  try {
    const response = await fetch(`probe?${Date.now()}`, { cache: "no-store", signal: controller.signal });
    await response.arrayBuffer();
    setConnectivity(performance.now() - started > poorMilliseconds ? "poor" : "online");
  } catch {
    setConnectivity(navigator.onLine ? "poor" : "offline");
  } finally {
    clearTimeout(timer);
  }
}

function matrixState(tour: TourState): MatrixState {
  if (tour.job !== undefined && tour.job.status !== "failed") return "downloading";
  if (tour.installed !== undefined) return tour.update !== undefined ? "update_available" : "cached";
  return "none";
}

let renderTimer: ReturnType<typeof setTimeout> | undefined;
function scheduleRender(): void {
  if (renderTimer === undefined) renderTimer = setTimeout(() => void render(), 30);
}

async function render(): Promise<void> {
  renderTimer = undefined;
  const tours = await library.tours();
  const list = document.getElementById("tours")!;
  const items: HTMLElement[] = [];
  for (const tour of tours) {
    const state = matrixState(tour);
    const cell = matrix[state][connectivity];
    const size = state === "update_available" ? tour.update?.sizeBytes : tour.offers.find((offer) => offer.format === "aac")?.sizeBytes ?? tour.offers[0]?.sizeBytes;
    const total = tour.job?.totalBytes ?? 0;
    const downloaded = tour.job?.downloadedBytes ?? 0;
    const percent = total > 0 ? Math.floor((downloaded / total) * 100) : 0;
    const item = element("li", { class: "tour", "data-tour-id": tour.tourId, "data-pack-state": state, "data-cell": `${state}/${connectivity}` });
    if (tour.job !== undefined) {
      item.dataset.job = tour.job.status;
      item.dataset.downloadedBytes = String(downloaded);
      item.dataset.totalBytes = String(total);
    }
    const title = element("h2");
    title.append(tour.installed !== undefined ? element("a", { href: `#tour=${tour.tourId}`, "data-open": tour.tourId }, tour.tourName) : tour.tourName);
    item.append(title, element("p", { class: "copy", "data-copy": "" }, fill(cell.copy, { size: size === undefined ? "" : megabytes(size), percent })));
    const actions = [...cell.actions];
    if (tour.job?.status === "failed") {
      const failure = element("p", { class: "failure", "data-failure": tour.job.error?.kind ?? "" }, fill(failedCopy, { reason: tour.job.error?.message ?? "" }));
      item.append(failure);
      if (connectivity !== "offline" && !actions.includes("download") && !actions.includes("update")) actions.unshift(tour.installed ? "update" : "download");
    }
    for (const action of actions) {
      item.append(element("button", { type: "button", "data-action": action, "data-tour-id": tour.tourId }, labels[action]));
    }
    items.push(item);
  }
  list.replaceChildren(...items);
  await renderTour(tours);
  await renderStorage();
}

async function renderTour(tours: TourState[]): Promise<void> {
  const section = document.getElementById("tour")!;
  const match = /^#tour=([0-9a-f-]{36})$/.exec(location.hash);
  const tour = match === null ? undefined : tours.find((each) => each.tourId === match[1]);
  const installed = tour?.installed;
  if (installed === undefined) {
    shownTour = undefined;
    section.hidden = true;
    section.replaceChildren();
    return;
  }
  if (shownTour?.tourId === installed.tourId && shownTour.packageId === installed.packageId) return;
  shownTour = { tourId: installed.tourId, packageId: installed.packageId };
  section.hidden = false;
  section.dataset.tourId = installed.tourId;
  section.dataset.packageId = installed.packageId;
  const url = (path: string) => `offline/${installed.tourId}/${path.split("/").map(encodeURIComponent).join("/")}`;
  const rows: HTMLElement[] = [element("h2", {}, installed.tourName)];
  for (const narration of installed.manifest.narrations) {
    const row = element("div", { class: "narration" });
    row.append(element("p", {}, `${narration.poiName} · ${phases[narration.phase] ?? narration.phase}`));
    const audio = element("audio", { controls: "", preload: "metadata", "data-poi-id": narration.poiId, "data-phase": narration.phase, src: url(narration.audio.path) });
    if (narration.captions !== undefined) {
      audio.append(element("track", { kind: "captions", srclang: "en", label: "Captions", default: "", src: url(narration.captions.path) }));
    }
    audio.addEventListener("play", () => {
      library.setPlaying(installed.tourId);
      void library.markAccessed(installed.tourId);
    });
    audio.addEventListener("pause", () => library.setPlaying(undefined));
    row.append(audio);
    rows.push(row);
  }
  section.replaceChildren(...rows);
}

async function renderStorage(): Promise<void> {
  const use = await library.storageUse();
  const footer = document.getElementById("storage")!;
  footer.dataset.packageBytes = String(use.packageBytes);
  if (use.usage !== undefined) footer.dataset.usage = String(use.usage);
  if (use.quota !== undefined) footer.dataset.quota = String(use.quota);
  footer.textContent = `Tours take ${megabytes(use.packageBytes)}` + (use.quota !== undefined ? ` · this site uses ${megabytes(use.usage ?? 0)} of ${megabytes(use.quota)}` : "");
}

function showCatalogue(state: "verified" | "refused" | "expired" | "unreachable" | "none", error?: OfflineError): void {
  document.body.dataset.catalogState = state;
  const banner = document.getElementById("catalog-banner")!;
  if (state === "verified" || state === "none") {
    banner.hidden = true;
    banner.textContent = "";
    delete banner.dataset.errorKind;
    return;
  }
  banner.hidden = false;
  banner.textContent = catalogueCopy[state];
  if (error !== undefined) {
    banner.dataset.errorKind = error.kind;
    banner.title = error.message;
  }
}

async function refreshCatalogue(): Promise<void> {
  if (!navigator.onLine) return;
  try {
    await library.refreshCatalog();
    showCatalogue("verified");
  } catch (error) {
    if (!(error instanceof OfflineError)) throw error;
    const state = error.kind === "catalogExpired" ? "expired" : error.kind === "networkUnavailable" ? "unreachable" : "refused";
    showCatalogue(state, error);
  }
  scheduleRender();
}

document.addEventListener("click", (event) => {
  const button = (event.target as HTMLElement).closest<HTMLElement>("[data-action]");
  if (button === null) return;
  const tourId = button.dataset.tourId ?? "";
  switch (button.dataset.action) {
    case "download":
    case "update":
      library.download(tourId).catch(() => scheduleRender());
      break;
    case "delete":
      void library.delete(tourId);
      break;
    case "cancel":
      void library.cancel(tourId);
      break;
    case "refresh":
      void refreshCatalogue();
      break;
  }
});

async function start(): Promise<void> {
  if ("serviceWorker" in navigator) {
    await navigator.serviceWorker.register("sw.js");
    await navigator.serviceWorker.ready;
  }
  const config = (await (await fetch("config.json")).json()) as Config;
  const anchor: TrustAnchor = config.publicKey !== undefined ? { publicKey: config.publicKey } : { rootJSON: base64Decode(config.rootJSON ?? "")! };
  library = new OfflineLibrary({ site: new URL(config.site, location.href).toString(), anchor, storage: new BrowserStorage(), connectivity: browserConnectivity, flushBytes, downloadLock: webLock() });
  (globalThis as unknown as { tourpack: unknown }).tourpack = { library };
  library.onChange(scheduleRender);
  void library.requestPersistence();
  setConnectivity(connectivity);
  const held = await library.catalog();
  showCatalogue(held === undefined ? "none" : (await library.isStale()) ? "expired" : "verified");
  await render();
  addEventListener("online", () => {
    void probe();
    void refreshCatalogue();
  });
  addEventListener("offline", () => setConnectivity("offline"));
  addEventListener("hashchange", scheduleRender);
  setInterval(() => void probe(), probeSeconds * 1000);
  void probe();
  await refreshCatalogue();
  await library.resumeDownloads();
  await render();
  document.body.dataset.ready = "true";
}

void start().catch((error: Error) => {
  document.body.dataset.startError = error.message;
  document.getElementById("catalog-banner")!.hidden = false;
  document.getElementById("catalog-banner")!.textContent = `The app could not start: ${error.message}`;
});
