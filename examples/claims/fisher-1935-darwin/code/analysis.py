"""Fisher (1935), The Design of Experiments, sections 17 and 21.

Darwin's (1876) Zea mays: 15 differences in height (eighths of an inch),
cross- minus self-fertilised. Fisher's one-sample t is 2.148 on 14 df; his
randomisation test enumerates all 2^15 sign assignments of |d|: 1,726 of
32,768 give |sum| at least the observed 314, p = 0.05267.

Reads $DOTLAB_DATA_DIR/darwin.csv, writes $DOTLAB_OUT_DIR/results.json.
"""
import csv
import json
import math
import os

data_dir = os.environ.get("DOTLAB_DATA_DIR", "/work/data")
out_dir = os.environ.get("DOTLAB_OUT_DIR", "/work/out")

with open(os.path.join(data_dir, "darwin.csv"), newline="") as f:
    d = [float(row["y"]) for row in csv.DictReader(f)]

n = len(d)
mean = sum(d) / n
sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
t = mean / (sd / math.sqrt(n))

# Full enumeration of the 2^n sign patterns (integers: exact).
a = [abs(int(round(x))) for x in d]
observed = abs(sum(int(round(x)) for x in d))
extreme = 0
for mask in range(1 << n):
    s = 0
    for i in range(n):
        s += -a[i] if (mask >> i) & 1 else a[i]
    if abs(s) >= observed:
        extreme += 1
p = extreme / (1 << n)

results = {"t_one_sample": round(t, 6), "randomisation_extreme": extreme, "randomisation_p": round(p, 8)}
with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=2, sort_keys=True)
print(json.dumps(results, sort_keys=True))
