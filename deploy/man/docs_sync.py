#!/usr/bin/env python3
"""One source for what users read about options and environment variables.

  docs_sync.py client-man TSV OUT        write libiotrace-client(7) from clientlib/environment.tsv
  docs_sync.py client-table TSV DOC      rewrite the Environment table of docs/client.md from it
  docs_sync.py check SRC BIN_DIR         check that --help, --man, the docs and the library agree

The daemons' manual pages come from their own option tables (PROGRAM --man);
`check` fails when a program's documentation page misses an option of its
--help, when --man and --help list different options, when docs/client.md's
table is not the TSV's,
when the library reads an IOTRACE_ variable the TSV does not list (or the
reverse), or when groff warns about a built manual page."""
import glob
import os
import re
import subprocess
import sys

VERSION = os.environ.get("IOTRACE_VERSION", "")


def read_tsv(path):
    rows = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name, default, meaning = line.rstrip("\n").split("\t")
        rows.append((name, default, meaning))
    return rows


def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return ("\\&" + s) if s[:1] in (".", "'") else s


def client_man(tsv, out):
    rows = read_tsv(tsv)
    lines = [
        '.\\" Generated from clientlib/environment.tsv by deploy/man/docs_sync.py; do not edit.',
        f'.TH LIBIOTRACE-CLIENT 7 "" "iotrace {VERSION}" "iotrace"',
        ".SH NAME",
        "libiotrace\\-client \\- trace the MPI\\-IO and POSIX I/O of an MPI program for iotrace",
        ".SH SYNOPSIS",
        "mpiexec \\-genv LD_PRELOAD /usr/lib/x86_64\\-linux\\-gnu/libiotrace\\-client.so PROGRAM",
        ".SH DESCRIPTION",
        roff("Preloaded into the ranks of an MPI program, the library gives every MPI-IO call a "
             "CallID, records it with the POSIX I/O it makes, publishes the CallID of the call in "
             "progress in the node's CallID registry for the GlusterFS translator, and hands the "
             "records to the node's iotrace-agent. It never blocks the program: what it cannot "
             "hand over it drops and counts, and the count reaches the store."),
        ".SH ENVIRONMENT",
    ]
    for name, default, meaning in rows:
        lines += [".TP", f".B {roff(name)}", roff(f"{meaning} (default: {default})")]
    lines += [".SH SEE ALSO",
              roff("iotrace-agent(8), iotrace-collector(8), iotrace-export(1); docs/client.md "
                   "and docs/registry.md in the documentation directory.")]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


TABLE_HEAD = "| variable | default | meaning |\n| --- | --- | --- |\n"


def table(rows):
    return TABLE_HEAD + "".join(f"| `{n}` | {d} | {m} |\n" for n, d, m in rows)


def env_section(doc):
    text = open(doc).read()
    m = re.search(r"(## Environment\n\n)(\| variable \| default \| meaning \|\n\| --- \| --- \| --- \|\n(?:\|.*\n)*)",
                  text)
    if not m:
        raise SystemExit(f"{doc}: no Environment table")
    return text, m


def client_table(tsv, doc):
    text, m = env_section(doc)
    with open(doc, "w") as f:
        f.write(text[:m.start(2)] + table(read_tsv(tsv)) + text[m.end(2):])


