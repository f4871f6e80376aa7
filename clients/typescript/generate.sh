#!/usr/bin/env bash
# Generates the TypeScript messages and the grpc-js client of
# convstate.proto into src/gen (not committed), with Debian's protoc and the
# ts-proto plugin from node_modules (npm ci first).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v protoc >/dev/null || { echo "protoc is missing (Debian: protobuf-compiler)" >&2; exit 1; }
wkt="${PROTOC_INCLUDE:-/usr/include}"
[ -f "$wkt/google/protobuf/descriptor.proto" ] ||
  { echo "google/protobuf/descriptor.proto not under $wkt (Debian: libprotobuf-dev)" >&2; exit 1; }
plugin="$here/node_modules/.bin/protoc-gen-ts_proto"
[ -x "$plugin" ] || { echo "$plugin missing: run npm ci in $here" >&2; exit 1; }
# Generated aside, and put in place only when it differs: a build running
# meanwhile never finds src/gen missing.
tmp=$(mktemp -d "$here/.gen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
protoc --plugin=protoc-gen-ts_proto="$plugin" \
  --ts_proto_out="$tmp" \
  --ts_proto_opt=outputServices=grpc-js,env=node,esModuleInterop=true,forceLong=number,useOptionals=none,oneof=unions-value \
  -I "$root/protos" -I "$wkt" \
  "$root/protos/convstate/v1/convstate.proto"
if ! diff -rq "$tmp" "$here/src/gen" >/dev/null 2>&1; then
  old="$here/.gen-old.$$"
  if [ -d "$here/src/gen" ]; then mv "$here/src/gen" "$old"; fi
  mv "$tmp" "$here/src/gen"
  rm -rf "$old"
fi
