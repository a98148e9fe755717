#!/usr/bin/python3
"""Runs every command example of README.md and docs/*.md (ctest: docs_examples).

usage: doc_examples.py TESSERA SOURCE_DIR [MODELS_DIR] [--only FILE] [--list]
                       [--synopses]

MODELS_DIR holds the small models of `scripts/gen_models.py --small` (the
graph_models fixture of the build); without it they are generated. --only
runs one document (README.md, docs/graph.md, ...); --list prints what would
run without running it; --synopses checks the synopses and inline commands
only.

What counts as an example. In every fenced code block with no language or
with `sh`/`shell`/`bash`/`console` (json, sql, ebnf blocks are data), the
command lines: lines whose first word is `tessera`, `build/tessera` or
`./build/tessera`, `make`, `python3` or `/usr/bin/python3`, or a
`scripts/*.py|sh` of the repository, after an optional `$ ` prompt and
indentation; a line ending in `\\` continues on the next. When a block has
`$ ` prompts, only the prompted lines are commands and the lines after one
are its shown output. A line that only sets variables (`W="..."`,
`export X=1`) sets them for the later commands of the same document.
Inside `for V in A B ...; do ... done` the commands run once, with $V
replaced by A. Anything else (comments, `kill`, pipes into sed/awk) is
shell around the commands and is not run; shell comments are dropped.

A block whose commands use synopsis notation (`[--opt]`, `(a | b)`,
`<command>`, `...`) is a synopsis, not an example: each `--option` of it
must appear in the command's `--help` (`tessera db --help`, ...). So must
the options of each `tessera ...` code span of the prose (outside fences).

Markers: an HTML comment on the last non-blank line before the fence.
  <!-- doc-test: skip (REASON) -->   not run; listed with the reason
  <!-- doc-test: expect-exit N -->   each command of the block must exit N,
                                      and a `tessera: error: ...` line the
                                      block shows must be in its output
A command that exits 77 skipped itself (the tests' convention, e.g.
scripts/ort_check.py without onnxruntime) and is listed as skipped.

How examples run. One fresh directory per document, its examples in order
(a walk-through is a sequence: later commands use the files earlier ones
wrote), each under /bin/sh, which must exit 0 (or the marked code) within
TIMEOUT seconds. The directory looks like a checkout: `build/tessera` and,
first on PATH, `tessera` are the binary under test; `docs/`, `scripts/`,
`tests/` and `.venv/` link into the source tree; `models/` holds copies of
the small models. After a failure the rest of that document is not run
(it may need the failed command's files); the other documents are.

Rewrites that keep every example short (each is printed where it applies):
  --trials N, --trials-per-task N  min(N, 4 + N // 1000): a first batch, and
                                   a larger budget stays larger (a resume
                                   that extends a job still extends it)
  tessera tune                     + --no-summary-measure: the summary from
                                   the job's measurements, without the
                                   end-of-job re-timing (confirmation, the
                                   unscheduled code and oneDNN side by side:
                                   8 s and more per task)
  --n N                            at most 4 (costmodel collect, rpc bench)
  --repeat N                       at most 2 (run; bench rounds)
  --min-repeat-ms N                at most 20
  --budget full                    quick
  KEY=N in a workload spec         N / 4 when N >= 1024 (upper-case keys:
                                   M=1024 -> M=256), in every command and
                                   assignment of the document alike
  models/M.onnx (M a full-size zoo model: resnet50, mobilenet_v2, bert,
                 csrnet)           models/M_small.onnx, and that command's
                                   --input-shape dimensions at most 16
  scripts/gen_models.py            + --small (the full zoo: 600 MB, 15 s)
`make` lines are not run; each target met in the docs has its reason in
EXCLUDED_MAKE (and must exist in the Makefile): `make run` (the tune
examples run the same job with a small budget), `make test` (this test is
part of it), `make bench` (an hour; the `tessera bench` examples stand for
it).
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 120  # seconds per command
SKIP_CODE = 77  # a command that exits 77 skipped itself (as under ctest)
SHELL_INFOS = {"", "sh", "shell", "bash", "console"}
ZOO = ("resnet50", "mobilenet_v2", "bert", "csrnet")

# make targets documented in fences, each excluded with its reason
EXCLUDED_MAKE = {
    "run": "a two-minute, 1000-trial tuning job; the README's tune examples run "
           "the same command with a small budget",
    "test": "runs the whole test suite, this test included",
    "bench": "an hour of tuning the benchmark suite; the `tessera bench` "
             "examples stand for it",
}

def _cap(limit):
    def f(m):
        n = int(m.group(2))
        return "%s%d" % (m.group(1), min(n, limit))
    return f


# (pattern, replacement) applied in order to each command's text (comments
# dropped) and to each variable assignment
REWRITES = [
    # a budget of N trials becomes min(N, 4 + N // 1000): a search's first
    # batch, and a larger budget stays larger (a resume that extends a job,
    # 5400 then 8000, still extends it: 9 then 12)
    (re.compile(r"(--trials(?:-per-task)?[ =])(\d+)\b"),
     lambda m: "%s%d" % (m.group(1), min(int(m.group(2)), 4 + int(m.group(2)) // 1000))),
    (re.compile(r"(--n[ =])(\d+)\b"), _cap(4)),
    (re.compile(r"(--repeat[ =])(\d+)\b"), _cap(2)),
    (re.compile(r"(--min-repeat-ms[ =])(\d+)\b"), _cap(20)),
    (re.compile(r"(--budget[ =])full\b"), lambda m: m.group(1) + "quick"),
    # workload sizes: an upper-case key (M=, N=, K=, H=, ...) of 1024 or more
    # is divided by 4 in every command and assignment of a document alike,
    # so a walk-through stays consistent (the tuned workload is the one
    # looked up); a 1024^3 matmul's trace still applies to 256^3. (Halving
    # instead makes the tune examples slower: 512^3 candidates with long
    # unrolled loops take seconds each to build.)
    (re.compile(r"\b([A-Z][A-Z0-9]*=)(\d{4,})\b"),
     lambda m: m.group(0) if int(m.group(2)) < 1024
     else "%s%d" % (m.group(1), int(m.group(2)) // 4)),
    # a tuning job's summary without the end-of-job re-measurement
    # (confirmation of the top schedules, the unscheduled code and oneDNN
    # side by side: 8 s and more per task); it still prints, from the
    # job's own measurements
    (re.compile(r"^((?:\S*/)?tessera tune)(?!.*--no-summary-measure)(?!.*--compare-models)"),
     lambda m: m.group(1) + " --no-summary-measure"),
    (re.compile(r"\bmodels/(%s)\.onnx\b" % "|".join(ZOO)),
     lambda m: "models/%s_small.onnx" % m.group(1)),
    # the full zoo is ~600 MB and 15 s to write
    (re.compile(r"(scripts/gen_models\.py)(?!.*--small)(.*)$"),
     lambda m: m.group(1) + m.group(2) + " --small"),
]

SMALL_MODEL = re.compile(r"\bmodels/(?:%s)_small\.onnx\b" % "|".join(ZOO))
INPUT_SHAPE = re.compile(r"(--input-shape[ =][A-Za-z0-9_.:]+=)(\d+(?:x\d+)*)")
MARKER = re.compile(r"^ {0,3}<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
PROMPT = re.compile(r"^\s*\$ ")
CMD_START = re.compile(
    r"^(?:(?:\./)?build/)?tessera(?:\s|$)|^make(?:\s|$)"
    r"|^(?:/usr/bin/)?python3\s|^scripts/\S+\.(?:py|sh)(?:\s|$)")
ASSIGN_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
FOR_LOOP = re.compile(r"^for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([^;]*?)\s*(?:;\s*do)?\s*$")
SYNOPSIS = re.compile(r"\[-|\(--|\[[A-Z]|<[a-z]+>|\[options\]|(^|\s)\.\.\.(\s|$)|\]\.\.\.")


class Example:
    def __init__(self, path, line, text, kind, expect=0, shown=None):
        self.path, self.line, self.text, self.kind = path, line, text, kind
        self.expect = expect
        self.shown = shown or []  # output lines the doc shows after it

    def where(self):
        return "%s:%d" % (self.path, self.line)


def strip_comment(text):
    """The text before a shell comment (a `#` after a blank, outside quotes)."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text


