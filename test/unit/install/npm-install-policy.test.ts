import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";

const root = packageRoot();
const json = (file: string) => JSON.parse(readFileSync(join(root, file), "utf8"));

describe("installs stay offline-safe and warning-free (README, Installing)", () => {
  it("package.json's allowScripts decides for every dependency with an install script", () => {
    const lock = json("package-lock.json") as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== "" && p.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
    const allow = (json("package.json") as { allowScripts: Record<string, boolean> }).allowScripts;
    expect(withScripts.length).toBeGreaterThan(0);
    expect(withScripts.filter((name) => !(name in allow))).toEqual([]);
    // onnxruntime-node's postinstall only downloads optional CUDA binaries from NuGet (unreachable
    // offline); its CPU binaries ship in the npm package.
    expect(allow["onnxruntime-node"]).toBe(false);
  });

  it("npm reads the project's .npmrc without a warning (no unknown keys)", () => {
    const npm = spawnSync("npm", ["config", "get", "fund"], { cwd: root, encoding: "utf8" });
    expect(npm.status).toBe(0);
    expect(npm.stderr).not.toMatch(/warn/i);
    expect(readFileSync(join(root, ".npmrc"), "utf8")).not.toContain("onnxruntime-node-install");
  });

  it("the documented switch of onnxruntime-node's install script is the one it reads", () => {
    // Older npm (Node 20 ships npm 10) ignores allowScripts; ONNXRUNTIME_NODE_INSTALL=skip covers it.
    const script = join(root, "node_modules", "onnxruntime-node", "script", "install.js");
    const out = execFileSync(process.execPath, [script], {
      env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(out).toBe("");
    expect(readFileSync(join(root, ".ci", "run"), "utf8")).toContain("ONNXRUNTIME_NODE_INSTALL=skip npm ci");
  });
});
