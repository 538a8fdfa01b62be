#!/usr/bin/python3
"""mkman.py — herd's man pages and bash completion, generated from the code.

    mkman.py --herd bin/herd --agent bin/herd-agent --spec-dir lib/job \
             --keys doc/keys.md --out DIR --completion FILE

writes into DIR:
  herd.1          from `herd --help` (the command table of launcher/main.c)
  herd-CMD.1      one per command, from `herd CMD --help`
  herd-agent.1    from `herd-agent --help`
  herd.yaml.5     the keys of the job file: the names from the spec
                  schema (the `.name = "..."` entries of lib/job/spec*.c), the
                  defaults from `herd validate --print`, the meanings from
                  the key reference's table ("### Every key" of doc/keys.md;
                  a Markdown link there is its text in the page)
and FILE, the bash completion: the commands and each command's options
from the same --help texts.

The pages cannot drift from --help: they are made from it at build time.
A key of the schema without a line in the key reference is named on
stderr and, with --strict, is an error (exit 1).  The date of the pages
is SOURCE_DATE_EPOCH's (reproducible builds), else today's.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys

# ---- reading the help texts ----------------------------------------------


def run(argv):
    """stdout of argv, which must exit 0."""
    env = dict(os.environ, LC_ALL="C", COLUMNS="80")
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, stdin=subprocess.DEVNULL, check=False)
    if p.returncode != 0:
        sys.exit("mkman: %s exited %d: %s" %
                 (" ".join(argv), p.returncode,
                  p.stderr.decode(errors="replace").strip()))
    return p.stdout.decode()


def commands_of(main_help):
    """[(name, args, summary)] from the table `herd --help` prints.

    The summary column is where every row has a word start after a space
    (the table is printed with fixed widths)."""
    rows = []
    on = False
    for line in main_help.splitlines():
        if line.startswith("commands:"):
            on = True
            continue
        if on and not line.strip():
            break
        if on and line.startswith("  herd "):
            rows.append(line)
    if not rows:
        sys.exit("mkman: no command table in herd --help")
    width = min(len(r) for r in rows)
    col = None
    for c in range(width - 1, 8, -1):
        if all(r[c - 1] == " " and r[c] != " " for r in rows):
            col = c
            break
    if col is None:
        sys.exit("mkman: cannot find the summary column of herd --help")
    out = []
    for r in rows:
        head, summary = r[:col].split(), r[col:].strip()
        out.append((head[1], " ".join(head[2:]), summary))
    return out


def parse_help(text):
    """The parts of a --help text.

    Returns (synopsis, sections): synopsis is a list of the usage lines
    (continuations joined); sections is a list of ("text", [lines]) and
    ("list", [(tag, [desc lines])]) and ("exit", [lines]) in order."""
    lines = text.rstrip("\n").split("\n")
    if not lines or not lines[0].startswith("usage: "):
        sys.exit("mkman: a --help text must start with 'usage: '")
    synopsis = []
    i = 0
    while i < len(lines) and lines[i].strip():
        s = lines[i][len("usage: "):] if i == 0 else lines[i]
        if i == 0 or s.lstrip().startswith("herd"):
            synopsis.append(s.strip())
        else:
            synopsis[-1] += " " + s.strip()
        i += 1
    blocks, cur = [], []
    for line in lines[i:]:
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    sections = []
    for b in list(blocks):
        # "... a summary.  Exit status: 0 ...": the exit status starts a
        # section of its own.
        for j, line in enumerate(b):
            col = line.find("Exit status:")
            if col > 0 and not line.startswith(" "):
                head = b[:j] + ([line[:col].rstrip()]
                                if line[:col].strip() else [])
                b[:] = ["Exit status:" + line[col + len("Exit status:"):]] \
                    + b[j + 1:]
                sections += parse_block(head)
                break
        sections += parse_block(b)
    return synopsis, sections


def parse_block(b):
    """The sections of one paragraph of a --help text."""
    if not b:
        return []
    if b[0].startswith("Exit status:"):
        return [("exit", [b[0][len("Exit status:"):].strip()] + b[1:])]
    sections, seg = [], []  # seg: lines all flush left or all indented
    for line in b:
        indented = line.startswith(" ")
        if seg and seg[0].startswith(" ") == indented:
            seg.append(line)
        else:
            if seg:
                sections.append(segment(seg))
            seg = [line]
    sections.append(segment(seg))
    return sections


def indent(s):
    return len(s) - len(s.lstrip(" "))


def segment(seg):
    if not seg[0].startswith(" "):
        return ("text", seg)
    # A definition list: a tag at the smallest indent, its text after a
    # gap of two or more spaces (or at the column the continuation lines
    # share), continuation lines further in.
    base = min(indent(s) for s in seg)
    conts = [indent(s) for s in seg if indent(s) > base]
    col = max(set(conts), key=conts.count) if conts else None
    items = []
    for s in seg:
        if indent(s) > base and items:
            items[-1][1].append(s.strip())
            continue
        body = s[base:]
        m = re.match(r"(\S.*?)(?: {2,}|$)(.*)", body)
        tag, desc = m.group(1), m.group(2)
        if not m.group(2) and col and len(s) > col and s[col - 1] == " " \
                and s[col] != " ":
            tag, desc = s[base:col].strip(), s[col:]
        items.append((tag.strip(), [desc.strip()] if desc.strip() else []))
        if desc and re.search(r"\S {3,}\S", desc):
            items[-1][1][0] = "\0" + desc.strip()  # aligned: keep lines
    for tag, desc in items:
        if any(re.search(r"\S {3,}\S", d) for d in desc[1:]):
            if desc and not desc[0].startswith("\0"):
                desc[0] = "\0" + desc[0]
    return ("list", items)


def options_of(sections):
    """[(option, takes_argument, metavar)] of a command's option lists."""
    out = []
    for kind, body in sections:
        if kind != "list":
            continue
        for tag, _ in body:
            if not tag.startswith("-"):
                continue
            found = []
            for alt in tag.split(", "):
                words = alt.split()
                for j, w in enumerate(words):
                    if re.fullmatch(r"--?[A-Za-z][\w-]*", w):
                        arg = words[j + 1] if j + 1 < len(words) and \
                            not words[j + 1].startswith("-") else ""
                        if arg.startswith("["):
                            arg = ""
                        found.append([w, arg])
            # "-o, --output FILE": -o takes FILE too
            arg = next((a for _, a in found if a), "")
            out += [(w, a or arg) for w, a in found]
    seen, uniq = set(), []
    for o, a in out:
        if o not in seen:
            seen.add(o)
            uniq.append((o, a))
    return uniq

