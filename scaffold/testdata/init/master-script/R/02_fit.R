library(stats)
require(fixest, quietly = TRUE)
fit <- fixest::feols(y ~ treat | id + year, data = panel)
print(coef(fit))
