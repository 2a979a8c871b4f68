import {
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  KafkaJSSASLAuthenticationError,
} from "kafkajs";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../../src/config/config-loader.js";
import { createKafka } from "../../../../src/kafka/client/kafka-client.js";
import { kafkaFailure } from "../../../../src/kafka/client/kafka-failure.js";
import { isAccessFailure, SluiceError } from "../../../../src/sluice-error.js";

const kafka = createKafka(
  loadConfig({
    env: {
      KAFKA_BROKERS: "k1:9093,k2:9093",
      SLUICE_KAFKA__SSL: "true",
      SLUICE_KAFKA__SASL__MECHANISM: "scram-sha-512",
      SLUICE_KAFKA__SASL__USERNAME: "app",
      SLUICE_KAFKA__SASL__PASSWORD: "pw-never-shown",
    },
  }).kafka,
);
const protocol = (type: string, message: string) =>
  new KafkaJSProtocolError({ type, code: 0, retriable: false, message } as never);

describe("kafkaFailure", () => {
  it("authorization: names resource type, name and operation from the access the call needed", () => {
    const error = new KafkaJSNumberOfRetriesExceeded(
      protocol("GROUP_AUTHORIZATION_FAILED", "Group authorization failed"),
      {
        retryCount: 5,
        retryTime: 100,
      },
    );
    const failure = kafkaFailure(error, {
      doing: "consuming",
      kafka,
      access: [
        { operation: "READ", resourceType: "TOPIC", names: ["t"] },
        { operation: "READ", resourceType: "GROUP", names: ["g"] },
      ],
    });
    expect(failure?.code).toBe("AUTHORIZATION_FAILED");
    expect(failure?.message).toMatch(
      /^Kafka denied READ on GROUP "g" to user "app" while consuming; grant it/,
    );
    expect(failure?.context).toMatchObject({ resourceType: "GROUP", resourceName: "g", operation: "READ" });
    expect(isAccessFailure(failure)).toBe(true);
  });

  it("a 'Failed to find group coordinator' after a logged transactional-id denial is that denial", () => {
    kafka.logger().namespace("Connection").error("Response FindCoordinator(key: 10, version: 2)", {
      error: "Transactional Id authorization failed",
    });
    const failure = kafkaFailure(new Error("Failed to find group coordinator"), {
      doing: "initialising",
      kafka,
      access: [
        { operation: "WRITE", resourceType: "TRANSACTIONAL_ID", names: ["sluice-g-"], prefixed: true },
      ],
    });
    expect(failure?.message).toContain('WRITE on TRANSACTIONAL_ID prefix "sluice-g-"');
  });

  it("SASL: AUTHENTICATION_FAILED naming the user and the keys, never the password", () => {
    const failure = kafkaFailure(
      new (KafkaJSSASLAuthenticationError as unknown as new (m: string) => Error)(
        "SASL SCRAM SHA512 authentication failed",
      ),
      {
        doing: "connecting",
        kafka,
      },
    );
    expect(failure?.code).toBe("AUTHENTICATION_FAILED");
    expect(failure?.message).toContain('"app" with SCRAM-SHA-512');
    expect(failure?.message).toContain("kafka.sasl.password");
    expect(failure?.message).not.toContain("pw-never-shown");
  });

  it("TLS: untrusted CA, host name mismatch, plaintext port each name the option to set", () => {
    const tls = (message: string, code?: string) =>
      kafkaFailure(new KafkaJSConnectionError(`Connection error: ${message}`, code ? { code } : {}), {
        doing: "x",
        kafka,
      });
    expect(tls("self-signed certificate in certificate chain")?.message).toContain("kafka.ssl.caPath");
    expect(
      tls("Hostname/IP does not match certificate's altnames: Host: a.", "ERR_TLS_CERT_ALTNAME_INVALID")
        ?.message,
    ).toContain("kafka.ssl.servername");
    expect(tls("... wrong version number")?.message).toContain("kafka.ssl: false");
    expect(tls("self-signed certificate")?.code).toBe("TLS_FAILED");
  });

  it("unreachable: BROKER_UNAVAILABLE naming the addresses tried", () => {
    const failure = kafkaFailure(
      new KafkaJSConnectionError("Connection error: connect ECONNREFUSED 10.0.0.1:9093", {
        code: "ECONNREFUSED",
      }),
      {
        doing: "connecting",
        kafka,
      },
    );
    expect(failure?.code).toBe("BROKER_UNAVAILABLE");
    expect(failure?.message).toMatch(
      /^cannot reach Kafka at k1:9093, k2:9093 while connecting \(ECONNREFUSED\)/,
    );
    expect(failure?.retriable).toBe(true);
  });

  it("other errors are not its business", () => {
    expect(kafkaFailure(protocol("INVALID_PRODUCER_EPOCH", "fenced"), { doing: "x", kafka })).toBeUndefined();
    expect(kafkaFailure(new SluiceError("PRODUCER_FENCED", "f"), { doing: "x" })).toBeUndefined();
  });
});
