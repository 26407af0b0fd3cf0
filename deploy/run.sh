#!/usr/bin/env bash
# Starts N `cflow serve` replicas and nginx in front of them on loopback, in
# the foreground; Ctrl-C or SIGTERM stops them cleanly (nginx first, then the
# replicas drain: running generations finish, up to their --drain-timeout).
#
#   deploy/run.sh [--replicas N] [--port P] [--first-port Q] [-- serve options...]
#
# The front listens on 127.0.0.1:P (default 8080); replica i on 127.0.0.1:Q+i
# (default 8081..). Everything after `--` goes to every `cflow serve` (e.g.
# `--model qwen2.5-coder-0.5b --parallel 4`). Clients send `X-Session-Id:
# <conversation id>` to keep a conversation on one replica (deploy/nginx.conf.template).
# Prints one line, "front: listening on http://127.0.0.1:P (N replicas)", once
# every replica is ready.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
replicas=2
port=8080
first=8081
serve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --first-port) first="$2"; shift 2 ;;
    --) shift; serve_args=("$@"); break ;;
    *) echo "front: unknown option $1 (see the comment at the top of deploy/run.sh)" >&2; exit 2 ;;
  esac
done
case "$replicas" in ''|*[!0-9]*) echo "front: --replicas must be a number" >&2; exit 2 ;; esac
[ "$replicas" -ge 1 ] && [ "$replicas" -le 64 ] || { echo "front: --replicas must be 1 to 64" >&2; exit 2; }
nginx="$(bash "$ROOT/scripts/install-nginx.sh")"
run="$(mktemp -d "${TMPDIR:-/tmp}/cflow-front.XXXXXX")"
mkdir -p "$run"/{body,proxy,fastcgi,uwsgi,scgi}
pids=()
nginx_pid=""
stop() {
  trap - INT TERM EXIT
  touch "$run/stopping"
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  [ -n "$nginx_pid" ] && wait "$nginx_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$run"
}
trap stop INT TERM EXIT

# Replica i, supervised: restarted when it exits without being told to (a crash, a
# SIGKILL); its current process id is in $run/replica<i>.pid. SIGTERM drains it.
start_replica() {
  local i="$1" p="$2"
  (
    child=""
    trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; [ -n "$child" ] && wait "$child"; exit 0' TERM
    while :; do
      "$ROOT/cflow" serve --host 127.0.0.1 --port "$p" "${serve_args[@]}" >>"$run/replica$i.out" 2>&1 &
      child="$!"
      echo "$child" >"$run/replica$i.pid"
      code=0
      wait "$child" || code=$?
      [ -e "$run/stopping" ] && exit 0
      echo "front: replica $i (port $p) exited with $code; restarting" >>"$run/replica$i.out"
      sleep 0.5
    done
  ) &
  pids+=("$!")
}
upstreams=""
for ((i = 0; i < replicas; i++)); do
  p=$((first + i))
  start_replica "$i" "$p"
  upstreams+="    server 127.0.0.1:$p max_fails=1 fail_timeout=3s;"$'\n'
done
user=""
[ "$(id -u)" = "0" ] && user="user root;"
sed -e "s|@RUN@|$run|g" -e "s|@LISTEN@|127.0.0.1:$port|" -e "s|@USER@|$user|" \
  "$ROOT/deploy/nginx.conf.template" | awk -v u="$upstreams" '{ if ($0 == "@UPSTREAMS@") printf "%s", u; else print }' >"$run/nginx.conf"
# Every replica ready (its /health 200) before the front opens; a replica that exits says why.
for ((i = 0; i < replicas; i++)); do
  p=$((first + i))
  for ((t = 0; ; t++)); do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "front: replica $i (port $p) exited:" >&2
      tail -n 5 "$run/replica$i.out" >&2
      exit 1
    fi
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p/health" || true)"
    [ "$code" = "200" ] && break
    [ "$t" -lt 6000 ] || { echo "front: replica $i not ready after 600 s" >&2; exit 1; }
    sleep 0.1
  done
done
"$nginx" -p "$run" -c "$run/nginx.conf" -e stderr -g 'daemon off;' &
nginx_pid="$!"
for ((t = 0; ; t++)); do
  code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true)"
  [ "$code" = "200" ] && break
  kill -0 "$nginx_pid" 2>/dev/null || { echo "front: nginx exited" >&2; exit 1; }
  [ "$t" -lt 100 ] || { echo "front: nginx did not answer on port $port" >&2; exit 1; }
  sleep 0.1
done
echo "front: listening on http://127.0.0.1:$port ($replicas replicas on ports $first-$((first + replicas - 1)); process ids in $run)"
# Replica logs to stderr as they come.
tail -q -n +1 -f "$run"/replica*.out >&2 &
tailer="$!"
wait "$nginx_pid" || true
kill "$tailer" 2>/dev/null || true
