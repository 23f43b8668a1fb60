/**
 * The offline screens' copy, cell by cell: a tour's pack state against the
 * device's connectivity. The WebClient article holds the same table, and
 * the browser tests hold the page to the article's text.
 */
export type Connectivity = "online" | "poor" | "offline";
export type MatrixState = "none" | "downloading" | "cached" | "update_available";
export type Action = "download" | "update" | "delete" | "cancel";

export const matrix: Record<MatrixState, Record<Connectivity, { copy: string; actions: Action[] }>> = {
  none: {
    online: { copy: "Download for offline use · {size}", actions: ["download"] },
    poor: { copy: "Weak connection · downloading {size} may be slow", actions: ["download"] },
    offline: { copy: "Not downloaded · connect to download {size}", actions: [] },
  },
  downloading: {
    online: { copy: "Downloading · {percent}%", actions: ["cancel"] },
    poor: { copy: "Downloading on a weak connection · {percent}%", actions: ["cancel"] },
    offline: { copy: "Waiting for a connection · {percent}% kept", actions: ["cancel"] },
  },
  cached: {
    online: { copy: "Available offline", actions: ["delete"] },
    poor: { copy: "Available offline · plays from this device", actions: ["delete"] },
    offline: { copy: "Offline · plays from this device", actions: ["delete"] },
  },
  update_available: {
    online: { copy: "Update available · {size} · this version plays until the update is complete", actions: ["update", "delete"] },
    poor: { copy: "Update available · {size} · weak connection, this version keeps playing", actions: ["update", "delete"] },
    offline: { copy: "Offline · an update is waiting; this version plays", actions: ["delete"] },
  },
};

/** What the catalogue's banner says. */
export const catalogueCopy = {
  refused: "This tour list failed its security check, so nothing changed. Downloaded tours still play.",
  expired: "This tour list is out of date. Downloaded tours still play; connect to get updates.",
  unreachable: "The tour list could not be reached. Downloaded tours still play.",
} as const;

/** A failed download's line, under its tour's cell. */
export const failedCopy = "Download failed: {reason}. Try again.";

export function fill(copy: string, values: { size?: string; percent?: number; reason?: string }): string {
  return copy
    .replace("{size}", values.size ?? "")
    .replace("{percent}", String(values.percent ?? 0))
    .replace("{reason}", values.reason ?? "");
}

export function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}
