import type { Counter, Histogram } from "prom-client";

/**
 * One label set of a prom-client counter or histogram, for the per-record path.
 *
 * prom-client 15 builds a label object, validates the label names and concatenates a hash string on
 * every `inc` and `observe`, through a `labels(...)` child too: at the Kafka-path ceiling the three
 * calls per record allocated ~0.9 KB per record and were a few per cent of the main thread
 * (BENCHMARKS.md, "Metrics cells"). A cell does that work once: its first call goes through
 * prom-client (which validates the labels and creates the series), and later calls update the same
 * fields of the same series entry prom-client's own call updates (`hashMap[hash]`: a counter's
 * `value`; a histogram's `bucketValues`, `sum`, `count`). Before each update the cell checks that the
 * entry is still the metric's (a `reset()` replaces it) and otherwise goes through prom-client again.
 * A metric with exemplars always goes through prom-client.
 *
 * test/unit/observability/metric-cell.test.ts compares the exposition text with prom-client's own
 * calls on generated values, so a prom-client release that changes these internals fails there.
 */
type LabelValues = Record<string, string | number>;

interface SeriesMap<E> {
  hashMap: Record<string, E>;
  sortedLabelNames?: readonly string[];
  enableExemplars?: boolean;
}

/** prom-client's series key of a label set: `name:value,` per label, in sorted label-name order. */
function seriesKey(metric: SeriesMap<unknown>, labels: LabelValues): string | undefined {
  const names = metric.sortedLabelNames;
  if (!Array.isArray(names) || metric.enableExemplars === true) return undefined;
  let key = "";
  for (const name of names) {
    const value = labels[name];
    if (value !== undefined) key += `${name}:${value},`;
  }
  return key;
}

function checkFinite(value: number): void {
  if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
}

interface CounterEntry {
  value: number;
}

export class CounterCell {
  private readonly metric: SeriesMap<CounterEntry>;
  private readonly key: string | undefined;
  private entry: CounterEntry | undefined;

  constructor(
    private readonly counter: Counter<string>,
    private readonly labels: LabelValues,
  ) {
    this.metric = counter as unknown as SeriesMap<CounterEntry>;
    this.key = seriesKey(this.metric, labels);
  }

  inc(value = 1): void {
    const entry = this.entry;
    if (entry !== undefined && this.key !== undefined && this.metric.hashMap[this.key] === entry) {
      checkFinite(value);
      if (value < 0) throw new Error("It is not possible to decrease a counter");
      entry.value += value;
      return;
    }
    this.counter.inc(this.labels, value);
    this.entry = this.key === undefined ? undefined : this.metric.hashMap[this.key];
  }
}

interface HistogramEntry {
  bucketValues: Record<string, number>;
  sum: number;
  count: number;
}

export class HistogramCell {
  private readonly metric: SeriesMap<HistogramEntry> & { upperBounds?: readonly number[] };
  private readonly key: string | undefined;
  private readonly bounds: readonly number[];
  /** The property name of each bound in `bucketValues` (prom-client keys them by the number). */
  private readonly boundKeys: string[];
  private entry: HistogramEntry | undefined;

  constructor(
    private readonly histogram: Histogram<string>,
    private readonly labels: LabelValues,
  ) {
    this.metric = histogram as unknown as HistogramCell["metric"];
    const bounds = this.metric.upperBounds;
    this.bounds = Array.isArray(bounds) ? bounds : [];
    this.boundKeys = this.bounds.map(String);
    this.key = Array.isArray(bounds) ? seriesKey(this.metric, labels) : undefined;
  }

  observe(value: number): void {
    const entry = this.entry;
    if (entry !== undefined && this.key !== undefined && this.metric.hashMap[this.key] === entry) {
      checkFinite(value);
      entry.sum += value;
      entry.count += 1;
      const bounds = this.bounds;
      for (let i = 0; i < bounds.length; i++) {
        if (value <= (bounds[i] as number)) {
          const k = this.boundKeys[i] as string;
          entry.bucketValues[k] = (entry.bucketValues[k] as number) + 1;
          return;
        }
      }
      return;
    }
    this.histogram.observe(this.labels, value);
    this.entry = this.key === undefined ? undefined : this.metric.hashMap[this.key];
  }
}
