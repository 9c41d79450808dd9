// client.mjs drives one MCP server through the official TypeScript SDK client
// (legacy era: initialize, roots with listChanged) following a scenario, and
// prints a JSON transcript on stdout for the Go tests to assert.
//
// Usage: node client.mjs SCENARIO_JSON   or   node client.mjs - < scenario.json
//
// Scenario:
//   {
//     "command": "/path/rootfs", "args": ["run", "--", "..."],   // spawned by StdioClientTransport
//     "env": {"K": "V"},            // added to the SDK's default environment
//     "cwd": "/dir",
//     "capabilities": {...},         // default {"roots": {"listChanged": true}}
//     "roots": [{"uri": "file:///...", "name": "..."}],
//     "answerRoots": true,           // false: never answer roots/list (the request hangs)
//     "requestTimeoutMs": 30000,
//     "steps": [ STEP, ... ]
//   }
//
// Steps (each may carry "label"; its record in the transcript keeps it):
//   {"op":"call", "name":T, "arguments":{...}}     tools/call once
//   {"op":"until", "name":T, "arguments":{...}, "contains":[...], "absent":[...],
//    "isError":false, "timeoutMs":10000}           tools/call until the text matches (or time runs out)
//   {"op":"setRoots", "roots":[...], "notify":N}   replace the roots; send N list_changed (default 1, 0: none)
//   {"op":"listTools"}                              tools/list
//   {"op":"sleep", "ms":N}
//   {"op":"close"}                                  close the transport (stdin end, then signals)
//
// Strings in "arguments" may hold {{pid}} (the spawned process) and {{child}}
// (its first child process, read from /proc; the process itself when it
// has none), for tests that aim at a process
// by its host pid.
//
// Transcript: {"steps":[{label, op, ok, isError, text, error, attempts, ms}...],
// "rootsListCalls":N, "logs":[...], "serverInfo":{...}, "fatal":"..."}.
// The process exits 0 when the transcript is complete, 1 when a fatal error
// cut it short (the transcript is printed either way).

import { readFileSync, readdirSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

function readScenario() {
  const arg = process.argv[2];
  if (arg === undefined || arg === "-") return JSON.parse(readFileSync(0, "utf8"));
  return JSON.parse(arg);
}

function childPid(pid) {
  // A child belongs to the thread that forked it (Go forks from any thread),
  // so every task's children list counts.
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      if (kids) return kids.split(/\s+/)[0];
    }
  } catch {}
  return String(pid); // no child (a server run directly): aim at the process itself
}

function expand(value, transport) {
  if (typeof value === "string") {
    return value
      .replaceAll("{{pid}}", String(transport.pid ?? 0))
      .replaceAll("{{child}}", () => childPid(transport.pid));
  }
  if (Array.isArray(value)) return value.map((v) => expand(v, transport));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expand(v, transport)]));
  }
  return value;
}

function textOf(result) {
  if (!result || !Array.isArray(result.content)) return "";
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const sc = readScenario();
  const out = { steps: [], rootsListCalls: 0, logs: [], serverInfo: null, fatal: null };
  let roots = sc.roots ?? [];
  const timeout = sc.requestTimeoutMs ?? 30000;

  const client = new Client(
    { name: "rootfs-e2e-ts", version: "0.0.1" },
    { capabilities: sc.capabilities ?? { roots: { listChanged: true } } },
  );
  const caps = sc.capabilities ?? { roots: {} };
  if (caps.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      out.rootsListCalls++;
      if (sc.answerRoots === false) return new Promise(() => {});
      return { roots };
    });
  }
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (out.logs.length < 1000) out.logs.push(n.params);
  });

  const transport = new StdioClientTransport({
    command: sc.command,
    args: sc.args ?? [],
    env: sc.env ? { ...process.env, ...sc.env } : undefined,
    cwd: sc.cwd,
    stderr: "inherit",
  });
  transport.onerror = () => {}; // the SDK reports unparsable lines here; rootfs should drop them first

  const print = () => process.stdout.write(JSON.stringify(out) + "\n");
  try {
    await client.connect(transport, { timeout });
    out.serverInfo = client.getServerVersion() ?? null;
  } catch (e) {
    out.fatal = `connect: ${e?.message ?? e}`;
    print();
    await client.close().catch(() => {});
    process.exit(1);
  }

  const call = async (step) => {
    const args = expand(step.arguments ?? {}, transport);
    const t0 = Date.now();
    try {
      const r = await client.callTool({ name: step.name, arguments: args }, undefined, {
        timeout: step.timeoutMs ?? timeout,
      });
      return { ok: true, isError: !!r.isError, text: textOf(r), ms: Date.now() - t0 };
    } catch (e) {
      return { ok: false, isError: true, error: String(e?.message ?? e), ms: Date.now() - t0 };
    }
  };

  const matches = (rec, step) => {
    if (!rec.ok) return false;
    if (step.isError !== undefined && rec.isError !== step.isError) return false;
    const t = rec.text ?? "";
    return (step.contains ?? []).every((s) => t.includes(s)) && (step.absent ?? []).every((s) => !t.includes(s));
  };

  for (const step of sc.steps ?? []) {
    let rec = { label: step.label ?? step.op, op: step.op };
    switch (step.op) {
      case "call":
        Object.assign(rec, await call(step));
        break;
      case "until": {
        const deadline = Date.now() + (step.timeoutMs ?? 10000);
        let attempts = 0;
        let r;
        for (;;) {
          attempts++;
          r = await call({ ...step, timeoutMs: step.callTimeoutMs });
          if (matches(r, step) || Date.now() > deadline) break;
          await sleep(step.intervalMs ?? 100);
        }
        Object.assign(rec, r, { attempts, satisfied: matches(r, step) });
        break;
      }
      case "setRoots": {
        roots = step.roots ?? [];
        const n = step.notify ?? 1;
        const t0 = Date.now();
        try {
          for (let i = 0; i < n; i++) await client.sendRootsListChanged();
          Object.assign(rec, { ok: true, sent: n, ms: Date.now() - t0 });
        } catch (e) {
          Object.assign(rec, { ok: false, error: String(e?.message ?? e) });
        }
        break;
      }
      case "listTools":
        try {
          const r = await client.listTools(undefined, { timeout });
          Object.assign(rec, { ok: true, text: r.tools.map((t) => t.name).sort().join("\n") });
        } catch (e) {
          Object.assign(rec, { ok: false, error: String(e?.message ?? e) });
        }
        break;
      case "sleep":
        await sleep(step.ms ?? 0);
        rec.ok = true;
        break;
      case "close": {
        const t0 = Date.now();
        await client.close().catch(() => {});
        Object.assign(rec, { ok: true, ms: Date.now() - t0 });
        break;
      }
      default:
        out.fatal = `unknown step op ${JSON.stringify(step.op)}`;
        print();
        process.exit(1);
    }
    rec.rootsListCalls = out.rootsListCalls;
    out.steps.push(rec);
  }
  print();
  await client.close().catch(() => {});
  process.exit(0);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack ?? e) }) + "\n");
  process.exit(1);
});
