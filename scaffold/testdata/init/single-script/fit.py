"""Fits the wage regression of table 2.

Docstrings mentioning /home/alice/data or requests.get("https://x") are text, not code.
"""
import numpy as np
import pandas as pd  # import sklearn  <- a comment, not an import

QUERY = "import scipy"  # a string, not an import
SPLIT = ("a \
b")

df = pd.read_csv("data/wages.csv")
beta = np.polyfit(df["educ"], df["wage"], 1)
print(f"slope {beta[0]:.4f}")
