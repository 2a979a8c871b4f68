import { encodeRequest } from "../../src/contracts/request-codec.js";

/** Kafka messages carrying one JSON inference request per id, keyed by the id, all with `text`. */
export function jsonRequestMessages(
  ids: string[],
  text: string,
): { key: string; value: Buffer; headers: Record<string, string> }[] {
  return ids.map((id) => ({ key: id, ...encodeRequest({ id, text }, "json") }));
}
