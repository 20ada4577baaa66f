#!/usr/bin/env python3
"""Launcher for a real llama.cpp server (via the `xllamacpp` wheel) on the CPU.

Started in the background by tests/real-engine.sh; not meant to be run by hand,
though it works standalone:

    python tests/real-engine-server.py --model M.gguf --port 0 --slots 4 \
        --url-file url.txt

The llama.cpp HTTP server lives as long as the `xllamacpp.Server` object does,
so this process just holds it until SIGTERM/SIGINT. With --port 0 the server
binds an ephemeral port itself; the real base URL (http://127.0.0.1:PORT) is
written to --url-file once the model is loaded and the socket is listening.
"""

import argparse
import os
import signal
import sys
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="path to the .gguf file")
    ap.add_argument("--alias", default="smollm2-135m", help="model id served")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral port")
    ap.add_argument("--slots", type=int, default=4, help="parallel slots")
    ap.add_argument("--ctx-per-slot", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--url-file", default=None)
    a = ap.parse_args()

    import xllamacpp

    stop = threading.Event()

    def on_signal(signum, _frame):
        print(f"launcher: signal {signum}, shutting down", flush=True)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    p = xllamacpp.CommonParams()
    p.model.path = a.model
    p.model_alias = {a.alias}
    p.hostnames = [a.host]
    p.port = a.port
    p.n_parallel = a.slots
    # n_ctx is the total KV size; with kv_unified off each slot gets n_ctx / n_parallel.
    p.n_ctx = a.slots * a.ctx_per_slot
    p.kv_unified = False
    p.cont_batching = True
    p.endpoint_metrics = True
    p.n_gpu_layers = 0
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.n_threads_http = a.slots + 2

    print(
        f"launcher: xllamacpp {xllamacpp.__version__}, model={a.model}, "
        f"alias={a.alias}, slots={a.slots}, ctx/slot={a.ctx_per_slot}, "
        f"threads={a.threads}, port={a.port}",
        flush=True,
    )
    t0 = time.monotonic()
    server = xllamacpp.Server(p)
    url = server.listening_address
    if isinstance(url, bytes):
        url = url.decode()
    url = str(url).rstrip("/")
    print(f"launcher: listening on {url} after {time.monotonic() - t0:.2f}s", flush=True)

    if a.url_file:
        tmp = a.url_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(url + "\n")
        os.replace(tmp, a.url_file)

    while not stop.wait(0.5):
        pass

    del server  # stops the HTTP server and the main loop
    print("launcher: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
