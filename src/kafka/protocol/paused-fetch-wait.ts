import { kafkajsModule } from "./kafkajs-module.js";

/**
 * kafkajs 2.2.4's consumer sleeps a full `maxWaitTimeInMs` whenever every partition it owns is
 * paused, and does not notice a `resume` until that sleep ends (`src/consumer/consumerGroup.js`,
 * `fetch`: `if (!requests.length) { await sleep(this.maxWaitTime); return [] }`). Sluice pauses all
 * of a lane's partitions when its queue bound is reached (docs/processor.md "Backpressure") and
 * resumes them when commits free room; at the Kafka-path ceiling that happens after nearly every
 * fetch, and the next fetch then waited up to 100 ms (the default wait) with nothing else to do.
 *
 * The correction: when every assigned partition is paused, the fetch does what kafkajs's does
 * before it finds nothing to fetch (notice new metadata and a stale assignment, with kafkajs's own
 * recovery), then waits for the same `maxWaitTime`, but a `resume` ends the wait at once. Nothing
 * else changes: the same empty result, the same loop in kafkajs's fetcher, the same requests. A
 * consumer with some partitions active fetches exactly as kafkajs does. (With several brokers, a
 * broker whose own partitions are all paused while another's are not still sleeps kafkajs's way.)
 *
 * Where: the `fetch` and `resume` methods of kafkajs's ConsumerGroup class (its prototype, shared
 * by every consumer). Applied once per process by `createKafka`; see
 * test/integration/kafkajs-paused-fetch.test.ts.
 */
const WRAPPED = Symbol.for("sluice.kafkajs.pausedFetchWait");
const WAKERS = Symbol.for("sluice.kafkajs.pausedFetchWakers");

interface TopicPartitions {
  topic: string;
  partitions: number[];
}

/** The parts of kafkajs's ConsumerGroup this correction uses (all of them kafkajs's own fetch uses). */
interface ConsumerGroup {
  maxWaitTime: number;
  subscriptionState: { active(): TopicPartitions[] };
  cluster: { refreshMetadataIfNecessary(): Promise<void> };
  checkForStaleAssignment(): void;
  recoverFromFetch(error: unknown): Promise<void>;
  [WAKERS]?: (() => void)[];
}

interface ConsumerGroupPrototype {
  fetch(this: ConsumerGroup, nodeId: number): Promise<unknown[]>;
  resume(this: ConsumerGroup, topicPartitions: unknown): void;
  [WRAPPED]?: true;
}

/** Some partitions are assigned and every one of them is paused. */
function allPaused(group: ConsumerGroup): boolean {
  const active = group.subscriptionState.active();
  return active.length > 0 && active.every((t) => t.partitions.length === 0);
}

/** Waits `maxWaitTime`, or until the next `resume` of this consumer, whichever comes first. */
function pausedWait(group: ConsumerGroup): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, group.maxWaitTime);
    const wakers = group[WAKERS] ?? [];
    group[WAKERS] = wakers;
    wakers.push(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function wake(group: ConsumerGroup): void {
  const wakers = group[WAKERS];
  if (wakers === undefined || wakers.length === 0) return;
  group[WAKERS] = [];
  for (const w of wakers) w();
}

export function fixPausedFetchWait(): void {
  const ConsumerGroupClass = kafkajsModule<{ prototype: ConsumerGroupPrototype }>(
    "consumer",
    "consumerGroup.js",
  );
  const proto = ConsumerGroupClass.prototype;
  if (proto[WRAPPED]) return;
  const fetch = proto.fetch;
  const resume = proto.resume;
  proto.resume = function (this: ConsumerGroup, topicPartitions: unknown) {
    resume.call(this, topicPartitions);
    wake(this);
  };
  proto.fetch = async function (this: ConsumerGroup, nodeId: number) {
    if (!allPaused(this)) return fetch.call(this, nodeId);
    try {
      // What kafkajs's fetch does before it finds that nothing is to be fetched.
      await this.cluster.refreshMetadataIfNecessary();
      this.checkForStaleAssignment();
    } catch (error) {
      await this.recoverFromFetch(error);
      return [];
    }
    await pausedWait(this);
    return [];
  };
  proto[WRAPPED] = true;
}
