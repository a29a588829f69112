// Drives a running `pagedinfer serve` (PINFER_BASE_URL, PINFER_API_KEY) with the official
// openai client: completion, chat, streamed chat, n=2, errors, JSON schema outputs and forced
// tool calls (whole and streamed). Exits non-zero on a failure.
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

await check("unknown parameter is accepted and named in X-Ignored-Fields", async () => {
  const { data, response } = await client.completions.create({
    model, prompt: "Hi", max_tokens: 4, bogus: 1 }).withResponse();
  assert.equal(response.headers.get("x-ignored-fields"), "bogus");
  assert.ok(data.choices[0].text.length > 0);
});

// What LangChain's ChatOpenAI / OpenAI send: bindTools (tools, tool_choice,
// parallel_tool_calls), a text response_format, metadata, store, user, stream_options, and
// the legacy completions' list of prompts, logprobs, penalties and logit_bias.
const servedId = (await client.models.list()).data[0].id;
const tools = [{ type: "function", function: {
  name: "get_weather", description: "Weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];

await check("LangChain-style chat: tools, response_format text, metadata, store", async () => {
  const { data, response } = await client.chat.completions.create({
    model: "gpt-4o-mini", messages, max_tokens: 8, temperature: 0, tools, tool_choice: "auto",
    parallel_tool_calls: false, response_format: { type: "text" }, metadata: { run: "lc" },
    store: false, user: "u1", n: 1, presence_penalty: 0.1, frequency_penalty: 0.1,
    max_completion_tokens: 8 }).withResponse();
  assert.equal(data.object, "chat.completion");
  assert.equal(data.model, servedId, "the served model's id, not the client's name");
  assert.match(data.id, /^chatcmpl-[0-9a-f]{32}$/);
  assert.match(data.system_fingerprint, /^fp_[0-9a-f]{12}$/);
  assert.ok(data.choices[0].message.content.length > 0);
  assert.equal(response.headers.get("x-ignored-fields"), "metadata, store, user");
  assert.equal(typeof data.usage.prompt_tokens_details.cached_tokens, "number");
});

await check("chat logprobs + top_logprobs in OpenAI's content[] shape", async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((c) => c.token).join(""), r.choices[0].message.content);
  for (const c of content) {
    assert.ok(c.logprob <= 0 && Array.isArray(c.bytes) && c.top_logprobs.length === 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(c.top_logprobs[0].logprob - c.logprob) < 1e-6);
  }
});

await check("completions: a list of prompts, logprobs, penalties, logit_bias", async () => {
  const r = await client.completions.create({
    model, prompt: ["Once upon a time", "The dog"], n: 2, max_tokens: 8, temperature: 0,
    logprobs: 2, frequency_penalty: 0.3, presence_penalty: 0.2, logit_bias: { "13": -100 } });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
  for (const c of r.choices) {
    assert.equal(c.logprobs.tokens.join(""), c.text);
    assert.equal(c.logprobs.token_logprobs.length, c.logprobs.tokens.length);
    assert.ok(c.logprobs.top_logprobs.every((t) => Object.keys(t).length >= 2));
    assert.ok(c.logprobs.text_offset.every((o, i, a) => i === 0 || o > a[i - 1]));
  }
  assert.equal(r.choices[0].text, r.choices[1].text);  // greedy: n copies agree
  assert.equal(r.usage.completion_tokens, 32);
});

await check("penalties change the greedy text; logit_bias -100 bans the token", async () => {
  const base = { model, prompt: "Once upon a time", max_tokens: 40, temperature: 0 };
  const plain = await client.completions.create(base);
  const pen = await client.completions.create({ ...base, frequency_penalty: 1.5 });
  assert.notEqual(pen.choices[0].text, plain.choices[0].text);
  const rep = await client.completions.create({ ...base, repeat_penalty: 1.8 });
  assert.notEqual(rep.choices[0].text, plain.choices[0].text);
  // The first generated token: the one after the prompt's in the whole text's tokens.
  const tokenize = async (content) => (await (await fetch(`${root}/tokenize`, {
    method: "POST", body: JSON.stringify({ content, add_special: true, with_pieces: true }) }))
    .json()).tokens;
  const promptLen = (await tokenize(base.prompt)).length;
  const first = (await tokenize(base.prompt + plain.choices[0].text))[promptLen];
  const banned = await client.completions.create({
    ...base, logprobs: 0, logit_bias: { [String(first.id)]: -100 } });
  const tokens = banned.choices[0].logprobs.tokens;
  assert.ok(plain.choices[0].text.includes(first.piece));
  assert.ok(!tokens.includes(first.piece), `${first.piece} still in ${tokens}`);
});

await check("no seed: two temperature-1 answers differ; a seed repeats", async () => {
  const body = { model, prompt: "The dog", max_tokens: 48, temperature: 1 };
  const [a, b] = await Promise.all([client.completions.create(body),
                                    client.completions.create(body)]);
  assert.notEqual(a.choices[0].text, b.choices[0].text);
  const [c, d] = await Promise.all([client.completions.create({ ...body, seed: 3 }),
                                    client.completions.create({ ...body, seed: 3 })]);
  assert.equal(c.choices[0].text, d.choices[0].text);
  assert.notEqual(a.id, b.id);
});

await check("echo: the prompt's text, then its continuation", async () => {
  const body = { model, prompt: "Once upon", max_tokens: 5, temperature: 0 };
  const plain = await client.completions.create(body);
  const echo = await client.completions.create({ ...body, echo: true });
  assert.ok(plain.choices[0].text.startsWith(" "), "the continuation keeps its space");
  assert.equal(echo.choices[0].text, "Once upon" + plain.choices[0].text);
});

await check("what cannot be honoured is a 400 naming it", async () => {
  for (const [extra, param] of [[{ best_of: 3 }, "best_of"], [{ suffix: "x" }, "suffix"],
                                [{ echo: true, logprobs: 1 }, "echo"]]) {
    await assert.rejects(client.completions.create({ model, prompt: "Hi", max_tokens: 2,
                                                     ...extra }),
                         (e) => e.status === 400 && e.error.param === param);
  }
  await assert.rejects(client.chat.completions.create({ model, max_tokens: 2, messages: [
    { role: "user", content: [{ type: "image_url", image_url: { url: "http://x/a.png" } }] }] }),
    (e) => e.status === 400 && /image_url/.test(e.error.message));
  await assert.rejects(client.chat.completions.create({ model, max_tokens: 2,
    messages: [{ role: "user", content: "Hi" }],
    response_format: { type: "json_schema", json_schema: { name: "x", schema: {
      type: "object", properties: { n: { type: "integer", minimum: 0 } } } } } }),
    (e) => e.status === 400 && e.error.param === "response_format" &&
           /'minimum'/.test(e.error.message));
});

// A JSON schema validator for what these checks ask for: type, properties, required,
// additionalProperties false, enum, items, maxItems, maxLength. Returns "" or what is wrong.
function violation(v, s, path = "") {
  const types = { object: (x) => x !== null && typeof x === "object" && !Array.isArray(x),
                  array: Array.isArray, string: (x) => typeof x === "string",
                  integer: Number.isInteger, number: (x) => typeof x === "number" };
  if (s.type && !types[s.type](v)) return `${path || "/"}: ${JSON.stringify(v)} is not ${s.type}`;
  if (s.enum && !s.enum.includes(v)) return `${path}: ${JSON.stringify(v)} not in the enum`;
  if (s.maxLength !== undefined && [...v].length > s.maxLength) return `${path}: too long`;
  if (s.maxItems !== undefined && v.length > s.maxItems) return `${path}: too many items`;
  if (s.items) {
    for (const [i, x] of v.entries()) {
      const e = violation(x, s.items, `${path}/${i}`);
      if (e) return e;
    }
  }
  if (s.type === "object") {
    for (const k of s.required || []) if (!(k in v)) return `${path}: lacks ${k}`;
    for (const [k, x] of Object.entries(v)) {
      if (!(s.properties || {})[k]) {
        if (s.additionalProperties === false) return `${path}: ${k} is not allowed`;
        continue;
      }
      const e = violation(x, s.properties[k], `${path}/${k}`);
      if (e) return e;
    }
  }
  return "";
}

const person = { type: "object", additionalProperties: false,
  required: ["name", "age", "mood", "tags"],
  properties: { name: { type: "string", maxLength: 20 }, age: { type: "integer" },
                mood: { enum: ["happy", "sad", "sleepy"] },
                tags: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 } } };

