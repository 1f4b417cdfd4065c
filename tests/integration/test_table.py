#!/usr/bin/env python3
"""Every MPI_File_* function MPICH's headers declare is in the wrapper table,
and libiotrace-client.so defines it under its MPI_ and its PMPI_ name (a tool
loaded before iotrace forwards to the PMPI_ one)."""
import re
import subprocess
import sys

table, lib, *headers = sys.argv[1:]
text = " ".join(open(h).read() for h in headers)
declared = set(re.findall(r"\b(?:int|MPI_Fint|MPI_File)\s+(MPI_File_\w+)\s*\(", text))
rows = {l.split("\t")[0] for l in open(table) if l.strip() and not l.startswith("#")}
missing = declared - rows
assert not missing, f"not in the table: {sorted(missing)}"
syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                      check=True).stdout
exported = set(re.findall(r" T (\w+)", syms))
both = rows | {"MPI_Init", "MPI_Init_thread", "MPI_Finalize"}
undefined = (both | {"P" + name for name in both} |
             {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall",
              "MPI_Testany", "MPI_Testsome"}) - exported
assert not undefined, f"not defined by the library: {sorted(undefined)}"
print(f"ok: {len(declared)} MPI_File functions declared, all {len(rows)} table rows wrapped "
      "under both names")