def is_assignment(text):
    """A line that only sets variables: `W="..."`, `export X=1`."""
    try:
        toks = shlex.split(strip_comment(text))
    except ValueError:
        return False
    if toks and toks[0] == "export":
        toks = toks[1:]
    return bool(toks) and all(ASSIGN_WORD.match(t) for t in toks)


def fences(path):
    """Yields (line, info, marker, [(lineno, text)]) for each fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)\s*(\S*)", lines[i])
        if not m:
            i += 1
            continue
        ticks, info, start = m.group(2), m.group(3), i
        marker = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and MARKER.match(lines[j]):
            marker = MARKER.match(lines[j]).group(1)
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + ticks + r"\s*$", lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        yield start + 1, info, marker, body


def join_continuations(body, start_pred):
    """Command lines (with continuations) and the lines after each. Inside
    `for V in A B ...; do ... done` the commands are taken once, with $V
    replaced by the first item A."""
    out = []  # [lineno, text, shown]
    loop = None  # (variable, first item)
    k = 0
    while k < len(body):
        no, text = body[k]
        t = PROMPT.sub("", text, count=1) if PROMPT.match(text) else text.strip()
        m = FOR_LOOP.match(t)
        if m and m.group(2).split():
            loop = (m.group(1), m.group(2).split()[0])
        elif re.match(r"^done\b", t):
            loop = None
        elif start_pred(text, t):
            full = t
            while strip_comment(full).endswith("\\") and k + 1 < len(body):
                k += 1
                full = strip_comment(full)[:-1].rstrip() + " " + body[k][1].strip()
            if loop:
                full = re.sub(r"\$\{?%s\b\}?" % loop[0], loop[1], full)
            out.append([no, full, []])
        elif out:
            out[-1][2].append(text)
        k += 1
    return out


def doc_examples(path, rel, problems):
    """Every example of one document, in order."""
    result = []
    for start, info, marker, body in fences(path):
        if info not in SHELL_INFOS:
            continue
        prompted = any(PROMPT.match(t) for _, t in body)
        if prompted:
            pred = lambda raw, t: bool(PROMPT.match(raw))
        else:
            pred = lambda raw, t: bool(CMD_START.match(t) or is_assignment(t))
        cmds = join_continuations(body, pred)
        cmds = [c for c in cmds if CMD_START.match(c[1]) or is_assignment(c[1])]
        if not any(CMD_START.match(c[1]) for c in cmds):
            continue
        where = "%s:%d" % (rel, start)
        expect = 0
        if marker is not None:
            m = re.match(r"^skip\s*\((.+)\)$", marker)
            e = re.match(r"^expect-exit\s+(\d+)$", marker)
            if m:
                for no, text, _ in cmds:
                    if CMD_START.match(text):
                        result.append(Example(rel, no, text, "skip", shown=[m.group(1)]))
                continue
            elif e:
                expect = int(e.group(1))
            else:
                problems.append("%s: bad marker '%s' (want 'skip (REASON)' or "
                                "'expect-exit N')" % (where, marker))
                continue
        if any(SYNOPSIS.search(strip_comment(c[1])) for c in cmds
               if CMD_START.match(c[1])):
            for no, line in synopsis_lines(body):
                result.append(Example(rel, no, line, "synopsis"))
            continue
        for no, text, shown in cmds:
            if is_assignment(text):
                result.append(Example(rel, no, text, "env"))
            elif re.match(r"^make(\s|$)", text):
                result.append(Example(rel, no, text, "make"))
            else:
                result.append(Example(rel, no, text, "cmd", expect, shown))
    return result


def synopsis_lines(body):
    """A synopsis block's commands: an indented line continues the last."""
    out = []
    for no, text in body:
        t = text.strip()
        if not t:
            continue
        if CMD_START.match(t) or not out:
            out.append([no, t])
        else:
            out[-1][1] += " " + t
    return out


