#!/usr/bin/env python3
"""Writes every MPI-IO wrapper of libiotrace-client from mpiio_functions.tsv.

Each function is defined under its MPI_ and its PMPI_ name: a tool loaded
before iotrace (Darshan) forwards the application's calls to the PMPI_ name.
Both share one inline body and find the next definition of their own name
with dlsym(RTLD_NEXT), pass straight through when tracing is off or the call
is not the application's (iot_mpi_tracing, iot_mpi_from_mpi,
iot_mpi_app_query), and
otherwise bracket the call with the iot_mpi_enter*/iot_mpi_leave* helpers of
mpiio.c chosen by the row's kind.  The output is not a unit of its own:
mpiio.c includes it.
"""
import re
import sys

tsv, functions_tsv, out = sys.argv[1:4]

ids = {}
for line in open(functions_tsv):
    if line.startswith("#") or not line.strip():
        continue
    fid, kind, name, _family = line.rstrip("\n").split("\t")
    if kind == "mpiio":
        ids[name] = int(fid)

rows = []
for line in open(tsv):
    if line.startswith("#") or not line.strip():
        continue
    name, ret, kind, pos, direction, coll, params = line.rstrip("\n").split("\t")
    if name not in ids:
        sys.exit(f"{name}: not in proto/functions.tsv")
    rows.append((name, ret, kind, pos, direction, coll == "1", params))


def arg_names(params):
    names = []
    for p in params.split(","):
        m = re.search(r"(\w+)\s*(\[\])?\s*$", p.strip())
        names.append(m.group(1))
    return names


# Rows that only ask MPI something: recorded only when the application asks
# (see iot_mpi_app_query), as another tool's wrappers ask them too.
QUERY_KINDS = ("query", "conv")
ERROR = {"int": "MPI_ERR_INTERN", "MPI_Fint": "0", "MPI_File": "MPI_FILE_NULL"}
POS = {"at": "IOT_MF_AT", "ind": "IOT_MF_IND", "shared": "IOT_MF_SHARED"}
DIR = {"read": "IOT_MF_READ", "write": "IOT_MF_WRITE"}


def flags_of(pos, direction, coll):
    f = [POS[pos]] if pos in POS else []
    f += [DIR[direction]] if direction in DIR else []
    f += ["IOT_MF_COLL"] if coll else []
    return " | ".join(f) or "0"


def body(name, ret, kind, pos, direction, coll, params):
    args = arg_names(params)
    call = f"next({', '.join(args)})"
    fid = ids[name]
    flags = flags_of(pos, direction, coll)
    fh = "fh" if "fh" in args else "MPI_FILE_NULL"
    count = "count" if "count" in args else "0"
    dtype = "datatype" if "datatype" in args else "MPI_DATATYPE_NULL"
    offset = "offset" if "offset" in args and kind in ("rw", "nb", "begin") else "0"
    lines = []
    if "status" in args:
        lines.append("    MPI_Status iot_status;")
        lines.append("    if (status == MPI_STATUS_IGNORE)")
        lines.append("        status = &iot_status;")
    lines.append("    struct iot_mpi_call c;")
    if kind in ("open", "delete"):
        lines.append(f"    iot_mpi_enter_path(&c, {fid}, {flags}, filename);")
    elif kind == "close":
        lines.append("    MPI_File closing = *fh;")
        lines.append(f"    iot_mpi_enter(&c, on, {fid}, {flags}, closing, 0, 0, MPI_DATATYPE_NULL);")
    elif kind == "end":
        lines.append(f"    iot_mpi_enter_end(&c, {fid}, {flags}, fh);")
    else:
        lines.append(f"    iot_mpi_enter(&c, on, {fid}, {flags}, {fh}, {offset}, {count}, {dtype});")
    if "size" in args and kind == "meta":
        lines.append("    c.offset = size; /* the size asked for, in the offset column */")
    if kind == "open":
        lines.append("    c.offset = iot_mpi_info_id(info, amode); /* mode and hints, by id */")
        lines.append("    c.coll_group = iot_mpi_comm_group(comm); /* whose collectives */")
    elif name == "MPI_File_set_info":
        lines.append("    c.offset = iot_mpi_info_id(info, -1); /* the hints, by id */")
    if ret == "int":
        lines.append(f"    int ret = {call};")
        code = "ret"
    else:
        lines.append(f"    {ret} ret = {call};")
        code = "MPI_SUCCESS"
    if kind == "open":
        lines.append(f"    iot_mpi_leave_open(&c, ret, *fh);")
    elif kind == "close":
        lines.append(f"    iot_mpi_leave_close(&c, ret, closing);")
    elif kind == "nb":
        lines.append(f"    iot_mpi_leave_request(&c, ret, request);")
    elif kind == "begin":
        lines.append(f"    iot_mpi_leave_begin(&c, ret);")
    elif name == "MPI_File_set_view":
        lines.append(f"    iot_mpi_leave_view(&c, ret, fh, disp, etype, filetype);")
    elif name == "MPI_File_seek":
        lines.append(f"    iot_mpi_leave_seek(&c, ret, offset, whence);")
    elif "status" in args:
        lines.append(f"    iot_mpi_leave(&c, ret, status);")
    else:
        lines.append(f"    iot_mpi_leave(&c, {code}, NULL);")
    lines.append("    return ret;")
    return "\n".join(lines)


def entry(f, name, pname, ret, params, via):
    args = ", ".join(arg_names(params))
    f.write(f"{ret} {pname}({params})\n{{\n")
    f.write(f"    if (IOT_UNLIKELY(!next_{pname})) {{\n")
    f.write(f"        next_{pname} = (iot_fn_{name})iot_mpi_next(\"{pname}\");\n")
    f.write(f"        if (!next_{pname})\n            return {ERROR[ret]};\n    }}\n")
    f.write(f"    return body_{name}(next_{pname}, {via}, __builtin_return_address(0), {args});\n")
    f.write("}\n\n")


with open(out, "w") as f:
    f.write("/* Generated by gen_wrappers.py from mpiio_functions.tsv. Do not edit.\n"
            " * Included by mpiio.c, whose static helpers it calls. */\n\n")
    for name, ret, kind, pos, direction, coll, params in rows:
        args = ", ".join(arg_names(params))
        pname = "P" + name
        f.write(f"typedef {ret} (*iot_fn_{name})({params});\n")
        f.write(f"static iot_fn_{name} next_{name}, next_{pname};\n\n")
        f.write(f"static inline __attribute__((always_inline)) {ret}\n"
                f"body_{name}(iot_fn_{name} next, int via_pmpi, const void *caller, "
                f"{params})\n{{\n")
        f.write("    int on = iot_mpi_tracing();\n")
        if kind in QUERY_KINDS:
            f.write("    (void)via_pmpi; /* either name: the caller decides */\n")
            f.write(f"    if (!on || !iot_mpi_app_query(caller, \"{name}\"))\n")
        else:
            f.write("    if (!on || (via_pmpi && iot_mpi_from_mpi(caller)))\n")
        f.write(f"        return next({args});\n")
        f.write(body(name, ret, kind, pos, direction, coll, params))
        f.write("\n}\n\n")
        entry(f, name, name, ret, params, 0)
        entry(f, name, pname, ret, params, 1)