# ---- writing man(7) --------------------------------------------------------


def esc(s):
    """Text for a man(7) text line: backslashes, option dashes, `code`."""
    s = s.replace("\\", "\\e")
    s = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in s)
    s = re.sub(r"(?<![\w-])--?[A-Za-z0-9][\w-]*",
               lambda m: m.group(0).replace("-", "\\-"), s)
    s = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", s)
    s = re.sub(r"\[([^]]+)\]\((?:[^)]+)\)", r"\1", s)  # markdown links
    if s[:1] in (".", "'"):
        s = "\\&" + s
    return s


def bold_opts(s):
    return re.sub(r"(?<![\w\\-])((?:\\-)+[A-Za-z0-9][\w\\-]*)",
                  r"\\fB\1\\fR", esc(s))


def text_lines(lines):
    out = []
    for line in lines:
        out.append(esc(line.strip()))
    return out


def list_lines(items, opts):
    out = []
    for tag, desc in items:
        out.append(".TP")
        out.append(bold_opts(tag) if opts else "\\fB%s\\fR" % esc(tag))
        if desc and desc[0].startswith("\0"):
            out.append(".nf")
            out.extend(esc(d.lstrip("\0")) for d in desc)
            out.append(".fi")
        else:
            out.extend(esc(d) for d in desc)
    return out


