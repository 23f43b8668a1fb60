/**
 * A strict JSON reader. `JSON.parse` turns a generation of 2^53 + 1 into
 * 2^53 and silently agrees with a forged catalogue; here every integer that
 * a double cannot hold exactly is a `bigint`, so the rules compare the
 * numbers a signature covered, exactly as Swift's `Int` does.
 */
export type JSONValue = null | boolean | number | bigint | string | JSONValue[] | { [key: string]: JSONValue };

export class JSONError extends Error {}

export interface ReadOptions {
  /** Nesting deeper than this is refused. */
  maxDepth?: number;
  /** Refuse an object that names a key twice (signature documents do). */
  refuseDuplicates?: boolean;
}

export function readJSON(bytes: Uint8Array, options: ReadOptions = {}): JSONValue {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new JSONError("not UTF-8");
  }
  return new Reader(text, options.maxDepth ?? 64, options.refuseDuplicates ?? false).document();
}

class Reader {
  private at = 0;
  constructor(private readonly text: string, private readonly maxDepth: number, private readonly refuseDuplicates: boolean) {}

  document(): JSONValue {
    if (this.text.charCodeAt(0) === 0xfeff) this.at = 1;
    const value = this.value(0);
    this.space();
    if (this.at !== this.text.length) this.fail("text after the document");
    return value;
  }

  private fail(why: string): never {
    throw new JSONError(`${why} at offset ${this.at}`);
  }

  private space(): void {
    while (this.at < this.text.length) {
      const c = this.text.charCodeAt(this.at);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.at++;
      else break;
    }
  }

  private value(depth: number): JSONValue {
    if (depth > this.maxDepth) this.fail(`nesting deeper than ${this.maxDepth}`);
    this.space();
    const c = this.text[this.at];
    if (c === "{") return this.object(depth);
    if (c === "[") return this.array(depth);
    if (c === '"') return this.string();
    if (c === "t") return this.word("true", true);
    if (c === "f") return this.word("false", false);
    if (c === "n") return this.word("null", null);
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
    return this.fail(c === undefined ? "unexpected end" : `unexpected ${JSON.stringify(c)}`);
  }

  private word<T extends JSONValue>(word: string, value: T): T {
    if (this.text.startsWith(word, this.at)) {
      this.at += word.length;
      return value;
    }
    return this.fail("not a JSON value");
  }

  private object(depth: number): JSONValue {
    this.at++;
    const result: { [key: string]: JSONValue } = Object.create(null);
    this.space();
    if (this.text[this.at] === "}") {
      this.at++;
      return result;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail("expected a key");
      const key = this.string();
      this.space();
      if (this.text[this.at] !== ":") this.fail("expected ':'");
      this.at++;
      const value = this.value(depth + 1);
      if (Object.prototype.hasOwnProperty.call(result, key) && this.refuseDuplicates) this.fail(`duplicate key ${key}`);
      result[key] = value;
      this.space();
      const next = this.text[this.at++];
      if (next === "}") return result;
      if (next !== ",") this.fail("expected ',' or '}'");
    }
  }

  private array(depth: number): JSONValue {
    this.at++;
    const result: JSONValue[] = [];
    this.space();
    if (this.text[this.at] === "]") {
      this.at++;
      return result;
    }
    for (;;) {
      result.push(this.value(depth + 1));
      this.space();
      const next = this.text[this.at++];
      if (next === "]") return result;
      if (next !== ",") this.fail("expected ',' or ']'");
    }
  }

  private string(): string {
    this.at++;
    let out = "";
    for (;;) {
      const c = this.text.charCodeAt(this.at);
      if (Number.isNaN(c)) this.fail("unterminated string");
      if (c === 0x22) {
        this.at++;
        return out;
      }
      if (c < 0x20) this.fail("control character in a string");
      if (c === 0x5c) {
        const e = this.text[this.at + 1];
        this.at += 2;
        switch (e) {
          case '"': out += '"'; break;
          case "\\": out += "\\"; break;
          case "/": out += "/"; break;
          case "b": out += "\b"; break;
          case "f": out += "\f"; break;
          case "n": out += "\n"; break;
          case "r": out += "\r"; break;
          case "t": out += "\t"; break;
          case "u": {
            const hex = this.text.slice(this.at, this.at + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("bad \\u escape");
            out += String.fromCharCode(parseInt(hex, 16));
            this.at += 4;
            break;
          }
          default:
            this.fail("bad escape");
        }
        continue;
      }
      out += this.text[this.at++];
    }
  }

  private number(): number | bigint {
    const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.text.slice(this.at, this.at + 400));
    if (!match) return this.fail("bad number");
    const text = match[0] ?? "";
    this.at += text.length;
    if (match[2] === undefined && match[3] === undefined) {
      const value = BigInt(text);
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
    }
    const value = Number(text);
    if (!Number.isFinite(value)) this.fail("number out of range");
    return value;
  }
}

