// The pull worker against a live `fairque serve`: its slots, cancels, refused results,
// drains.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, Worker } from "../index.js";
import { api, eventually, freshQueue, look } from "./helpers.mjs";

const nap = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

test("runs every task, never more at once than its concurrency", async () => {
  const queue = freshQueue();
  const client = new Client({ api, queue });
  await client.pushMany(Array.from({ length: 40 }, (_, i) => ({
    name: i % 2 ? "square" : "nap", user_id: `u${i % 4}`, payload: { n: i }, task_id: `t${i}`,
  })));
  let now = 0;
  let most = 0;
  const worker = new Worker({
    api, queue, concurrency: 3, signals: [], log: () => {},
    handlers: {
      square: ({ n }) => n * n,
      nap: async ({ n }) => {
        now += 1;
        most = Math.max(most, now);
        await nap(20);
        now -= 1;
        return `napped ${n}`;
      },
    },
  });
  const running = worker.run();
  await eventually(async () => (await look(queue, "/stats")).body.counts.FINISHED === 40, "40 finished");
  worker.stop();
  const stats = await running;
  assert.equal(stats.done, 40);
  assert.ok(most <= 3, `${most} handlers at once`);
  assert.deepEqual(await client.result("t7"), { type: "success", finished_at: (await client.result("t7")).finished_at, result: 49 });
  assert.equal((await client.result("t8")).result, "napped 8");
});

test("a cancel stops the running handler; a refused result fails its task at once", async () => {
  const queue = freshQueue();
  const client = new Client({ api, queue });
  let stopped = null;
  const worker = new Worker({
    api, queue, concurrency: 2, heartbeatSeconds: 0.1, signals: [], log: () => {},
    handlers: {
      long: async (_, { signal }) => {
        try {
          await nap(60_000, signal);
        } catch (error) {
          stopped = error.message;
          throw error;
        }
      },
      nan: () => NaN, // MessagePack carries it; the queue refuses it
      fn: () => () => 1, // MessagePack cannot carry it
    },
  });
  const running = worker.run();
  await client.push({ name: "long", user_id: "a", task_id: "long" });
  await eventually(async () => (await client.get("long")).state === "STARTED", "long started");
  await client.cancel("long");
  await eventually(() => stopped !== null, "the handler stopped");
  assert.equal(stopped, "the task was canceled");
  assert.equal((await client.get("long")).state, "CANCELED");

  await client.push({ name: "nan", user_id: "a", task_id: "nan", max_retries: 0 });
  await client.push({ name: "fn", user_id: "a", task_id: "fn", max_retries: 0 });
  const failed = async (id) => (await client.get(id)).state === "FAILED";
  await eventually(async () => (await failed("nan")) && (await failed("fn")), "both failed");
  assert.match((await client.result("nan")).message, /result refused/);
  assert.match((await client.result("fn")).message, /result cannot be sent/);
  worker.stop();
  const stats = await running;
  assert.equal(stats.refused, 1);
});

test("a stop gives back what has not started and lets what runs finish", async () => {
  const queue = freshQueue();
  const client = new Client({ api, queue });
  await client.pushMany(Array.from({ length: 6 }, (_, i) => ({ name: "slow", user_id: "a", task_id: `s${i}` })));
  let began = 0;
  const worker = new Worker({
    api, queue, concurrency: 2, ahead: 3, signals: [], log: () => {},
    handlers: {
      slow: async () => {
        began += 1;
        await nap(300);
        return "done";
      },
    },
  });
  const running = worker.run();
  await eventually(() => began === 2 && worker.ready.length === 3, "2 running, 3 leased ahead");
  worker.stop();
  const stats = await running;
  assert.equal(stats.done, 2);
  assert.equal(stats.givenBack, 3);
  const { body } = await look(queue, "/stats");
  assert.equal(body.counts.FINISHED, 2);
  assert.equal(body.counts.QUEUED, 4); // 3 given back, 1 never leased
  for (let i = 0; i < 6; i += 1) assert.equal((await client.get(`s${i}`)).retry_count, 0);
});

test("a task leased ahead keeps its lease while it waits for a slot", async () => {
  const queue = freshQueue();
  const client = new Client({ api, queue });
  await client.push({ name: "hold", user_id: "a", task_id: "first", payload: { ms: 3500 } });
  await client.push({ name: "hold", user_id: "a", task_id: "second", payload: { ms: 1 } });
  const worker = new Worker({
    api, queue, concurrency: 1, ahead: 1, leaseSeconds: 1.5, signals: [], log: () => {},
    handlers: { hold: async ({ ms }) => nap(ms) },
  });
  const running = worker.run();
  // the second waits 3.5 s in hand, past its 1.5 s lease: it must not run on a dead one
  await eventually(async () => (await client.get("second")).state === "FINISHED", "second finished");
  worker.stop();
  const stats = await running;
  assert.equal(stats.done, 2);
  assert.equal(stats.lost, 0);
  assert.equal((await client.get("second")).retry_count, 0);
});
