# Shared by clients/typescript/test and tools/bench_proxy. Source it after
# tools/lib/common.sh. ts_work makes a fresh work folder under .convstate/
# (TS_WORK) for one run; ts_build installs the npm packages (npm ci, only
# when node_modules is missing or older than package-lock.json), generates
# the code (src/gen is replaced only when it changed) and compiles into
# TS_WORK/dist, so runs side by side never wipe each other's build (nor the
# shared dist/ that tools/proxy uses); ts_start starts a throw-away
# PostgreSQL under TS_WORK/pg and the server (CONVSTATE_SERVER, default the
# Bazel build's) with small model profiles, setting TS_SERVER_ADDRESS and
# TS_DATABASE_URL; ts_stop undoes it and removes TS_WORK.

TS_DIR="$CONVSTATE_ROOT/clients/typescript"
TS_SERVER_PID=""
TS_WORK=""

ts_work() {
  mkdir -p "$CONVSTATE_ROOT/.convstate"
  TS_WORK=$(mktemp -d "$CONVSTATE_ROOT/.convstate/$1.XXXXXX")
  chmod 755 "$TS_WORK" # PostgreSQL's own user works under it.
}

ts_build() {
  command -v node >/dev/null && command -v npm >/dev/null || ensure_packages nodejs npm
  ensure_packages protobuf-compiler libprotobuf-dev
  log "code generation and compilation (clients/typescript) into $TS_WORK/dist"
  (cd "$TS_DIR" &&
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      npm ci --no-audit --no-fund --loglevel=error >&2
    fi &&
    ./generate.sh && node_modules/.bin/tsc -p tsconfig.json --outDir "$TS_WORK/dist") ||
    die "building the TypeScript client failed"
  # The compiled files find the npm packages from there.
  ln -s "$TS_DIR/node_modules" "$TS_WORK/node_modules"
  # tools/proxy runs this build instead of building dist/.
  export CONVSTATE_PROXY_DIST="$TS_WORK/dist"
}

ts_start() {
  local work="$TS_WORK" server="${CONVSTATE_SERVER:-$CONVSTATE_ROOT/bazel-bin/services/server/convstate_server}"
  [ -x "$server" ] || die "no server binary at $server (bazel build //services/server:convstate_server, or set CONVSTATE_SERVER)"
  ensure_packages postgresql-15
  ensure_vocab
  pg_start "$work/pg" fast
  pg_create_db convstate_ts
  TS_DATABASE_URL="$PG_URL/convstate_ts"
  # Small windows ("tiny-*" models: 4,096 tokens) so that a few turns compact.
  cat >"$work/profiles.textproto" <<'PROFILES'
default_profile: "default"
profiles { name: "default" tokenizer { encoding: "approximate" } }
profiles {
  name: "tiny"
  patterns: "tiny-*"
  context_window: 4096
  output_reserve: 512
  token_floor: 0
  tokenizer { encoding: "o200k_base" }
  recent { turns: 3 max_tokens: 1200 }
  tool_pruning { trigger_tokens: 800 keep_recent: 2 min_savings_tokens: 100 keep_recent_fraction: 1.0 }
  summarizer { max_chunk_tokens: 250 chunk_budget_fraction: 0.15 }
}
PROFILES
  local attempt port
  for attempt in 1 2 3; do
    port=$(free_port)
    "$server" --host=127.0.0.1 --port="$port" --database_url="$TS_DATABASE_URL" \
      --vocab_dir="$CONVSTATE_VOCAB_DIR" --auth=none --otel_disabled \
      --model_profiles="$work/profiles.textproto" >"$work/server.out" 2>"$work/server.log" &
    TS_SERVER_PID=$!
    for _ in $(seq 1 100); do
      grep -q "convstate listening on" "$work/server.out" 2>/dev/null && break
      kill -0 "$TS_SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    grep -q "convstate listening on" "$work/server.out" && break
    kill "$TS_SERVER_PID" 2>/dev/null || true
    wait "$TS_SERVER_PID" 2>/dev/null || true
    TS_SERVER_PID=""
  done
  [ -n "$TS_SERVER_PID" ] || { tail -20 "$work/server.log" >&2; die "the server did not start"; }
  TS_SERVER_ADDRESS="127.0.0.1:$port"
  log "convstate server on $TS_SERVER_ADDRESS"
}

ts_stop() {
  local work="$TS_WORK"
  [ -n "$work" ] || return 0
  if [ -n "$TS_SERVER_PID" ]; then
    kill "$TS_SERVER_PID" 2>/dev/null || true
    wait "$TS_SERVER_PID" 2>/dev/null || true
    TS_SERVER_PID=""
  fi
  pg_stop "$work/pg"
  rm -rf "$work"
}
