# Helper functions for analysis.R.

# save_model_table writes the estimate, its standard error, the confidence
# interval and the heterogeneity statistics of a fitted rma model as a CSV
# table (full precision), creating the directory when needed.
save_model_table <- function(res, path) {
  dir.create(dirname(path), showWarnings = FALSE, recursive = TRUE)
  tab <- data.frame(
    term     = c("estimate", "tau2", "I2", "QE"),
    value    = c(as.numeric(res$beta), res$tau2, res$I2, res$QE),
    se       = c(res$se, res$se.tau2, NA, NA),
    ci.lb    = c(res$ci.lb, NA, NA, NA),
    ci.ub    = c(res$ci.ub, NA, NA, NA)
  )
  write.csv(tab, path, row.names = FALSE)
  invisible(tab)
}

# save_forest_plot draws the forest plot of the model (trials labelled by
# author and year) into a PDF file.
save_forest_plot <- function(res, dat, path) {
  dir.create(dirname(path), showWarnings = FALSE, recursive = TRUE)
  pdf(path, width = 8, height = 6)
  forest(res, slab = paste(dat$author, dat$year, sep = ", "), atransf = exp,
         xlab = "Relative risk (log scale)")
  invisible(dev.off())
}