await check("response_format json_schema: 5 seeded answers parse and validate", async () => {
  for (let seed = 1; seed <= 5; seed++) {
    const r = await client.chat.completions.create({
      model, seed, temperature: 1, max_tokens: 300,
      messages: [{ role: "user", content: "Describe Lily as JSON." }],
      response_format: { type: "json_schema",
                         json_schema: { name: "person", strict: true, schema: person } } });
    const e = violation(JSON.parse(r.choices[0].message.content), person);
    assert.equal(e, "", `seed ${seed}: ${r.choices[0].message.content}`);
  }
});

const weather = { type: "object", additionalProperties: false, required: ["city", "unit"],
  properties: { city: { type: "string", maxLength: 16 },
                unit: { enum: ["celsius", "fahrenheit"] } } };
const weatherTools = [{ type: "function", function: {
  name: "get_weather", description: "Weather in a city", parameters: weather } }];
const forced = { type: "function", function: { name: "get_weather" } };

await check("forced tool call: tool_calls whose arguments validate", async () => {
  for (let seed = 1; seed <= 3; seed++) {
    const r = await client.chat.completions.create({
      model, seed, temperature: 1, max_tokens: 400, tools: weatherTools, tool_choice: forced,
      messages: [{ role: "user", content: "Weather in Paris?" }] });
    const c = r.choices[0];
    assert.equal(c.finish_reason, "tool_calls");
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    assert.match(call.id, /^call_/);
    assert.equal(violation(JSON.parse(call.function.arguments), weather), "", call.function.arguments);
  }
});

