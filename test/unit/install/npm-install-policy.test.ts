import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";

const root = packageRoot();
const json = (file: string) => JSON.parse(readFileSync(join(root, file), "utf8"));

describe("installs stay offline-safe (README, Quickstart)", () => {
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

  it("a plain npm ci stays offline-safe on npm 10 too: .npmrc carries onnxruntime-node's own switch", () => {
    // npm 10 ignores allowScripts; the install script reads this key as npm_config_onnxruntime_node_install.
    expect(readFileSync(join(root, ".npmrc"), "utf8")).toMatch(/^onnxruntime-node-install=skip$/m);
    const npm = spawnSync("npm", ["config", "get", "onnxruntime-node-install"], {
      cwd: root,
      encoding: "utf8",
    });
    expect(npm.status).toBe(0);
    expect(npm.stdout.trim()).toBe("skip");
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
