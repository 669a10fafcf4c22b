# Runs the whole analysis: library(notapackage) in a comment is not read.
source("R/01_clean.R")
source("R/02_fit.R")
message("library(alsonot) inside a string is text")
x <- r"(library(rawnot) in a raw string)"
