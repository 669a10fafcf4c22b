# The R reader of `dotlab manifest init` (scaffold/parse.go): parses each unit
# of source text with R's own parser (parse(), getParseData()) and reports
# the packages it names (pkg::fn, pkg:::fn), the calls it makes to watched
# names with their literal arguments, and the string literals passed to
# calls. Nothing is evaluated: parse() builds expressions, it does not run them.
#
# Arguments: DIR N WATCHFILE PKGFILE. DIR holds the units 1.R .. N.R;
# WATCHFILE the watched function names, one a line; PKGFILE the packages
# all of whose calls (pkg::fn) are watched. Output lines, tab-separated, every
# text field hex-encoded UTF-8 ("-" for an empty field):
#   B name                      a base package of this R
#   E unit line message         a parse error
#   P unit line package         pkg::
#   C unit line package func {argname:kind:value}...
#   S unit line value func      a path-like string literal (func: the call it is passed to)
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
n <- as.integer(args[2])
watch <- readLines(args[3], warn = FALSE)
watch_pkgs <- readLines(args[4], warn = FALSE)
max_items <- 20000L
# The strings reported: absolute paths, home-relative paths, drive letters, UNC paths, URLs.
path_like <- "^(/|~|[A-Za-z]:[\\\\/]|\\\\\\\\|[A-Za-z][A-Za-z0-9+.-]*://)"

hex <- function(s) {
  if (is.na(s) || !nzchar(s)) return("-")
  paste(as.character(charToRaw(enc2utf8(s))), collapse = "")
}
out <- function(...) cat(paste(..., sep = "\t"), "\n", sep = "")

# The value of a STR_CONST token: R's parser reads the literal (escapes, raw strings).
str_value <- function(tok) {
  v <- tryCatch(parse(text = tok, keep.source = FALSE)[[1]], error = function(e) NA_character_)
  if (is.character(v) && length(v) == 1) v else NA_character_
}

# arg_of describes the expression node id as kind:value: a string (str_of),
# a symbol, a number (or NULL, TRUE, FALSE), a standard stream
# (stdout() …), or other.
arg_of <- function(pd, id) {
  v <- str_of(pd, id, 0L)
  if (!is.na(v)) return(paste("str", hex(v), sep = ":"))
  kids <- children(pd, id)
  if (nrow(kids) == 1 && kids$terminal[1]) {
    tok <- kids$token[1]
    if (tok == "SYMBOL") return(paste("sym", hex(kids$text[1]), sep = ":"))
    if (tok == "NUM_CONST" || tok == "NULL_CONST") return(paste("num", hex(kids$text[1]), sep = ":"))
  }
  if (nrow(kids) >= 3 && fn_of(pd, id)[2] %in% c("stdout", "stderr", "stdin")) return(paste("std", hex(fn_of(pd, id)[2]), sep = ":"))
  "other:-"
}

# str_of is the string expression node id stands for, NA when it is none
# known before run time: a literal, a top-level name bound once to one
# (consts), or file.path() / paste0() of those.
str_of <- function(pd, id, depth) {
  kids <- children(pd, id)
  if (depth > 20L || nrow(kids) == 0) return(NA_character_)
  if (nrow(kids) == 1 && kids$terminal[1]) {
    if (kids$token[1] == "STR_CONST") return(str_value(kids$text[1]))
    if (kids$token[1] == "SYMBOL" && !is.null(consts[[kids$text[1]]])) return(consts[[kids$text[1]]])
    return(NA_character_)
  }
  if (nrow(kids) < 3 || kids$token[1] != "expr" || kids$token[2] != "'('" || any(kids$token == "SYMBOL_SUB")) return(NA_character_)
  pf <- fn_of(pd, id)
  if (!(pf[2] %in% c("file.path", "paste0")) || !(pf[1] %in% c("", "base"))) return(NA_character_)
  args <- kids$id[kids$token == "expr"][-1]
  vals <- vapply(args, function(a) str_of(pd, a, depth + 1L), character(1))
  if (length(vals) == 0 || anyNA(vals)) return(NA_character_)
  paste(vals, collapse = if (pf[2] == "file.path") "/" else "")
}