# timing at a test's length: `bench --model` (10 rounds of 200 ms a side
# and 250 ms of settling: 9 s) and `bench --workload` (5 rounds of 100 ms
# each) take their shortest settings, where a command sets none itself and
# has no pipe or redirection to keep at the end
BENCH_SHORT = [
    (re.compile(r"^(?:\S*/)?tessera bench\b.*--model\b"), "--rounds",
     " --rounds 2 --min-round-ms 20 --settle-ms 0"),
    (re.compile(r"^(?:\S*/)?tessera bench\b.*--workload\b"), "--repeat",
     " --repeat 2 --min-repeat-ms 20"),
]


def rewrite(text):
    new = text
    for pat, repl in REWRITES:
        new = pat.sub(repl, new)
    for pat, opt, extra in BENCH_SHORT:
        if pat.search(new) and opt not in new and not re.search(r"[|>;&]", new):
            new += extra
    if SMALL_MODEL.search(new) and not SMALL_MODEL.search(text):
        # a full model became its small version: its fixed input shapes too
        # (the small BERT's sequence is at most 32)
        new = INPUT_SHAPE.sub(lambda m: m.group(1) + "x".join(
            str(min(int(d), 16)) for d in m.group(2).split("x")), new)
    return new


def help_words(tessera, words, cache):
    key = tuple(words)
    if key not in cache:
        p = subprocess.run([tessera] + words + ["--help"], capture_output=True,
                           text=True, timeout=30)
        cache[key] = (p.returncode, p.stdout + p.stderr)
    return cache[key]