await check("forced tool call, streamed: the client's stream helper puts the deltas together",
            async () => {
  const stream = client.beta.chat.completions.stream({
    model, seed: 4, temperature: 1, max_tokens: 400, tools: weatherTools, tool_choice: forced,
    messages: [{ role: "user", content: "Weather in Oslo?" }] });
  let deltas = 0;
  stream.on("chunk", (chunk) => { if (chunk.choices[0]?.delta?.tool_calls) deltas++; });
  const done = await stream.finalChatCompletion();
  const c = done.choices[0];
  assert.ok(deltas >= 2, "the call arrives as deltas (a head, then the arguments)");
  assert.equal(c.finish_reason, "tool_calls");
  const call = c.message.tool_calls[0];
  assert.equal(call.function.name, "get_weather");
  assert.equal(violation(JSON.parse(call.function.arguments), weather), "", call.function.arguments);
});

await check("a conversation with a tool call and its result", async () => {
  const r = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0, tools: weatherTools, messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
        function: { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "21 degrees, sunny" }] });
  assert.equal(typeof r.choices[0].message.content, "string");
});

await check("/tokenize and /detokenize (llama-server's shapes)", async () => {
  const t = await (await fetch(`${root}/tokenize`, { method: "POST",
    body: JSON.stringify({ content: "Once upon a time", add_special: true }) })).json();
  assert.ok(Array.isArray(t.tokens) && t.tokens.length >= 4);
  const d = await (await fetch(`${root}/detokenize`, { method: "POST",
    body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.content, "Once upon a time");
});

await check("CORS is off by default", async () => {
  const r = await fetch(`${root}/v1/models`, { headers: { Origin: "http://a.test",
                                                          Authorization: `Bearer ${apiKey}` } });
  assert.equal(r.headers.get("access-control-allow-origin"), null);
});

await check("wrong API key is a 401", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.models.list(),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