# unit_consts are the names bound exactly once in the unit, at its top
# level, to a string literal (out_dir <- "output").
unit_consts <- function(pd) {
  ops <- pd[pd$token %in% c("LEFT_ASSIGN", "EQ_ASSIGN", "RIGHT_ASSIGN"), ]
  counts <- list()
  found <- list()
  for (j in seq_len(nrow(ops))) {
    node <- ops$parent[j]
    exprs <- children(pd, node)
    exprs <- exprs$id[exprs$token == "expr"]
    if (length(exprs) != 2) next
    if (ops$token[j] == "RIGHT_ASSIGN") exprs <- rev(exprs)
    lhs <- children(pd, exprs[1])
    if (nrow(lhs) != 1 || lhs$token[1] != "SYMBOL") next
    name <- lhs$text[1]
    counts[[name]] <- if (is.null(counts[[name]])) 1L else counts[[name]] + 1L
    rhs <- children(pd, exprs[2])
    if (pd[as.character(node), "parent"] == 0 && nrow(rhs) == 1 && rhs$token[1] == "STR_CONST") {
      found[[name]] <- str_value(rhs$text[1])
    }
  }
  found[vapply(names(found), function(n) counts[[n]] == 1L && !is.na(found[[n]]), logical(1))]
}

# call_args lists the arguments of call node id as name:kind:value fields.
call_args <- function(pd, id) {
  kids <- children(pd, id)
  res <- character(0)
  name <- "-"
  for (k in seq_len(nrow(kids))[-1]) {
    tok <- kids$token[k]
    if (tok == "SYMBOL_SUB" || (tok == "STR_CONST" && k + 1 <= nrow(kids) && kids$token[k + 1] == "EQ_SUB")) {
      name <- hex(kids$text[k])
    } else if (tok == "expr") {
      res <- c(res, paste(name, arg_of(pd, kids$id[k]), sep = ":"))
      name <- "-"
    } else if (tok == "','" || tok == "')'") {
      name <- "-"
    }
  }
  res
}

# fn_of is the package and name of the function a call node id calls ("" when not a plain name).
fn_of <- function(pd, id) {
  kids <- children(pd, id)
  if (nrow(kids) == 0 || kids$token[1] != "expr") return(c("", ""))
  head <- children(pd, kids$id[1])
  f <- head$text[head$token == "SYMBOL_FUNCTION_CALL"]
  p <- head$text[head$token == "SYMBOL_PACKAGE"]
  c(if (length(p)) p[1] else "", if (length(f)) f[1] else "")
}

# children are the nodes whose parent is id, in source order (through the
# index by_parent, built once per unit).
by_parent <- list()
consts <- list()
children <- function(pd, id) {
  rows <- by_parent[[as.character(id)]]
  if (is.null(rows)) return(pd[0, ])
  kids <- pd[rows, ]
  kids[order(kids$line1, kids$col1), ]
}

read_unit <- function(i, pd) {
  by_parent <<- split(seq_len(nrow(pd)), pd$parent)
  consts <<- list()
  consts <<- unit_consts(pd)
  pk <- pd[pd$token == "SYMBOL_PACKAGE", ]
  for (j in seq_len(min(nrow(pk), max_items))) out("P", i, pk$line1[j], hex(pk$text[j]))
  fc <- pd[pd$token == "SYMBOL_FUNCTION_CALL", ]
  shown <- 0L
  for (j in seq_len(nrow(fc))) {
    call <- pd[as.character(fc$parent[j]), "parent"]
    pf <- fn_of(pd, call)
    if (!(fc$text[j] %in% watch || pf[1] %in% watch_pkgs) || shown >= max_items) next
    shown <- shown + 1L
    out("C", i, fc$line1[j], hex(pf[1]), hex(fc$text[j]), paste(call_args(pd, call), collapse = "\t"))
  }
  st <- pd[pd$token == "STR_CONST", ]
  for (j in seq_len(min(nrow(st), max_items))) {
    v <- str_value(st$text[j])
    if (is.na(v) || nchar(v, type = "bytes") > 4096 || !grepl(path_like, v, useBytes = TRUE)) next
    call <- pd[as.character(st$parent[j]), "parent"]
    pf <- if (length(call) == 1 && call != 0) fn_of(pd, call) else c("", "")
    out("S", i, st$line1[j], hex(v), hex(pf[2]))
  }
}

for (b in rownames(installed.packages(priority = "base"))) out("B", hex(b))
for (i in seq_len(n)) {
  f <- file.path(dir, paste0(i, ".R"))
  pd <- tryCatch(getParseData(parse(file = f, keep.source = TRUE, encoding = "UTF-8")),
                 error = function(e) e)
  if (inherits(pd, "error")) {
    msg <- conditionMessage(pd)
    line <- suppressWarnings(as.integer(sub("^[^:]*:([0-9]+):.*$", "\\1", msg)))
    out("E", i, if (is.na(line)) 0 else line, hex(gsub("\\s+", " ", msg)))
    next
  }
  if (!is.null(pd) && nrow(pd) > 0) read_unit(i, pd)
}
