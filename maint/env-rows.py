#!/usr/bin/env python3
"""Print the PSP_* rows of the C configuration tables in FILES, as `pscom_info -c -d` prints them.

Usage: maint/env-rows.py [--skip NAME,...] FILE.c...

A table is a `pscom_env_row_t NAME[] = { {"PSP_X", "default", "help" "more help", TYPE, &target,
min, max}, ..., {NULL, ...} };`. Its group is the first argument of the
`pscom_env_register("GROUP", NAME)` call in the same file, or, for a plugin's table
(`.env = NAME` in its pscom_plugin_t), the plugin's `.name`. Each group is printed as
`# GROUP`, then per row `NAME = DEFAULT # default DEFAULT` and the help text on the next line.
Variables named in --skip (printed already) are left out, and so is a group left empty.

maint/env-table.sh uses it for the rows that pscom_info cannot show: those the MPI netmod
registers inside an MPI process, and those of a plugin that is not built on this machine.
"""
import re
import sys

STRING = r'"(?:[^"\\]|\\.)*"'


def c_strings(text):
    """Adjacent C string literals in text, concatenated; escapes kept simple (\\" and \\\\)."""
    parts = re.findall(STRING, text)
    return "".join(p[1:-1].replace('\\"', '"').replace("\\\\", "\\") for p in parts)


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def tables(path):
    src = strip_comments(open(path, encoding="utf-8").read())
    # a default given by a macro: #define NAME "literal" in the same file
    macros = dict(re.findall(r"#define\s+(\w+)\s+(" + STRING + r")", src))
    groups = {}
    for m in re.finditer(r'pscom_env_register\s*\(\s*"([^"]+)"\s*,\s*(\w+)\s*\)', src):
        groups.setdefault(m.group(2), m.group(1))
    plugin = re.search(r'\.name\s*=\s*"([^"]+)"', src)
    for m in re.finditer(r"\.env\s*=\s*(\w+)", src):
        if plugin:
            groups.setdefault(m.group(1), plugin.group(1))
    for m in re.finditer(r"pscom_env_row_t\s+(\w+)\s*\[\s*\]\s*=\s*\{", src):
        name, start = m.group(1), m.end()
        depth, i = 1, start
        while depth and i < len(src):  # the array's closing brace
            if src[i] == '"':
                i = re.match(STRING, src[i:]).end() + i
                continue
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        body = src[start:i]
        for mac, lit in macros.items():
            body = re.sub(r"(\{\s*" + STRING + r"\s*,\s*)" + mac + r"\b",
                          lambda m: m.group(1) + lit, body)
        rows = []
        for r in re.finditer(r"\{(" + STRING + r")\s*,\s*(" + STRING + r")\s*,\s*((?:" + STRING +
                             r"\s*)+),", body):
            rows.append((c_strings(r.group(1)), c_strings(r.group(2)), c_strings(r.group(3))))
        read = set(r[0] for r in rows)
        for n, helpless in re.findall(r'\{\s*"(PSP_\w+)"\s*,\s*[^,]+,\s*(NULL)?', body):
            if n not in read and not helpless:  # a row without help is internal
                print("env-rows: %s: cannot read the row of %s" % (path, n), file=sys.stderr)
        if rows:
            yield groups.get(name, name), rows


def main(argv):
    skip = set()
    if len(argv) > 1 and argv[0] == "--skip":
        skip = set(g for g in argv[1].split(",") if g)
        argv = argv[2:]
    for path in argv:
        for group, rows in tables(path):
            rows = [r for r in rows if r[0] not in skip]
            if not rows:
                continue
            print("# " + group)
            for name, deflt, help_text in rows:
                shown = deflt if deflt else ""
                print("%-28s = %-12s # default %s" % (name, shown, deflt if deflt else '""'))
                print("    " + help_text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
