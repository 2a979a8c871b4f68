/**
 * Printing configuration must never leak credentials. A key is secret when its name ends in
 * password, secret, token, apiKey or credentials (case-insensitive); `maxBatchTokens` and
 * `tokenizerPath` are not secrets because the word must end the key. `tokenCommand` is masked too:
 * a command line that prints a token often carries a client secret. File paths (`passwordFile`,
 * `tokenFile`, `keyPasswordFile`) are not secrets; the files they name are.
 */
const SECRET_KEY = /(password|secret|token|tokencommand|apikey|api_key|credentials?)$/i;

export const MASK = "********";

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** Deep copy of `config` with every secret value replaced by `MASK`. */
export function maskSecrets<T>(config: T): T {
  return maskValue(config, undefined) as T;
}

function maskValue(value: unknown, key: string | undefined): unknown {
  if (key !== undefined && isSecretKey(key) && value !== undefined && value !== null && value !== "") {
    return MASK;
  }
  if (Array.isArray(value)) return value.map((v) => maskValue(v, undefined));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskValue(v, k)]));
  }
  return value;
}
