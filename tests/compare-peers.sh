#!/usr/bin/env bash
# Cross-check capplan's latency figures against an established public benchmark tool,
# NVIDIA AIPerf (PyPI `aiperf`), on the real CPU engine of tests/real-engine.sh.
#
# usage: tests/compare-peers.sh [--concurrency N] [--requests N] [--sandwich]
#                               [--peer-isl N] [--max-diff PCT] [--peer-connections pooled|never]
#
#   --concurrency N  fixed concurrency of both tools (default 2)
#   --requests N     measured requests of each tool (default 60), after 4 warm-up requests
#   --sandwich       run capplan a second time after the peer (capplan, peer, capplan): the
#                    peer is then compared with the mean of the two capplan runs, and the
#                    capplan-vs-capplan column shows how much the server drifted meanwhile
#   --peer-isl N     prompt tokens of the peer's synthetic prompts (default: matched so that
#                    the server counts the same prompt tokens as for capplan's prompts)
#   --max-diff PCT   exit 1 when a TTFT/TPOT row differs by more than PCT % (default: report only)
#   --peer-connections pooled|never
#                    aiperf's --connection-reuse-strategy (default never, see run_peer)
#
# What it does:
#   1. installs aiperf==0.13.0 (+ gguf, to read the tokenizer out of the model file) into the
#      venv tests/.real-engine/peers-venv, and writes the model's own tokenizer (SmolLM2's
#      byte-level BPE, taken from the .gguf: no model hub needed) to
#      tests/.real-engine/smollm2-tokenizer, checked against the server's /tokenize;
#   2. starts the real engine (4 slots) and stops it on exit;
#   3. runs `capplan probe` (streaming chat, --input-tokens 64, --output-tokens 32), then
#      `aiperf profile` with the same request body (max_tokens, min_tokens, ignore_eos,
#      cache_prompt=false, temperature 0, stream_options.include_usage), the same concurrency,
#      warm-up and request count, and server-reported token counts (--use-server-token-count);
#      capplan runs first because its synthetic prompts carry a unique tag, so the server
#      counts more prompt tokens than --input-tokens: the peer's --isl is set to match;
#   4. prints TTFT and TPOT (mean, p50, p90; ms) side by side and the exact commands.
#      capplan's tpot is (e2e - ttft) / (output tokens - 1): AIPerf's inter_token_latency.
#      Below them, llama.cpp's own view of each tool's measured requests (from its log): how
#      many prompts shared a prefill batch, its TTFT and decode time per token, and each tool's
#      figures relative to the server's. On this 1-thread engine two concurrent requests either
#      arrive together and share one prefill batch (TTFT ~2 prefills, clean decode) or arrive a
#      millisecond apart and are prefilled one after the other (one short TTFT, and the other
#      request's decode stalls behind that prefill); each pattern then repeats by itself. The
#      tools' TTFT/TPOT only match when the server ran both in the same pattern at the same
#      speed: these rows show whether it did. Two things push aiperf's run off capplan's: it
#      hands requests to its worker through inter-process credits, so two concurrent sends leave
#      1-15 ms apart (capplan's: ~0.3 ms), which splits prefill batches more often; and with
#      --concurrency alone its timing_manager polls for a free slot without sleeping (~0.75 of a
#      core), which on a 2-core machine slows the 1-thread server a few %. At --concurrency 1
#      neither matters.
#
# Artifacts (both tools' reports) stay in a temporary folder whose path is printed.
# Environment: PYTHON (interpreter for the peer venv, Python 3.11..3.13, default python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STATE="tests/.real-engine"
PEERS_VENV="$STATE/peers-venv"
PEER_PY="$PEERS_VENV/bin/python"
AIPERF="$PEERS_VENV/bin/aiperf"
AIPERF_VERSION="0.13.0"
GGUF_VERSION="0.19.0"
MODEL_FILE="$STATE/SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_DIR="$STATE/smollm2-tokenizer"
CAPPLAN="target/debug/capplan"
SERVED_MODEL="smollm2-135m"
INPUT_TOKENS=64
OUTPUT_TOKENS=32
WARMUP=4

die() { echo "compare-peers: error: $*" >&2; exit 1; }
note() { echo "compare-peers: $*" >&2; }
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

