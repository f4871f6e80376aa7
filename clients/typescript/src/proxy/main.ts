// The proxy's command line: tools/proxy --convstate=HOST:PORT --upstream=URL [--port=N].

import { startProxy } from "./proxy";

const USAGE = `usage: tools/proxy --convstate=HOST:PORT --upstream=URL [flags]

  --convstate=HOST:PORT      convstate's address (default CONVSTATE_ADDRESS, else localhost:50051)
  --upstream=URL             the OpenAI-compatible API root, e.g. https://api.openai.com/v1
                             (default CONVSTATE_PROXY_UPSTREAM); /v1/X is sent to URL/X
  --port=N                   port to listen on; 0 picks a free one (default 8080)
  --host=ADDR                address to listen on (default 127.0.0.1)
  --convstate_token=T        bearer token for convstate (default CONVSTATE_TOKEN)
  --convstate_token_file=F   file holding it
  --convstate_cacert=F       CA of convstate's TLS certificate: TLS on (default CONVSTATE_CACERT)
  --convstate_cert=F         client certificate for mutual TLS (default CONVSTATE_CERT)
  --convstate_key=F          its key (default CONVSTATE_KEY)
  --tenant=ID                convstate tenant (default CONVSTATE_TENANT)
  --convstate_deadline_ms=N  deadline of each convstate call (default 30000)
  --upstream_timeout_ms=N    how long an upstream call may take (default 600000)
  --max_body_bytes=N         largest request body (default 33554432)
  --max_upstream_body_bytes=N  largest upstream answer read whole, and streamed answer
                             stored (default 67108864; beyond: 502, or not stored)
  --max_remembered_bytes=N   what the proxy remembers of stored histories (default 67108864)
  --merge_system             send the view's leading system entries as one system message
  --convstate_allow_insecure_token  send the token without TLS to a non-loopback address
`;

function parse(argv: string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    const m = /^--([a-z_]+)(?:=(.*))?$/s.exec(arg);
    if (!m) fail(`unexpected argument ${JSON.stringify(arg)}`);
    flags.set(m![1], m![2] ?? "true"); // A bare --flag is --flag=true.
  }
  const known = new Set([
    "convstate", "upstream", "port", "host", "convstate_token", "convstate_token_file", "convstate_cacert",
    "convstate_cert", "convstate_key", "tenant", "convstate_deadline_ms", "upstream_timeout_ms", "max_body_bytes",
    "max_upstream_body_bytes", "max_remembered_bytes", "merge_system", "convstate_allow_insecure_token",
  ]);
  for (const k of flags.keys()) if (!known.has(k)) fail(`unknown flag --${k}`);
  return flags;
}

function fail(message: string): never {
  process.stderr.write(`proxy: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function int(flags: Map<string, string>, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = flags.get(name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) fail(`--${name}: expected a whole number in ${min}..${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

function bool(flags: Map<string, string>, name: string): boolean {
  const v = flags.get(name);
  if (v === undefined || v === "false") return false;
  if (v === "true") return true;
  fail(`--${name}: expected true or false, got ${JSON.stringify(v)}`);
}

async function main(): Promise<void> {
  const flags = parse(process.argv.slice(2));
  const env = process.env;
  const upstream = flags.get("upstream") ?? env.CONVSTATE_PROXY_UPSTREAM;
  if (!upstream) fail("--upstream is required");
  let token = flags.get("convstate_token");
  const tokenFile = flags.get("convstate_token_file");
  if (tokenFile) token = require("node:fs").readFileSync(tokenFile, "utf8").trim();
  const proxy = await startProxy({
    convstate: {
      address: flags.get("convstate"),
      token,
      caCert: flags.get("convstate_cacert"),
      certChain: flags.get("convstate_cert"),
      privateKey: flags.get("convstate_key"),
      tenantId: flags.get("tenant"),
      deadlineMs: int(flags, "convstate_deadline_ms", 30000, 1),
      allowInsecureToken: bool(flags, "convstate_allow_insecure_token"),
    },
    upstream: upstream!,
    host: flags.get("host") ?? "127.0.0.1",
    port: int(flags, "port", 8080, 0, 65535),
    upstreamTimeoutMs: int(flags, "upstream_timeout_ms", 600000, 1),
    maxBodyBytes: int(flags, "max_body_bytes", 32 << 20, 1),
    maxUpstreamBodyBytes: int(flags, "max_upstream_body_bytes", 64 << 20, 1),
    maxRememberedBytes: int(flags, "max_remembered_bytes", 64 << 20, 0),
    mergeSystem: bool(flags, "merge_system"),
  });
  const stop = () => {
    proxy.close().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  const host = proxy.host.includes(":") ? `[${proxy.host}]` : proxy.host;
  process.stdout.write(`proxy listening on ${host}:${proxy.port}\n`);
}

main().catch((err) => {
  process.stderr.write(`proxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
