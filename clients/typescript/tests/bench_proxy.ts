// The proxy's overhead per call (tools/bench_proxy runs it): N small
// non-streamed chat completions sent straight to the upstream fake and the
// same ones through tools/proxy with a conversation header (the client
// resending its whole history, conversations of TURNS turns), interleaved
// one for one, and as many through the proxy without the header
// (pass-through). Prints p50 and p90 of each and the differences.
//
// Environment: CONVSTATE_TEST_ADDRESS (the server), BENCH_CALLS (default
// 300), BENCH_TURNS (default 10), BENCH_WARMUP (default 20).

import { spawn } from "node:child_process";
import * as http from "node:http";
import * as path from "node:path";

import { startProxyProcess, uniqueId } from "./helpers";
import { replyTo } from "./upstream_fake";

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function post(url: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", authorization: "Bearer sk-bench", "content-length": Buffer.byteLength(body), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        if (res.statusCode !== 200) reject(new Error(`${url}: HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`));
        else resolve(Number(process.hrtime.bigint() - started) / 1e6);
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

async function startFake(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, [path.join(__dirname, "upstream_fake.js"), "--port=0"], { stdio: ["ignore", "pipe", "inherit"] });
  const address = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const m = /upstream listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`upstream fake exited with ${code}`)));
  });
  return { url: `http://${address}/v1`, stop: () => child.kill("SIGTERM") };
}

async function main(): Promise<void> {
  const calls = Number(process.env.BENCH_CALLS ?? 300);
  const turns = Number(process.env.BENCH_TURNS ?? 10);
  const warmup = Number(process.env.BENCH_WARMUP ?? 20);
  const fake = await startFake();
  const proxy = await startProxyProcess(fake.url);
  try {
    const direct: number[] = [];
    const kept: number[] = [];
    const passed: number[] = [];
    let conversation = "";
    let history: Array<{ role: string; content: string }> = [];
    for (let i = 0; i < warmup + calls; i++) {
      if (i % turns === 0) {
        conversation = uniqueId("bench");
        history = [{ role: "system", content: "You are a terse assistant." }];
      }
      const question = `Question ${i}: what is the status of host db-${i % 17}?`;
      history.push({ role: "user", content: question });
      const body = JSON.stringify({ model: "tiny-1", messages: history, max_tokens: 50 });
      // Interleaved, the order turned each time.
      const order = i % 2 === 0 ? ["direct", "kept", "passed"] : ["passed", "kept", "direct"];
      const ms: Record<string, number> = {};
      for (const which of order) {
        if (which === "direct") ms.direct = await post(`${fake.url}/chat/completions`, body);
        else if (which === "kept") ms.kept = await post(`${proxy.url}/v1/chat/completions`, body, { "x-convstate-conversation-id": conversation });
        else ms.passed = await post(`${proxy.url}/v1/chat/completions`, body);
      }
      // The answer the client would append (the fake's reply is deterministic).
      history.push({ role: "assistant", content: replyTo(question) });
      if (i >= warmup) {
        direct.push(ms.direct);
        kept.push(ms.kept);
        passed.push(ms.passed);
      }
    }
    const row = (name: string, xs: number[]) => `${name.padEnd(34)} p50 ${quantile(xs, 0.5).toFixed(2).padStart(7)} ms   p90 ${quantile(xs, 0.9).toFixed(2).padStart(7)} ms`;
    console.log(`proxy overhead: ${calls} non-streamed chat completions each (after ${warmup} warm-up), conversations of ${turns} turns, history resent`);
    console.log(row("upstream fake, direct", direct));
    console.log(row("through the proxy, kept in convstate", kept));
    console.log(row("through the proxy, pass-through", passed));
    const diff = (xs: number[], q: number) => (quantile(xs, q) - quantile(direct, q)).toFixed(2);
    console.log(`overhead kept in convstate: p50 +${diff(kept, 0.5)} ms, p90 +${diff(kept, 0.9)} ms`);
    console.log(`overhead pass-through:      p50 +${diff(passed, 0.5)} ms, p90 +${diff(passed, 0.9)} ms`);
  } finally {
    await proxy.stop();
    fake.stop();
    agent.destroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