def finish(lines):
    """The page's text: no paragraph macro right after a heading, text
    lines (outside .nf) wrapped at 78 bytes on spaces."""
    import textwrap
    out, nofill = [], False
    for line in "\n".join(lines).split("\n"):
        if line == ".PP" and out and out[-1].startswith((".SH", ".SS",
                                                          ".TP", ".PP")):
            continue
        if line in (".nf", ".fi"):
            nofill = line == ".nf"
        if nofill or line.startswith(".") or len(line) <= 78 or \
                (out and out[-1] == ".TP"):
            out.append(line)
            continue
        for part in textwrap.wrap(line, 78, break_long_words=False,
                                  break_on_hyphens=False):
            out.append("\\&" + part if part[:1] in (".", "'") else part)
    return "\n".join(out) + "\n"


def header(name, section, date, version, title):
    return ['.\\" Generated by scripts/mkman.py from the code; do not edit.',
            '.TH "%s" "%s" "%s" "herd %s" "%s"' %
            (name.upper(), section, date, version, title)]


def synopsis_lines(synopsis):
    out = [".SH SYNOPSIS"]
    for j, s in enumerate(synopsis):
        words = s.split(" ", 2)
        if j:
            out.append(".br")
        # "herd CMD" bold, the rest with its options bold
        n = 2 if words[0] == "herd" and len(words) > 1 and \
            not words[1].startswith(("-", "[")) else 1
        out.append("\\fB%s\\fR %s" % (esc(" ".join(words[:n])),
                                       bold_opts(" ".join(words[n:]))))
    return out


def command_page(name, summary, text, date, version, see):
    synopsis, sections = parse_help(text)
    out = header(name, "1", date, version, "herd manual")
    out += [".SH NAME", "%s \\- %s" % (name, esc(summary))]
    out += synopsis_lines(synopsis)
    desc = [s for s in sections
            if s[0] == "text" or (s[0] == "list" and
                                  not s[1][0][0].startswith("-"))]
    opts = [s for s in sections
            if s[0] == "list" and s[1][0][0].startswith("-")]
    exits = [s for s in sections if s[0] == "exit"]
    if desc:
        out.append(".SH DESCRIPTION")
        prev = None
        for kind, body in desc:
            if kind == "text":
                if prev != "text-cont":
                    out.append(".PP")
                out += text_lines(body)
                prev = "text"
            else:
                out += list_lines(body, False)
                out.append(".PP")
                prev = "text-cont"
        if out[-1] == ".PP":
            out.pop()
    if opts:
        out.append(".SH OPTIONS")
        for _, body in opts:
            out += list_lines(body, True)
    if exits:
        out.append(".SH EXIT STATUS")
        for _, body in exits:
            out += text_lines(body)
    out.append(".SH SEE ALSO")
    out.append(",\n".join("\\fB%s\\fR(%s)" % (p, s) for p, s in see))
    return finish(out)


def main_page(help_text, cmds, date, version):
    intro = help_text.split("\n\n")[1].strip()
    out = header("herd", "1", date, version, "herd manual")
    out += [".SH NAME", "herd \\- %s" % esc(
        intro.rstrip(".").replace("herd launches", "launch"))]
    out += [".SH SYNOPSIS", "\\fBherd\\fR \\fICOMMAND\\fR [\\fIARGS\\fR]",
            ".br", "\\fBherd\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR",
            ".br", "\\fBherd \\-\\-version\\fR"]
    out += [".SH DESCRIPTION", esc(intro),
            "Each command has a page of its own, \\fBherd\\-\\fR\\fIcommand\\fR(1),",
            "made from the text \\fBherd\\fR \\fIcommand\\fR \\fB\\-\\-help\\fR prints;",
            "the job file is described in \\fBherd.yaml\\fR(5).",
            ".SH COMMANDS"]
    for name, args, summary in cmds:
        out.append(".TP")
        out.append("\\fBherd %s\\fR %s" % (name, bold_opts(args)))
        out.append("%s; see \\fBherd\\-%s\\fR(1)." % (esc(summary), name))
    out += [".SH FILES",
            ".TP", "\\fI../share/herd/templates/\\fR",
            "beside the directory of \\fBherd\\fR (or \\fI../templates/\\fR in a",
            "source tree): the job templates of \\fBherd render\\fR and the",
            "projects of \\fBherd init\\fR.",
            ".TP", "\\fIherd\\-agent\\fR",
            "in the directory of \\fBherd\\fR: the agent herd starts on every",
            "node (uploaded there over SSH); see \\fBherd\\-agent\\fR(1).",
            ".TP", "\\fI../share/herd/python/herd/\\fR",
            "the Python package the ranks import.",
            ".SH SEE ALSO"]
    see = ["\\fBherd\\-%s\\fR(1)" % n for n in sorted({c[0] for c in cmds})]
    see += ["\\fBherd\\-agent\\fR(1)", "\\fBherd.yaml\\fR(5)"]
    out.append(",\n".join(see))
    return finish(out)


