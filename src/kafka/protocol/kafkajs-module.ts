import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
let src: string | undefined;

/**
 * One of kafkajs's own CommonJS modules, by its path under `kafkajs/src` (for example
 * `"protocol", "encoder.js"`): the module object kafkajs itself uses, so a correction that wraps a
 * function on it reaches every client. Throws as `require` does when kafkajs has no such module.
 */
export function kafkajsModule<T>(...path: string[]): T {
  return require(kafkajsModulePath(...path)) as T;
}

/** The file name of one of kafkajs's own modules (see `kafkajsModule`), without loading it. */
export function kafkajsModulePath(...path: string[]): string {
  src ??= join(dirname(require.resolve("kafkajs")), "src");
  return join(src, ...path);
}
