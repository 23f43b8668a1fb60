/**
 * The two primitives the rules need, behind a small facade so a platform
 * without WebCrypto's Ed25519 (React Native, an old browser) can hand in
 * its own. The default is the platform's `crypto.subtle`: Ed25519 and
 * SHA-256, nothing else, and no library.
 */
export interface CryptoFacade {
  sha256(bytes: Uint8Array): Promise<Uint8Array>;
  /** Whether `signature` (64 bytes) is `publicKey`'s (32 raw bytes) Ed25519 signature of exactly `message`. */
  verifyEd25519(publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array): Promise<boolean>;
}

/** WebCrypto's, in a browser, a worker and Node 20. */
export function webCrypto(subtle: SubtleCrypto | undefined = globalThis.crypto?.subtle): CryptoFacade {
  if (subtle === undefined) throw new Error("this platform has no WebCrypto (crypto.subtle): pass a CryptoFacade of your own");
  return {
    async sha256(bytes) {
      return new Uint8Array(await subtle.digest("SHA-256", bytes));
    },
    async verifyEd25519(publicKey, signature, message) {
      if (publicKey.length !== 32 || signature.length !== 64) return false;
      let key: CryptoKey;
      try {
        key = await subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
      } catch (error) {
        if (error instanceof DOMException && error.name === "NotSupportedError") {
          throw new Error("this platform's WebCrypto has no Ed25519: pass a CryptoFacade of your own");
        }
        return false;
      }
      return subtle.verify({ name: "Ed25519" }, key, signature, message);
    },
  };
}

export function hex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
  return out;
}

export async function sha256Hex(crypto: CryptoFacade, bytes: Uint8Array): Promise<string> {
  return hex(await crypto.sha256(bytes));
}

/** Strict base64, as Foundation's `Data(base64Encoded:)` reads it: padded, no whitespace; undefined otherwise. */
export function base64Decode(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    return undefined;
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function base64Encode(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** An Ed25519 public key and its id: the first 16 hex digits of its SHA-256, as `tourpack keys` prints it. */
export interface VerifyingKey {
  raw: Uint8Array;
  keyId: string;
  base64: string;
}

export async function verifyingKey(crypto: CryptoFacade, base64: string): Promise<VerifyingKey> {
  const raw = base64Decode(base64.trim());
  if (raw === undefined) throw new Error("public key: not base64; expected the base64 of an Ed25519 public key's 32 raw bytes");
  if (raw.length !== 32) throw new Error(`public key: ${raw.length} bytes; an Ed25519 public key has 32`);
  return { raw, keyId: (await sha256Hex(crypto, raw)).slice(0, 16), base64: base64Encode(raw) };
}
