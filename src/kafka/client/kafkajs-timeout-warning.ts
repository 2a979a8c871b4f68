/**
 * kafkajs 2.2.4 arms timers with negative delays (tulios/kafkajs#1751, open). Node 20 clamps them to
 * 1 ms silently; Node 24 clamps them too but prints a `TimeoutNegativeWarning` to stderr, once per
 * process. The behaviour is the same on both, so the warning only alarms operators and breaks clean
 * stderr (README, "Node.js versions"). This drops exactly that warning type and passes every other
 * warning through unchanged. Called once by the CLI entry (src/cli/main.ts).
 */
export function ignoreKafkajsNegativeTimeoutWarning(): void {
  const original = process.emitWarning;
  if ((original as { sluiceFiltered?: boolean }).sluiceFiltered) return;
  const filtered = function (this: unknown, warning: string | Error, ...rest: unknown[]): void {
    const [typeOrOptions] = rest;
    const type =
      typeof typeOrOptions === "string"
        ? typeOrOptions
        : typeof typeOrOptions === "object" && typeOrOptions !== null
          ? (typeOrOptions as { type?: string }).type
          : warning instanceof Error
            ? warning.name
            : undefined;
    if (type === "TimeoutNegativeWarning") return;
    (original as (...args: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  (filtered as { sluiceFiltered?: boolean }).sluiceFiltered = true;
  process.emitWarning = filtered;
}
