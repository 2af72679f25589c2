// The official TypeScript SDK client against a running ice-mcp server (Streamable HTTP, 2025-11-25 sessions):
// list the tools, run a workflow, and answer an approval gate through elicitation. Prints one JSON line.
// usage: node sdk_client.mjs SDK_DIR URL
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, url] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", file)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema } = await load("types.js");

const client = new Client({ name: "ts-sdk-check", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { approved: true, reason: "from TypeScript" } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const tools = await client.listTools();
const steps = await client.callTool({ name: "workflow_steps", arguments: { word: "hi" } });
const gate = await client.callTool({ name: "workflow_gate", arguments: { customer: "ACME" } });
const broken = await client.callTool({ name: "workflow_broken", arguments: {} });
console.log(JSON.stringify({
  protocol: client.transport?.protocolVersion ?? null,
  tools: tools.tools.map((t) => t.name),
  steps: steps.structuredContent,
  gate: gate.structuredContent,
  brokenIsError: broken.isError === true,
  asked,
}));
await client.close();
