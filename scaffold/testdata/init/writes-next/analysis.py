import os
import pandas as pd
import matplotlib.pyplot as plt

OUTPUT = "output"
df = pd.DataFrame({"a": [1, 2]})
os.makedirs(OUTPUT, exist_ok=True)
df.to_json(os.path.join(OUTPUT, "a.json"))
df.to_csv(os.path.join("tables", "t1.csv"), index=False)
df.to_csv("/work/out/kept.csv")
plt.savefig("figures/fig1.png")
with open("log.txt", "w") as fh:
    fh.write("done\n")
with open("data/input.csv") as fh:
    pass
