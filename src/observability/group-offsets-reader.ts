/**
 * The offsets lag is computed from, as the broker reports them for one partition. Offsets are
 * decimal strings (Kafka offsets are 64-bit).
 */
export interface PartitionOffsets {
  topic: string;
  partition: number;
  /** Log start offset: the oldest offset still retained. */
  logStartOffset: string;
  /** Log end offset (high watermark): the offset the next record will get. */
  logEndOffset: string;
  /** The group's committed offset (the next one it reads); null when it never committed here. */
  committedOffset: string | null;
}

/**
 * Port: a consumer group's position on its topics, read from the broker. The Kafka implementation
 * is `KafkaGroupOffsetsReader` (src/kafka/probes/kafka-group-offsets-reader.ts). Failures are SluiceErrors:
 * an access failure (`isAccessFailure`) or BROKER_UNAVAILABLE (retriable).
 */
export interface GroupOffsetsReader {
  /** Every partition of `topics`, sorted by topic as given and then by partition. */
  partitionOffsets(groupId: string, topics: readonly string[]): Promise<PartitionOffsets[]>;
  /** The topics on which the group has a committed offset for at least one partition. */
  committedTopics(groupId: string): Promise<string[]>;
  /** Releases the connection. Safe to call twice; the reader may be used again afterwards. */
  close(): Promise<void>;
}
