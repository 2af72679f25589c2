// The official TypeScript SDK client with ajv in strict mode against a running ice-mcp server (stdio or Streamable
// HTTP): every tool's input and output schema compiled by strict ajv (draft-07, as the SDK's own, and 2020-12),
// the client itself validating results with strict ajv, and a few calls whose results it checks. Prints one JSON
// line: {tools, problems, results}.
// usage: node strict_schemas.mjs NODE_MODULES http URL
//        node strict_schemas.mjs NODE_MODULES stdio COMMAND [ARGS...]   (the environment is passed on)
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [modules, mode, target, ...rest] = process.argv.slice(2);
const require = createRequire(path.join(modules, "index.js"));
const Ajv = require("ajv").default;
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;
const sdk = (file) => import(pathToFileURL(path.join(modules, "@modelcontextprotocol", "sdk", "dist", "esm", file)).href);
const { Client } = await sdk("client/index.js");
const { AjvJsonSchemaValidator } = await sdk("validation/ajv-provider.js");

function strictAjv(Kind) {
  const ajv = new Kind({ strict: true, allErrors: true });
  addFormats(ajv);
  return ajv;
}

const client = new Client({ name: "ts-strict-check", version: "1.0.0" },
                          { jsonSchemaValidator: new AjvJsonSchemaValidator(strictAjv(Ajv)) });
let transport;
if (mode === "http") {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(target));
} else {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  transport = new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "ignore" });
}
await client.connect(transport);

const problems = [];
let tools = [];
try {
  tools = (await client.listTools()).tools;  // the client compiles every outputSchema here, with strict ajv
} catch (error) {
  problems.push(`listTools: ${error.message}`);
}
for (const [dialect, Kind] of [["draft-07", Ajv], ["2020-12", Ajv2020]]) {
  for (const tool of tools) {
    for (const key of ["inputSchema", "outputSchema"]) {
      if (!tool[key]) continue;
      try {
        strictAjv(Kind).compile(tool[key]);
      } catch (error) {
        problems.push(`${dialect} ${tool.name} ${key}: ${error.message}`);
      }
    }
  }
}

// Each result is checked by the client against the tool's outputSchema (a mismatch throws).
const results = {};
async function call(label, name, args) {
  try {
    const result = await client.callTool({ name, arguments: args });
    results[label] = { isError: result.isError === true, structured: result.structuredContent ?? null };
  } catch (error) {
    results[label] = { thrown: error.message };
  }
}
await call("workflow", "workflow_steps", { word: "hi" });
await call("tool", "tool_measure", { text: "two words" });
const measured = tools.find((tool) => tool.name === "tool_measure");
results.tool.typed = Object.keys(measured?.outputSchema?.properties?.outputs?.properties?.result?.properties ?? {}).sort();
await call("start", "workflow_start", { name: "steps", inputs: { word: "yo" } });
await call("search", "workflow_search", { query: "three steps" });
await call("list", "run_list", { limit: 2 });
const runId = results.workflow?.structured?.run_id;
if (runId) {
  await call("status", "run_status", { run_id: runId });
  await call("result", "run_result", { run_id: runId });
}
await call("validate", "blueprint_validate", { blueprint: { name: "x", nodes: [] } });
console.log(JSON.stringify({ tools: tools.map((tool) => tool.name), problems, results }));
await client.close();
