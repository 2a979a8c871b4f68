/** Whether a processor should receive traffic (`/readyz`), and why not. */
export interface ProcessorReadiness {
  ready: boolean;
  reason?: string;
}

/** What readiness looks at: the lifecycle, the owned partitions and the model router's refusals. */
export interface ReadinessFacts {
  started: boolean;
  stopping: boolean;
  tasks: readonly { tp: { topic: string; partition: number }; running: boolean }[];
  /** Why online partitions may not be answered (a member without the decided model version). */
  refusals: readonly { message: string }[];
}

/** Ready = started, not stopping, has partitions, all of them restored, and no model refused. Pure. */
export function processorReadiness(f: ReadinessFacts): ProcessorReadiness {
  if (!f.started || f.stopping) return { ready: false, reason: f.stopping ? "stopping" : "not started" };
  if (f.tasks.length === 0) return { ready: false, reason: "no partitions assigned" };
  const restoring = f.tasks.filter((t) => !t.running).map((t) => `${t.tp.topic}:${t.tp.partition}`);
  if (restoring.length > 0) return { ready: false, reason: `restoring ${restoring.join(", ")}` };
  if (f.refusals.length > 0) return { ready: false, reason: f.refusals.map((r) => r.message).join("; ") };
  return { ready: true };
}
