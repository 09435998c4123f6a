#!/usr/bin/env bash
# Crash campaign for the profiler's checkpoints (issue 21, item 4).
#
#   scripts/crash-campaign.sh [KILLS]      (default 100)
#
# Builds the release binary and copies it to a temporary directory (builds by others
# cannot change it mid-campaign), generates a zoo model, then:
#  1. profiles it once, uninterrupted, into its own checkpoint directory: the reference;
#  2. profiles it again into a fresh directory, SIGKILLing the profile (by the pid this
#     script started) KILLS times and starting the same command again after every kill,
#     which resumes the checkpoint. Each kill is one of
#       write      wait for a random number of checkpoint saves, then poll (every
#                  ~0.1 ms) for the save's temporary file (`.<checkpoint>.XXXXXX.tmp`,
#                  crates/files write_atomic) and kill the moment it appears (half of
#                  the time) or up to 5 ms later (during its write, fsync or rename);
#       after-save wait for a random number of saves, then kill within a quarter of a
#                  pass after the last one (so many kills fall just after a pass ends);
#       anytime    kill at a uniformly random moment since launch (start-up, locking,
#                  the reference pass, a pass, a save, the interference calibration);
#     the number of saves waited for is drawn so that the kills spread over the whole
#     profile (about remaining passes / remaining kills per run, on average).
#     A kill "hit a write" when the temporary file it left behind is there after the
#     process is gone: it died between creating the temporary file and renaming it.
#  3. after every kill, checks that the checkpoint (if there is one yet) loads:
#     `placer compare C C --json` decodes the whole file without resuming it (exit 0, or
#     3 when there is nothing to judge yet, and valid JSON); that its passes never go
#     backwards; and, for a fixed plan (below), that it holds exactly as many
#     measurements as the reference holds for the passes it says are done, and no
#     (signature, configuration) the reference lacks;
#  4. lets the last run finish, checks it reports resuming where the last checkpoint
#     stood, exports both profiles (`--export json` on a complete checkpoint only reads
#     it: the script checks the file is not rewritten) and compares them.
#
# What "the same profile, up to timings" means. A measurement's key is (pass, kernel
# signature, configuration) (crates/profile/src/record.rs: one Measurement per
# signature and configuration per pass; rounds are told apart by their pass index); the
# node it was measured at and its op follow from the plan. With default flags the
# profiler's plan adapts to timings in three ways:
#   - `--reps 3 --max-reps 9`: a pass runs timed steps until every pick's median is
#     known to --precision, so a measurement's sample count depends on timings;
#   - `--round-noise 0.02`: a round after the first stops after its round check when the
#     re-measured medians repeated, so how many passes run (and which keys exist beyond
#     the first round) depends on timings;
#   - `--design screen`: the second stage measures in full the families whose
#     predictions missed, so its passes and keys depend on the first stage's timings.
# The campaign therefore runs a plan with none of them (`--design full --round-noise 0
# --reps R --max-reps R`), on which an uninterrupted run's file is determined up to
# timing values, and checks the strongest property: the final file equals the
# reference in everything but timings, namely
#   - the header, field for field (model, hash, model file, host, pools, protocol, mode,
#     pins, plan digest), passes_total and passes_done;
#   - the measurements, in file order: the same (pass, signature, configuration, node,
#     op, sample count) sequence (so the same set and count of keys: nothing lost,
#     nothing measured twice);
#   - one drift factor per pass, one reference time per node (counts, not values);
#   - the round checks' (first pass, re-run of, passes, quiet) (their pairs count depends
#     on which kernels take 1 ms or more, a timing);
#   - the design record (none for a full design) and the interference calibration's
#     ops and pair count (which node is each op's longest, and the copy sized from it,
#     are timings).
# Timing values are not compared: medians, spreads, min/max, drift, reference times,
# wall and clock figures, the calibration's times. With other flags (CRASH_FLAGS), the
# script checks what still holds for an adaptive plan: the same header, a complete
# profile, no (pass, signature, configuration) twice, passes 0..passes_done-1 each
# present with one drift factor each, and the first round's passes with exactly the
# reference's keys; sample counts only when --reps equals --max-reps.
#
# Environment: CRASH_MODEL (zoo name, default bert-tiny), CRASH_BATCH (default 32),
# CRASH_FLAGS (profile flags, default below), CRASH_SEED (the kills' random seed,
# default random; printed), KEEP=1 keeps the work directory (kept anyway on failure).
#
# The default, BERT-tiny b32 in single-config mode with 10 timed steps per pass, has
# 1,158 passes (386 per round x 3) and takes 40-60 s uninterrupted on the 2-core VM
# (more when the host is busy); 100 kills take a few minutes more.
# Exits non-zero on any failure. Stops only the processes it started, by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-100}
[[ $kills =~ ^[0-9]+$ ]] || { echo "usage: $0 [KILLS]" >&2; exit 2; }
model_name=${CRASH_MODEL:-bert-tiny}
batch=${CRASH_BATCH:-32}
flags=${CRASH_FLAGS:---design full --max-simultaneous 1 --rounds 3 --round-noise 0 --reps 10 --max-reps 10}
seed=${CRASH_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

cargo build --release -q
work=$(mktemp -d "${TMPDIR:-/tmp}/crash-campaign.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp target/release/placer "$work/placer"
# A copy of the host cache as it is now: the DRAM baseline the emulated pool scales
# from, so that the campaign neither measures it again nor sees another process change it.
default_cache=${PLACER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/placer}
mkdir -p "$work/cache"
cp "$default_cache"/host-*.json "$work/cache/" 2>/dev/null || true
export PLACER_CACHE_DIR="$work/cache"
"$work/placer" zoo "$model_name" --batch "$batch" -o "$work/model.json" >/dev/null 2>&1

status=0
export PLACER="$work/placer" WORK="$work" KILLS="$kills" FLAGS="$flags" SEED="$seed"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git --no-optional-locks status --porcelain -uno 2>/dev/null)" ]]; then COMMIT+=" + uncommitted changes"; fi
export COMMIT
if python3 - <<'PY'
import atexit, collections, json, os, random, re, signal, subprocess, sys, time

placer, work = os.environ["PLACER"], os.environ["WORK"]
kills, flags, seed = int(os.environ["KILLS"]), os.environ["FLAGS"].split(), int(os.environ["SEED"])
model = os.path.join(work, "model.json")
rng = random.Random(seed)
log = open(os.path.join(work, "runs.log"), "ab")
started = time.monotonic()
failures = []


running = []  # the profile this script started and has not reaped yet


@atexit.register
def stop_ours():
    for p in running:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def cmd(d, *extra):
    return [placer, "profile", model, *flags, "--checkpoint-dir", d, *extra]


def only_checkpoint(d):
    names = [n for n in os.listdir(d) if n.endswith(".ckpt")]
    if len(names) != 1:
        sys.exit(f"expected one checkpoint in {d}, found {names}")
    return os.path.join(d, names[0])


def fileid(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None


def export(d):
    """The complete checkpoint in d as JSON, through `placer profile --export json`,
    which must only read it."""
    path = only_checkpoint(d)
    before = fileid(path)
    r = subprocess.run(cmd(d, "--export", "json"), capture_output=True)
    if r.returncode != 0:
        sys.exit(f"export of {path} failed ({r.returncode}): {r.stderr.decode()}")
    if fileid(path) != before:
        fail(f"--export json rewrote {path}: the checkpoint was not complete")
    return json.loads(r.stdout)


def loads(path):
    """Whether the checkpoint at path decodes (compare against itself reads it whole and
    never resumes): its facts, or None."""
    r = subprocess.run([placer, "compare", path, path, "--json"], capture_output=True)
    try:
        facts = json.loads(r.stdout)["a"] if r.returncode in (0, 3) else None
    except (ValueError, KeyError):
        facts = None
    if facts is None:
        fail(f"checkpoint does not load (exit {r.returncode}): {r.stderr.decode().strip()}")
    return facts


def key(m):
    return (m["pass"], m["signature"], tuple(m["config"]))


# 1. The reference: one uninterrupted run.
ref_dir = os.path.join(work, "reference")
t0 = time.monotonic()
r = subprocess.run(cmd(ref_dir), stdout=log, stderr=subprocess.STDOUT)
ref_seconds = time.monotonic() - t0
if r.returncode != 0:
    sys.exit(f"the reference profile failed ({r.returncode}); see {work}/runs.log")
ref = export(ref_dir)
ref_path = only_checkpoint(ref_dir)
name = os.path.basename(ref_path)
h = ref["header"]
proto, mode = h["protocol"], h["mode"]
fixed_counts = proto["reps"] == proto["max_reps"]
fixed = mode["design"]["design"] == "Full" and (proto["round_noise"] == 0 or proto["rounds"] == 1) and fixed_counts
per_round = int(re.search(rb"passes +(\d+) per round", subprocess.run(cmd(ref_dir, "--plan-only"), capture_output=True).stdout).group(1))
ref_cum = [0] * (ref["passes_total"] + 1)  # measurements in passes < p
for m in ref["measurements"]:
    ref_cum[m["pass"] + 1] += 1
for p in range(1, len(ref_cum)):
    ref_cum[p] += ref_cum[p - 1]
period = ref_seconds / max(ref["passes_total"], 1)
print(f"model {h['model_name']}, flags: {' '.join(flags)}")
print(f"reference: {ref['passes_done']} passes ({per_round} per round), {len(ref['measurements'])} measurements, "
      f"{ref_seconds:.1f} s uninterrupted; plan {'fixed' if fixed else 'adaptive'}; kill seed {seed}", flush=True)

# 2. The campaign.
cdir = os.path.join(work, "campaign")
os.makedirs(cdir)
ckpt = os.path.join(cdir, name)
tmp_prefix = f".{name}."


def temps():
    return {n for n in os.listdir(cdir) if n.startswith(tmp_prefix) and n.endswith(".tmp")}


def sleep_until(p, deadline):
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return False
        time.sleep(0.0002)
    return True


def wait_saves(p, n):
    """Waits for n more saves of the checkpoint (each a rename: a new file at the path);
    False if the process ended first."""
    seen = fileid(ckpt)
    while n > 0:
        if p.poll() is not None:
            return False
        now = fileid(ckpt)
        if now != seen:
            seen, n = now, n - 1
        else:
            time.sleep(0.0002)
    return True


def wait_temp(p, old):
    while not (temps() - old):
        if p.poll() is not None:
            return False
        time.sleep(0.0001)
    return True


stats = collections.Counter()
done, total = 0, ref["passes_total"]
progress = []
for i in range(kills):
    before = fileid(ckpt)
    had = before is not None
    stats["resumes"] += had
    old = temps()
    left = kills - i
    remaining = max(total - done, 0)
    per_run = remaining / left  # passes each remaining run should measure
    how = rng.choices(["write", "after-save", "anytime"], weights=[45, 35, 20])[0]
    # Never wait for more saves than passes remain: the run must still be there to kill.
    saves = min(rng.randint(0, int(2 * per_run)) + (how == "after-save"), remaining)
    if how == "after-save" and saves == 0:
        how = "write"  # only the calibration's save is left: kill during it
    p = subprocess.Popen(cmd(cdir), stdout=log, stderr=subprocess.STDOUT)
    running[:] = [p]
    launched = time.monotonic()
    if how == "anytime":
        alive = sleep_until(p, launched + rng.uniform(0, 0.3 + 2 * per_run * period))
    elif how == "after-save":
        alive = wait_saves(p, saves) and sleep_until(p, time.monotonic() + rng.uniform(0, period / 4))
    else:
        # At once, or up to 5 ms later (a save writes and syncs for a few ms): some kills
        # land while the file is written, some after its fsync or its rename.
        alive = wait_saves(p, saves) and wait_temp(p, old) and sleep_until(p, time.monotonic() + rng.choice([0, rng.uniform(0, 0.005)]))
    if alive and p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    rc = p.wait()
    if rc != -signal.SIGKILL:
        # It ended before the kill: only a complete profile may (exit 0).
        stats["finished before the kill"] += 1
        if rc != 0:
            fail(f"run {i + 1} exited {rc} on its own; see runs.log")
    stats[how] += 1
    left_behind = temps() - old
    stats["kills during a write"] += bool(left_behind)
    for t in left_behind:
        stats["temporary files left empty" if os.path.getsize(os.path.join(cdir, t)) == 0 else "temporary files left with data"] += 1
    stats["kills before the run saved anything"] += fileid(ckpt) == before
    if fileid(ckpt) is not None:
        facts = loads(ckpt)
        if facts is None:
            stats["checkpoints that failed to load"] += 1
        else:
            stats["checkpoints loaded"] += 1
            if facts["passes_done"] < done:
                fail(f"kill {i + 1}: the checkpoint went back from {done} to {facts['passes_done']} passes")
            if fixed:
                want = ref_cum[min(facts["passes_done"], len(ref_cum) - 1)]
                if facts["measurements"] != want or facts["passes_total"] != ref["passes_total"]:
                    fail(f"kill {i + 1}: {facts['measurements']} measurements after {facts['passes_done']} of "
                         f"{facts['passes_total']} passes; the reference has {want} of {ref['passes_total']}")
                c = subprocess.run([placer, "compare", ref_path, ckpt, "--json"], capture_output=True)
                try:
                    extra = json.loads(c.stdout)["only_in_b"]
                except (ValueError, KeyError):
                    extra = None
                if extra != 0:
                    fail(f"kill {i + 1}: {extra} configurations in the checkpoint that the reference lacks")
            progress.append(facts["passes_done"] - done)
            done, total = facts["passes_done"], facts["passes_total"]
    if (i + 1) % 10 == 0:
        print(f"  {i + 1} kills: {done}/{total} passes, {stats['kills during a write']} during a write", flush=True)

# The last run goes to the end.
stats["resumes"] += fileid(ckpt) is not None
p = subprocess.Popen(cmd(cdir), stdout=subprocess.PIPE, stderr=log)
running[:] = [p]
out, _ = p.communicate()
log.write(out)
if p.returncode != 0:
    fail(f"the last run failed ({p.returncode})")
resumed = re.search(rb"resumed after (\d+) passes", out)
if done > 0 and (not resumed or int(resumed.group(1)) != done):
    fail(f"the last run did not resume after the {done} passes the checkpoint held: "
         f"{resumed.group(0).decode() if resumed else 'no resume reported'}")
final = export(cdir)
stale = temps()

# 4. Final against reference.
# An adaptive plan's keys after its first round depend on timings: compare the first
# round's only (and, below, look for any key twice in the whole file).
compared = lambda prof: [m for m in prof["measurements"] if fixed or m["pass"] < per_round]
fk = collections.Counter(key(m) for m in compared(final))
rk = collections.Counter(key(m) for m in compared(ref))
lost = sum((rk - fk).values())
duplicated = sum((fk - rk).values())
twice = sum(c - 1 for c in collections.Counter(key(m) for m in final["measurements"]).values() if c > 1)
differences = []


def same(what, a, b):
    if a != b:
        differences.append(what)
        print(f"  differs: {what}: {str(a)[:200]} / reference {str(b)[:200]}")


same("header", final["header"], ref["header"])
complete = final["passes_done"] == final["passes_total"] and final["interference"] is not None and (
    mode["design"]["design"] == "Full" or final["design"] is not None)
if not complete:
    differences.append("incomplete")
same("pass drift factors (one per pass)", len(final["pass_drift"]), final["passes_done"])
passes = sorted({m["pass"] for m in final["measurements"]})
same("passes measured", passes, list(range(final["passes_done"])))
first_round = lambda prof: [(*key(m), m["node"], m["op"]) for m in prof["measurements"] if m["pass"] < per_round]
same("first round: pass, signature, configuration, node, op", first_round(final), first_round(ref))
if fixed:
    for field in ("passes_total", "passes_done"):
        same(field, final[field], ref[field])
    same("reference times (one per node)", len(final["reference_ns"]), len(ref["reference_ns"]))
    same("pass drift factors", len(final["pass_drift"]), len(ref["pass_drift"]))
    shape = lambda prof: [(m["pass"], m["signature"], m["config"], m["node"], m["op"], m["count"]) for m in prof["measurements"]]
    same("measurements: pass, signature, configuration, node, op, count (in order)", shape(final), shape(ref))
    checks = lambda prof: [(k["first_pass"], k["rerun_of"], k["passes"], k["quiet"]) for k in prof["round_checks"]]
    same("round checks", checks(final), checks(ref))
    same("design", final["design"], ref["design"])
    calib = lambda prof: prof["interference"] and (prof["interference"]["pairs"], [o["op"] for o in prof["interference"]["ops"]])
    same("interference calibration: pairs, ops", calib(final), calib(ref))
elif fixed_counts:
    same("sample counts", sorted(m["count"] for m in final["measurements"]), [proto["reps"]] * len(final["measurements"]))

if "host_activity" in final:
    # One activity sample per pass, saved with it, and one per run that saved anything.
    per_pass = lambda prof: [s["pass"] for s in prof["host_activity"] if s["pass"] is not None]
    if fixed:
        same("host activity samples, one per pass", per_pass(final), per_pass(ref))
    else:
        same("host activity samples, at most one per pass", per_pass(final), sorted(set(per_pass(final))))
    stats["run samples"] = sum(1 for s in final["host_activity"] if s["pass"] is None)

wall = time.monotonic() - started
progress.sort()
print()
print(f"crash campaign: {h['model_name']} ({' '.join(flags)}), binary {os.environ['COMMIT']}, kill seed {seed}")
print(f"  reference            {ref['passes_done']} passes, {len(ref['measurements'])} measurements, {ref_seconds:.1f} s uninterrupted")
print(f"  kills                {kills - stats['finished before the kill']} of {kills} runs (write {stats['write']}, after-save {stats['after-save']}, anytime {stats['anytime']})")
print(f"  kills during a write {stats['kills during a write']} (a temporary checkpoint file was left behind: "
      f"{stats['temporary files left empty']} empty, {stats['temporary files left with data']} with data)")
print(f"  finished before kill {stats['finished before the kill']} (runs that ended on their own before their kill came)")
print(f"  resumes              {stats['resumes']} (runs that started from an existing checkpoint, the last run included)")
if progress:
    print(f"  passes per killed run min {progress[0]}, median {progress[len(progress) // 2]}, max {progress[-1]}")
print(f"  killed before saving {stats['kills before the run saved anything']} (the run left the checkpoint as it found it)")
print(f"  checkpoints loaded   {stats['checkpoints loaded']} after kills; failed to load: {stats['checkpoints that failed to load']}")
print(f"  final                {final['passes_done']}/{final['passes_total']} passes, {len(final['measurements'])} measurements")
print(f"  lost keys            {lost}{'' if fixed else ' (of the first round; the plan is adaptive)'}")
print(f"  duplicated keys      {duplicated} (keys measured more often than in the reference; {twice} measured twice in the file)")
print(f"  other differences    {len(differences)} ({'; '.join(differences) if differences else 'equal to the reference up to timings' if fixed else 'adaptive plan: same header, complete, every pass once, first round equal'})")
if "run samples" in stats:
    print(f"  run activity samples {stats['run samples']} (one per run that saved a pass, before its first pass)")
print(f"  stale temporary files {len(stale)} left in the checkpoint directory")
print(f"  wall time            {wall:.1f} s")
if lost or duplicated or twice or differences or stats["checkpoints that failed to load"]:
    failures.append("final checkpoint")
if failures:
    print(f"FAILED: {len(failures)} failure(s)")
    sys.exit(1)
print("OK")
PY
then :; else status=$?; fi
if [[ $status != 0 || ${KEEP:-0} == 1 ]]; then
  trap - EXIT
  echo "work directory kept: $work (runs.log has every run's output)"
fi
exit "$status"