CONCURRENCY=2
REQUESTS=60
SANDWICH=0
PEER_ISL=""
MAX_DIFF=""
PEER_CONNECTIONS="never"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --concurrency) CONCURRENCY="${2:?--concurrency needs a value}"; shift 2 ;;
        --requests) REQUESTS="${2:?--requests needs a value}"; shift 2 ;;
        --sandwich) SANDWICH=1; shift ;;
        --peer-isl) PEER_ISL="${2:?--peer-isl needs a value}"; shift 2 ;;
        --max-diff) MAX_DIFF="${2:?--max-diff needs a value}"; shift 2 ;;
        --peer-connections) PEER_CONNECTIONS="${2:?--peer-connections needs a value}"; shift 2 ;;
        -h | --help) usage ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
for v in "$CONCURRENCY" "$REQUESTS" ${PEER_ISL:+"$PEER_ISL"}; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive integer"
done
[[ "$PEER_CONNECTIONS" == pooled || "$PEER_CONNECTIONS" == never ]] \
    || die "--peer-connections: 'pooled' or 'never', not '$PEER_CONNECTIONS'"
[[ -z "$MAX_DIFF" || "$MAX_DIFF" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--max-diff: '$MAX_DIFF' is not a number"
command -v python3 >/dev/null 2>&1 || die "python3 is needed"

# --- capplan -------------------------------------------------------------------------------
if [[ ! -x "$CAPPLAN" ]]; then
    note "building capplan (cargo build -q)"
    cargo build -q
fi
[[ -x "$CAPPLAN" ]] || die "$CAPPLAN missing after cargo build"

# --- the peer: AIPerf in its own venv -------------------------------------------------------
peer_ok() {
    [[ -x "$PEER_PY" && -x "$AIPERF" ]] || return 1
    "$PEER_PY" - "$AIPERF_VERSION" "$GGUF_VERSION" >/dev/null 2>&1 <<'EOF'
import sys, importlib.metadata as m
sys.exit(0 if (m.version("aiperf"), m.version("gguf")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
}
if peer_ok; then
    note "aiperf==$AIPERF_VERSION present in $PEERS_VENV"
else
    py="${PYTHON:-python3}"
    "$py" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' \
        || die "aiperf $AIPERF_VERSION needs Python 3.11..3.13; set PYTHON to one"
    mkdir -p "$STATE"
    [[ -x "$PEER_PY" ]] || "$py" -m venv "$PEERS_VENV" \
        || die "'$py -m venv' failed (on Debian: apt-get install python3-venv)"
    note "installing aiperf==$AIPERF_VERSION gguf==$GGUF_VERSION into $PEERS_VENV (~1 min)"
    "$PEER_PY" -m pip install --quiet --disable-pip-version-check \
        "aiperf==$AIPERF_VERSION" "gguf==$GGUF_VERSION" || die "pip install aiperf failed"
    peer_ok || die "aiperf==$AIPERF_VERSION not importable after install"
fi
# The tokenizer is a local folder, so nothing reaches for a model hub. It is given to aiperf as
# an absolute path (its services resolve a relative one as a hub repository id), and
# HF_HUB_OFFLINE must stay unset: in offline mode aiperf 0.13.0 looks every --tokenizer up in
# the hub cache, local folders included, and fails.
unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE
export HF_HUB_DISABLE_TELEMETRY=1

# --- the engine -----------------------------------------------------------------------------
ENGINE_STARTED=0
WORK=""
cleanup() {
    local rc=$?
    if [[ "$ENGINE_STARTED" == 1 ]]; then
        bash tests/real-engine.sh stop >&2 || true
    fi
    [[ -n "$WORK" ]] && note "artifacts kept in $WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if bash tests/real-engine.sh status >/dev/null 2>&1; then
    die "the real engine is already running (tests/real-engine.sh status); stop it first so both tools see a fresh server"
fi
ENGINE_STARTED=1
URL="$(bash tests/real-engine.sh start --slots 4 | tail -n1)"
[[ "$URL" =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || die "unexpected engine URL '$URL'"
note "engine at $URL"

# --- tokenizer: SmolLM2's own, rebuilt from the .gguf -----------------------------------------
if [[ ! -f "$TOKENIZER_DIR/tokenizer.json" ]]; then
    note "writing the model's tokenizer to $TOKENIZER_DIR"
    rm -rf "$TOKENIZER_DIR.part"
    "$PEER_PY" - "$MODEL_FILE" "$TOKENIZER_DIR.part" <<'EOF' 2> >(grep -v "PyTorch was not found" >&2)
import sys
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

gguf_file, out = sys.argv[1:3]
fields = GGUFReader(gguf_file).fields
get = lambda key: fields[key].contents()
assert get("tokenizer.ggml.model") == "gpt2" and get("tokenizer.ggml.pre") == "smollm"
tokens, types = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.token_type")
merges = [tuple(m.split(" ", 1)) for m in get("tokenizer.ggml.merges")]
tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
# llama.cpp's "smollm" pre-tokenizer = HF SmolLM2: single digits, then GPT-2 byte-level.
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
])
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                        for t, kind in zip(tokens, types) if kind == 3])  # CONTROL tokens
fast = PreTrainedTokenizerFast(
    tokenizer_object=tok,
    bos_token=tokens[get("tokenizer.ggml.bos_token_id")],
    eos_token=tokens[get("tokenizer.ggml.eos_token_id")],
    unk_token=tokens[get("tokenizer.ggml.unknown_token_id")],
    pad_token=tokens[get("tokenizer.ggml.padding_token_id")],
)
fast.chat_template = get("tokenizer.chat_template")
fast.save_pretrained(out)
EOF
    # Same ids as the server's own tokenizer?
    "$PEER_PY" - "$TOKENIZER_DIR.part" "$URL" <<'EOF' 2> >(grep -v "PyTorch was not found" >&2)
import json, sys, urllib.request
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
text = ("Shall I compare thee to a summer's day? Thou art more lovely and more temperate: "
        "r20261123T140124Z-0-12 the of and  spaces\n\nnew lines, émigré 2024年!")
req = urllib.request.Request(sys.argv[2] + "/tokenize", data=json.dumps({"content": text}).encode(),
                             headers={"Content-Type": "application/json"})
server = json.load(urllib.request.urlopen(req, timeout=10))["tokens"]
mine = tok.encode(text, add_special_tokens=False)
if mine != server:
    sys.exit(f"tokenizer differs from the server's: {mine} vs {server}")
EOF
    mv "$TOKENIZER_DIR.part" "$TOKENIZER_DIR"
fi
# Tokens the chat template adds around a user message (SmolLM2's default system prompt etc.).
TEMPLATE_TOKENS="$("$PEER_PY" - "$TOKENIZER_DIR" <<'EOF' 2> >(grep -v "PyTorch was not found" >&2)
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
ids = tok.apply_chat_template([{"role": "user", "content": ""}], tokenize=True, add_generation_prompt=True)
print(len(ids["input_ids"] if hasattr(ids, "keys") else ids))
EOF
)"
[[ "$TEMPLATE_TOKENS" =~ ^[0-9]+$ ]] || die "could not count the chat template's tokens"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/compare-peers.XXXXXX")"
SERVER_LOG="$STATE/server.log"
COMMANDS=()
SEGMENTS=() # label:first-line:last-line of the server log during each tool's run

log_lines() { sleep 0.5; wc -l <"$SERVER_LOG" | tr -d ' '; }

run_capplan() { # $1 = label; writes $WORK/$1.json
    local out="$WORK/$1" from to
    mkdir -p "$out"
    local cmd=("$CAPPLAN" probe --url "$URL" --served-model "$SERVED_MODEL" --model "$SERVED_MODEL"
        --card EPYC-Zen4-core --ttft 60s --percentile mean --concurrency "$CONCURRENCY"
        --input-tokens "$INPUT_TOKENS" --output-tokens "$OUTPUT_TOKENS" --warmup "$WARMUP"
        --window "$REQUESTS" --out "$out" --format json)
    COMMANDS+=("$(printf '%q ' "${cmd[@]}")")
    note "running $1: capplan probe, concurrency $CONCURRENCY, $REQUESTS requests"
    from="$(log_lines)"
    "${cmd[@]}" >"$WORK/$1.json" 2>"$WORK/$1.stderr" \
        || { cat "$WORK/$1.stderr" >&2; die "capplan probe failed"; }
    to="$(log_lines)"
    SEGMENTS+=("$1:$from:$to")
}

# Mean prompt tokens the server counted for capplan's measured requests.
capplan_prompt_tokens() { # $1 = label
    python3 - "$WORK/$1.json" <<'EOF'
import json, os, sys
report = json.load(open(sys.argv[1]))
counts = []
with open(os.path.join(report["run_dir"], "requests.ndjson")) as f:
    for line in f:
        r = json.loads(line)
        if r.get("phase") == "measured" and r.get("ok") and r.get("input_tokens"):
            counts.append(r["input_tokens"])
print(f"{sum(counts) / len(counts):.1f}" if counts else "")
EOF
}

run_peer() {
    local extra from to
    extra="$(printf '{"max_tokens": %d, "min_tokens": %d, "ignore_eos": true, "cache_prompt": false, "temperature": 0.0}' \
        "$OUTPUT_TOKENS" "$OUTPUT_TOKENS")"
    # --connection-reuse-strategy never: with pooled connections aiperf sometimes reuses one
    # that llama.cpp's HTTP server has just closed and records a ServerDisconnectedError.
    local cmd=("$AIPERF" profile --model "$SERVED_MODEL" --url "$URL" --endpoint-type chat --streaming
        --tokenizer "$ROOT/$TOKENIZER_DIR" --use-server-token-count
        --isl "$PEER_ISL" --isl-stddev 0 --extra-inputs "$extra"
        --concurrency "$CONCURRENCY" --request-count "$REQUESTS" --warmup-request-count "$WARMUP"
        --connection-reuse-strategy "$PEER_CONNECTIONS" --random-seed 1
        --artifact-dir "$WORK/aiperf" --export-level records
        --ui-type none --no-server-metrics --no-gpu-telemetry)
    COMMANDS+=("$(printf '%q ' "${cmd[@]}")")
    note "running the peer: aiperf profile, concurrency $CONCURRENCY, $REQUESTS requests, --isl $PEER_ISL"
    from="$(log_lines)"
    "${cmd[@]}" >"$WORK/aiperf.log" 2>&1 || { tail -n 40 "$WORK/aiperf.log" >&2; die "aiperf failed"; }
    to="$(log_lines)"
    SEGMENTS+=("peer:$from:$to")
    [[ -f "$WORK/aiperf/profile_export_aiperf.json" ]] || die "aiperf wrote no profile_export_aiperf.json"
}

run_capplan capplan1
CP_PROMPT="$(capplan_prompt_tokens capplan1)"
if [[ -z "$PEER_ISL" ]]; then
    [[ -n "$CP_PROMPT" ]] || die "capplan's report has no server prompt-token counts"
    PEER_ISL="$(python3 -c "import sys; print(max(1, round(float(sys.argv[1]) - int(sys.argv[2]))))" \
        "$CP_PROMPT" "$TEMPLATE_TOKENS")"
    note "capplan's prompts: $CP_PROMPT tokens at the server (incl. $TEMPLATE_TOKENS of chat template); peer --isl $PEER_ISL"
fi
run_peer
if [[ "$SANDWICH" == 1 ]]; then
    run_capplan capplan2
fi

# --- the table --------------------------------------------------------------------------------
echo
echo "capplan vs NVIDIA AIPerf $AIPERF_VERSION on llama.cpp (tests/real-engine.sh, 4 slots, 1 thread):"
echo "streaming chat, concurrency $CONCURRENCY, $REQUESTS measured requests each after $WARMUP warm-up, $OUTPUT_TOKENS output tokens (ignore_eos)"
echo
set +e
python3 - "$WORK" "$SERVER_LOG" "$WARMUP" "$MAX_DIFF" "${SEGMENTS[@]}" <<'EOF'
import json, os, re, sys

work, server_log, warmup, max_diff = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
segments = {}
for s in sys.argv[5:]:
    label, first, last = s.rsplit(":", 2)
    segments[label] = (int(first), int(last))
labels = [l for l in ("capplan1", "capplan2") if l in segments]
peer = json.load(open(os.path.join(work, "aiperf", "profile_export_aiperf.json")))
runs = [json.load(open(os.path.join(work, l + ".json"))) for l in labels]

# llama.cpp's own per-request timings, from its log lines of each tool's run (time stamps are
# minutes.seconds.ms.us since the server started):
#   "0.04.502.395 I slot launch_slot_: id  2 | task 34 | processing task, ..."
#   "... print_timing: id 2 | task 34 | prompt eval time = 1269.69 ms / 114 tokens (...)"
#   "... print_timing: id 2 | task 34 |        eval time =  767.22 ms /  32 tokens (...)"
#   "0.06.541.674 I slot      release: id  2 | task 34 | stop processing: ..."
# The server's TTFT of a request = (release - launch) - eval time: its wait for the batch,
# prompt processing and first token, without HTTP and the client.
LINE = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) \S+ slot\s+(\w+): id\s+\d+ \| task (\d+) \|(.*)$")
TIMING = re.compile(r"^\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) tokens")
log_lines = open(server_log, errors="replace").read().splitlines()

def server_view(label):
    first, last = segments[label]
    tasks = {}
    for line in log_lines[first:last]:
        m = LINE.match(line)
        if not m:
            continue
        t = int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6
        task = tasks.setdefault(int(m[6]), {})
        if m[5] == "launch_slot_":
            task["launch"] = t
        elif m[5] == "release":
            task["release"] = t
        elif m[5] == "print_timing":
            tm = TIMING.match(m[7])
            if tm:
                task[tm[1]] = (float(tm[2]) / 1e3, int(tm[3]))
    done = [tasks[k] for k in sorted(tasks) if {"launch", "release", "eval"} <= tasks[k].keys()]
    done = done[warmup:]  # the first ones are the warm-up requests
    ttft = [(d["release"] - d["launch"] - d["eval"][0]) * 1e3 for d in done]
    dec = [d["eval"] for d in done if d["eval"][1] > 0]
    # A prompt shares its prefill batch with another when their slots were launched together.
    launches = sorted(d["launch"] for d in tasks.values() if "launch" in d)
    batched = [any(abs(o - d["launch"]) < 0.05 for o in launches if o != d["launch"]) for d in done]
    return {
        "n": len(done),
        "ttft": sum(ttft) / len(ttft) if ttft else None,
        "decode": sum(s for s, _ in dec) * 1e3 / sum(n for _, n in dec) if dec else None,
        "batched": 100.0 * sum(batched) / len(batched) if batched else None,
    }

servers = {l: server_view(l) for l in segments}

def peer_stat(metric, stat):
    return (peer.get(metric) or {}).get(stat)

def capplan_stat(run, metric, stat, scale=1000.0):
    v = run["steps"][0][metric].get(stat)
    return None if v is None else v * scale

def capplan_tokens(run, key):
    vals = []
    with open(os.path.join(run["run_dir"], "requests.ndjson")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "measured" and r.get("ok") and r.get(key) is not None:
                vals.append(r[key])
    return sum(vals) / len(vals) if vals else None

def sub(a, b):
    return None if a is None or b is None else a - b

def div(a, b):
    return None if a is None or not b else a / b

stat = {"mean": "avg", "p50": "p50", "p90": "p90"}
rows = []  # (label, peer value, [capplan values], compared?)
for name, pm, cm in (("TTFT", "time_to_first_token", "ttft"), ("TPOT", "inter_token_latency", "tpot")):
    for s in ("mean", "p50", "p90"):
        rows.append((f"{name} {s} (ms)", peer_stat(pm, stat[s]), [capplan_stat(r, cm, s) for r in runs], True))
rows.append(("E2E mean (ms)", peer_stat("request_latency", "avg"), [capplan_stat(r, "e2e", "mean") for r in runs], False))
rows.append(("prompt tokens (server)", peer_stat("usage_prompt_tokens", "avg"), [capplan_tokens(r, "input_tokens") for r in runs], False))
rows.append(("output tokens (server)", peer_stat("usage_completion_tokens", "avg"), [capplan_tokens(r, "output_tokens") for r in runs], False))
rows.append(("measured requests", peer_stat("request_count", "avg"), [float(r["steps"][0]["requests"]) for r in runs], False))
# What llama.cpp itself logged for the same requests: tells a server that behaved differently
# (drift, CPU taken by a client, batching) from a tool that measures differently.
rows.append(("server: batched prefills %", servers["peer"]["batched"], [servers[l]["batched"] for l in labels], False))
rows.append(("server: TTFT mean (ms)", servers["peer"]["ttft"], [servers[l]["ttft"] for l in labels], False))
rows.append(("server: decode ms/token", servers["peer"]["decode"], [servers[l]["decode"] for l in labels], False))
rows.append(("TTFT mean - server TTFT (ms)", sub(peer_stat("time_to_first_token", "avg"), servers["peer"]["ttft"]),
             [sub(capplan_stat(r, "ttft", "mean"), servers[l]["ttft"]) for r, l in zip(runs, labels)], False))
rows.append(("TPOT mean / server ms/tok", div(peer_stat("inter_token_latency", "avg"), servers["peer"]["decode"]),
             [div(capplan_stat(r, "tpot", "mean"), servers[l]["decode"]) for r, l in zip(runs, labels)], False))

def fmt(v, width, digits=2):
    return f"{'n/a':>{width}}" if v is None else f"{v:>{width}.{digits}f}"

def pct(a, b):
    return None if a is None or b is None or b == 0 else (a - b) / b * 100.0

two = len(runs) == 2
head = f"{'metric':<28}{'peer (aiperf)':>14}"
head += f"{'capplan #1':>12}{'capplan #2':>12}{'capplan avg':>13}{'diff %':>9}{'#2 vs #1 %':>12}" if two \
    else f"{'capplan':>12}{'diff %':>9}"
print(head)
print("-" * len(head))
worst = 0.0
for i, (label, p, cs, compared) in enumerate(rows):
    if i == 6 or label.startswith("server: batched"):
        print()
    digits = 3 if "/ server" in label else 2
    line = f"{label:<28}{fmt(p, 14, digits)}"
    # Percentages and the client-minus-server row differ in points / ms, not in %.
    delta = (lambda a, b: sub(a, b)) if ("%" in label or " - " in label) else pct
    unit = "pt" if "%" in label else "ms" if " - " in label else ""
    fd = lambda v, w: f"{'n/a' if v is None else ('%+.1f' % v) + unit:>{w}}"
    if two:
        avg = None if None in cs else sum(cs) / 2
        d = delta(avg, p)
        line += f"{fmt(cs[0], 12, digits)}{fmt(cs[1], 12, digits)}{fmt(avg, 13, digits)}{fd(d, 9)}{fd(delta(cs[1], cs[0]), 12)}"
    else:
        d = delta(cs[0], p)
        line += f"{fmt(cs[0], 12, digits)}{fd(d, 9)}"
    if compared and d is not None:
        worst = max(worst, abs(d))
    print(line)
print()
print("diff % = (capplan - peer) / peer; rows in % or ms show plain differences (pt, ms).")
print("TPOT = capplan's tpot = AIPerf's inter_token_latency = (e2e - ttft) / (output tokens - 1).")
print("server: rows come from llama.cpp's own log for the measured requests of each tool's run:")
print("batched prefills = prompts whose slot was launched together with another's (one shared")
print("prefill batch); server TTFT = slot launch to first token (a request that waited for a busy")
print("loop before its launch hides that wait here); decode ms/token = its eval time per token.")
print("The last two rows take the server's figures out: where they agree while the top rows")
print("differ, the server behaved differently, not the tools' measurement.")
print(f"largest TTFT/TPOT difference: {worst:.1f} %")
if max_diff and worst > float(max_diff):
    print(f"over --max-diff {max_diff} %", file=sys.stderr)
    sys.exit(1)
EOF
TABLE_RC=$?
set -e

echo
echo "commands (run from the repository root):"
echo "  bash tests/real-engine.sh start --slots 4"
for c in "${COMMANDS[@]}"; do
    echo "  ${c% }"
done
echo "  bash tests/real-engine.sh stop"
exit "$TABLE_RC"
