import type { TestProject } from "vitest/node";

// Minimal version: uses KAFKA_BROKERS. The foundation work extends this to testcontainers and the
// project's local broker.
export default async function setup(project: TestProject): Promise<void> {
  if (process.env.KAFKA_BROKERS) project.provide("kafkaBrokers", process.env.KAFKA_BROKERS);
}

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string;
  }
}
