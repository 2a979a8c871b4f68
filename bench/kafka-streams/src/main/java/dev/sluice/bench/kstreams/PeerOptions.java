package dev.sluice.bench.kstreams;

import java.util.HashMap;
import java.util.Map;

/**
 * Command-line options of the peer and the counter: {@code --name value} pairs, each with an environment
 * fallback (named below), so the bench can pass arguments and a user can run the peer from a shell.
 */
final class PeerOptions {
  private final Map<String, String> values = new HashMap<>();
  private final Map<String, String> env;

  private PeerOptions(Map<String, String> env) {
    this.env = env;
  }

  static PeerOptions parse(String[] args, Map<String, String> env) {
    PeerOptions o = new PeerOptions(env);
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException("expected --name value pairs, got " + a);
      }
      o.values.put(a.substring(2), args[++i]);
    }
    return o;
  }

  /** The option {@code --name}, else the environment variable {@code envName}, else the fallback. */
  String get(String name, String envName, String fallback) {
    String v = values.get(name);
    if (v == null && envName != null) v = env.get(envName);
    if (v == null) v = fallback;
    if (v == null) {
      throw new IllegalArgumentException(
          "missing --" + name + (envName == null ? "" : " (or " + envName + ")"));
    }
    return v;
  }

  long getLong(String name, String envName, long fallback) {
    return Long.parseLong(get(name, envName, Long.toString(fallback)));
  }

  float[] getFloats(String name, String envName) {
    String[] parts = get(name, envName, null).split(",");
    float[] out = new float[parts.length];
    for (int i = 0; i < parts.length; i++) out[i] = Float.parseFloat(parts[i].trim());
    return out;
  }
}
