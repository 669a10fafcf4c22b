"""Longley (1967): least squares regression of total employment on six
economic series, 1947-1962, the classic test of a regression program's
numerical accuracy (NIST StRD "Longley", certified values to 15 digits).

Run from this directory:  python3 analysis.py
Prints the regression table and writes output/coefficients.csv and
output/fitted.png next to this file.
"""

import os

import matplotlib.pyplot as plt
import pandas as pd
import statsmodels.api as sm
from statsmodels.datasets import longley

OUTPUT = "output"


def main():
    data = longley.load_pandas()
    y = data.endog
    X = sm.add_constant(data.exog)

    results = sm.OLS(y, X).fit()
    print(results.summary())
    print()
    print("Residual standard deviation: %.15g" % results.mse_resid ** 0.5)

    os.makedirs(OUTPUT, exist_ok=True)
    table = pd.DataFrame({"coef": results.params, "std_err": results.bse})
    table.to_csv(os.path.join(OUTPUT, "coefficients.csv"), index_label="term", float_format="%.15g")

    fig, ax = plt.subplots(figsize=(6, 4))
    years = data.exog["YEAR"]
    ax.plot(years, y, "o", label="observed")
    ax.plot(years, results.fittedvalues, "-", label="fitted")
    ax.set_xlabel("Year")
    ax.set_ylabel("Total employment (thousands)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUTPUT, "fitted.png"), dpi=100)


if __name__ == "__main__":
    main()
