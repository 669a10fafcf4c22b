# The Python reader of `dotlab manifest init` (scaffold/parse.go): parses each
# unit of source text with the standard library's ast module and reports what
# it imports, the calls it makes to watched names and the string literals
# passed to calls. Nothing is executed: ast.parse builds a syntax tree only.
#
# stdin: {"units": ["<source>", ...], "watch": ["<last name>", ...], "watch_modules": ["<module>", ...]}
# stdout: {"stdlib": [...], "units": [{"error": "...", "line": N} or {"imports": [{"name", "line"}],
#          "calls": [{"func", "line", "args": [{"name", "kind", "value"}]}],
#          "strings": [{"value", "line", "func"}]}]} (path-like literals; func: the call they are passed to)
# A call is reported when its last name is in "watch" or its first in "watch_modules".
import ast
import json
import re
import sys

MAX_ITEMS = 20000  # per unit and kind: a generated file cannot flood the output
# The strings reported: absolute paths, home-relative paths, drive letters, UNC paths, URLs.
PATH_LIKE = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\\\\|[A-Za-z][A-Za-z0-9+.-]*://)")


def dotted(node, aliases):
    """The dotted name of a Name/Attribute chain, its first part resolved
    through the unit's import aliases; "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def literal(node, aliases, consts):
    """(kind, value): a string constant, a module-level name bound once to
    one (consts), a path joined from those (os.path.join, pathlib.Path),
    another name, another constant (num: a number, None, True), or other."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "str", node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return "str", consts[node.id]
    if isinstance(node, ast.Constant):
        return "num", repr(node.value)
    if isinstance(node, ast.Name):
        return "sym", node.id
    if isinstance(node, ast.Call) and dotted(node.func, aliases) in (
            "os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath"):
        parts = [literal(a, aliases, consts) for a in node.args]
        if parts and all(k == "str" for k, _ in parts):
            return "str", "/".join(v for _, v in parts)
    return "other", ""


def assigned_names(node):
    """The names a statement or expression binds."""
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.comprehension)):
        targets = [node.target]
    else:
        return []
    names = []
    while targets:
        t = targets.pop()
        if isinstance(t, ast.Name):
            names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            targets.extend(t.elts)
    return names


def module_constants(tree):
    """The module-level names bound exactly once in the unit, to a string constant."""
    counts = {}
    for node in ast.walk(tree):
        for n in assigned_names(node):
            counts[n] = counts.get(n, 0) + 1
    consts = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                and counts.get(node.targets[0].id) == 1):
            consts[node.targets[0].id] = node.value.value
    return consts


def read_unit(src, watch, watch_modules):
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None) or 0
        return {"error": "%s: %s" % (type(e).__name__, getattr(e, "msg", str(e))), "line": line}
    except (RecursionError, MemoryError) as e:
        return {"error": "%s: too deeply nested to parse" % type(e).__name__, "line": 0}
    aliases, imports = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                imports.append({"name": a.name, "line": node.lineno})
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imports.append({"name": node.module, "line": node.lineno})
            for a in node.names:
                aliases[a.asname or a.name] = node.module + "." + a.name
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))
    calls, strings, arg_of = [], [], {}
    consts = module_constants(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = dotted(node.func, aliases)
        last = func.rsplit(".", 1)[-1]
        if func in ("importlib.import_module", "__import__") and node.args:
            kind, value = literal(node.args[0], aliases, consts)
            if kind == "str":
                imports.append({"name": value, "line": node.lineno})
        argnodes = [("", a) for a in node.args] + [(k.arg or "", k.value) for k in node.keywords]
        if (last in watch or func.split(".")[0] in watch_modules) and len(calls) < MAX_ITEMS:
            args = [dict(zip(("name", "kind", "value"), (name, *literal(a, aliases, consts)))) for name, a in argnodes]
            calls.append({"func": func, "line": node.lineno, "args": args})
        for _, a in argnodes:
            arg_of[id(a)] = func
    for node in ast.walk(tree):
        kind, value = literal(node, aliases, {}) if isinstance(node, ast.Constant) else ("other", "")
        if (kind == "str" and id(node) not in docstrings and len(strings) < MAX_ITEMS
                and len(value) < 4096 and PATH_LIKE.match(value)):
            strings.append({"value": value, "line": node.lineno, "func": arg_of.get(id(node), "")})
    return {"imports": imports[:MAX_ITEMS], "calls": calls, "strings": strings}


def main():
    req = json.load(sys.stdin)
    watch, watch_modules = set(req["watch"]), set(req["watch_modules"])
    units = [read_unit(u, watch, watch_modules) for u in req["units"]]
    json.dump({"stdlib": sorted(getattr(sys, "stdlib_module_names", ())), "units": units}, sys.stdout)


main()
