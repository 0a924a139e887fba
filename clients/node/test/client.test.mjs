// The producer client against a live `fairque serve`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, FairqueError } from "../index.js";
import { api, freshQueue, look } from "./helpers.mjs";

test("push, read, wait for and cancel tasks", async () => {
  const queue = freshQueue();
  const client = new Client({ api, queue });
  const task = await client.push({ name: "job", user_id: "acme", payload: { n: 1 } });
  assert.equal(task.state, "QUEUED");
  assert.match(task.task_id, /^[0-9a-f-]{36}$/); // an id made here: a resend pushes nothing new
  const again = await client.push({ name: "job", user_id: "acme", task_id: task.task_id });
  assert.equal(again.task_id, task.task_id);
  assert.equal((await look(queue, "/stats")).body.counts.QUEUED, 1);

  const [a, b] = await client.pushMany([
    { name: "job", user_id: "acme", task_id: "a" },
    { name: "job", user_id: "globex", task_id: "b", depends_on: ["a"] },
  ]);
  assert.equal(a.state, "QUEUED");
  assert.equal(b.state, "DEFERRED");
  assert.equal((await client.get("b")).user_id, "globex");
  assert.equal(await client.get("never-pushed"), null);
  assert.deepEqual(await client.result("a"), { state: "QUEUED" });
  assert.equal(await client.result("never-pushed"), null);

  const canceled = await client.cancel("a");
  assert.equal(canceled.state, "CANCELED");
  assert.equal(await client.cancel("never-pushed"), null);
  await assert.rejects(client.cancel("a"), (error) =>
    error instanceof FairqueError && error.status === 409 && error.type === "already-ended");
  await assert.rejects(client.push({ name: "job" }), (error) =>
    error instanceof FairqueError && error.status === 422); // no user_id: not resent
});
