import type { Kafka } from "kafkajs";
import type { GroupOffsetsReader } from "../../observability/group-offsets-reader.js";
import type { RecordTimestampReader } from "../../observability/record-timestamp-reader.js";
import { KafkaGroupOffsetsReader } from "./kafka-group-offsets-reader.js";
import { KafkaRecordTimestampReader } from "./kafka-record-timestamp-reader.js";

/** The two ports lag is read through (`LagMonitor`, `readGroupStatus`), on one Kafka client. */
export function kafkaLagReaders(kafka: Kafka): {
  offsets: GroupOffsetsReader;
  timestamps: RecordTimestampReader;
} {
  return { offsets: new KafkaGroupOffsetsReader(kafka), timestamps: new KafkaRecordTimestampReader(kafka) };
}
