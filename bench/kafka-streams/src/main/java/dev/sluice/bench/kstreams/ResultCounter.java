package dev.sluice.bench.kstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The bench's reader of one results topic, for either side: the Java client with
 * {@code isolation.level=read_committed} (the reference implementation of what a committed result is),
 * assigned every partition from the beginning, no group. Results are keyed by request id; ids are
 * {@code <prefix><i>} for i in [0, expected). It records when each id first arrived (wall clock, after
 * the poll that returned it), counts ids seen more than once and keys that are no expected id, and
 * keeps the values of ids below {@code --sample} for the bench to compare between sides.
 *
 * <p>Protocol on stdout, one JSON object a line: {@code {"event":"ready"}} once assigned;
 * {@code {"event":"complete",...}} when every expected id has arrived; after "stop" (or EOF) on stdin it
 * reads on to the end offsets of that moment (the last stable offsets under read_committed) and prints
 * {@code {"event":"summary",...}} and exits.
 */
public final class ResultCounter {
  private static final byte[] STATUS_OK = "\"status\":\"ok\"".getBytes(StandardCharsets.UTF_8);
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private ResultCounter() {}

  public static void main(String[] args) throws Exception {
    PeerOptions o = PeerOptions.parse(args, System.getenv());
    String topic = o.get("topic", null, null);
    String prefix = o.get("prefix", null, null);
    int expected = (int) o.getLong("expected", null, 0);
    int sample = (int) o.getLong("sample", null, 0);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap", "KAFKA_BROKERS", null));
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "20");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, "ceiling-counter");

    Thread stdin =
        new Thread(
            () -> {
              try (BufferedReader in =
                  new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                  // only "stop" means anything
                }
              } catch (Exception ignored) {
                // EOF or a closed pipe: stop as well
              }
              stopRequested = true;
            });
    stdin.setDaemon(true);
    stdin.start();

    BitSet seen = new BitSet(expected);
    long distinct = 0;
    long duplicates = 0;
    long unexpected = 0;
    long ok = 0;
    long valueBytes = 0;
    long headerCount = 0;
    long firstMs = 0;
    long lastMs = 0;
    boolean completeSent = false;
    Map<String, String> samples = new LinkedHashMap<>();
    try (KafkaConsumer<String, byte[]> consumer =
        new KafkaConsumer<>(p, new StringDeserializer(), new ByteArrayDeserializer())) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(60))) {
        partitions.add(new TopicPartition(topic, info.partition()));
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      for (TopicPartition tp : partitions) consumer.position(tp);
      emit(Map.of("event", "ready", "partitions", partitions.size()));
      Map<TopicPartition, Long> end = null;
      for (; ; ) {
        var records = consumer.poll(Duration.ofMillis(50));
        long now = System.currentTimeMillis();
        for (ConsumerRecord<String, byte[]> r : records) {
          int i = index(r.key(), prefix, expected);
          if (i < 0) {
            unexpected++;
            continue;
          }
          if (seen.get(i)) {
            duplicates++;
            continue;
          }
          seen.set(i);
          distinct++;
          if (firstMs == 0) firstMs = now;
          lastMs = now;
          byte[] v = r.value();
          valueBytes += v == null ? 0 : v.length;
          headerCount += r.headers().toArray().length;
          if (v != null && contains(v, STATUS_OK)) ok++;
          if (i < sample && v != null) samples.put(r.key(), new String(v, StandardCharsets.UTF_8));
        }
        if (!completeSent && distinct >= expected && expected > 0) {
          completeSent = true;
          emit(Map.of("event", "complete", "firstMs", firstMs, "lastMs", lastMs));
        }
        if (stopRequested) {
          if (end == null) end = consumer.endOffsets(partitions);
          boolean atEnd = true;
          for (TopicPartition tp : partitions) atEnd &= consumer.position(tp) >= end.get(tp);
          if (atEnd) break;
        }
      }
    }
    Map<String, Object> summary = new LinkedHashMap<>();
    summary.put("event", "summary");
    summary.put("expected", expected);
    summary.put("distinct", distinct);
    summary.put("missing", expected - distinct);
    summary.put("duplicates", duplicates);
    summary.put("unexpected", unexpected);
    summary.put("ok", ok);
    summary.put("firstMs", firstMs);
    summary.put("lastMs", lastMs);
    summary.put("valueBytes", valueBytes);
    summary.put("headers", headerCount);
    summary.put("samples", samples);
    emit(summary);
  }

  private static volatile boolean stopRequested;

  /** i for a key {@code <prefix><i>} with 0 ≤ i < expected, else -1. */
  private static int index(String key, String prefix, int expected) {
    if (key == null || !key.startsWith(prefix) || key.length() == prefix.length()) return -1;
    try {
      int i = Integer.parseInt(key.substring(prefix.length()));
      return i >= 0 && i < expected && key.equals(prefix + i) ? i : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private static boolean contains(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) if (haystack[i + j] != needle[j]) continue outer;
      return true;
    }
    return false;
  }

  private static void emit(Map<String, ?> line) throws Exception {
    System.out.println(MAPPER.writeValueAsString(line));
    System.out.flush();
  }
}
