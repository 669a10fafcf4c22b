ans <- readline("Run the bootstrap too? [y/n] ")
f <- file.choose()
setwd("C:/Users/alice/Dropbox/project")
d <- read.csv("/Users/alice/data/survey.csv")
