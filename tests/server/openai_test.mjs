// Drives a running `pagedinfer serve` (PINFER_BASE_URL, PINFER_API_KEY) with the official
// openai client: completion, chat, streamed chat, n=2, errors. Exits non-zero on a failure.
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.PINFER_BASE_URL;
const apiKey = process.env.PINFER_API_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const model = "stories260K";
let failures = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

function checkUsage(u, maxCompletion) {
  assert.ok(u.prompt_tokens > 0);
  assert.ok(u.completion_tokens > 0 && u.completion_tokens <= maxCompletion);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
}

const root = baseURL.replace(/\/v1$/, "");
for (let i = 0; i < 100; i++) {  // wait for /health (the script already saw the port)
  try {
    if ((await fetch(`${root}/health`)).ok) break;
  } catch {}
  await new Promise((r) => setTimeout(r, 100));
}

await check("models", async () => {
  const list = await client.models.list();
  assert.ok(list.data.length === 1 && typeof list.data[0].id === "string");
});

await check("completion", async () => {
  const r = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 16, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 1);
  assert.ok(r.choices[0].text.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  checkUsage(r.usage, 16);
});

const messages = [{ role: "system", content: "You tell stories." },
                  { role: "user", content: "Tell me about a cat." }];
let chatText = "";
await check("chat completion", async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  chatText = r.choices[0].message.content;
  assert.ok(chatText.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  checkUsage(r.usage, 24);
});

await check("streamed chat completion equals the whole one", async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0, role = null;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 2, `only ${chunks} chunks`);
  assert.equal(role, "assistant");
  assert.equal(text, chatText);
  assert.ok(["stop", "length"].includes(finish));
  checkUsage(usage, 24);
});

await check("n=2 completions", async () => {
  const r = await client.completions.create({
    model, prompt: "The dog", max_tokens: 12, n: 2, temperature: 1, seed: 7 });
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of r.choices) assert.ok(typeof c.text === "string");
  assert.ok(r.usage.completion_tokens <= 24 && r.usage.completion_tokens >= 2);
});

await check("max_tokens too large is a 400", async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: "Hi", max_tokens: 100000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 &&
           /max_model_len/.test(e.error.message) && e.error.param === "max_tokens");
});

await check("unknown parameter is a 400", async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: "Hi", max_tokens: 4, bogus: 1 }),
    (e) => e.status === 400 && e.error.param === "bogus");
});

await check("wrong API key is a 401", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.models.list(),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
