// Drives the official JavaScript SDKs against a Tollgate data plane (deploy/e2e/jssdk_test.go starts the
// stack and reads the results). Every client API — openai chat completions and responses, @anthropic-ai/sdk
// messages, @google/genai generateContent — is called plain and streaming, for a text answer and a tool
// call, on the routes of the alpha, beta and gamma providers. Cases run one after another; each prints one
// JSON line on stdout with what the SDK parsed and the X-Request-Id of every HTTP response it received.
//
// Environment: TOLLGATE_URL (the data plane's base URL), TOLLGATE_KEY (a gateway API key).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';

const base = process.env.TOLLGATE_URL;
const key = process.env.TOLLGATE_KEY;
if (!base || !key) {
  console.error('TOLLGATE_URL and TOLLGATE_KEY are required');
  process.exit(2);
}

const PROMPT = 'What is the weather in Oslo?';
const TOOL = 'get_weather';
const DESCRIPTION = 'Weather forecast for a city';
const SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string', description: 'city name' }, days: { type: 'integer' } },
  required: ['city'],
};

// Every SDK calls the global fetch: wrap it to keep the data plane's request id of each response, so the
// test can find the usage row the request produced.
let requestIds = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const resp = await realFetch(...args);
  requestIds.push(resp.headers.get('x-request-id') ?? '');
  return resp;
};

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
// @google/genai 3.x talks to /v1/ by default; the gateway serves gamma there as well as under /v1beta/.
const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });

function parseArgs(raw) {
  const v = JSON.parse(raw);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new Error(`tool arguments ${raw} are not a JSON object`);
  }
  return v;
}

async function openaiChat(c, headers) {
  const params = { model: c.route, messages: [{ role: 'user', content: PROMPT }] };
  if (c.tool) {
    params.tools = [{ type: 'function', function: { name: TOOL, description: DESCRIPTION, parameters: SCHEMA } }];
  }
  const res = { text: '', calls: [], finish: '' };
  if (!c.stream) {
    const r = await openai.chat.completions.create(params, { headers });
    if (r.choices.length !== 1) throw new Error(`${r.choices.length} choices, want 1`);
    const m = r.choices[0].message;
    res.text = m.content ?? '';
    res.finish = r.choices[0].finish_reason;
    for (const tc of m.tool_calls ?? []) {
      res.calls.push({ id: tc.id, name: tc.function.name, args: parseArgs(tc.function.arguments) });
    }
    if (r.usage) Object.assign(res, { hasUsage: true, in: r.usage.prompt_tokens, out: r.usage.completion_tokens, total: r.usage.total_tokens });
    return res;
  }
  const st = await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }, { headers });
  const calls = [];
  for await (const chunk of st) {
    if (res.hasUsage) throw new Error(`a chunk follows the usage chunk: ${JSON.stringify(chunk)}`);
    if (chunk.usage) {
      if (chunk.choices.length !== 0) throw new Error(`usage chunk with choices: ${JSON.stringify(chunk)}`);
      Object.assign(res, { hasUsage: true, in: chunk.usage.prompt_tokens, out: chunk.usage.completion_tokens, total: chunk.usage.total_tokens });
      if (chunk.usage.tollgate) res.cost = chunk.usage.tollgate.cost; // the gateway's member, kept by the SDK
    }
    for (const ch of chunk.choices) {
      res.text += ch.delta?.content ?? '';
      for (const tc of ch.delta?.tool_calls ?? []) {
        const cur = (calls[tc.index] ??= { id: '', name: '', args: '' });
        cur.id ||= tc.id ?? '';
        cur.name += tc.function?.name ?? '';
        cur.args += tc.function?.arguments ?? '';
      }
      if (ch.finish_reason) res.finish = ch.finish_reason;
    }
  }
  res.calls = calls.map((cl) => ({ id: cl.id, name: cl.name, args: parseArgs(cl.args) }));
  if (!res.finish) throw new Error('the stream ended without finish_reason');
  return res;
}

function responsesResult(r) {
  const res = { text: '', calls: [], finish: r.status };
  for (const it of r.output ?? []) {
    if (it.type === 'message') {
      for (const ct of it.content) if (ct.type === 'output_text') res.text += ct.text;
    } else if (it.type === 'function_call') {
      res.calls.push({ id: it.call_id, name: it.name, args: parseArgs(it.arguments) });
    }
  }
  if (r.usage) Object.assign(res, { hasUsage: true, in: r.usage.input_tokens, out: r.usage.output_tokens, total: r.usage.total_tokens });
  return res;
}