def agent_page(text, date, version):
    synopsis, sections = parse_help(text)
    # The usage line lists the options; the paragraph explains them.
    out = header("herd-agent", "1", date, version, "herd manual")
    out += [".SH NAME", "herd-agent \\- the node agent of herd"]
    out += synopsis_lines(synopsis)
    out.append(".SH DESCRIPTION")
    for kind, body in sections:
        out.append(".PP")
        if kind == "list":
            out += list_lines(body, True)
        else:
            out += text_lines(body)
    out += [".SH SEE ALSO", "\\fBherd\\fR(1), \\fBherd.yaml\\fR(5)"]
    return finish(out)

# ---- herd.yaml(5) -------------------------------------------------------


def schema_keys(spec_dir):
    """The keys of the spec schema, in the order of the tables."""
    keys = []
    for root, _, files in sorted(os.walk(spec_dir)):
        for f in sorted(files):
            if re.fullmatch(r"spec\w*\.c", f):
                with open(os.path.join(root, f)) as fh:
                    keys += re.findall(r'\.name\s*=\s*"([a-z_.]+)"',
                                       fh.read())
    if not keys:
        sys.exit("mkman: no keys found in %s/spec*.c" % spec_dir)
    seen, out = set(), []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    # A section (nodes, ssh, ...) is a key only when nothing is under it.
    tops = [k for k in out if "." not in k]
    keys = [k for k in out if k == "name" or "." in k]

    def order(k):
        parts = k.split(".")
        parent = ".".join(parts[:2])
        return (tops.index(parts[0]) if parts[0] in tops else len(tops),
                keys.index(parent) if parent in keys else keys.index(k),
                len(parts), keys.index(k))
    return sorted(keys, key=order)