/** The kind of a value, for messages ("expected a string, found an array"). */
export function kindName(value: JSONValue | undefined): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "bigint") return "a number";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

export function isObject(value: JSONValue | undefined): value is { [key: string]: JSONValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;

/**
 * A field read as Swift's `Codable` reads it, or a message naming the field.
 * Integers are `bigint` in the 64-bit range Swift's `Int` holds: a number
 * past it cannot be a catalogue tourpack reads, on either client.
 */
export class Fields {
  constructor(private readonly object: { [key: string]: JSONValue }, private readonly path: string) {}

  static of(value: JSONValue | undefined, path: string): Fields {
    if (!isObject(value)) throw new JSONError(`${path || "the document"}: expected an object, found ${kindName(value)}`);
    return new Fields(value, path);
  }

  private name(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  has(key: string): boolean {
    const value = this.object[key];
    return value !== undefined && value !== null;
  }

  raw(key: string): JSONValue | undefined {
    return this.object[key];
  }

  string(key: string): string {
    const value = this.object[key];
    if (typeof value !== "string") throw new JSONError(`${this.name(key)}: expected a string, found ${kindName(value)}`);
    return value;
  }

  optionalString(key: string): string | undefined {
    return this.has(key) ? this.string(key) : undefined;
  }

  int(key: string): bigint {
    const value = this.object[key];
    let result: bigint | undefined;
    if (typeof value === "bigint") result = value;
    else if (typeof value === "number" && Number.isInteger(value)) result = BigInt(value);
    if (result === undefined) throw new JSONError(`${this.name(key)}: expected an integer, found ${kindName(value)}`);
    if (result < int64Min || result > int64Max) throw new JSONError(`${this.name(key)}: ${result} does not fit in 64 bits`);
    return result;
  }

  optionalInt(key: string): bigint | undefined {
    return this.has(key) ? this.int(key) : undefined;
  }

  number(key: string): number {
    const value = this.object[key];
    if (typeof value === "number") return value;
    if (typeof value === "bigint") return Number(value);
    throw new JSONError(`${this.name(key)}: expected a number, found ${kindName(value)}`);
  }

  bool(key: string): boolean {
    const value = this.object[key];
    if (typeof value !== "boolean") throw new JSONError(`${this.name(key)}: expected true or false, found ${kindName(value)}`);
    return value;
  }

  optionalBool(key: string): boolean | undefined {
    return this.has(key) ? this.bool(key) : undefined;
  }

  object_(key: string): Fields {
    return Fields.of(this.object[key], this.name(key));
  }

  array(key: string): JSONValue[] {
    const value = this.object[key];
    if (!Array.isArray(value)) throw new JSONError(`${this.name(key)}: expected an array, found ${kindName(value)}`);
    return value;
  }

  /** `YYYY-MM-DDTHH:MM:SSZ`, as package.json and the catalogue write times. */
  timestamp(key: string): Date {
    const text = this.string(key);
    const date = parseTimestamp(text);
    if (date === undefined) throw new JSONError(`${this.name(key)}: expected YYYY-MM-DDTHH:MM:SSZ, found ${text.slice(0, 40)}`);
    return date;
  }

  optionalTimestamp(key: string): Date | undefined {
    return this.has(key) ? this.timestamp(key) : undefined;
  }

  keys(): string[] {
    return Object.keys(this.object);
  }
}

export function parseTimestamp(text: string): Date | undefined {
  const match = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z$/.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return undefined;
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second));
}

export function timestamp(date: Date): string {
  return date.toISOString().replace(/\.[0-9]{3}Z$/, "Z");
}
