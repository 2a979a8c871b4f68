import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixAddPartitionsErrors } from "../../../../src/kafka/protocol/add-partitions-errors.js";

const require = createRequire(import.meta.url);
const v1 = require(
  join(
    dirname(require.resolve("kafkajs")),
    "src",
    "protocol",
    "requests",
    "addPartitionsToTxn",
    "v1",
    "response.js",
  ),
) as {
  parse: (data: unknown) => Promise<unknown>;
};

describe("fixAddPartitionsErrors", () => {
  it("reports the refused topic, not OPERATION_NOT_ATTEMPTED of the others, whatever the order", async () => {
    fixAddPartitionsErrors();
    fixAddPartitionsErrors(); // idempotent
    const response = {
      throttleTime: 0,
      errors: [
        { topic: "results", partitionErrors: [{ partition: 0, errorCode: 55 }] },
        { topic: "dead-letters", partitionErrors: [{ partition: 0, errorCode: 29 }] },
      ],
    };
    await expect(v1.parse(response)).rejects.toMatchObject({
      type: "TOPIC_AUTHORIZATION_FAILED",
      refusedTopics: ["dead-letters"],
    });
    await expect(
      v1.parse({
        throttleTime: 0,
        errors: [{ topic: "t", partitionErrors: [{ partition: 0, errorCode: 0 }] }],
      }),
    ).resolves.toBeDefined();
  });
});
