/**
 * `node --import dist/bench/noop-serve.js bin/sluice.js serve`: the real `sluice serve` (CLI, serve
 * runtime, metrics server, lag monitor, processor) with the no-op model (src/model/noop-model.ts)
 * instead of an ONNX model, for bench:ceiling's Kafka-path ceiling. `sluice serve` has no setting for
 * the no-op model (it is not a model; only `infer` and `model info` take `--model noop`), so this
 * registers a module resolve hook (noop-serve-hooks.ts) that hands serve a `loadModel` returning the
 * no-op model. Nothing else of serve changes.
 */
import { register } from "node:module";

register("./noop-serve-hooks.js", import.meta.url);
