import * as semconv from "@opentelemetry/semantic-conventions/incubating";
import { ATTR_SERVICE_INSTANCE_ID } from "@opentelemetry/semantic-conventions/incubating";
import { describe, expect, it } from "vitest";
import {
  ATTR,
  MESSAGING_SYSTEM_KAFKA,
  OPERATION_TYPE_PROCESS,
  OPERATION_TYPE_SETTLE,
  RESOURCE_ATTR,
  SPAN_NAME,
} from "../../../src/tracing/span-attributes.js";

describe("span attribute names", () => {
  it("the messaging.* names and values are OpenTelemetry's messaging semantic conventions", () => {
    expect({
      system: ATTR.messagingSystem,
      operationType: ATTR.messagingOperationType,
      operationName: ATTR.messagingOperationName,
      destination: ATTR.messagingDestinationName,
      group: ATTR.messagingConsumerGroupName,
      partition: ATTR.messagingDestinationPartitionId,
      offset: ATTR.messagingKafkaOffset,
      batchCount: ATTR.messagingBatchMessageCount,
      kafka: MESSAGING_SYSTEM_KAFKA,
      process: OPERATION_TYPE_PROCESS,
      settle: OPERATION_TYPE_SETTLE,
      instance: RESOURCE_ATTR.serviceInstanceId,
    }).toEqual({
      system: semconv.ATTR_MESSAGING_SYSTEM,
      operationType: semconv.ATTR_MESSAGING_OPERATION_TYPE,
      operationName: semconv.ATTR_MESSAGING_OPERATION_NAME,
      destination: semconv.ATTR_MESSAGING_DESTINATION_NAME,
      group: semconv.ATTR_MESSAGING_CONSUMER_GROUP_NAME,
      partition: semconv.ATTR_MESSAGING_DESTINATION_PARTITION_ID,
      offset: semconv.ATTR_MESSAGING_KAFKA_OFFSET,
      batchCount: semconv.ATTR_MESSAGING_BATCH_MESSAGE_COUNT,
      kafka: semconv.MESSAGING_SYSTEM_VALUE_KAFKA,
      process: semconv.MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
      settle: semconv.MESSAGING_OPERATION_TYPE_VALUE_SETTLE,
      instance: ATTR_SERVICE_INSTANCE_ID,
    });
  });

  it("Sluice's own names are sluice.*, each used once", () => {
    const own = Object.values(ATTR).filter((name) => !name.startsWith("messaging."));
    expect(own.every((name) => name.startsWith("sluice."))).toBe(true);
    expect(new Set(Object.values(ATTR)).size).toBe(Object.values(ATTR).length);
  });

  it("span names are <operation> <topic>", () => {
    expect(SPAN_NAME.request("q")).toBe("request q");
    expect(SPAN_NAME.batch("q")).toBe("process q");
    expect(SPAN_NAME.batch(undefined)).toBe("process");
    expect(SPAN_NAME.modelCall("bge")).toBe("infer bge");
    expect(SPAN_NAME.transaction("q")).toBe("commit q");
  });
});
