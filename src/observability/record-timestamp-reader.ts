/**
 * Look around `offset` of one partition: the last data record in `[fromOffset, offset)` and the
 * first in `[offset, untilOffset)`. For a consumer group, `offset` is its committed offset: the
 * record before it is the last committed one (freshness), the one at or after it is the oldest
 * uncommitted one (lag seconds). Offsets are decimal strings with `fromOffset ≤ offset ≤ untilOffset`.
 */
export interface TimestampProbe {
  topic: string;
  partition: number;
  /** Inclusive start of the look-behind window; equal to `offset` to skip the look-behind. */
  fromOffset: string;
  offset: string;
  /** Exclusive end of the look-ahead; equal to `offset` to skip it (usually the high watermark). */
  untilOffset: string;
  /**
   * Read the whole look-ahead and count its data records (transaction markers and aborted records
   * excluded), instead of stopping at the first one.
   */
  countDataRecords: boolean;
}

export interface ProbedRecord {
  offset: string;
  timestampMs: number;
}

/**
 * Per side: the record, `null` when that range holds no data record (empty, or only transaction
 * markers / aborted records), `undefined` when not answered before the timeout or not asked.
 */
export interface ProbeResult {
  before: ProbedRecord | null | undefined;
  atOrAfter: ProbedRecord | null | undefined;
  /** Data records in `[offset, untilOffset)` when `countDataRecords` was asked and the scan finished. */
  dataRecords?: number;
}

/**
 * Port: reads the timestamps of individual records around offsets, as a `read_committed` consumer
 * sees them (transaction markers and aborted records are not data records). The Kafka
 * implementation is `KafkaRecordTimestampReader` (src/kafka/probes/kafka-record-timestamp-reader.ts).
 */
export interface RecordTimestampReader {
  /**
   * Answers every probe, keyed by `topicPartitionKey(topic, partition)`; what is not answered within
   * `timeoutMs` stays `undefined`. Throws a SluiceError when the log cannot be read at all (an access
   * failure, or BROKER_UNAVAILABLE).
   */
  read(probes: readonly TimestampProbe[], timeoutMs: number): Promise<Map<string, ProbeResult>>;
}
