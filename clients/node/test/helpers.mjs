// What the tests share: the live service `FAIRQUE_API` (started by the Python suite,
// tests/service/test_node_client.py), a fresh queue per test, and a raw JSON client for
// checking what the queue holds.
import { randomUUID } from "node:crypto";

export const api = process.env.FAIRQUE_API ?? "http://127.0.0.1:8000";
const prefix = process.env.FAIRQUE_QUEUE_PREFIX ?? "node-";

export const freshQueue = () => `${prefix}${randomUUID().slice(0, 8)}`;

/** GET a path under a queue, as JSON. */
export async function look(queue, path) {
  const response = await fetch(`${api}/v1/queues/${queue}${path}`);
  return { status: response.status, body: await response.json() };
}

/** Wait until `check()` is truthy (a minute at most: a hang fails the test). */
export async function eventually(check, what) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