def options_of(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    return sorted(set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", out, re.M)))


def literal_defaults(binary):
    """Options whose --help gives a default of one word ("(default 0666)",
    "(default: 10s)"): option -> that word."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    blocks, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^\s+(?:-\w, )?--([a-z0-9-]+)", line)
        if m:
            cur = m.group(1)
            blocks[cur] = line
        elif cur and line.startswith("    "):
            blocks[cur] += " " + line.strip()
        else:
            cur = None
    found = {}
    for opt, text in blocks.items():
        m = re.search(r"\(default:? ([^\s();,]+)[;)]", re.sub(r"\s+", " ", text))
        if m:
            found[opt] = m.group(1)
    return found


def doc_rows(doc_text, opt):
    """The table rows of docs/ whose first cell names --opt."""
    rows = []
    for line in doc_text.splitlines():
        if line.startswith("| "):
            first = re.split(r"(?<!\\) \| ", line[2:])[0]
            if re.search(rf"--{re.escape(opt)}\b", first):
                rows.append(line.replace("`", "").replace("\\", ""))
    return rows


LOOPBACK = re.compile(r"^(127\.|localhost\b|\[::1\])")


def scrape_examples(src):
    """docs/http-api.md's Prometheus examples: a collector serving beyond
    loopback requires --http-users, so such a scrape must log in."""
    problems = []
    text = open(os.path.join(src, "docs/http-api.md")).read()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        for job in re.split(r"^\s*- job_name:", block, flags=re.M)[1:]:
            beyond = [t for t in re.findall(r"['\"]([^'\"]+:\d+)['\"]", job) if not LOOPBACK.match(t)]
            if beyond and not re.search(r"^\s*basic_auth:", job, re.M):
                problems.append(f"docs/http-api.md: the Prometheus example scrapes {beyond} without "
                                f"basic_auth, which the collector requires beyond loopback")
    return problems


def check(src, bindir):
    problems = scrape_examples(src)
    rows = read_tsv(os.path.join(src, "clientlib/environment.tsv"))
    text, m = env_section(os.path.join(src, "docs/client.md"))
    if m.group(2) != table(rows):
        problems.append("docs/client.md: the Environment table is not clientlib/environment.tsv's "
                        "(deploy/man/docs_sync.py client-table rewrites it)")
    used = set()
    for path in glob.glob(os.path.join(src, "clientlib/*.c")) + [os.path.join(src, "common/registry.c")]:
        used |= set(re.findall(r'"(IOTRACE_[A-Z_]+)"', open(path).read()))
    listed = {r[0] for r in rows}
    for v in sorted(used - listed):
        problems.append(f"the library reads {v}, which clientlib/environment.tsv does not list")
    for v in sorted(listed - used):
        problems.append(f"clientlib/environment.tsv lists {v}, which the library does not read")
    for prog, doc in (("agent/iotrace-agent", "docs/agent.md"),
                      ("collector/iotrace-collector", "docs/collector.md"),
                      ("collector/iotrace-export", "docs/export.md"),
                      ("collector/iotrace-replay", "docs/replay.md")):
        binary = os.path.join(bindir, prog)
        opts = options_of(binary)
        man = subprocess.run([binary, "--man"], capture_output=True, text=True, check=True).stdout
        man_opts = sorted(set(re.findall(r"^\.B (?:\\-\w, )?\\-\\-([a-z0-9\\-]+)", man, re.M)))
        man_opts = sorted(o.replace("\\-", "-") for o in man_opts)
        if man_opts != opts:
            problems.append(f"{prog} --man lists {man_opts}, --help {opts}")
        doc_text = open(os.path.join(src, doc)).read()
        documented = set(re.findall(r"`(?:-\w, )?--([a-z0-9-]+)", doc_text))
        for o in opts:
            if o not in documented and o not in ("help", "version", "man"):
                problems.append(f"{doc} does not document --{o} of {os.path.basename(prog)}")
        # A default --help states as one word is in the option's row of docs/.
        for o, value in literal_defaults(binary).items():
            rows = doc_rows(doc_text, o)
            if not rows:
                problems.append(f"{doc}: no table row for --{o} of {os.path.basename(prog)}")
            elif not any(value in r for r in rows):
                problems.append(f"{doc}: --{o}'s row does not give its default {value} "
                                f"(--help of {os.path.basename(prog)})")
    pages = sorted(glob.glob(os.path.join(bindir, "deploy/man/*.[178]")))
    if len(pages) != 5:
        problems.append(f"manual pages built: {pages}")
    for page in pages:
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page], capture_output=True, text=True)
        if r.returncode != 0 or r.stderr.strip():
            problems.append(f"groff on {os.path.basename(page)}: {r.stderr.strip()}")
    for p in problems:
        print("FAIL:", p)
    if problems:
        sys.exit(1)
    print(f"ok: {len(rows)} environment variables and the options of 4 programs agree across "
          f"--help, --man, the TSV and docs/ (names, and the defaults --help gives as one word); "
          f"{len(pages)} manual pages render without a warning")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "client-man" and len(sys.argv) == 4:
        client_man(sys.argv[2], sys.argv[3])
    elif cmd == "client-table" and len(sys.argv) == 4:
        client_table(sys.argv[2], sys.argv[3])
    elif cmd == "check" and len(sys.argv) == 4:
        check(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
