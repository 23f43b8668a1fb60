/**
 * tourpack's web client: a published site's signed catalogue, verified and
 * installed in a browser with the rules of the Swift client
 * (TourpackClient). No runtime dependency: WebCrypto, `fetch`, and a
 * `PackStorage` (IndexedDB and Cache Storage in `browser/`).
 */
export { OfflineError, type ErrorKind } from "./errors.js";
export { webCrypto, type CryptoFacade, base64Encode, base64Decode, sha256Hex } from "./crypto.js";
export { MemoryStorage, type PackStorage, type StateValue } from "./storage.js";
export { CatalogReader, type TrustAnchor, resetTrust } from "./trust.js";
export { SiteTransport, defaultPolicy, type TransferPolicy, type FetchFunction, type Clock, type PartialFiles } from "./transfer.js";
export { fetchManifest, decodeManifest, type Manifest, type Narration, type PackageFile } from "./manifest.js";
export { SiteLayout, type Catalog, type CatalogTour, type CatalogPackage } from "./documents.js";
export {
  OfflineLibrary,
  alwaysOnline,
  webLock,
  type Connectivity,
  type DownloadJob,
  type InstalledPackage,
  type LibraryOptions,
  type Offer,
  type PackStateKind,
  type TourState,
} from "./library.js";