def check_synopsis(ex, tessera, cache):
    """Each --option of a synopsis must be in the command's --help (or, for
    a mode such as `bench --model`, in `tessera bench --model x --help`).
    Returns an error message or None."""
    text = strip_comment(ex.text)
    toks = text.split()
    words = []
    for t in toks[1:]:
        if re.match(r"^[a-z][a-z0-9_-]*$", t):
            words.append(t)
        else:
            break
    rc, out = help_words(tessera, words, cache)
    if rc != 0:
        return "'tessera %s --help' exited %d:\n%s" % (" ".join(words), rc, out)
    opts = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)))
    has = lambda o, h: re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", h)
    missing = [o for o in opts if not has(o, out)]
    rest = toks[1 + len(words):]
    if missing and rest and rest[0].startswith("--"):
        rc2, out2 = help_words(tessera, words + [rest[0], "x"], cache)
        if rc2 == 0:
            missing = [o for o in missing if not has(o, out2)]
    if missing:
        return ("options not in 'tessera %s --help': %s"
                % (" ".join(words), ", ".join(missing)))
    return None


def inline_synopses(path, rel):
    """`tessera ...` code spans in the prose (outside fences) that name
    options: their options are checked like a synopsis's."""
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = None
    prose = []
    for text in lines:
        m = re.match(r"^\s*(```+)", text)
        if m and (fence is None or m.group(1) == fence):
            fence = m.group(1) if fence is None else None
            prose.append("")
            continue
        prose.append("" if fence else text)
    body = "\n".join(prose)
    out = []
    for m in re.finditer(r"`((?:\./)?(?:build/)?tessera [^`]+)`", body):
        span = " ".join(m.group(1).split())
        if "--" not in span:
            continue
        span = re.sub(r"^(?:\./)?build/", "", span)
        out.append(Example(rel, body.count("\n", 0, m.start()) + 1, span, "synopsis"))
    return out


def make_target_exists(src, target):
    text = open(os.path.join(src, "Makefile"), encoding="utf-8").read()
    return re.search(r"^%s\s*:" % re.escape(target), text, re.M) is not None


