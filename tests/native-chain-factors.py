#!/usr/bin/env python3
"""Writes hardware/operators/vllm-module-native-chain.csv: what vLLM's native norm chain cost
AIConfigurator's latent-attention module timings, cell by cell on capplan's reduced grid.

B200's vLLM 0.24.0 module tables were collected twice: before the collector fix
(ai-dynamo/aiconfigurator commit 4fabb7736, the native mean/pow/rsqrt/mul chain) and after it
(commit c56db49fe, #1423: the engine's fused ops). This reduces the pinned collection twice with
`capplan hardware import-operators` (B200's three module files taken from each commit in turn,
no factors in either output folder) and writes after / before for every mla_module row (at most
1: the chain only adds work).

    python3 tests/native-chain-factors.py --aiconfigurator PATH/TO/aiconfigurator \
        [--capplan target/release/capplan] [--out hardware/operators/vllm-module-native-chain.csv]

Needs Python 3 (standard library), git and a capplan build. The repository may be a work tree
or a bare clone; files are read with `git show`.
"""

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile

PINNED = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"  # hardware/operators/README.md
BEFORE = "4fabb773643d961c9679e9af3544b74f95c87c8e"  # native chain
AFTER = "c56db49fe2f1edf693d5859900e4a3254fdb421b"  # fused ops (#1423)
DATA = "aic-core/src/aiconfigurator_core/systems/data"
MODULE = DATA + "/b200_sxm/mla/vllm/0.24.0"
FILES = [
    "mla_context_module_perf.parquet",
    "mla_generation_module_perf.parquet",
    "collection_meta.yaml",
]


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def reduce_with(repo, capplan, module_commit, work):
    """The reduced B200 vLLM table with B200's module files from `module_commit`."""
    tree = os.path.join(work, module_commit[:9])
    with tarfile.open(fileobj=io.BytesIO(git(repo, "archive", PINNED, DATA))) as archive:
        archive.extractall(tree)
    for name in FILES:
        with open(os.path.join(tree, MODULE, name), "wb") as out:
            out.write(git(repo, "show", f"{module_commit}:{MODULE}/{name}"))
    out = os.path.join(work, module_commit[:9] + "-reduced")
    subprocess.run(
        [capplan, "hardware", "import-operators", "--from", os.path.join(tree, DATA), "--out", out],
        check=True,
        capture_output=True,
    )
    rows = {}
    with open(os.path.join(out, "b200_sxm", "vllm.csv")) as table:
        for line in table:
            fields = line.rstrip("\n").split(",")
            if fields[0] in ("mla_module_context", "mla_module_generation"):
                rows[tuple(fields[:4])] = [float(v) for v in fields[4].split()]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aiconfigurator", required=True)
    parser.add_argument("--capplan", default="target/release/capplan")
    parser.add_argument("--out", default="hardware/operators/vllm-module-native-chain.csv")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        before = reduce_with(args.aiconfigurator, args.capplan, BEFORE, work)
        after = reduce_with(args.aiconfigurator, args.capplan, AFTER, work)
    if set(before) != set(after) or not before:
        sys.exit("the two reductions do not hold the same mla_module rows")
    lines = [
        "# Factors that take vLLM's latent-attention module timings from the native norm chain",
        "# to the fused ops (src/catalog/operators/native_chain.rs): B200 vLLM 0.24.0 after the",
        f"# collector fix ({AFTER[:9]}) over before it ({BEFORE[:9]}), each reduced from",
        f"# NVIDIA AIConfigurator {PINNED[:9]} (Apache-2.0). Written by tests/native-chain-factors.py.",
        "# table,variant,heads per card,sequences,factor along the table's length axis",
    ]
    for key in sorted(before, key=lambda k: (k[0], k[1], int(k[2]), int(k[3]))):
        # The chain only adds work: a cell measured slower after the fix is noise, kept as is.
        factors = [min(1.0, a / b) for a, b in zip(after[key], before[key])]
        lines.append(",".join(key) + "," + " ".join(f"{f:.3g}" for f in factors))
    with open(args.out, "w") as out:
        out.write("\n".join(lines) + "\n")
    print(f"{args.out}: {len(before)} rows")


if __name__ == "__main__":
    main()
