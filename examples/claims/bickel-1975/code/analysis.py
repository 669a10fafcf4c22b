"""Bickel, Hammel & O'Connell (1975), "Sex bias in graduate admissions:
data from Berkeley", Science 187:398-404.

The paper reports campus-wide admission rates of 44% of 8,442 men and 35% of
4,321 women. This data set holds only the six largest departments (A-F), so
the rates recomputed from it (men 0.445, women 0.304) do not match the
campus-wide claim for women: an honest not_reproduced, caused by the data
being a subset of the claim's population.

Reads $DOTLAB_DATA_DIR/ucb_admissions.csv, writes $DOTLAB_OUT_DIR/results.json.
"""
import csv
import json
import os

data_dir = os.environ.get("DOTLAB_DATA_DIR", "/work/data")
out_dir = os.environ.get("DOTLAB_OUT_DIR", "/work/out")

admitted = {"Male": 0, "Female": 0}
applied = {"Male": 0, "Female": 0}
with open(os.path.join(data_dir, "ucb_admissions.csv"), newline="") as f:
    for row in csv.DictReader(f):
        n = int(row["Freq"])
        applied[row["Gender"]] += n
        if row["Admit"] == "Admitted":
            admitted[row["Gender"]] += n

results = {
    "admit_rate_men": round(admitted["Male"] / applied["Male"], 6),
    "admit_rate_women": round(admitted["Female"] / applied["Female"], 6),
}
with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump(results, f, indent=2, sort_keys=True)
print(json.dumps(results, sort_keys=True))
