// firstcall.mjs runs the first calls of many fresh sessions of one MCP server through the official
// TypeScript SDK client, a few at a time, and prints one JSON line with every session's answers.
// Each session is what a client like VS Code does first: initialize (roots with listChanged),
// answer roots/list with its roots, and call tools at once; then, optionally, change its roots
// (notifications/roots/list_changed) and call again at once.
//
// Usage: node firstcall.mjs - < spec.json
//
// Spec:
//   {
//     "command": "/path/rootfs", "args": ["run", "--", "..."],  // spawned per session
//     "env": {"K": "V"},          // added to the SDK's default environment
//     "cwd": "/dir",
//     "roots": [{"uri": "file:///...", "name": "..."}],
//     "sessions": 200, "parallel": 4,
//     "wait": ["connected", "answered"],  // per session, in turn: the first calls start right
//                                         // after initialized ("connected") or right after the
//                                         // client answered its first roots/list ("answered")
//     "calls": [{"name": T, "arguments": {...}}, ...],   // in order, each right after the last
//     "change": {"roots": [...], "calls": [...]},        // optional: then new roots, calls at once
//     "requestTimeoutMs": 30000
//   }
//
// Output: {"sessions":[{"wait":W,"calls":[{"ok","isError","text","error"}...],"changeCalls":[...],
// "rootsListCalls":N,"tap":[...],"ms":N,"fatal":"..."}...],"ms":N}; a session's ms runs from its
// start to its last answer (it closes in the background while the next one starts). tap holds the events of
// tap/tap.mjs when the server runs with it (the lines it writes to stderr).

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(readFileSync(0, "utf8"));
const timeout = spec.requestTimeoutMs ?? 30000;
const waits = [].concat(spec.wait ?? "answered");
const tapPrefix = "rootfs-e2e-tap ";

function textOf(result) {
  if (!result || !Array.isArray(result.content)) return "";
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function callAll(client, calls) {
  const out = [];
  for (const c of calls ?? []) {
    try {
      const r = await client.callTool({ name: c.name, arguments: c.arguments ?? {} }, undefined, { timeout });
      out.push({ ok: true, isError: !!r.isError, text: textOf(r) });
    } catch (e) {
      out.push({ ok: false, isError: true, error: String(e?.message ?? e) });
    }
  }
  return out;
}

async function session(i) {
  const rec = { wait: waits[i % waits.length], calls: [], changeCalls: [], rootsListCalls: 0, tap: [], ms: 0, fatal: null };
  const t0 = Date.now();
  let roots = spec.roots ?? [];
  let answered;
  const firstAnswer = new Promise((r) => (answered = r));
  const client = new Client(
    { name: "rootfs-e2e-firstcall", version: "0.0.1" },
    { capabilities: { roots: { listChanged: true } } },
  );
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    rec.rootsListCalls++;
    // The answer is written when this handler's promise settles; the calls go out after it.
    setImmediate(answered);
    return { roots };
  });
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args ?? [],
    env: spec.env, // the SDK adds it to its default environment
    cwd: spec.cwd,
    stderr: "pipe",
  });
  transport.onerror = () => {};
  let stderr = "";
  let partial = "";
  try {
    const connected = client.connect(transport, { timeout });
    transport.stderr?.on("data", (d) => {
      partial += d;
      let j;
      while ((j = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, j);
        partial = partial.slice(j + 1);
        const k = line.indexOf(tapPrefix);
        if (k >= 0) {
          try {
            rec.tap.push(JSON.parse(line.slice(k + tapPrefix.length)));
          } catch {}
        } else if (stderr.length < 8192) {
          stderr += line + "\n";
        }
      }
    });
    await connected;
    if (rec.wait === "answered") {
      await Promise.race([firstAnswer, new Promise((_, rej) => setTimeout(() => rej(new Error("no roots/list reached the client")), timeout))]);
    }
    rec.calls = await callAll(client, spec.calls);
    if (spec.change) {
      roots = spec.change.roots ?? [];
      await client.sendRootsListChanged();
      rec.changeCalls = await callAll(client, spec.change.calls);
    }
  } catch (e) {
    rec.fatal = `${e?.message ?? e}\n${stderr}`;
  }
  rec.ms = Date.now() - t0;
  // The next session need not wait for this one's processes to exit.
  closing.push(client.close().catch(() => {}));
  return rec;
}

const closing = [];

const t0 = Date.now();
const n = spec.sessions ?? 1;
const out = new Array(n);
let next = 0;
async function worker() {
  while (next < n) {
    const i = next++;
    out[i] = await session(i);
  }
}
await Promise.all(Array.from({ length: Math.max(1, spec.parallel ?? 1) }, worker));
await Promise.all(closing);
// Exit once the line is written: a pipe takes a long line in several writes.
process.stdout.write(JSON.stringify({ sessions: out, ms: Date.now() - t0 }) + "\n", () => process.exit(0));
