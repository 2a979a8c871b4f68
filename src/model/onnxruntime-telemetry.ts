/**
 * onnxruntime's own usage telemetry, off unless the operator opts in (`model.onnxruntimeTelemetry`).
 *
 * onnxruntime-node 1.30 on Linux/macOS starts Microsoft's 1DS telemetry client when it creates its
 * environment (onnxruntime/core/platform/posix/telemetry.cc): it persists a device id and an event
 * cache under `$XDG_CACHE_HOME` or `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` (`deviceid`,
 * `onnxruntime.db`), writes `mat-debug-<pid>.log` and `.ses` into the temp folder, and uploads events
 * to `mobile.events.data.microsoft.com`. Its documented full opt-out is the environment variable
 * `ORT_DISABLE_TELEMETRY` (1/true/yes/on/y, read with getenv when the environment is created and then
 * latched for the process; `IsTelemetryDisabledByEnvironment` in core/platform/telemetry_environment.h).
 * The native code reads the process environment, which `process.env` assignments on the main thread
 * update, so this must run on the main thread before the first worker loads onnxruntime.
 */
export const ORT_DISABLE_TELEMETRY = "ORT_DISABLE_TELEMETRY";

/**
 * Sets `ORT_DISABLE_TELEMETRY=1` unless `allow` is true. With `allow` the environment is left as it is,
 * so an operator's own `ORT_DISABLE_TELEMETRY=1` still wins.
 */
export function applyOnnxruntimeTelemetry(allow: boolean, env: NodeJS.ProcessEnv = process.env): void {
  if (!allow) env[ORT_DISABLE_TELEMETRY] = "1";
}
