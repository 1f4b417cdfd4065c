#!/usr/bin/env python3
"""Generates iot_functions.h/.c from functions.tsv: the stable function ids."""
import sys

tsv, out_h, out_c = sys.argv[1:4]
rows = []
for line in open(tsv):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    fid, kind, name, _family = line.split("\t")  # family: for collector/export/gen_colours.py
    rows.append((int(fid), kind, name))

ids = [r[0] for r in rows]
if len(set(ids)) != len(ids):
    sys.exit("functions.tsv: duplicate id")
top = max(ids) + 1

def ident(kind, name):
    return f"IOT_F_{kind.upper()}_{name.lstrip('_')}"

with open(out_h, "w") as h:
    h.write("/* Generated from proto/functions.tsv by gen_functions.py. Do not edit. */\n")
    h.write("#ifndef IOT_FUNCTIONS_H\n#define IOT_FUNCTIONS_H\n\n")
    h.write("enum iot_func_kind { IOT_KIND_NONE = 0, IOT_KIND_MPIIO, IOT_KIND_POSIX, IOT_KIND_DISK };\n\n")
    h.write("enum iot_func {\n    IOT_F_NONE = 0,\n")
    for fid, kind, name in rows:
        h.write(f"    {ident(kind, name)} = {fid},\n")
    h.write(f"    IOT_F_LIMIT = {top}\n}};\n\n")
    h.write("/* Real name of a function id (\"MPI_File_write_at\", \"pwrite\", \"writev\"), or NULL. */\n")
    h.write("const char *iot_func_name(unsigned id);\n")
    h.write("enum iot_func_kind iot_func_kind(unsigned id);\n")
    h.write("/* Id of a function by kind and name, IOT_F_NONE if unknown. */\n")
    h.write("unsigned iot_func_lookup(enum iot_func_kind kind, const char *name);\n\n#endif\n")

with open(out_c, "w") as c:
    c.write("/* Generated from proto/functions.tsv by gen_functions.py. Do not edit. */\n")
    c.write('#include "iot_functions.h"\n#include <string.h>\n\n')
    c.write(f"static const char *const names[{top}] = {{\n")
    for fid, kind, name in rows:
        c.write(f'    [{fid}] = "{name}",\n')
    c.write("};\n\n")
    c.write(f"static const unsigned char kinds[{top}] = {{\n")
    for fid, kind, name in rows:
        c.write(f"    [{fid}] = IOT_KIND_{kind.upper()},\n")
    c.write("};\n\n")
    c.write(f"const char *iot_func_name(unsigned id) {{ return id < {top} ? names[id] : NULL; }}\n\n")
    c.write(f"enum iot_func_kind iot_func_kind(unsigned id)\n{{\n    return id < {top} ? (enum iot_func_kind)kinds[id] : IOT_KIND_NONE;\n}}\n\n")
    c.write("unsigned iot_func_lookup(enum iot_func_kind kind, const char *name)\n{\n")
    c.write(f"    for (unsigned i = 1; i < {top}; i++)\n")
    c.write("        if (names[i] && kinds[i] == kind && strcmp(names[i], name) == 0)\n            return i;\n")
    c.write("    return IOT_F_NONE;\n}\n")