def printed_defaults(herd):
    """{key: value} from `herd validate --print` of a minimal job."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        job = os.path.join(d, "job.yaml")
        with open(job, "w") as fh:
            fh.write("nodes:\n  hosts: localhost\nlaunch:\n"
                     "  command: 'true'\n")
        text = run([herd, "validate", "--print", job])
    out, section = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\s*)([a-z_]+):\s?(.*)$", line)
        if not m:
            continue
        ind, k, v = m.groups()
        if not ind:
            section = k if not v else None
            if v:
                out[k] = v
        elif section and len(ind) == 2:
            out["%s.%s" % (section, k)] = v
    out.pop("name", None)          # the temporary file's name
    out.pop("nodes.hosts", None)   # the minimal job's value
    out.pop("launch.command", None)
    return out


def unlink(text):
    """text with each Markdown link [words](target) as its words."""
    return re.sub(r"\[([^\]]*)\]\([^()\s]*\)", r"\1", text)


def reference_keys(path):
    """(intro lines, {key: (default, meaning)}) of the key reference's
    "### Every key" table."""
    with open(path) as fh:
        lines = unlink(fh.read()).split("\n")
    try:
        start = next(i for i, l in enumerate(lines)
                     if l.strip() == "### Every key")
    except StopIteration:
        sys.exit("mkman: %s has no '### Every key' section" % path)
    intro, rows = [], {}
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            cells = [c.strip() for c in
                     re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if len(cells) == 3 and cells[0].startswith("`"):
                rows[cells[0].strip("`")] = (cells[1].replace("\\|", "|"),
                                             cells[2].replace("\\|", "|"))
        elif not rows and line.strip():
            intro.append(line.strip())
    return intro, rows


def covered(key, rows):
    """The reference's row that documents key: its own, a parent's or X.*."""
    k = key
    while True:
        if k in rows:
            return k
        if k + ".*" in rows:
            return k + ".*"
        if "." not in k:
            return None
        k = k.rsplit(".", 1)[0]


def yaml_page(keys, defaults, intro, rows, date, version):
    out = header("herd.yaml", "5", date, version, "herd file formats")
    out += [".SH NAME", "herd.yaml \\- the job file of herd",
            ".SH DESCRIPTION",
            "A job file is one YAML mapping: the job's \\fBname\\fR and the",
            "sections \\fBnodes\\fR, \\fBssh\\fR, \\fBlaunch\\fR, \\fBbind\\fR,",
            "\\fBhealth\\fR, \\fBrestart\\fR, \\fBcheckpoint\\fR, \\fBlog\\fR,",
            "\\fBmetrics\\fR and \\fBslurm\\fR.",
            "\\fBlaunch.command\\fR is the one key a job must have.",
            ".PP"]
    out += text_lines(intro)
    out += [".SH KEYS"]
    # Keys documented by one line of the reference (a key and the keys
    # under it, or X.*) are one entry.
    groups = {}
    for k in keys:
        groups.setdefault(covered(k, rows) or k, []).append(k)
    section, missing, done = None, [], set()
    for k in keys:
        row = covered(k, rows)
        if (row or k) in done:
            continue
        done.add(row or k)
        members = groups[row or k]
        top = k.split(".")[0] if "." in k else None
        if top != section and top:
            out.append(".SS %s" % top)
            section = top
        dflt = defaults.get(k) if len(members) == 1 else None
        if dflt in (None, "~", "[]", "{}"):
            dflt = rows[row][0] if row else None
        else:
            dflt = "`%s`" % dflt
        out.append(".TP")
        tag = "\\fB%s\\fR" % esc(row or k)
        if dflt and dflt not in ("\u2014", "-"):
            tag += " (default: %s)" % esc(dflt)
        out.append(tag)
        if row is None:
            missing.append(k)
            out.append("Not described in doc/keys.md.")
        else:
            out.append(esc(rows[row][1]))
        if len(members) > 1:
            out += [".br", "Keys: " + ", ".join("\\fB%s\\fR" % esc(m)
                                                for m in members) + "."]
    out += [".SH EXAMPLES", ".nf",
            "name: llama-ft",
            "nodes:",
            "  hosts: node[01\\-04]",
            "  slots: 8",
            "  spares: node[05\\-06]",
            "launch:",
            "  command: python3 train.py \\-\\-ckpt /shared/ckpt {{resume_args}}",
            "checkpoint:",
            "  dir: /shared/ckpt",
            "  pattern: step_*",
            ".fi",
            ".PP",
            "\\fBherd validate \\-\\-print\\fR \\fIjob.yaml\\fR shows a job",
            "with every default filled in.",
            ".SH SEE ALSO",
            "\\fBherd\\fR(1), \\fBherd\\-validate\\fR(1), \\fBherd\\-run\\fR(1)"]
    return finish(out), missing

# ---- bash completion -------------------------------------------------------


FILE_ARGS = re.compile(r"(FILE|DIR|yaml|RUNDIR|LOGDIR|html|xml)", re.I)


def completion(cmds, opts_by_cmd):
    names = []
    for n, _, _ in cmds:
        if n not in names:
            names.append(n)
    out = ["# bash completion for herd; generated by scripts/mkman.py from",
           "# the --help texts.  Do not edit.",
           "_herd_files()",
           "{",
           "\tlocal IFS=$'\\n'",
           "\tcompopt -o filenames 2>/dev/null",
           "\tif [ \"$2\" = job ]; then",
           "\t\tCOMPREPLY+=($(compgen -d -- \"$1\"))",
           "\t\tCOMPREPLY+=($(compgen -f -X '!*.y*ml' -- \"$1\"))",
           "\telse",
           "\t\tCOMPREPLY+=($(compgen -f -- \"$1\"))",
           "\tfi",
           "}",
           "",
           "_herd()",
           "{",
           "\tlocal cur=${COMP_WORDS[COMP_CWORD]}",
           "\tlocal prev=${COMP_WORDS[COMP_CWORD-1]}",
           "\tCOMPREPLY=()",
           "\tif [ \"$COMP_CWORD\" -eq 1 ]; then",
           "\t\tCOMPREPLY=($(compgen -W '%s --help --version' -- \"$cur\"))"
           % " ".join(names),
           "\t\treturn",
           "\tfi",
           "\tlocal opts=",
           "\tcase ${COMP_WORDS[1]} in"]
    for n in names:
        opts = opts_by_cmd[n]
        with_file = [o for o, a in opts if a and FILE_ARGS.search(a)]
        with_arg = [o for o, a in opts if a and not FILE_ARGS.search(a)]
        out.append("\t%s)" % n)
        out.append("\t\topts='%s'" % " ".join(o for o, _ in opts))
        if with_file or with_arg:
            out.append("\t\tcase $prev in")
            if with_file:
                out.append("\t\t%s) _herd_files \"$cur\" any; return ;;" %
                           "|".join(with_file))
            if with_arg:
                out.append("\t\t%s) return ;;" % "|".join(with_arg))
            out.append("\t\tesac")
        out.append("\t\t;;")
    out += ["\t*) return ;;",
            "\tesac",
            "\tcase $cur in",
            "\t-*) COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")) ;;",
            "\t*)",
            "\t\tcase ${COMP_WORDS[1]} in",
            "\t\tinit|render)",
            "\t\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then",
            "\t\t\t\tCOMPREPLY=($(compgen -W \"$(\"${COMP_WORDS[0]}\" "
            "${COMP_WORDS[1]} --list 2>/dev/null | sed -n 's/^ *\\([a-z0-9_]*\\)  .*/\\1/p')\" -- \"$cur\"))",
            "\t\t\tfi",
            "\t\t\t_herd_files \"$cur\" any ;;",
            "\t\thostlist) ;;",
            "\t\t*) _herd_files \"$cur\" job ;;",
            "\t\tesac ;;",
            "\tesac",
            "}",
            "complete -F _herd herd",
            ""]
    return "\n".join(out)

# ---- main ----------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--herd", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--spec-dir", required=True)
    ap.add_argument("--keys", required=True,
                    help="the key reference (doc/keys.md)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--completion", required=True)
    ap.add_argument("--strict", action="store_true",
                    help="a key missing from the key reference is an error")
    a = ap.parse_args()

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    day = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
           if epoch else datetime.datetime.now(datetime.timezone.utc))
    date = day.strftime("%Y-%m-%d")
    version = run([a.herd, "--version"]).split()[-1]
    main_help = run([a.herd, "--help"])
    cmds = commands_of(main_help)
    pages = {"herd.1": main_page(main_help, cmds, date, version)}
    see_all = [("herd", "1"), ("herd.yaml", "5")]
    opts_by_cmd = {}
    for name in dict.fromkeys(c[0] for c in cmds):
        text = run([a.herd, name, "--help"])
        summary = next(c[2] for c in cmds if c[0] == name)
        pages["herd-%s.1" % name] = command_page(
            "herd-" + name, summary, text, date, version, see_all)
        synopsis, sections = parse_help(text)
        opts = options_of(sections)
        known = {o for o, _ in opts}
        # an option the usage lines show but the list does not explain
        for line in synopsis:
            for o in re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", line):
                if o not in known:
                    known.add(o)
                    opts.append((o, ""))
        opts_by_cmd[name] = opts
    pages["herd-agent.1"] = agent_page(run([a.agent, "--help"]), date,
                                       version)
    intro, rows = reference_keys(a.keys)
    page, missing = yaml_page(schema_keys(a.spec_dir),
                              printed_defaults(a.herd), intro, rows, date,
                              version)
    pages["herd.yaml.5"] = page

    os.makedirs(a.out, exist_ok=True)
    for f, text in pages.items():
        with open(os.path.join(a.out, f + ".tmp"), "w") as fh:
            fh.write(text)
        os.replace(os.path.join(a.out, f + ".tmp"), os.path.join(a.out, f))
    os.makedirs(os.path.dirname(a.completion) or ".", exist_ok=True)
    with open(a.completion + ".tmp", "w") as fh:
        fh.write(completion(cmds, opts_by_cmd))
    os.replace(a.completion + ".tmp", a.completion)
    if missing:
        print("mkman: keys of the spec with no line in %s's key "
              "table: %s" % (a.keys, " ".join(missing)), file=sys.stderr)
        if a.strict:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
