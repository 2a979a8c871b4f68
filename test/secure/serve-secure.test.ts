import { afterEach, describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { killLeftovers, type ServeProcess, startServe } from "../support/serve-process.js";
import {
  aclsFor,
  configEnv,
  createServeTopics,
  grant,
  produceAsAdmin,
  readCommittedAsAdmin,
  secrets,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// `sluice serve` as the application user (not a super user) with exactly the ACLs `sluice acls`
// prints, over SASL_SSL with SCRAM-SHA-512 and the password in a file: results exactly once, and a
// restart restores dedup state from the changelog (it needs the changelog READ and the restore
// group prefix for that).
describe("sluice serve on the secured broker", () => {
  const procs: ServeProcess[] = [];
  afterEach(() => killLeftovers(procs));

  it("exactly once with the printed ACLs; a restart restores dedup state", async () => {
    const base = uniqueBase("secure-serve");
    const config = writeConfig(base);
    await createServeTopics(base);
    await grant(await aclsFor(config, ["--command", "serve"]), `User:${secureKafka().app.username}`);
    const requests = `${base}.requests`;
    const first = Array.from({ length: 30 }, (_, i) => ({
      key: `id-${i}`,
      ...encodeRequest({ id: `id-${i}`, text: `text ${i}` }, "json"),
    }));
    const duplicates = first.slice(0, 10).map((m) => ({ ...m }));
    const malformed = [{ key: "bad-1", value: Buffer.from('{"id": "bad-1", "text": ') }];
    await produceAsAdmin(requests, [...first, ...duplicates, ...malformed]);

    const env = configEnv(config);
    const serve = startServe([], env);
    procs.push(serve);
    let results = await readCommittedAsAdmin(`${base}.results`, { expected: 30, timeoutMs: 90_000 });
    const ids = results.map((r) => decodeResult(r.value as Buffer, r.headers).id);
    expect(ids.sort()).toEqual(first.map((m) => m.key).sort());
    const dead = await readCommittedAsAdmin(`${base}.dlq`, { expected: 1 });
    expect(dead.map((d) => d.key)).toEqual(["bad-1"]);
    serve.child.kill("SIGTERM");
    expect((await serve.exited).code, serve.output().slice(-3000)).toBe(0);

    // Already answered ids again, and new ones: after the restart only the new ones get results.
    const again = first.slice(10, 20).map((m) => ({ ...m }));
    const fresh = Array.from({ length: 5 }, (_, i) => ({
      key: `new-${i}`,
      ...encodeRequest({ id: `new-${i}`, text: `new ${i}` }, "json"),
    }));
    await produceAsAdmin(requests, [...again, ...fresh]);
    const second = startServe([], env);
    procs.push(second);
    await second.waitFor(/"dedupEntries":[1-9]/, 90_000);
    results = await readCommittedAsAdmin(`${base}.results`, {
      expected: 35,
      timeoutMs: 90_000,
    });
    const all = results.map((r) => decodeResult(r.value as Buffer, r.headers).id);
    expect(all.length).toBe(35);
    expect(new Set(all).size).toBe(35);
    second.child.kill("SIGTERM");
    expect((await second.exited).code).toBe(0);

    for (const text of [serve.output(), second.output()])
      for (const secret of secrets()) expect(text).not.toContain(secret);
  });
});
