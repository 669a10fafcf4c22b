write.csv(mtcars, file = "tables/mtcars.csv")
ggplot2::ggsave("figures/fig2.pdf")
saveRDS(mtcars, "/work/out/mtcars.rds")
out_dir <- "results"
saveRDS(mtcars, file.path(out_dir, "fit.rds"))
save_table <- function(x, path) write.csv(x, path)
cat("done\n", file = stderr())
