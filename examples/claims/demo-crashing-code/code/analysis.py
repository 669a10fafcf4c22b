"""DEMONSTRATION ONLY: analysis code that crashes, to show the spec_issue path.

It reads Student's sleep data but asks for a column the file does not have,
so it exits with an error and writes no results.json: the run is recorded as
spec_issue (the spec cannot be executed as written).
"""
import csv
import os

data_dir = os.environ.get("DOTLAB_DATA_DIR", "/work/data")
with open(os.path.join(data_dir, "sleep.csv"), newline="") as f:
    for row in csv.DictReader(f):
        print(row["hours_of_sleep"])  # KeyError: no such column
