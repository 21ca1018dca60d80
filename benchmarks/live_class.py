"""A live class measured: teachers and following students against R replicas
behind nginx with one room store, all on loopback.

    python benchmarks/live_class.py --rooms 30,30 --rounds 2 --idle 60    # SQLite
    python benchmarks/live_class.py --rooms 30,30 --rounds 2 --idle 60 --redis --separate
    SPECDEC_LIVE_HUB_SEATS=0 python benchmarks/live_class.py ...   # tabs beat every 10 s
    python benchmarks/live_class.py --push --followers 30,60 --storm 60   # raw push sockets

``--push`` measures followers as raw push sockets instead (``benchmarks/live_push.py``: a
real teacher in Chromium). Without it every student is a whole tab on the app's websocket
protocol (``benchmarks/locust_live.py``, ``benchmarks/live_tabs.py``): its page runs, the
fragment timers the server asks for, and the push components' sockets and triggers as the
browser's JavaScript sends them.

Starts ``deploy/replicas.py``'s cluster (R replicas, nginx with cookie affinity, each
replica warmed) with the store every replica shares: a fresh SQLite file
(``SPECDEC_ROOM_DB``) or, with ``--redis``, Debian's ``redis-server`` on a free loopback
port without persistence (``SPECDEC_REDIS_URL``). Then ``benchmarks/locust_live.py`` (its
own process: Locust users on the app's websocket protocol) runs one teacher per room and
the rooms' students: the teacher starts the room by its button, steps through rounds,
asks a question each round and reveals it; the students join with ``?room=CODE``,
follow (their ``st.fragment`` polls, as a browser sends them) and answer.

Reports (JSON, one line, and a short table):

* follow: teacher click sent → a follower's screen shows the new lesson state (a pushed
  follower: its socket got the state's frame), p50 / p95 / max (ms) over every follower
  and click, and per click the first / median / last follower; answer: a student's answer
  sent → the teacher's chart counts it; reveal: Reveal sent → a follower shows the
  outcome; the join storm (``--storm`` s: each room's students open the link spread over
  it; link opened → the teacher's moment on screen, and each room's first student);
* server CPU per step click (over the click and the teacher's pause after it, less the
  idle rate, shared among the rooms' clicks inside it) in total and per follower; the idle
  class (``--idle`` s, everyone joined, no click: sockets, fragment timers) in % of one
  core per replica and nginx;
* store operations a second over the class (every call of the store interface, counted
  inside each replica by ``benchmarks/live_probe/sitecustomize.py``, by method; with
  Redis also the server's own command count);
* CPU (% of one core, over the class) and memory (RSS at the end, peak) of each
  replica, nginx's CPU and the load generator's;
* cross-talk: lesson states a follower showed that belong to the other room (must be 0),
  and followers whose token strips differ from their teacher's at the same state;
* the machine's load average before and after (other work on the machine shares its
  cores with the server and the bots: read the figures with it).

Everything runs on 127.0.0.1 and is stopped at the end; every wait is bounded.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "deploy"))
import replicas as deploy  # noqa: E402

#: Each room's prompt: different prompts, so no lesson state of one room is ever one of
#: the other's (the cross-talk check relies on it).
PROMPTS = ["ROMEO:\nBut soft, what light", "JULIET:\nO Romeo, Romeo", "HAMLET:\nTo be"]


def lesson_link(prompt: str) -> str:
    """The query string of a step-page lesson link that opens ``prompt`` at round 1
    (``lessons/link.encode``'s form: ``s`` = base64url(zlib(JSON of the non-default
    fields))), made here without importing the app (torch)."""
    raw = json.dumps({"prompt": prompt}, separators=(",", ":"), ensure_ascii=False)
    packed = base64.urlsafe_b64encode(zlib.compress(raw.encode(), 9)).rstrip(b"=").decode()
    return f"v=2&lang=en&s={packed}"


@contextmanager
def redis_server(log_dir: Path):
    """Debian's ``redis-server`` on a free loopback port, no persistence; yields its URL."""
    port = deploy.free_port()
    log = open(log_dir / "redis.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
        + ["--appendonly", "no", "--dir", str(log_dir)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    import redis

    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        yield url, client, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> dict[str, float]:
    """``rss`` (VmRSS) and ``peak`` (VmHWM) of ``pid``, MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out["rss" if line.startswith("VmRSS") else "peak"] = int(line.split()[1]) / 1024
    return out


def nginx_pids(master: int) -> list[int]:
    kids = Path(f"/proc/{master}/task/{master}/children")
    return [master] + [int(p) for p in kids.read_text().split()] if kids.exists() else [master]


def store_counts(folder: Path) -> dict[str, int]:
    """The store calls counted so far in every replica (summed by method)."""
    total: dict[str, int] = {}
    for f in folder.glob("*.json"):
        try:
            counts = json.loads(f.read_text())["counts"]
        except (OSError, ValueError, KeyError):
            continue
        for name, n in counts.items():
            total[name] = total.get(name, 0) + n
    return total


def pct(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` ∈ (0, 1] of ``xs``; ``None`` for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-int(q * 100) * len(s) // 100) - 1))]


def spread(xs: list[float]) -> dict:
    return {
        "n": len(xs),
        "p50_ms": round(pct(xs, 0.5)) if xs else None,
        "p95_ms": round(pct(xs, 0.95)) if xs else None,
        "max_ms": round(max(xs)) if xs else None,
    }


def run_class(args, out: Path) -> dict:
    counts_dir = out / "counts"
    env = {
        "PYTHONPATH": os.pathsep.join(
            [str(HERE / "live_probe"), str(REPO), os.environ.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep),
        "SPECDEC_STORE_COUNTS": str(counts_dir),
    }
    with ExitStack() as stack:
        redis_client = None
        if args.redis:
            url, redis_client, _ = stack.enter_context(redis_server(out))
            env["SPECDEC_REDIS_URL"] = url
        else:
            env["SPECDEC_ROOM_DB"] = str(out / "rooms.sqlite3")
        run = stack.enter_context(deploy.cluster(args.replicas, env=env))
        pids = [p.pid for p in run.replicas]
        ngx = nginx_pids(run.nginx.pid)
        load_before = os.getloadavg()
        uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        ops0 = store_counts(counts_dir)
        redis0 = redis_client.info("stats")["total_commands_processed"] if redis_client else 0
        cpu0 = [cpu_seconds(p) for p in pids]
        ngx0 = sum(cpu_seconds(p) for p in ngx)
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples: list[dict] = []
        stop = threading.Event()

        def sample() -> None:  # CPU (each replica, nginx) and memory, 4 times a second
            while not stop.wait(0.25):
                each = [cpu_seconds(p) for p in pids]
                samples.append(
                    {
                        "t": time.time(),
                        "cpu": sum(each),
                        "each": each,
                        "nginx": sum(cpu_seconds(p) for p in ngx),
                        **{p: memory_mb(p)["rss"] for p in pids},
                    }
                )

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.time()
        links = [lesson_link(PROMPTS[i % len(PROMPTS)]) for i in range(len(args.rooms))]
        cmd = [
            sys.executable,
            str(HERE / "locust_live.py"),
            "--host",
            run.url,
            "--rooms",
            ",".join(str(n) for n in args.rooms),
            "--rounds",
            str(args.rounds),
            "--think",
            str(args.think),
            "--links",
            json.dumps(links),
            "--seed",
            str(args.seed),
            "--idle",
            str(args.idle),
            "--storm",
            str(args.storm),
            "--hosts",
            json.dumps(run.replica_urls if args.separate else []),
            "--timeout",
            str(args.timeout),
            "--out",
            str(out / "samples.json"),
        ]
        with open(out / "locust.log", "w") as log:
            subprocess.run(
                cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout + 120
            )
        wall = time.time() - started
        stop.set()
        sampler.join(5)
        time.sleep(1.0)  # the last counts reach their files
        ops1 = store_counts(counts_dir)
        redis1 = redis_client.info("stats")["total_commands_processed"] if redis_client else 0
        cpu1 = [cpu_seconds(p) for p in pids]
        ngx1 = sum(cpu_seconds(p) for p in ngx)
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        mem = [memory_mb(p) for p in pids]
        load_after = os.getloadavg()
        for log in run.logs.glob("*.log"):  # the cluster's folder goes with it
            (out / log.name).write_bytes(log.read_bytes())
    data = json.loads((out / "samples.json").read_text())
    s = data["samples"]
    secs = max(1e-9, data["ended"] - data["started"])
    ops = {k: ops1.get(k, 0) - ops0.get(k, 0) for k in sorted(set(ops1) | set(ops0))}
    bots_cpu = children1.ru_utime + children1.ru_stime - children0.ru_utime - children0.ru_stime
    polling, per_update = polling_cost(samples, s, data["ended"], sum(cpu1) - sum(cpu0), wall)
    idle = idle_cost(samples, s)
    clicks = click_cost(samples, s, idle.get("rate_cpu_s"), sum(args.rooms))
    result = {
        "rooms": args.rooms,
        "students": sum(args.rooms),
        "rounds": args.rounds,
        "replicas": args.replicas,
        "store": "redis" if args.redis else "sqlite",
        "separate_ports": args.separate,
        "class_s": round(secs),
        "follow": spread([ms for _, ms in s["follow"]]),
        "answer": spread([ms for _, ms in s["answer"]]),
        "reveal": spread([ms for _, ms in s["reveal"]]),
        "join": spread([ms for _, ms in s["join"]]),
        "store_ops_per_s": round(sum(ops.values()) / secs, 1),
        "store_ops": ops,
        "redis_commands_per_s": round((redis1 - redis0) / secs, 1) if args.redis else None,
        "replica_cpu_pct": [round(100 * (b - a) / wall) for a, b in zip(cpu0, cpu1, strict=True)],
        "replica_rss_mb": [round(m["rss"]) for m in mem],
        "replica_peak_rss_mb": [round(m["peak"]) for m in mem],
        "replica_rss_max_sampled_mb": [
            round(max((x[p] for x in samples), default=0)) for p in pids
        ],
        "replica_cpu_s": round(sum(cpu1) - sum(cpu0), 1),
        "polling_only_cpu_pct": polling,
        "cpu_s_per_follower_update": per_update,
        "follower_updates": len(s["follow"]) + len(s["reveal"]),
        "idle": idle,
        "per_click": clicks,
        "follow_first_median_last": per_click_spread(s.get("follow_by_click", [])),
        "join_storm": join_storm(s.get("join_push", [])),
        "push_triggers": sum(x[2] for x in s.get("push_triggers", [])),
        "votes_triggers": [x[1] for x in s.get("votes_triggers", [])],
        "teacher_clicked_again": len(s["clicked_again"]),
        "nginx_cpu_pct": round(100 * (ngx1 - ngx0) / wall),
        "bots_cpu_pct": round(100 * bots_cpu / wall),
        "cross_talk": len(s["crosstalk"]),
        "strips_compared": len(s["strips_compared"]),
        "strip_mismatches": len(s["strip_mismatch"]),
        "unknown_states": len(s["unknown_state"]),
        "states_published": data["published"],
        "errors": s["errors"][:10],
        "error_count": len(s["errors"]),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "uptime_before": uptime_before,
        "cpus": os.cpu_count(),
        "reports": str(out),
    }
    return result


def polling_cost(samples: list[dict], s: dict, ended: float, cpu_s: float, wall: float):
    """The replicas' CPU while only the polls ran (every room's idle window: everyone
    joined, no click yet), % of one core; and the rest of their CPU over the class spread
    over the follower updates (s per update). ``None`` without a usable window."""
    if not s["idle"]:
        return None, None
    t0, t1 = max(w[1] for w in s["idle"]), min(w[2] for w in s["idle"])
    inside = [x for x in samples if t0 <= x["t"] <= t1]
    if len(inside) < 2:
        return None, None
    rate = (inside[-1]["cpu"] - inside[0]["cpu"]) / (inside[-1]["t"] - inside[0]["t"])
    updates = len(s["follow"]) + len(s["reveal"])
    per_update = (cpu_s - rate * wall) / updates if updates else None
    if per_update is not None and per_update <= 0:  # the window's rate is not the class's
        per_update = None  # (a machine whose other load swings): no estimate
    return round(100 * rate), (round(per_update, 2) if per_update is not None else None)


def idle_cost(samples: list[dict], s: dict) -> dict:
    """The class idle (every room's window: everyone joined, no click yet, each tab's
    fragment beat and push socket running): % of one core per replica and nginx's, over
    the samples inside the window; ``rate_cpu_s``: the replicas' CPU-s per second."""
    if not s["idle"]:
        return {}
    t0, t1 = max(w[1] for w in s["idle"]), min(w[2] for w in s["idle"])
    inside = [x for x in samples if t0 <= x["t"] <= t1]
    if len(inside) < 2:
        return {}
    a, b = inside[0], inside[-1]
    secs = b["t"] - a["t"]
    each = [100 * (y - x) / secs for x, y in zip(a["each"], b["each"], strict=True)]
    return {
        "window_s": round(secs, 1),
        "replica_pct": [round(x, 1) for x in each],
        "replicas_pct": round(sum(each), 1),
        "nginx_pct": round(100 * (b["nginx"] - a["nginx"]) / secs, 1),
        "rate_cpu_s": (b["cpu"] - a["cpu"]) / secs,
    }


def _cpu_at(samples: list[dict], t: float) -> float | None:
    """The replicas' CPU-s at time ``t``, interpolated between the samples around it."""
    for x, y in zip(samples, samples[1:], strict=False):
        if x["t"] <= t <= y["t"]:
            f = (t - x["t"]) / max(1e-9, y["t"] - x["t"])
            return x["cpu"] + f * (y["cpu"] - x["cpu"])
    return None


def click_cost(samples: list[dict], s: dict, idle_rate: float | None, students: int) -> dict:
    """Server CPU per teacher step click: over each click's window (sent → the end of the
    teacher's pause after it), the replicas' CPU less the idle rate, shared among the
    step clicks of any room sent inside the window (two rooms click at the same time);
    median over the windows, in total and per follower."""
    wins = s.get("click_windows", [])
    if not wins or idle_rate is None:
        return {}
    costs = []
    for _room, _label, t0, t1 in wins:
        a, b = _cpu_at(samples, t0), _cpu_at(samples, t1)
        if a is None or b is None:
            continue
        inside = sum(1 for w in wins if t0 <= w[2] <= t1)
        costs.append((b - a - idle_rate * (t1 - t0)) / max(1, inside))
    if not costs:
        return {}
    med = sorted(costs)[len(costs) // 2]
    return {
        "clicks": len(costs),
        "cpu_s": round(med, 3),
        "cpu_ms_per_follower": round(1e3 * med / students, 2),
    }


def per_click_spread(rows: list) -> dict:
    """Per click (room, state): the first, median and last follower's drawn time; p50 and
    p95 of each over the clicks (ms)."""
    by: dict[tuple, list[float]] = {}
    for room, s16, ms in rows:
        by.setdefault((room, s16), []).append(ms)
    firsts, meds, lasts = [], [], []
    for xs in by.values():
        xs.sort()
        firsts.append(xs[0])
        meds.append(xs[len(xs) // 2])
        lasts.append(xs[-1])
    return {
        "clicks": len(by),
        "first": spread(firsts),
        "median": spread(meds),
        "last": spread(lasts),
    }


def join_storm(rows: list) -> dict:
    """Join link opened → the first frame pushed (the teacher's moment on screen): spread,
    the span over which the class opened the link, and each room's first student."""
    if not rows:
        return {}
    starts = [r[3] for r in rows]
    return {
        **spread([r[2] for r in rows]),
        "opened_over_s": round(max(starts) - min(starts), 1),
        "first_students_ms": [round(r[2]) for r in rows if r[1] == 0],
    }


def table(r: dict) -> str:
    def cell(m: dict) -> str:
        return f"{m['p50_ms']:,} / {m['p95_ms']:,} ms (n {m['n']})" if m["n"] else "–"

    return "\n".join(
        [
            f"{r['students']} students in rooms {r['rooms']}, {r['replicas']} replicas, "
            f"{r['store']}, {r['class_s']} s of class",
            f"teacher click → follower updated p50 / p95: {cell(r['follow'])}",
            f"answer → teacher's chart p50 / p95:        {cell(r['answer'])}",
            f"reveal → follower shows outcome p50 / p95: {cell(r['reveal'])}",
            "per click, first / median / last follower drawn p50 / p95: "
            + ", ".join(
                cell(r["follow_first_median_last"][k])
                for k in ("first", "median", "last")
                if k in r["follow_first_median_last"]
            ),
            f"server CPU per step click: {r['per_click']}",
            f"idle class: {r['idle']}",
            f"join storm (link → first frame): {r['join_storm']}",
            f"store operations/s {r['store_ops_per_s']} {r['store_ops']}",
            f"polls alone: {r['polling_only_cpu_pct']} % of a core; "
            f"{r['cpu_s_per_follower_update']} CPU s per follower update",
            f"replica CPU % {r['replica_cpu_pct']}, RSS MB {r['replica_rss_mb']} "
            f"(peak {r['replica_peak_rss_mb']}); nginx CPU {r['nginx_cpu_pct']} %, "
            f"bots CPU {r['bots_cpu_pct']} %",
            f"cross-talk {r['cross_talk']}; strips compared {r['strips_compared']}, "
            f"differ {r['strip_mismatches']}; errors {r['error_count']}",
            f"load {r['load_before']} → {r['load_after']} on {r['cpus']} CPUs",
        ]
    )


def main() -> None:
    if "--push" in sys.argv:  # the followers on the push route: benchmarks/live_push.py
        sys.argv.remove("--push")
        from live_push import main as push_main

        push_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rooms", default="30,30", help="students per room, comma-separated")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--think", type=float, default=3.0, help="teacher's pause (s)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--redis", action="store_true", help="a loopback Redis, not SQLite")
    parser.add_argument(
        "--separate",
        action="store_true",
        help="bots use the replicas' own ports (stand-ins for separate machines), not nginx",
    )
    parser.add_argument("--idle", type=float, default=10.0, help="polls alone before the 1st click")
    parser.add_argument("--storm", type=float, default=20.0, help="the joins spread over (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.rooms = [int(n) for n in args.rooms.split(",")]
    if len(args.rooms) > len(PROMPTS):
        parser.error(f"at most {len(PROMPTS)} rooms")
    out = Path(tempfile.mkdtemp(prefix="live-class-"))
    result = run_class(args, out)
    print(json.dumps(result, ensure_ascii=False), flush=True)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