def setup_dir(d, tessera, src, models):
    os.makedirs(os.path.join(d, "build"))
    os.makedirs(os.path.join(d, ".bin"))
    os.symlink(tessera, os.path.join(d, "build", "tessera"))
    os.symlink(tessera, os.path.join(d, ".bin", "tessera"))
    for sub in ("docs", "scripts", "tests", ".venv"):
        if os.path.exists(os.path.join(src, sub)):
            os.symlink(os.path.join(src, sub), os.path.join(d, sub))
    os.makedirs(os.path.join(d, "models"))
    for f in os.listdir(models):
        if "_small" in f:
            shutil.copy(os.path.join(models, f), os.path.join(d, "models", f))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    only = None
    if "--only" in argv:
        only = argv[argv.index("--only") + 1]
        args.remove(only)
    if len(args) < 2:
        print(__doc__)
        return 2
    tessera = os.path.abspath(args[0])
    src = os.path.abspath(args[1])
    models = os.path.abspath(args[2]) if len(args) > 2 else None
    tmp = tempfile.mkdtemp(prefix="tessera-docs-")
    try:
        return run_all(tessera, src, models, tmp, only, "--list" in argv,
                       "--synopses" in argv)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(tessera, src, models, tmp, only, list_only, synopses_only=False):
    if not models or not os.path.exists(os.path.join(models, "resnet50_small.onnx")):
        models = os.path.join(tmp, "models")
        subprocess.run(["/usr/bin/python3", os.path.join(src, "scripts", "gen_models.py"),
                        "--out", models, "--small"], check=True, stdout=subprocess.DEVNULL)
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs"))
                                  if f.endswith(".md"))
    if only:
        docs = [d for d in docs if d == only]
    problems = []
    counts = {"run": 0, "synopsis": 0, "inline": 0, "skip": 0, "make": 0, "not_run": 0}
    skipped, excluded = [], []
    help_cache = {}
    t_all = time.time()
    env_base = dict(os.environ)
    for rel in docs:
        n_problems = len(problems)
        exs = doc_examples(os.path.join(src, rel), rel, problems)
        for p in problems[n_problems:]:
            print("FAIL: " + p, flush=True)
        inline = inline_synopses(os.path.join(src, rel), rel)
        for ex in inline:
            counts["inline"] += 1
            err = None if list_only else check_synopsis(ex, tessera, help_cache)
            if err:
                print("FAIL: %s: `%s`: %s" % (ex.where(), ex.text, err), flush=True)
                problems.append("%s: `%s`: %s" % (ex.where(), ex.text, err))
        if not exs:
            continue
        d = os.path.join(tmp, rel.replace("/", "_"))
        setup_dir(d, tessera, src, models)
        env = dict(env_base)
        env["PATH"] = os.path.join(d, ".bin") + os.pathsep + env.get("PATH", "")
        prelude = []  # the document's variable assignments so far
        for ex in exs:
            if ex.kind == "env":
                line = rewrite(strip_comment(ex.text))
                prelude.append(line)
                print("%s: %s%s" % (ex.where(), ex.text, "" if line == strip_comment(ex.text)
                                    else "\n    (rewritten: %s)" % line), flush=True)
                continue
            if ex.kind == "skip":
                counts["skip"] += 1
                skipped.append((ex, ex.shown[0]))
                print("%s: SKIP (%s): %s" % (ex.where(), ex.shown[0], ex.text), flush=True)
                continue
            if ex.kind == "make":
                target = ex.text.split()[1] if len(ex.text.split()) > 1 else "all"
                why = None
                if target not in EXCLUDED_MAKE:
                    why = ("a make target this test does not know (add it to "
                           "EXCLUDED_MAKE with a reason, or run it)")
                elif not make_target_exists(src, target):
                    why = "no target '%s' in the Makefile" % target
                if why:
                    print("FAIL: %s: '%s': %s" % (ex.where(), ex.text, why), flush=True)
                    problems.append("%s: '%s': %s" % (ex.where(), ex.text, why))
                    continue
                counts["make"] += 1
                excluded.append((ex, EXCLUDED_MAKE[target]))
                print("%s: EXCLUDED (%s): %s" % (ex.where(), EXCLUDED_MAKE[target], ex.text),
                      flush=True)
                continue
            if list_only:
                print("%s: [%s] %s" % (ex.where(), ex.kind, ex.text))
                continue
            if ex.kind == "synopsis":
                counts["synopsis"] += 1
                err = check_synopsis(ex, tessera, help_cache)
                print("%s: synopsis: %s" % (ex.where(), ex.text), flush=True)
                if err:
                    problems.append("%s: synopsis '%s': %s" % (ex.where(), ex.text, err))
                    print("FAIL: %s: %s" % (ex.where(), err), flush=True)
                continue
            if synopses_only:
                continue
            cmd = rewrite(strip_comment(ex.text))
            counts["run"] += 1
            shown = ex.text
            if cmd != strip_comment(ex.text):
                shown += "\n    (rewritten: %s)" % cmd
            print("%s: $ %s" % (ex.where(), shown), flush=True)
            script = "\n".join(prelude + [cmd])
            t0 = time.time()
            rc, out = run_shell(script, d, env)
            dt = time.time() - t0
            err = None
            if rc != ex.expect:
                err = "exited %s, expected %d" % (rc, ex.expect)
            elif ex.expect != 0:
                for s in ex.shown:
                    s = s.strip()
                    if s.startswith("tessera: error:") and s not in out:
                        err = "its output lacks the documented '%s'" % s
            print("  -> exit %s, %.1f s" % (rc, dt), flush=True)
            if rc == SKIP_CODE and ex.expect != SKIP_CODE:
                # the command skipped itself (the tests' convention: no
                # onnxruntime, no such CPU feature)
                why = out.strip().split("\n")[-1] if out.strip() else "exit 77"
                counts["run"] -= 1
                counts["skip"] += 1
                skipped.append((ex, why))
                print("  skipped by the command: " + why, flush=True)
                continue
            if err:
                print("FAIL: %s: %s\n  command: %s\n  output:\n%s" %
                      (ex.where(), err, cmd, indent(out)), flush=True)
                problems.append("%s: '%s' %s" % (ex.where(), cmd, err))
                rest = len([e for e in exs[exs.index(ex) + 1:] if e.kind == "cmd"])
                if rest:
                    print("(the %d later examples of %s are not run: they may need "
                          "this one's files)" % (rest, rel), flush=True)
                    counts["not_run"] += rest
                break
    print_summary(counts, skipped, excluded, problems, time.time() - t_all)
    return 1 if problems else 0


