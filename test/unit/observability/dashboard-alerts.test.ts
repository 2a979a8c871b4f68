import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { SLUICE_METRIC_NAMES, SluiceMetrics } from "../../../src/observability/metrics.js";

const root = join(import.meta.dirname, "../../..");
const read = (p: string) => readFileSync(join(root, p), "utf8");

/** Every series name the registry can expose, histograms with their _bucket/_sum/_count series. */
async function exposedNames(): Promise<Set<string>> {
  const metrics = new SluiceMetrics();
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(m.name + s);
  }
  return names;
}

const METRIC_REF = /\b(?:sluice|nodejs|process)_[a-zA-Z0-9_]+/g;

function exprsOfDashboard(): string[] {
  const dash = JSON.parse(read("deploy/grafana/sluice-dashboard.json")) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { definition?: string }[] };
  };
  return [
    ...dash.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ...dash.templating.list.map((v) => v.definition ?? ""),
  ];
}

function exprsOfAlerts(): string[] {
  const doc = parse(read("deploy/prometheus/alerts.yml")) as { groups: { rules: { expr: string }[] }[] };
  return doc.groups.flatMap((g) => g.rules.map((r) => r.expr));
}

describe("dashboard and alert rules reference only metrics that exist", () => {
  it("dashboard JSON parses, has panels for the key signals, and every metric name is registered", async () => {
    const names = await exposedNames();
    const exprs = exprsOfDashboard();
    expect(exprs.length).toBeGreaterThan(15);
    const refs = new Set(exprs.flatMap((e) => e.match(METRIC_REF) ?? []));
    for (const ref of refs) expect(names.has(ref), `dashboard references unknown metric ${ref}`).toBe(true);
    for (const base of SLUICE_METRIC_NAMES) {
      const used = [...refs].some((r) => r === base || r.startsWith(`${base}_`));
      expect(used, `dashboard shows ${base}`).toBe(true);
    }
  });

  it("alert rules parse and every metric name is registered", async () => {
    const names = await exposedNames();
    const exprs = exprsOfAlerts();
    expect(exprs.length).toBeGreaterThanOrEqual(5);
    for (const ref of new Set(exprs.flatMap((e) => e.match(METRIC_REF) ?? []))) {
      expect(names.has(ref), `alerts reference unknown metric ${ref}`).toBe(true);
    }
  });

  const promtool = spawnSync("promtool", ["--version"]).status === 0;
  it.runIf(promtool)("promtool accepts the rules and config, and the rule unit tests pass", () => {
    // Throws (failing the test) with promtool's output when anything is wrong.
    execFileSync(join(root, "scripts/check-alerts.sh"), {
      stdio: "pipe",
      env: { ...process.env, REQUIRE_PROMTOOL: "1" },
    });
  });
});
