import type { KafkaMessage } from "kafkajs";
import { describe, expectTypeOf, it } from "vitest";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import type { FetchedRecord } from "../../../src/processor/processor-ports.js";
import type {
  RequestOutcome,
  RequestSpan,
  Traced,
  TracedRecord,
} from "../../../src/tracing/pipeline-tracer.js";

/**
 * The tracer takes what the pipeline already holds, so wiring it in allocates nothing when tracing
 * is off: these are type checks (`npm run typecheck` fails when a shape drifts).
 */
describe("the PipelineTracer's arguments fit the pipeline's own types", () => {
  it("a fetched record (the processor's or kafkajs's) is a TracedRecord", () => {
    expectTypeOf<FetchedRecord>().toExtend<TracedRecord>();
    expectTypeOf<KafkaMessage>().toExtend<TracedRecord>();
  });

  it("a record completion is a RequestOutcome, and one that carries its span is Traced", () => {
    expectTypeOf<RecordCompletion>().toExtend<RequestOutcome>();
    expectTypeOf<RecordCompletion & { span?: RequestSpan }>().toExtend<Traced>();
    expectTypeOf<{ span: RequestSpan; offset: string }>().toExtend<Traced>();
  });
});
