// An MCP client written with the official TypeScript SDK, for the gateway's
// third-party tests (internal/mcpgate): it connects to a streamable-HTTP MCP
// endpoint with a bearer token, lists the tools, makes the given calls in one
// session and prints one JSON object with what it saw.
//
//   node client.mjs URL TOKEN '[{"name":"fs_read_text_file","arguments":{"path":"/w/README.md"}}]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, callsJSON] = process.argv.slice(2);
if (!url || callsJSON === undefined) {
  console.error("usage: node client.mjs URL TOKEN CALLS_JSON");
  process.exit(2);
}
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "toolhooks-npm-test-client", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description ?? "", meta: t._meta ?? null }));
const results = [];
for (const c of JSON.parse(callsJSON)) {
  const r = await client.callTool({ name: c.name, arguments: c.arguments ?? {} });
  results.push({
    name: c.name,
    isError: r.isError === true,
    text: (r.content ?? []).filter((x) => x.type === "text").map((x) => x.text).join("\n"),
    structuredContent: r.structuredContent ?? null,
    meta: r._meta ?? null,
  });
}
console.log(JSON.stringify({ sessionId: transport.sessionId ?? "", tools, results }));
await client.close();
