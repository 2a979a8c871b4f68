import { z } from "zod";

/** Field rules the configuration's section schemas share (one wording for each rule). */
export const positiveInt = () =>
  z.number().int({ error: "must be an integer" }).positive({ error: "must be a positive number" });
export const topicName = () =>
  z
    .string()
    .min(1)
    .max(249)
    .regex(/^[a-zA-Z0-9._-]+$/, "Kafka topic names use only letters, digits, '.', '_' and '-'");
