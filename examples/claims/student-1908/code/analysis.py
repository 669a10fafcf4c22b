"""Student (1908), "The probable error of a mean", Biometrika 6:1-25.

Paired differences of extra sleep (hours), drug 2 minus drug 1, for the ten
patients of Cushny & Peebles (1905). Student reports the mean difference 1.58
and the standard deviation of the differences dividing by n, 1.17; the modern
paired t statistic is 4.062 on 9 degrees of freedom.

Reads $DOTLAB_DATA_DIR/sleep.csv, writes $DOTLAB_OUT_DIR/results.json.
"""
import csv
import json
import math
import os

data_dir = os.environ.get("DOTLAB_DATA_DIR", "/work/data")
out_dir = os.environ.get("DOTLAB_OUT_DIR", "/work/out")

extra = {}
with open(os.path.join(data_dir, "sleep.csv"), newline="") as f:
    for row in csv.DictReader(f):
        extra[(row["group"], row["ID"])] = float(row["extra"])

patients = sorted({pid for (_, pid) in extra}, key=int)
d = [extra[("2", p)] - extra[("1", p)] for p in patients]
n = len(d)
mean = sum(d) / n
ss = sum((x - mean) ** 2 for x in d)
sd_n = math.sqrt(ss / n)            # Student's own convention
sd_n1 = math.sqrt(ss / (n - 1))     # the modern sample standard deviation
t = mean / (sd_n1 / math.sqrt(n))

results = {"mean_diff": round(mean, 6), "sd_diff_n": round(sd_n, 6), "t_paired": round(t, 6)}
with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=2, sort_keys=True)
print(json.dumps(results, sort_keys=True))
