// What the tests against a real server share: its address and database
// (set by clients/typescript/test), unique ids, a proxy process started
// with tools/proxy, and a look at the provider usage stored.

import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as path from "node:path";

export function serverAddress(): string {
  const a = process.env.CONVSTATE_TEST_ADDRESS;
  if (!a) throw new Error("CONVSTATE_TEST_ADDRESS is not set: run clients/typescript/test");
  return a;
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

export const ROOT = process.env.CONVSTATE_ROOT ?? path.resolve(__dirname, "../../../..");

export interface ProxyProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts tools/proxy on a free port and waits for its "proxy listening on" line. */
export function startProxyProcess(upstream: string, extra: string[] = []): Promise<ProxyProcess> {
  const child = spawn(path.join(ROOT, "tools/proxy"), [`--convstate=${serverAddress()}`, `--upstream=${upstream}`, "--port=0", ...extra], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`the proxy did not start: ${out}`)), 60000);
    child.on("exit", (code) => reject(new Error(`the proxy exited with ${code}: ${out}`)));
    child.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const m = /^proxy listening on (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: `http://${m[1]}`,
          child,
          stop: () =>
            new Promise<void>((done) => {
              if (child.exitCode !== null) return done();
              child.removeAllListeners("exit");
              child.once("exit", () => done());
              child.kill("SIGTERM");
            }),
        });
      }
    });
  });
}

/** The provider usage rows stored for a conversation, by sequence. */
export function storedUsage(conversationId: string): Array<{ sequence: number; input: number; output: number; cached: number; reasoning: number }> {
  const url = process.env.CONVSTATE_TEST_DATABASE_URL;
  if (!url) throw new Error("CONVSTATE_TEST_DATABASE_URL is not set: run clients/typescript/test");
  const out = execFileSync("psql", [url, "-qAtF", ",", "-v", `id=${conversationId}`], {
    input: "SELECT u.sequence, u.input_tokens, u.output_tokens, u.cached_input_tokens, u.reasoning_tokens FROM provider_usage u JOIN conversations c USING (conv_key) WHERE c.conversation_id = :'id' ORDER BY u.sequence;\n",
    encoding: "utf8",
  });
  return out.trim().split("\n").filter(Boolean).map((line) => {
    const [sequence, input, output, cached, reasoning] = line.split(",").map(Number);
    return { sequence, input, output, cached, reasoning };
  });
}
