from sklearn.linear_model import LinearRegression
import pandas

from . import helpers  # relative: the package's own
import helpers
model = LinearRegression()
