/**
 * Writer schemas of a "Kafka shop" producer, for the registry codec tests (unit and e2e): its own
 * record name, an extra field, an evolved version, and one that cannot resolve to the request contract.
 */

/** A producer's own request schema: other name, an extra field. */
export const TICKET_V1 = {
  type: "record",
  name: "SupportTicket",
  namespace: "com.acme",
  fields: [
    { name: "id", type: "string" },
    { name: "priority", type: "int" },
    { name: "text", type: "string" },
  ],
} as const;

/** Its evolved version (BACKWARD compatible: the new field has a default). */
export const TICKET_V2 = {
  ...TICKET_V1,
  fields: [...TICKET_V1.fields, { name: "channel", type: "string", default: "web" }],
} as const;

/** Registered, but without `text`: cannot resolve to the request contract. */
export const PING = {
  type: "record",
  name: "Ping",
  namespace: "com.acme",
  fields: [{ name: "id", type: "string" }],
} as const;