async function openaiResponses(c, headers) {
  const params = { model: c.route, input: PROMPT };
  if (c.tool) params.tools = [{ type: 'function', name: TOOL, description: DESCRIPTION, parameters: SCHEMA, strict: false }];
  if (!c.stream) return responsesResult(await openai.responses.create(params, { headers }));
  const st = await openai.responses.create({ ...params, stream: true }, { headers });
  let final = null;
  let text = '';
  let seq = -1;
  for await (const ev of st) {
    if (final) throw new Error(`event ${ev.type} after response.completed`);
    if (ev.sequence_number !== seq + 1) throw new Error(`event ${ev.type}: sequence_number ${ev.sequence_number} after ${seq}`);
    seq = ev.sequence_number;
    switch (ev.type) {
      case 'response.output_text.delta':
        text += ev.delta;
        break;
      case 'error':
      case 'response.failed':
      case 'response.incomplete':
        throw new Error(`terminal event ${JSON.stringify(ev)}`);
      case 'response.completed':
        final = ev.response;
        break;
    }
  }
  if (!final) throw new Error('the stream ended without response.completed');
  const res = responsesResult(final);
  if (final.usage?.tollgate) res.cost = final.usage.tollgate.cost;
  if (res.text !== text) throw new Error(`streamed text ${JSON.stringify(text)} != completed text ${JSON.stringify(res.text)}`);
  return res;
}

async function anthropicMessages(c, headers) {
  const params = { model: c.route, max_tokens: 256, messages: [{ role: 'user', content: PROMPT }] };
  if (c.tool) {
    params.tools = [{ name: TOOL, description: DESCRIPTION, input_schema: { type: 'object', properties: SCHEMA.properties, required: SCHEMA.required } }];
  }
  // The streaming helper accumulates the events into the final message, as applications use it.
  const msg = c.stream
    ? await anthropic.messages.stream(params, { headers }).finalMessage()
    : await anthropic.messages.create(params, { headers });
  const res = { text: '', calls: [], finish: msg.stop_reason };
  for (const b of msg.content) {
    if (b.type === 'text') res.text += b.text;
    if (b.type === 'tool_use') res.calls.push({ id: b.id, name: b.name, args: b.input });
  }
  const u = msg.usage;
  Object.assign(res, { hasUsage: u.output_tokens > 0, in: u.input_tokens, out: u.output_tokens, total: u.input_tokens + u.output_tokens });
  return res;
}

async function genaiGenerate(c, headers) {
  const config = { httpOptions: { headers } };
  if (c.tool) config.tools = [{ functionDeclarations: [{ name: TOOL, description: DESCRIPTION, parametersJsonSchema: SCHEMA }] }];
  const req = { model: c.route, contents: PROMPT, config };
  const res = { text: '', calls: [], finish: '' };
  const add = (r) => {
    const cand = r.candidates?.[0];
    for (const p of cand?.content?.parts ?? []) {
      if (p.text && !p.thought) res.text += p.text;
      if (p.functionCall) res.calls.push({ id: p.functionCall.id ?? '', name: p.functionCall.name, args: p.functionCall.args });
    }
    if (cand?.finishReason) res.finish = cand.finishReason;
    const u = r.usageMetadata;
    if (u?.tollgate) res.cost = u.tollgate.cost;
    if (u) {
      Object.assign(res, { hasUsage: true, in: u.promptTokenCount ?? 0, out: (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0), total: u.totalTokenCount ?? 0 });
    }
  };
  if (!c.stream) {
    add(await genai.models.generateContent(req));
    return res;
  }
  for await (const chunk of await genai.models.generateContentStream(req)) {
    if (res.finish) throw new Error('a chunk follows the one with finishReason');
    add(chunk);
  }
  if (!res.finish) throw new Error('the stream ended without finishReason');
  return res;
}

const clients = { openai_chat: openaiChat, openai_responses: openaiResponses, anthropic: anthropicMessages, genai: genaiGenerate };

for (const client of Object.keys(clients)) {
  for (const channel of ['alpha', 'beta', 'gamma']) {
    for (const stream of [false, true]) {
      for (const tool of [false, true]) {
        const c = { client, channel, stream, tool, route: `sdk-${channel}` };
        c.case = `jssdk/${client}/${channel}/${stream ? 'stream' : 'plain'}/${tool ? 'tool' : 'text'}`;
        const headers = { 'X-Sdk-Case': c.case };
        if (tool) headers['x-mock-tool-call'] = '1';
        // TOLLGATE_INCLUDE_COST: every call asks for its cost (docs/cost.md), streams carry it in their final usage event.
        if (process.env.TOLLGATE_INCLUDE_COST) headers['X-Tollgate-Include-Cost'] = 'true';
        requestIds = [];
        let out;
        try {
          out = { ...c, ...(await clients[client](c, headers)) };
        } catch (err) {
          out = { ...c, error: `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}` };
        }
        out.requestIds = requestIds;
        process.stdout.write(JSON.stringify(out) + '\n');
      }
    }
  }
}
