import type { Consumer, Kafka } from "kafkajs";

const now = () => performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Counts results by request id as a read_committed reader sees them, with arrival times. */
export class ArrivalReader {
  readonly arrivals = new Map<string, number>();
  private readonly consumer: Consumer;
  constructor(
    kafka: Kafka,
    private readonly topic: string,
    groupId: string,
  ) {
    this.consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 20 });
  }
  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const at = now();
        for (const m of batch.messages) if (m.key) this.arrivals.set(m.key.toString(), at);
      },
    });
  }
  count(prefix: string): number {
    let n = 0;
    for (const k of this.arrivals.keys()) if (k.startsWith(prefix)) n++;
    return n;
  }
  async waitFor(prefix: string, n: number, timeoutMs: number): Promise<boolean> {
    const until = now() + timeoutMs;
    while (this.count(prefix) < n) {
      if (now() > until) return false;
      await sleep(25);
    }
    return true;
  }
  /** Arrival times of the ids with this prefix, sorted. */
  times(prefix: string): number[] {
    const out: number[] = [];
    for (const [k, t] of this.arrivals) if (k.startsWith(prefix)) out.push(t);
    return out.sort((a, b) => a - b);
  }
  /** First and last arrival of the ids with this prefix. */
  span(prefix: string): { first: number; last: number } {
    let first = Number.POSITIVE_INFINITY;
    let last = 0;
    for (const [k, t] of this.arrivals) {
      if (!k.startsWith(prefix)) continue;
      first = Math.min(first, t);
      last = Math.max(last, t);
    }
    return { first, last };
  }
  stop(): Promise<void> {
    return this.consumer.disconnect();
  }
}
