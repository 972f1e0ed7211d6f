// An interactive MCP session written with the official TypeScript SDK, for the
// gateway's third-party tests (internal/mcpgate) of what the CLIs cannot do:
// cancelling a call in flight, progress notifications and list changes. It
// connects to a streamable-HTTP MCP endpoint with a bearer token, then reads
// one JSON command per line on stdin and writes one JSON event per line on
// stdout:
//
//   {"op":"list"}                                   -> {"op":"list","tools":[{name,description}]}
//   {"op":"call","id":"c1","name":N,"arguments":A,
//    "progress":true}                               -> {"op":"progress","id":"c1","progress":P,"total":T}...
//                                                      then {"op":"result","id":"c1","result":R}
//                                                      or {"op":"error","id":"c1","message":M}
//   {"op":"cancel","id":"c1"}                       -> aborts call c1 (the SDK sends notifications/cancelled)
//   {"op":"ping"}                                   -> {"op":"pong"}
//   {"op":"close"}                                  -> closes the session and exits
//
// Unprompted events: {"op":"ready","sessionId":S} once connected,
// {"op":"listChanged"} for notifications/tools/list_changed, and
// {"op":"clientError","message":M} for what the SDK reports through onerror
// (for example a response to a request it no longer waits for).
//
//   node session.mjs URL TOKEN
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
if (!url) {
  console.error("usage: node session.mjs URL TOKEN");
  process.exit(2);
}
const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "toolhooks-npm-test-session", version: "1.0.0" });
client.onerror = (err) => emit({ op: "clientError", message: String(err?.message ?? err) });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => emit({ op: "listChanged" }));
await client.connect(transport);
emit({ op: "ready", sessionId: transport.sessionId ?? "" });

const inFlight = new Map();
const run = async (cmd) => {
  switch (cmd.op) {
    case "list": {
      const tools = (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description ?? "" }));
      emit({ op: "list", tools });
      return;
    }
    case "call": {
      const abort = new AbortController();
      inFlight.set(cmd.id, abort);
      const options = { signal: abort.signal, timeout: 60000 };
      if (cmd.progress) {
        options.onprogress = (p) => emit({ op: "progress", id: cmd.id, progress: p.progress, total: p.total ?? null });
      }
      try {
        const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, options);
        emit({ op: "result", id: cmd.id, result });
      } catch (err) {
        emit({ op: "error", id: cmd.id, message: String(err?.message ?? err) });
      } finally {
        inFlight.delete(cmd.id);
      }
      return;
    }
    case "cancel":
      inFlight.get(cmd.id)?.abort("cancelled by the test");
      return;
    case "ping":
      await client.ping();
      emit({ op: "pong" });
      return;
    case "close":
      await client.close();
      process.exit(0);
    default:
      emit({ op: "clientError", message: `unknown command ${cmd.op}` });
  }
};

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "") continue;
  // Commands run concurrently: a cancel must reach a call still in flight.
  run(JSON.parse(line)).catch((err) => emit({ op: "clientError", message: String(err?.message ?? err) }));
}
await client.close();
