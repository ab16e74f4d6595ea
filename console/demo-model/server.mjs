// @ts-check
// The console's demo model, for `cargo xtask console` without a real model and for its browser
// tests: it speaks OpenAI's Chat Completions HTTP API on loopback, streamed as Server-Sent Events
// one word per chunk after a delay, like a model generating tokens, or a reply's tool calls (one or
// several) one after another. `script.mjs` decides what it answers.
import { createServer } from "node:http";

import { decide } from "./script.mjs";

const PORT = Number(process.env.MODEL_PORT ?? 18766);
/** The time per streamed word: slow enough that a browser sees text before the turn ends. */
const WORD_DELAY_MS = Number(process.env.MODEL_WORD_DELAY_MS ?? 120);

/** @param {string} id @param {object} delta @param {string | null} finish */
function chunk(id, delta, finish = null) {
  const body = { id, object: "chat.completion.chunk", model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] };
  return `data: ${JSON.stringify(body)}\n\n`;
}

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
let calls = 0;

const server = createServer(async (request, response) => {
  if (request.method === "GET" && request.url === "/health") {
    response.writeHead(200, { "content-type": "text/plain" }).end("ok");
    return;
  }
  if (request.method !== "POST" || !request.url?.endsWith("/chat/completions")) {
    response.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"no such route"}}');
    return;
  }
  let raw = "";
  for await (const piece of request) raw += piece;
  /** @type {{ messages?: Message[], stream?: boolean }} */
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    response.writeHead(400, { "content-type": "application/json" }).end('{"error":{"message":"not JSON"}}');
    return;
  }
  calls += 1;
  const id = `chatcmpl-${calls}`;
  const reply = decide(body.messages ?? []);
  // A reply of several calls (tasks the model delegates at once) gives each an id of its own.
  const toolCalls = ("text" in reply ? [] : "calls" in reply ? reply.calls : [reply]).map((call, index, all) => ({
    id: all.length === 1 ? `call_${calls}` : `call_${calls}_${index}`,
    type: "function",
    function: { name: call.tool, arguments: JSON.stringify(call.args) },
  }));
  const usage = { prompt_tokens: 1000, completion_tokens: 20, total_tokens: 1020 };
  if (!body.stream) {
    const message =
      "text" in reply
        ? { role: "assistant", content: reply.text }
        : { role: "assistant", content: null, tool_calls: toolCalls };
    const finish = "text" in reply ? "stop" : "tool_calls";
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ id, object: "chat.completion", model: "scripted", choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  response.write(chunk(id, { role: "assistant", content: "" }));
  if ("text" in reply) {
    for (const word of reply.text.split(/(?<= )/)) {
      await sleep(WORD_DELAY_MS);
      response.write(chunk(id, { content: word }));
    }
    response.write(chunk(id, {}, "stop"));
  } else {
    // Each call opens with its id and name, then its arguments follow, as a model streams them.
    toolCalls.forEach((call, index) => {
      const opening = { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] };
      response.write(chunk(id, opening));
      response.write(chunk(id, { tool_calls: [{ index, function: { arguments: call.function.arguments } }] }));
    });
    response.write(chunk(id, {}, "tool_calls"));
  }
  response.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", choices: [], usage })}\n\n`);
  response.end("data: [DONE]\n\n");
});

server.listen(PORT, "127.0.0.1", () => console.log(`scripted model on http://127.0.0.1:${PORT}/v1`));
