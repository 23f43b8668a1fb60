/**
 * The app's error taxonomy, the same kinds TourpackClient's `OfflineError`
 * has, so a web app and a Swift app name a failure alike. Every error names
 * what failed: the file (a site key such as `catalog.json`) and, where there
 * is one, the package.
 */
export type ErrorKind =
  | "integrityFailed"
  | "rollbackRefused"
  | "catalogExpired"
  | "networkUnavailable"
  | "mapDownloadFailed"
  | "storageFailed"
  | "alreadyDownloading"
  | "notOffered"
  | "cancelled"
  | "invalidInput";

const kindText: Record<ErrorKind, string> = {
  integrityFailed: "integrity check failed",
  rollbackRefused: "rollback refused",
  catalogExpired: "catalogue expired",
  networkUnavailable: "network unavailable",
  mapDownloadFailed: "map download failed",
  storageFailed: "storage failed",
  alreadyDownloading: "already downloading",
  notOffered: "not offered",
  cancelled: "cancelled",
  invalidInput: "invalid input",
};

export interface ErrorContext {
  /** The site key (or device path) concerned, e.g. `catalog.json`, `roots/2.json`, `blobs/sha256/ab/ab…`. */
  file?: string;
  /** `package <id> (<tour name>)`. */
  packageName?: string;
  /** The URL, without its query (a CDN token is never shown). */
  url?: string;
  status?: number;
}

export class OfflineError extends Error {
  readonly kind: ErrorKind;
  readonly file?: string;
  readonly packageName?: string;
  readonly url?: string;
  readonly status?: number;
  /** The message without the kind. */
  readonly detail: string;

  constructor(kind: ErrorKind, detail: string, context: ErrorContext = {}) {
    const where = [context.packageName, context.file].filter((part) => part !== undefined).join(", ");
    super(`${kindText[kind]}: ${where ? where + ": " : ""}${detail}`);
    this.name = "OfflineError";
    this.kind = kind;
    this.detail = detail;
    this.file = context.file;
    this.packageName = context.packageName;
    this.url = context.url;
    this.status = context.status;
  }

  static integrity(file: string, detail: string, context: ErrorContext = {}): OfflineError {
    return new OfflineError("integrityFailed", detail, { ...context, file });
  }
}

/** `package <id> (<tour name>)`, as the Swift client names a package. */
export function packageName(id: string, tourName?: string): string {
  return tourName === undefined ? `package ${id}` : `package ${id} (${tourName})`;
}

/** A URL as a message may show it: no query, no user info. */
export function shownURL(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.search = "";
    parsed.hash = "";
    parsed.username = "";
    parsed.password = "";
    return parsed.toString();
  } catch {
    return url.split(/[?#]/)[0] ?? url;
  }
}
