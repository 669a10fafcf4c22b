"""Michelson (1880), speed of light measurements of 1879, as certified by
NIST's Statistical Reference Datasets ("Michelso").

v = 299 + Speed/1000 (thousands of km/s). NIST certifies the mean
299.852400000000, the sample standard deviation 0.0790105478190518 and the
lag-1 autocorrelation 0.535199668621283.

Reads $DOTLAB_DATA_DIR/morley.csv, writes $DOTLAB_OUT_DIR/results.json.
"""
import csv
import json
import math
import os

data_dir = os.environ.get("DOTLAB_DATA_DIR", "/work/data")
out_dir = os.environ.get("DOTLAB_OUT_DIR", "/work/out")

with open(os.path.join(data_dir, "morley.csv"), newline="") as f:
    rows = sorted(csv.DictReader(f), key=lambda r: (int(r["Expt"]), int(r["Run"])))
v = [299 + int(r["Speed"]) / 1000 for r in rows]

n = len(v)
mean = math.fsum(v) / n
dev = [x - mean for x in v]
sd = math.sqrt(math.fsum(e * e for e in dev) / (n - 1))
acf1 = math.fsum(dev[i] * dev[i + 1] for i in range(n - 1)) / math.fsum(e * e for e in dev)

results = {"mean": mean, "sd": sd, "autocorrelation_lag1": acf1}
with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=2, sort_keys=True)
print(json.dumps(results, sort_keys=True))
