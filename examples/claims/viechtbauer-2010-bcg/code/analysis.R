# Meta-analysis of the BCG vaccine trials (Colditz et al., 1994): the
# random-effects model of Viechtbauer (2010), "Conducting meta-analyses in R
# with the metafor package", J. Stat. Softw. 36(3), section 3.
#
# Run from this directory:  Rscript analysis.R
# Writes tables/random_effects.csv and figures/forest.pdf next to this file.

library(metafor)
source("helpers.R")

# dat.bcg: the 13 trials, shipped with metafor (in its data package metadat).

# Log relative risks and their sampling variances.
dat <- escalc(measure = "RR", ai = tpos, bi = tneg, ci = cpos, di = cneg,
              data = dat.bcg)
print(dat[, c("trial", "author", "year", "yi", "vi")])

# Random-effects model, REML estimate of tau^2.
res <- rma(yi, vi, data = dat)
print(res)

# Back-transformed to relative risks.
print(predict(res, transf = exp, digits = 2))

save_model_table(res, file.path("tables", "random_effects.csv"))
save_forest_plot(res, dat, file.path("figures", "forest.pdf"))
