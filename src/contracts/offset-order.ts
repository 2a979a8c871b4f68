/**
 * Kafka offsets travel through Sluice as decimal strings (kafkajs's convention). Where the per-record
 * path orders them (the committer's prefix, a task's redelivery check, a model switch's boundary, the
 * in-flight records behind lag seconds), it compares their order values: a number while the offset is
 * a safe integer (every real offset: 2^53 records is centuries of any partition), else a bigint. JavaScript's `<`, `<=`, `>` and `>=`
 * compare a number with a bigint exactly, so both kinds mix; a bigint is only parsed past 2^53.
 */
export type OffsetOrder = number | bigint;

/** `offset`'s order value (a decimal offset as Kafka and kafkajs give it). */
export function offsetOrder(offset: string): OffsetOrder {
  const n = Number(offset);
  return Number.isSafeInteger(n) ? n : BigInt(offset);
}

/** The order value of the offset after `order`. */
export function orderAfter(order: OffsetOrder): OffsetOrder {
  return typeof order === "number" && order < Number.MAX_SAFE_INTEGER ? order + 1 : BigInt(order) + 1n;
}

/** An order value as the decimal offset it stands for. */
export function offsetText(order: OffsetOrder): string {
  return String(order);
}
