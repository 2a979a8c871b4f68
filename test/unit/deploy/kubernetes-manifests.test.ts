import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { Deployment } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Service, ServiceAccount } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { sluiceConfigSchema } from "../../../src/config/config-schema.js";
import { packageRoot } from "../../../src/config/project-paths.js";

// deploy/kubernetes rendered with `kubectl kustomize` (offline, no cluster) and validated with the
// JSON schemas of kubernetes-models / @kubernetes-models/keda. Unknown fields pass those schemas,
// so the fields that matter are asserted one by one.
const root = packageRoot();
type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
} & Record<
  string,
  // biome-ignore lint/suspicious/noExplicitAny: rendered YAML, asserted field by field below
  any
>;

function kubectlKustomizeVersion(): string | undefined {
  try {
    const out = execFileSync("kubectl", ["version", "--client", "-o", "json"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    return (JSON.parse(out) as { kustomizeVersion?: string }).kustomizeVersion ?? "unknown";
  } catch {
    return undefined;
  }
}

function render(dir: string): Doc[] {
  const out = execFileSync("kubectl", ["kustomize", join(root, "deploy", "kubernetes", dir)], {
    encoding: "utf8",
  });
  return parseAllDocuments(out).map((d) => d.toJS() as Doc);
}

function one(docs: Doc[], kind: string): Doc {
  const found = docs.filter((d) => d.kind === kind);
  expect(found, `one ${kind}`).toHaveLength(1);
  return found[0]!;
}

function validate(doc: Doc): void {
  const models: Record<string, new (d: Doc) => { validate(): void }> = {
    Deployment: Deployment as never,
    Service: Service as never,
    ServiceAccount: ServiceAccount as never,
    ConfigMap: ConfigMap as never,
    PodDisruptionBudget: PodDisruptionBudget as never,
    ScaledObject: ScaledObject as never,
  };
  const Model = models[doc.kind];
  if (!Model) throw new Error(`no schema for ${doc.kind}; add one or assert its fields`);
  new Model(doc).validate();
}

const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The Dockerfile's numeric USER uid. */
function imageUid(): number {
  const m = /^USER (\d+)(?::\d+)?$/m.exec(readFileSync(join(root, "Dockerfile"), "utf8"));
  if (!m) throw new Error("Dockerfile has no numeric USER");
  return Number(m[1]);
}

/** Checks common to every overlay; returns the parsed sluice.config.yaml and the Deployment. */
function checkRendered(docs: Doc[]) {
  const kinds = [...new Set(docs.map((d) => d.kind))];
  for (const doc of docs) if (doc.kind !== "ServiceMonitor") validate(doc);
  const deployment = one(docs, "Deployment");
  const configMap = one(docs, "ConfigMap");
  const pod = deployment.spec.template;
  const labels = pod.metadata.labels as Record<string, string>;
  expect(matches(deployment.spec.selector.matchLabels, labels)).toBe(true);
  const container = pod.spec.containers.find((c: { name: string }) => c.name === "sluice");
  expect(container.args).toEqual(["serve"]);
  const metricsPort = container.ports.find((p: { name: string }) => p.name === "metrics");
  expect(metricsPort.containerPort).toBe(9464);

  // Probes: readiness on /readyz, liveness on /healthz, both on the metrics port; a startup probe
  // covers the model load.
  expect(container.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "metrics" });
  expect(container.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "metrics" });
  expect(container.startupProbe.httpGet.path).toBe("/healthz");

  // securityContext: non-root with the image's uid, nothing to escalate, read-only root.
  expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: imageUid() });
  expect(pod.spec.securityContext.seccompProfile).toEqual({ type: "RuntimeDefault" });
  expect(container.securityContext).toEqual({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  expect(container.volumeMounts.map((m: { mountPath: string }) => m.mountPath)).toContain("/tmp");

  // Resources and topology spread.
  for (const side of ["requests", "limits"]) {
    expect(container.resources[side].cpu, side).toBeDefined();
    expect(container.resources[side].memory, side).toBeDefined();
  }
  const spread = pod.spec.topologySpreadConstraints as {
    topologyKey: string;
    labelSelector: { matchLabels: Record<string, string> };
  }[];
  expect(spread.map((s) => s.topologyKey).sort()).toEqual([
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
  ]);
  for (const s of spread) expect(matches(s.labelSelector.matchLabels, labels)).toBe(true);

  // The configuration: the generated ConfigMap, mounted where SLUICE_CONFIG points.
  const env = Object.fromEntries(
    (container.env as { name: string; value?: string }[]).map((e) => [e.name, e.value]),
  );
  const configVolume = pod.spec.volumes.find((v: { configMap?: { name: string } }) => v.configMap);
  expect(configVolume.configMap.name).toBe(configMap.metadata.name);
  const configMount = container.volumeMounts.find((m: { name: string }) => m.name === configVolume.name);
  expect(env.SLUICE_CONFIG).toBe(`${configMount.mountPath}/sluice.config.yaml`);
  const config = parse(configMap.data["sluice.config.yaml"]);

  // Graceful stop: the kubelet's grace period is above shutdown.timeoutMs.
  expect(pod.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(config.shutdown.timeoutMs);
  expect(config.observability.metricsHost).toBe("0.0.0.0");

  // Scraping: annotations on the pods, and a Service whose metrics port reaches them.
  expect(pod.metadata.annotations).toMatchObject({
    "prometheus.io/scrape": "true",
    "prometheus.io/port": "9464",
  });
  const service = one(docs, "Service");
  expect(matches(service.spec.selector, labels)).toBe(true);
  expect(service.spec.ports).toEqual([expect.objectContaining({ name: "metrics", targetPort: "metrics" })]);

  // Disruptions take one instance at a time.
  const pdb = one(docs, "PodDisruptionBudget");
  expect(matches(pdb.spec.selector.matchLabels, labels)).toBe(true);
  expect(pdb.spec.maxUnavailable).toBe(1);

  // KEDA: the Deployment, on the time-based signal through Prometheus (not offsets), 1 ≤ replicas ≤
  // partitions.
  const scaled = one(docs, "ScaledObject");
  expect(scaled.spec.scaleTargetRef).toEqual({
    apiVersion: "apps/v1",
    kind: "Deployment",
    name: deployment.metadata.name,
  });
  expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
  expect(scaled.spec.maxReplicaCount).toBeLessThanOrEqual(config.topics.partitions);
  expect(scaled.spec.triggers).toHaveLength(1);
  const trigger = scaled.spec.triggers[0];
  expect(trigger.type).toBe("prometheus");
  expect(trigger.metricType).toBe("Value");
  expect(trigger.metadata.query).toContain("sluice_time_to_drain_seconds");
  expect(trigger.metadata.query).not.toMatch(/lag_records|offset/);
  expect(Number(trigger.metadata.threshold)).toBeGreaterThan(0);
  return { kinds, config, deployment, container, docs };
}

const kustomize = kubectlKustomizeVersion();
const missing =
  "kubectl is not installed: deploy/kubernetes cannot be rendered, so it is NOT validated on this machine (install a current kubectl: tested with v1.32 and its kustomize v5.5; see docs/deployment.md)";

describe("deploy/kubernetes (kubectl kustomize, validated offline)", () => {
  if (!kustomize) {
    // Say so loudly; in CI a missing kubectl is a failure, not a skip.
    console.warn(`[kubernetes-manifests] ${missing}`);
    it.runIf(process.env.CI === "true")("kubectl is available in CI", () => {
      throw new Error(missing);
    });
    it.skip(`SKIPPED: ${missing}`, () => {});
    return;
  }

  it("base: Deployment, Service, PDB, ConfigMap, ScaledObject are valid and wired together", () => {
    const { kinds, config } = checkRendered(render("base"));
    expect(kinds.sort()).toEqual(
      ["ConfigMap", "Deployment", "PodDisruptionBudget", "ScaledObject", "Service", "ServiceAccount"].sort(),
    );
    // The mounted configuration is one Sluice accepts.
    expect(() => sluiceConfigSchema.parse(config)).not.toThrow();
  });

  it("example overlay: secured Kafka from mounted Secrets, a ServiceMonitor, 24 partitions and at most 12 replicas", () => {
    const { config, deployment, container, docs } = checkRendered(render("overlays/example"));
    for (const d of docs) expect(d.metadata.namespace, d.kind).toBe("sluice");
    expect(container.image).toBe("registry.example.com/sluice:0.1.0");
    const scaled = one(docs, "ScaledObject");
    expect([scaled.spec.maxReplicaCount, config.topics.partitions]).toEqual([12, 24]);

    // Every TLS/SASL file the configuration names lies in a read-only mount of a Secret.
    const secretMounts = (container.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[])
      .filter((m) =>
        deployment.spec.template.spec.volumes.some(
          (v: { name: string; secret?: unknown }) => v.name === m.name && v.secret,
        ),
      )
      .filter((m) => m.readOnly);
    const files = [
      config.kafka.ssl.caPath,
      config.kafka.ssl.certPath,
      config.kafka.ssl.keyPath,
      config.kafka.sasl.passwordFile,
    ];
    for (const file of files) {
      expect(
        secretMounts.some((m) => file.startsWith(`${m.mountPath}/`)),
        file,
      ).toBe(true);
    }
    expect(JSON.stringify(config)).not.toMatch(/"password"\s*:/); // a path, never the secret itself

    // The rest of the configuration is one Sluice accepts (kafka.ssl/sasl files: checked above).
    const { kafka, ...rest } = config;
    expect(() => sluiceConfigSchema.parse({ ...rest, kafka: { brokers: kafka.brokers } })).not.toThrow();

    const monitor = one(docs, "ServiceMonitor");
    expect(monitor.apiVersion).toBe("monitoring.coreos.com/v1");
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: "metrics", path: "/metrics" })]);
    const service = one(docs, "Service");
    expect(matches(monitor.spec.selector.matchLabels, service.metadata.labels ?? {})).toBe(true);
  });
});