def run_shell(script, cwd, env):
    """Runs script under /bin/sh in its own process group; on timeout the
    whole group is killed. Returns (exit code or a reason, output)."""
    p = subprocess.Popen(["/bin/sh", "-c", script], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TIMEOUT)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        rc = "timeout after %d s" % TIMEOUT
    return rc, out.decode("utf-8", "replace")


def indent(text, limit=6000):
    if len(text) > limit:
        text = text[:limit // 2] + "\n    [...]\n" + text[-limit // 2:]
    return "\n".join("    " + l for l in text.rstrip("\n").split("\n"))


def print_summary(counts, skipped, excluded, problems, seconds):
    print("\nsummary: %d examples run, %d skipped, %d make lines excluded; "
          "%d synopses and %d inline commands checked against --help; "
          "%d failed (%d examples not run after a failure); %.0f s"
          % (counts["run"], counts["skip"], counts["make"], counts["synopsis"],
             counts["inline"], len(problems), counts["not_run"], seconds))
    for ex, why in skipped:
        print("  skipped  %s: %s  (%s)" % (ex.where(), ex.text, why))
    for ex, why in excluded:
        print("  excluded %s: %s  (%s)" % (ex.where(), ex.text, why))
    for p in problems:
        print("  FAIL     " + p)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
