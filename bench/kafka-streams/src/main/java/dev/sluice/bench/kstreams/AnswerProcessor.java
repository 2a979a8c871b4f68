package dev.sluice.bench.kstreams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Sluice's job for one request record: decode it, drop a request id already answered (counted, not
 * re-answered; the id is remembered in the logged dedup store, whose changelog writes go into the same
 * exactly_once_v2 transaction as the result), answer it, forward one result keyed by the request id.
 * Mode {@code noop}: a JSON request {@code {id, text}} gets a zero embedding (Sluice's no-op model:
 * rejected when the text is missing or blank). Mode {@code logistic}: a V2 JSON request whose one
 * FP32 input holds the features gets the logistic regression's probability.
 */
final class AnswerProcessor implements Processor<String, byte[], String, byte[]> {
  static final String STORE = "dedup";
  /** How long an id is remembered (Sluice's delivery.dedupTtlMs default); stored as expiry time. */
  private static final long DEDUP_TTL_MS = 86_400_000L;

  /** What one peer process did, over all its stream threads. */
  static final class Counters {
    final AtomicLong processed = new AtomicLong();
    final AtomicLong answered = new AtomicLong();
    final AtomicLong duplicates = new AtomicLong();
    final AtomicLong rejected = new AtomicLong();
    final AtomicLong undecodable = new AtomicLong();
  }

  private static final ObjectMapper MAPPER = new ObjectMapper();
  private final boolean noop;
  private final int dimensions;
  private final LogisticRegression regression;
  private final String outputName;
  private final ResultWriter writer;
  private final Counters counters;
  private ProcessorContext<String, byte[]> context;
  private KeyValueStore<String, Long> seen;

  AnswerProcessor(
      boolean noop,
      int dimensions,
      LogisticRegression regression,
      String outputName,
      ResultWriter writer,
      Counters counters) {
    this.noop = noop;
    this.dimensions = dimensions;
    this.regression = regression;
    this.outputName = outputName;
    this.writer = writer;
    this.counters = counters;
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
    this.seen = context.getStateStore(STORE);
  }

  @Override
  public void process(Record<String, byte[]> record) {
    counters.processed.incrementAndGet();
    JsonNode request;
    try {
      request = record.value() == null ? null : MAPPER.readTree(record.value());
    } catch (IOException e) {
      request = null;
    }
    JsonNode idNode = request == null ? null : request.get("id");
    if (idNode == null || !idNode.isTextual() || idNode.asText().isEmpty()) {
      // Sluice dead-letters these; the bench sends none.
      counters.undecodable.incrementAndGet();
      return;
    }
    String id = idNode.asText();
    if (seen.get(id) != null) {
      counters.duplicates.incrementAndGet();
      return;
    }
    seen.put(id, record.timestamp() + DEDUP_TTL_MS);
    RecordMetadata md = context.recordMetadata().orElseThrow();
    ResultWriter.Source source =
        new ResultWriter.Source(md.topic(), md.partition(), md.offset(), record.timestamp());
    long started = System.nanoTime();
    byte[] value;
    if (noop) {
      JsonNode text = request.get("text");
      String[] error = null;
      if (text == null || !text.isTextual()) {
        error = new String[] {"INVALID_TEXT", "text must be a string"};
      } else if (text.asText().isBlank()) {
        error = new String[] {"EMPTY_TEXT", "text is empty or only whitespace"};
      }
      float[] embedding = error == null ? new float[dimensions] : null;
      if (error != null) counters.rejected.incrementAndGet();
      value = writer.jsonResult(id, embedding, error, source, (System.nanoTime() - started) / 1e6);
    } else {
      float[] x = features(request);
      if (x == null) {
        // Sluice dead-letters a tensor that does not fit the model; the bench sends none.
        counters.undecodable.incrementAndGet();
        return;
      }
      float p = regression.probability(x);
      value = writer.v2Result(id, outputName, p, source, (System.nanoTime() - started) / 1e6);
    }
    RecordHeaders headers = new RecordHeaders();
    headers.add("content-type", "application/json".getBytes(StandardCharsets.UTF_8));
    if (!noop) headers.add("x-request-id", id.getBytes(StandardCharsets.UTF_8));
    context.forward(new Record<>(id, value, record.timestamp(), headers));
    counters.answered.incrementAndGet();
  }

  /** The features of a V2 request: its one FP32 input of shape [1, n], data flat or nested. */
  private float[] features(JsonNode request) {
    JsonNode inputs = request.get("inputs");
    if (inputs == null || !inputs.isArray() || inputs.size() != 1) return null;
    JsonNode input = inputs.get(0);
    if (!"FP32".equals(input.path("datatype").asText())) return null;
    float[] x = new float[regression.features()];
    int[] n = {0};
    if (!flatten(input.get("data"), x, n) || n[0] != x.length) return null;
    return x;
  }

  private static boolean flatten(JsonNode node, float[] out, int[] n) {
    if (node == null) return false;
    if (node.isArray()) {
      for (JsonNode child : node) if (!flatten(child, out, n)) return false;
      return true;
    }
    if (!node.isNumber() || n[0] >= out.length) return false;
    out[n[0]++] = node.floatValue();
    return true;
  }
}
