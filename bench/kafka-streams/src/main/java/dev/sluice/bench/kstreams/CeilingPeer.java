package dev.sluice.bench.kstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer of bench:ceiling: requests topic → {@link AnswerProcessor} (with the logged
 * dedup store) → results topic, {@code processing.guarantee=exactly_once_v2}, the default commit
 * interval (100 ms under EOS). Stops after {@code --records} records were processed (0 = never), or on
 * SIGTERM; either way it closes Kafka Streams, which commits the open transaction, and prints its
 * counts as one JSON line on stdout.
 *
 * <pre>
 * --bootstrap (KAFKA_BROKERS)  --requests (PEER_REQUESTS)  --results (PEER_RESULTS)
 * --application-id (PEER_APPLICATION_ID)  --mode noop|logistic (PEER_MODE)
 * --records (PEER_RECORDS, 0)  --threads (PEER_THREADS, 1)  --state-dir (PEER_STATE_DIR)
 * --store memory|rocksdb (PEER_STORE, memory)  --dimensions (384)
 * --model-name, --model-version  (the names results carry)
 * --weights w1,w2,...  --bias b  --output-name (probability)   (mode logistic)
 * </pre>
 */
public final class CeilingPeer {
  private CeilingPeer() {}

  public static void main(String[] args) throws Exception {
    PeerOptions o = PeerOptions.parse(args, System.getenv());
    String mode = o.get("mode", "PEER_MODE", "noop");
    if (!mode.equals("noop") && !mode.equals("logistic")) {
      throw new IllegalArgumentException("--mode must be noop or logistic, got " + mode);
    }
    boolean noop = mode.equals("noop");
    long records = o.getLong("records", "PEER_RECORDS", 0);
    String requests = o.get("requests", "PEER_REQUESTS", null);
    String results = o.get("results", "PEER_RESULTS", null);

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, o.get("application-id", "PEER_APPLICATION_ID", null));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap", "KAFKA_BROKERS", null));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, (int) o.getLong("threads", "PEER_THREADS", 1));
    p.put(
        StreamsConfig.STATE_DIR_CONFIG,
        o.get("state-dir", "PEER_STATE_DIR", System.getProperty("java.io.tmpdir") + "/kafka-streams"));
    // commit.interval.ms stays at its exactly-once default (100 ms).

    AnswerProcessor.Counters counters = new AnswerProcessor.Counters();
    ResultWriter writer =
        new ResultWriter(
            o.get("model-name", null, noop ? "noop" : "logistic-regression"),
            o.get("model-version", null, noop ? "noop" : "kstreams"));
    LogisticRegression regression =
        noop
            ? null
            : new LogisticRegression(
                o.getFloats("weights", null), Float.parseFloat(o.get("bias", null, null)));
    int dimensions = (int) o.getLong("dimensions", null, 384);
    String outputName = o.get("output-name", null, "probability");
    boolean rocksdb = o.get("store", "PEER_STORE", "memory").equals("rocksdb");

    // Logged (changelog-backed) by default; no caching, so every put reaches the changelog.
    StoreBuilder<KeyValueStore<String, Long>> store =
        Stores.keyValueStoreBuilder(
            rocksdb
                ? Stores.persistentKeyValueStore(AnswerProcessor.STORE)
                : Stores.inMemoryKeyValueStore(AnswerProcessor.STORE),
            Serdes.String(),
            Serdes.Long());
    Topology topology = new Topology();
    topology.addSource("requests", Serdes.String().deserializer(), Serdes.ByteArray().deserializer(), requests);
    topology.addProcessor(
        "answer",
        () -> new AnswerProcessor(noop, dimensions, regression, outputName, writer, counters),
        "requests");
    topology.addStateStore(store, "answer");
    topology.addSink(
        "results", results, Serdes.String().serializer(), Serdes.ByteArray().serializer(), "answer");

    KafkaStreams streams = new KafkaStreams(topology, p);
    CountDownLatch stop = new CountDownLatch(1);
    CountDownLatch printed = new CountDownLatch(1);
    boolean[] failed = {false};
    boolean[] signalled = {false};
    streams.setUncaughtExceptionHandler(
        e -> {
          System.err.println("kafka streams failed: " + e);
          failed[0] = true;
          stop.countDown();
          return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  signalled[0] = true;
                  stop.countDown();
                  try {
                    printed.await(90, TimeUnit.SECONDS);
                  } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                  }
                }));
    streams.start();
    while (!stop.await(5, TimeUnit.MILLISECONDS)) {
      if (records > 0 && counters.processed.get() >= records) break;
    }
    boolean closed = streams.close(Duration.ofSeconds(60));
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("processed", counters.processed.get());
    out.put("answered", counters.answered.get());
    out.put("duplicates", counters.duplicates.get());
    out.put("rejected", counters.rejected.get());
    out.put("undecodable", counters.undecodable.get());
    out.put("closedCleanly", closed && !failed[0]);
    System.out.println(new ObjectMapper().writeValueAsString(out));
    System.out.flush();
    printed.countDown();
    // After a signal the JVM is already exiting (System.exit would block); otherwise leave no thread behind.
    if (!signalled[0]) System.exit(failed[0] || !closed ? 1 : 0);
  }
}
