// tap.mjs is preloaded into a node MCP server (node --import .../tap.mjs server.js) to record, in
// the server's own order and clock, what it reads on stdin and when it takes roots in. It writes
// one stderr line per event, "rootfs-e2e-tap " + JSON:
//
//   {"t":ms,"ev":"in","method":M,"id":ID}                 a request or notification it read
//   {"t":ms,"ev":"in","id":ID,"roots":[uri...]}            a response it read, with its roots if any
//   {"t":ms,"ev":"updated","line":"..."}                   server-filesystem took roots in (its log line)
//
// It changes nothing the server sees: stdin's data events pass through unchanged.

import { performance } from "node:perf_hooks";

const out = (e) => origWrite.call(process.stderr, "rootfs-e2e-tap " + JSON.stringify({ t: performance.now(), ...e }) + "\n");
const origWrite = process.stderr.write;

let buf = "";
const origEmit = process.stdin.emit;
process.stdin.emit = function (name, chunk, ...rest) {
  if (name === "data") {
    buf += chunk.toString();
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        const m = JSON.parse(line);
        if (m.method !== undefined) {
          out({ ev: "in", method: m.method, id: m.id ?? null });
        } else {
          const roots = Array.isArray(m.result?.roots) ? m.result.roots.map((r) => r.uri) : undefined;
          out({ ev: "in", id: m.id ?? null, roots });
        }
      } catch {}
    }
  }
  return origEmit.call(this, name, chunk, ...rest);
};

process.stderr.write = function (chunk, ...rest) {
  const s = String(chunk);
  if (s.startsWith("Updated allowed directories") || s.startsWith("No valid root directories")) {
    out({ ev: "updated", line: s.trim() });
  }
  return origWrite.call(this, chunk, ...rest);
};
