#!/usr/bin/env bash
# The Zig suite (deno task test:zig): every test in Debug and ReleaseSafe for
# this machine's architecture, and the other architecture's tests (the aarch64
# library's root and its scalar, neon and neon_dotprod variants) under
# qemu-user when scripts/install-qemu.sh can provide it. Where it cannot, the
# build prints that those tests were skipped and why.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZIG="$(bash "$ROOT/scripts/bootstrap.sh" | tail -n1)"
cd "$ROOT/kernels-zig"
if [ "$(uname -m)" = "x86_64" ] && qemu_dir="$(bash "$ROOT/scripts/install-qemu.sh")"; then
  PATH="$qemu_dir:$PATH" exec "$ZIG" build test -fqemu --summary all "$@"
fi
echo "test-zig: running without qemu-user: the other architecture's tests are skipped" >&2
exec "$ZIG" build test --summary all "$@"
