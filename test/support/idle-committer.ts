import type { TaskCommitter } from "../../src/processor/processor-ports.js";

/** A TaskCommitter that accepts everything and publishes nothing (for tests of intake and gating). */
export const idleCommitter: TaskCommitter = {
  pendingRecords: 0,
  track: () => {},
  complete: () => {},
  commitSoon: () => {},
  flush: async () => {},
  close: async () => {},
};
