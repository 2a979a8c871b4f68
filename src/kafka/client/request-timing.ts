import type { Kafka } from "kafkajs";

/** One Kafka request's round trip, as kafkajs timed it (its `network.request` instrumentation event). */
export interface KafkaRequestTiming {
  /** The request's API as kafkajs names it: Produce, Fetch, AddPartitionsToTxn, EndTxn, Metadata, … */
  api: string;
  /** From the request's creation to its response, ms: the wait in the connection's queue plus the round trip. */
  durationMs: number;
}

type Listener = (timing: KafkaRequestTiming) => void;
type Maker = "producer" | "consumer" | "admin";
/** kafkajs's `network.request` event, as each of its producers, consumers and admins emits it. */
type RequestEvent = { payload: { apiName: string; pendingDuration: number; duration: number } };
/** What a kafkajs producer, consumer and admin share here: their REQUEST event. */
type Instrumented = {
  events: { REQUEST: string };
  on(event: string, listener: (e: RequestEvent) => void): unknown;
};

/** Each instrumented client's listeners (observeKafkaRequests). */
const listeners = new WeakMap<Kafka, Set<Listener>>();

/**
 * Called once by `createKafka` for each client it builds: every producer, consumer and admin the
 * client makes from then on reports its requests to the client's `observeKafkaRequests` listeners.
 * kafkajs emits these events per producer, consumer or admin only; Sluice makes many of them (one
 * transactional producer per input partition), so the hook sits where they are made.
 */
export function instrumentRequests(kafka: Kafka): void {
  const set = new Set<Listener>();
  listeners.set(kafka, set);
  const tell = (e: RequestEvent) => {
    if (set.size === 0) return;
    const timing = { api: e.payload.apiName, durationMs: e.payload.pendingDuration + e.payload.duration };
    for (const listener of set) listener(timing);
  };
  const makers = kafka as unknown as Record<Maker, (config?: unknown) => Instrumented>;
  for (const maker of ["producer", "consumer", "admin"] as const) {
    const make = makers[maker].bind(kafka);
    makers[maker] = (config?: unknown) => {
      const client = make(config);
      client.on(client.events.REQUEST, tell);
      return client;
    };
  }
}

/**
 * `listener` hears every request of the client's producers, consumers and admins from now on
 * (`sluice_kafka_request_duration_seconds`, docs/observability.md). Returns the detach. A client not
 * made by `createKafka` has no requests to tell.
 */
export function observeKafkaRequests(kafka: Kafka, listener: Listener): () => void {
  const set = listeners.get(kafka);
  if (set === undefined) return () => {};
  set.add(listener);
  return () => set.delete(listener);
}
