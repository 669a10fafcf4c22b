suppressPackageStartupMessages(library("dplyr"))
panel <- read.csv("data/panel.csv") |>
  dplyr::filter(year >= 2000)
