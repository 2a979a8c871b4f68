package dev.sluice.bench.kstreams;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * Results in Sluice's wire shapes, field for field and in Sluice's order, so both sides put comparable
 * bytes on the wire: the JSON result codec (src/contracts/result-codec.ts, `normalize`, built by
 * src/delivery/result-builder.ts) and the V2 inference response (src/contracts/v2-json-codec.ts,
 * `encodeV2Result`). One request per "batch": queue time 0, batch size 1.
 */
final class ResultWriter {
  /** Where a result came from and when: the result's `source` and `timing` fields. */
  record Source(String topic, int partition, long offset, long requestTimestamp) {}

  private final JsonFactory json = new JsonFactory();
  private final String modelName;
  private final String modelVersion;

  ResultWriter(String modelName, String modelVersion) {
    this.modelName = modelName;
    this.modelVersion = modelVersion;
  }

  /** A JSON-codec result: an `ok` embedding, or (error non-null) a `rejected` one without output. */
  byte[] jsonResult(String id, float[] embedding, String[] error, Source s, double inferenceMs) {
    return write(g -> {
      g.writeStartObject();
      g.writeStringField("id", id);
      g.writeStringField("status", error == null ? "ok" : "rejected");
      if (error == null) {
        g.writeObjectFieldStart("output");
        g.writeArrayFieldStart("embedding");
        for (float v : embedding) writeFloat(g, v);
        g.writeEndArray();
        g.writeEndObject();
      } else {
        g.writeNullField("output");
      }
      g.writeObjectFieldStart("model");
      g.writeStringField("name", modelName);
      g.writeStringField("version", modelVersion);
      g.writeEndObject();
      g.writeObjectFieldStart("source");
      g.writeStringField("topic", s.topic());
      g.writeNumberField("partition", s.partition());
      g.writeStringField("offset", Long.toString(s.offset()));
      g.writeEndObject();
      g.writeObjectFieldStart("timing");
      g.writeNumberField("requestTimestamp", s.requestTimestamp());
      g.writeNumberField("queueMs", 0);
      g.writeNumberField("inferenceMs", inferenceMs);
      g.writeNumberField("batchSize", 1);
      g.writeNumberField("completedAt", System.currentTimeMillis());
      g.writeEndObject();
      g.writeNullField("attributes");
      g.writeBooleanField("truncated", false);
      if (error == null) {
        g.writeNullField("error");
      } else {
        g.writeObjectFieldStart("error");
        g.writeStringField("code", error[0]);
        g.writeStringField("message", error[1]);
        g.writeEndObject();
      }
      g.writeEndObject();
    });
  }

  /** A V2 inference response with one FP32 [1, 1] output tensor named `outputName`. */
  byte[] v2Result(String id, String outputName, float value, Source s, double inferenceMs) {
    return write(g -> {
      g.writeStartObject();
      g.writeStringField("model_name", modelName);
      g.writeStringField("model_version", modelVersion);
      g.writeStringField("id", id);
      g.writeObjectFieldStart("parameters");
      g.writeStringField("status", "ok");
      g.writeStringField("source_topic", s.topic());
      g.writeNumberField("source_partition", s.partition());
      g.writeStringField("source_offset", Long.toString(s.offset()));
      g.writeNumberField("request_timestamp", s.requestTimestamp());
      g.writeNumberField("queue_ms", 0);
      g.writeNumberField("inference_ms", inferenceMs);
      g.writeNumberField("batch_size", 1);
      g.writeNumberField("completed_at", System.currentTimeMillis());
      g.writeBooleanField("truncated", false);
      g.writeEndObject();
      g.writeArrayFieldStart("outputs");
      g.writeStartObject();
      g.writeStringField("name", outputName);
      g.writeStringField("datatype", "FP32");
      g.writeArrayFieldStart("shape");
      g.writeNumber(1);
      g.writeNumber(1);
      g.writeEndArray();
      g.writeArrayFieldStart("data");
      writeFloat(g, value);
      g.writeEndArray();
      g.writeEndObject();
      g.writeEndArray();
      g.writeEndObject();
    });
  }

  /** A float32 as JavaScript prints the same value (a double): `0` for zero, no `.0` for whole numbers. */
  private static void writeFloat(JsonGenerator g, float v) throws IOException {
    if (v == Math.rint(v) && Math.abs(v) < 1e15) g.writeNumber((long) v);
    else g.writeNumber((double) v);
  }

  private interface Body {
    void write(JsonGenerator g) throws IOException;
  }

  private byte[] write(Body body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(2048);
    try (JsonGenerator g = json.createGenerator(out)) {
      body.write(g);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }
}
