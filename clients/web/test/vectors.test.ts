/**
 * Every shared vector (`Tests/Vectors`) through the web client, with the
 * verdict the Swift client's `SharedVectorTests` holds it to.
 */
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { base64Decode } from "../src/crypto.js";
import { OfflineError } from "../src/errors.js";
import { parseTimestamp } from "../src/json.js";
import { OfflineLibrary } from "../src/library.js";
import { MemoryStorage } from "../src/storage.js";
import { TrustAnchor } from "../src/trust.js";
import { TestSite } from "./site.js";

interface Verdict {
  outcome: string;
  generation?: string;
  kind?: string;
  file?: string;
}

interface Vector {
  name: string;
  anchor: { publicKey?: string; rootJSON?: string };
  steps: { note: string; now: string; site: Record<string, string>; filled?: Record<string, { byte: number; count: number }>; install?: string[]; verdict: Verdict }[];
}

const folder = process.env.TOURPACK_VECTORS ?? join(process.cwd(), "Tests", "Vectors");

async function run(vector: Vector): Promise<Verdict[]> {
  const storage = new MemoryStorage();
  const anchor: TrustAnchor =
    vector.anchor.publicKey !== undefined ? { publicKey: vector.anchor.publicKey } : { rootJSON: base64Decode(vector.anchor.rootJSON!)! };
  const outcomes: Verdict[] = [];
  for (const step of vector.steps) {
    const site = new TestSite();
    for (const [key, text] of Object.entries(step.site)) site.files.set(key, base64Decode(text)!);
    for (const [key, fill] of Object.entries(step.filled ?? {})) site.files.set(key, new Uint8Array(fill.count).fill(fill.byte));
    const now = parseTimestamp(step.now)!;
    const library = new OfflineLibrary({ site: site.base, anchor, storage, fetch: site.fetch, now: () => now });
    try {
      const catalog = await library.refreshCatalog();
      if (step.install === undefined) {
        outcomes.push({ outcome: "accepted", generation: catalog.generation.toString() });
      } else {
        for (const tourId of step.install) await library.download(tourId);
        outcomes.push({ outcome: "installed" });
      }
    } catch (error) {
      if (!(error instanceof OfflineError)) throw error;
      const verdict: Verdict = { outcome: "refused", kind: error.kind };
      if (error.file !== undefined) verdict.file = error.file;
      outcomes.push(verdict);
    }
  }
  return outcomes;
}

test("every shared vector gets the Swift client's verdict", async () => {
  const names = (await readdir(folder)).filter((name) => name.endsWith(".json")).sort();
  assert.ok(names.length >= 15, `the shared vectors are in ${folder}`);
  for (const name of names) {
    const vector = JSON.parse(await readFile(join(folder, name), "utf8")) as Vector;
    const outcomes = await run(vector);
    vector.steps.forEach((step, index) => {
      assert.deepEqual(outcomes[index], step.verdict, `${name} step ${index + 1} (${step.note})`);
    });
  }
});
