import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";

interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}
interface Panel {
  id: number;
  title: string;
  type: string;
  gridPos: GridPos;
  panels?: Panel[];
}

const overlap = (a: GridPos, b: GridPos) =>
  a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** Pairs of panels whose grid rectangles intersect (Grafana would push one down, or stack them). */
function overlappingPanels(panels: readonly Panel[]): string[] {
  const out: string[] = [];
  panels.forEach((a, i) => {
    for (const b of panels.slice(i + 1)) {
      if (overlap(a.gridPos, b.gridPos))
        out.push(`"${a.title}" ${JSON.stringify(a.gridPos)} × "${b.title}" ${JSON.stringify(b.gridPos)}`);
    }
  });
  return out;
}

describe("deploy/grafana/sluice-dashboard.json layout", () => {
  const dash = JSON.parse(
    readFileSync(join(packageRoot(), "deploy/grafana/sluice-dashboard.json"), "utf8"),
  ) as {
    panels: Panel[];
  };

  it("no two panels overlap, and every panel fits the 24-column grid", () => {
    // Panels inside a collapsed row are laid out when it expands: check them with the top level.
    const all = dash.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
    expect(all.length).toBeGreaterThan(20);
    expect(overlappingPanels(all)).toEqual([]);
    for (const p of all) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      expect(Math.min(p.gridPos.x, p.gridPos.y, p.gridPos.w, p.gridPos.h), p.title).toBeGreaterThanOrEqual(0);
    }
  });

  it("the check catches an overlap (the old 'Loaded model' table at y=50 under the Process panels at y=45, h=8)", () => {
    const process = { id: 1, title: "CPU", type: "timeseries", gridPos: { x: 8, y: 45, w: 8, h: 8 } };
    const model = { id: 2, title: "Loaded model", type: "table", gridPos: { x: 0, y: 50, w: 24, h: 5 } };
    expect(overlappingPanels([process, model])).toHaveLength(1);
    expect(overlappingPanels([process, { ...model, gridPos: { ...model.gridPos, y: 53 } }])).toEqual([]);
  });
});
