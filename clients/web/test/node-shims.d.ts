// The few Node APIs the tests use, declared here: Debian ships no @types/node,
// and the npm registry is not used.
declare module "node:test" {
  type Body = (context: { name: string }) => unknown | Promise<unknown>;
  export function test(name: string, body: Body): Promise<void>;
  export function test(name: string, options: { timeout?: number; skip?: boolean | string }, body: Body): Promise<void>;
  export function describe(name: string, body: () => unknown): void;
}
declare module "node:assert/strict" {
  interface Assert {
    (value: unknown, message?: string): asserts value;
    equal(actual: unknown, expected: unknown, message?: string): void;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual(actual: unknown, expected: unknown, message?: string): void;
    ok(value: unknown, message?: string): asserts value;
    rejects(promise: Promise<unknown> | (() => Promise<unknown>), check?: object | ((error: unknown) => boolean), message?: string): Promise<void>;
    match(text: string, pattern: RegExp, message?: string): void;
  }
  const assert: Assert;
  export default assert;
}
declare module "node:fs/promises" {
  export function readFile(path: string): Promise<Uint8Array>;
  export function readFile(path: string, encoding: "utf8"): Promise<string>;
  export function readdir(path: string): Promise<string[]>;
}
declare module "node:path" {
  export function join(...parts: string[]): string;
  export function dirname(path: string): string;
  export function resolve(...parts: string[]): string;
}
declare module "node:url" {
  export function fileURLToPath(url: string | URL): string;
}
declare const process: { env: Record<string, string | undefined>; cwd(): string };
interface ImportMeta {
  url: string;
}
