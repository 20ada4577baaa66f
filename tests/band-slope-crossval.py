#!/usr/bin/env python3
"""Would C* bands that depend on the predicted slope beat today's pooled bands?

Reads `capplan validate --details --format json` (a file, or standard input) and scores three
kinds of 80 % band for C* out of fold, on the held-out sweeps whose predicted C* lies inside
their loads (aggregated sources only, both SLOs):

  pooled   one band per group: the 10th and 90th percentile of ln(measured / predicted C*)
           (the rule the shipped bands followed when this was run; they are split-conformal
           now, and `capplan validate` prints their own out-of-fold check);
  widened  the pooled band stretched by max(1, the fold's median predicted slope / the sweep's);
  slope    percentiles of ln(measured / predicted) × slope, divided by the sweep's slope
           (a C* error is a latency error over the slope).

Sweeps are split in two folds by a hash of their name; each fold's bands come from the other.
Bands are kept per model class and engine, as `hardware/bands.toml` keeps them. The score is
the interval score of an 80 % band in ln C*: its width plus 10 × how far outside it the
measured C* fell (lower is better); `flat` is the coverage of sweeps whose predicted slope is
under 0.3. The README quotes this script's output.

    cargo run --release -- validate --details --format json > details.json
    python3 tests/band-slope-crossval.py details.json
"""

import hashlib
import json
import math
import sys
from collections import defaultdict

FLAT = 0.3
SLOPE_FLOOR = 0.05
MISS_WEIGHT = 2 / 0.2


def quantile(values, q):
    """Linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def median(values):
    return quantile(values, 0.5)


def sweeps_of(report):
    out = []
    for source in report["sources"]:
        if source["model_class"] == "disaggregated":
            continue
        for sweep in source["c_star_sweeps"]:
            slope = sweep.get("predicted_slope")
            if sweep["subset"] != "held out" or sweep["predicted_bracket"] != "inside":
                continue
            if slope is None:
                continue
            out.append(
                {
                    "group": (source["model_class"], sweep["engine"]),
                    "fold": int(hashlib.md5(sweep["sweep"].encode()).hexdigest(), 16) % 2,
                    "error": math.log(sweep["measured"] / sweep["predicted"]),
                    "slope": max(slope, SLOPE_FLOOR),
                }
            )
    return out


def band(train, test, method):
    """(low, high) of ln(measured / predicted) for the sweep `test`, from `train`."""
    if method == "pooled":
        errors = [s["error"] for s in train]
        return quantile(errors, 0.1), quantile(errors, 0.9)
    if method == "widened":
        reference = median([s["slope"] for s in train])
        stretch = lambda s: max(1.0, reference / s["slope"])
        scaled = [s["error"] / stretch(s) for s in train]
        return quantile(scaled, 0.1) * stretch(test), quantile(scaled, 0.9) * stretch(test)
    latency = [s["error"] * s["slope"] for s in train]
    return quantile(latency, 0.1) / test["slope"], quantile(latency, 0.9) / test["slope"]


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    groups = defaultdict(list)
    for sweep in sweeps_of(json.loads(text)):
        groups[sweep["group"]].append(sweep)
    print("method   sweeps  coverage  interval score  flat sweeps  flat coverage")
    for method in ["pooled", "widened", "slope"]:
        covered, scores, flat = [], [], []
        for members in groups.values():
            if len(members) < 10:
                continue
            for fold in (0, 1):
                train = [s for s in members if s["fold"] != fold]
                test = [s for s in members if s["fold"] == fold]
                if len(train) < 5:
                    continue
                for sweep in test:
                    low, high = band(train, sweep, method)
                    x = sweep["error"]
                    inside = low <= x <= high
                    covered.append(inside)
                    scores.append(
                        (high - low) + MISS_WEIGHT * (max(0.0, low - x) + max(0.0, x - high))
                    )
                    if sweep["slope"] < FLAT:
                        flat.append(inside)
        print(
            f"{method:8} {len(scores):6}  {sum(covered) / len(covered):8.3f}  "
            f"{sum(scores) / len(scores):14.3f}  {len(flat):11}  "
            f"{(sum(flat) / len(flat)) if flat else float('nan'):13.2f}"
        )


if __name__ == "__main__":
    main()
