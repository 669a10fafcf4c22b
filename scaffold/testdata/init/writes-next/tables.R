write.csv(mtcars, file = "tables/mtcars.csv")
ggplot2::ggsave("figures/fig2.pdf")
saveRDS(mtcars, "/work/out/mtcars.rds")
