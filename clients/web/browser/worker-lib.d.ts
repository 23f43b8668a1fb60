// TypeScript 4.8's WebWorker library (Debian's node-typescript) leaves out
// two methods every browser with service workers has.
interface AbortController {
  abort(reason?: unknown): void;
}
interface StorageManager {
  persist(): Promise<boolean>;
}
