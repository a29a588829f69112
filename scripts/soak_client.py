#!/usr/bin/env python3
"""The soak run's client (scripts/soak_report.sh starts the server and calls this).

Mixed load on a running `pagedinfer serve`, for --minutes or until --requests requests are
done: --clients threads, each sending one request after another, chosen at random among
completions and chat, streamed or not, some whose client hangs up (a stream after a few events,
a non-streamed request before its answer) and some malformed (bad JSON, wrong types, a body
over the limit, a compressed body, too many headers, bytes that are not UTF-8, ...). Beside
them, --slow-clients connections drip a request's header lines, one every --drip seconds, and
reconnect whenever the server cuts them (its request deadline). Every request is greedy
(temperature 0), so each finished answer must equal the same request run alone, which is
measured first, one request at a time.

Checked (exit 1 when one fails): every answer equal to its reference (0 wrong answers); every
request answered (200) or cut by its own client; every malformed request refused with its
status and an OpenAI error body; the server process alive to the end (0 crashes); /metrics
consistent all along (no counter ever goes down) and, once idle at the end, no request running
or waiting, every KV block back, every accepted request finished, the finish-reason counts
adding up to the finished count, at least as many finished requests and generated tokens as
the clients saw, and as many timeouts as the server's cuts the slow clients saw; in a run of
--minutes, resident memory flat (the last tenth of the run against the end of the warm-up).
Prints a progress line every --report-every seconds and a summary.
"""
import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time

PROMPTS = [
    "Once upon a time", "The little dog", "One day, a girl named Lily", "Tom and his mom",
    "The sun was", "In the park", "Sam had a red ball", "The cat sat", "Once there was a big tree",
    "A bird flew", "Mia wanted to", "The boy looked at the sky and",
]
MAX_TOKENS = [4, 16, 48, 96]
# Request kinds and their weights: finished non-streamed / streamed, cut by the client, refused.
KINDS = [("full", 40), ("stream", 30), ("cut_stream", 10), ("cut_full", 10), ("malformed", 10)]


def raw_post(path, body, headers=""):
    if isinstance(body, str):
        body = body.encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def chunked_post(path, total):
    chunk = b"x" * 65536
    out = [f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()]
    for _ in range(total // len(chunk) + 1):
        out.append(b"10000\r\n" + chunk + b"\r\n")
    return b"".join(out) + b"0\r\n\r\n"


def malformed_cases(max_body):
    """(name, request bytes, the status the server must answer)."""
    many = "".join(f"X-H{i}: v\r\n" for i in range(101))
    return [
        ("bad json", raw_post("/v1/completions", '{"prompt": "x",'), 400),
        ("messages not a list", raw_post("/v1/chat/completions", '{"messages": "hi"}'), 400),
        ("negative max_tokens", raw_post("/v1/completions", '{"prompt": "x", "max_tokens": -5}'), 400),
        ("deep nesting", raw_post("/v1/completions", '{"prompt": ' + "[" * 100000 + "]" * 100000 + "}"), 400),
        ("part type not a string",
         raw_post("/v1/chat/completions",
                  '{"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]}'), 400),
        ("unknown path", b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        ("path not utf-8", b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        ("gzip body", raw_post("/v1/completions", "{}", "Content-Encoding: gzip\r\n"), 415),
        ("101 headers", raw_post("/v1/completions", "{}", many), 431),
        ("unknown transfer-encoding",
         b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        ("chunked body over the limit", chunked_post("/v1/completions", max_body + 1), 413),
        ("garbage request line", b"HELLO THERE\r\n\r\n", 400),
    ]


def body_for(case, stream):
    endpoint, prompt, max_tokens = case
    b = {"max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if endpoint == "chat":
        b["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", b
    b["prompt"] = prompt
    return "/v1/completions", b


def text_of(endpoint, choice):
    return choice["message"]["content"] if endpoint == "chat" else choice["text"]


def delta_of(endpoint, choice):
    return choice.get("delta", {}).get("content") or "" if endpoint == "chat" else choice["text"]


def read_response(s):
    """Status and body of one HTTP answer on socket s (read to Content-Length or close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(65536)
        if not got:
            break
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        return None, b""
    status = int(head.split(b" ", 2)[1])
    length = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while length is None or len(body) < length:
        got = s.recv(65536)
        if not got:
            break
        body += got
    return status, body


class Server:
    def __init__(self, host, port, pid):
        self.host, self.port, self.pid = host, port, pid

    def conn(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def post(self, path, body):
        c = self.conn()
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def metrics(self):
        c = self.conn(timeout=30)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def rss_kib(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().split()[2] not in ("Z", "X")
        except OSError:
            return False


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {k: 0 for k, _ in KINDS}
        self.wrong, self.errors, self.tokens = [], [], 0
        self.slow_cuts = 0  # slow clients' connections the server closed

    def add(self, kind, tokens=0):
        with self.lock:
            self.counts[kind] += 1
            self.tokens += tokens

    def done(self):
        with self.lock:
            return sum(self.counts.values())

    def fail(self, what, detail):
        with self.lock:
            (self.wrong if what == "wrong" else self.errors).append(detail)


def references(server, cases):
    ref = {}
    for case in cases:
        path, body = body_for(case, False)
        status, data = server.post(path, body)
        if status != 200:
            sys.exit(f"soak: reference request {case} failed: {status} {data[:200]!r}")
        ref[case] = text_of(case[0], json.loads(data)["choices"][0])
    return ref


def run_full(server, case, ref, tally):
    path, body = body_for(case, False)
    status, data = server.post(path, body)
    if status != 200:
        return tally.fail("error", f"{case}: HTTP {status} {data[:200]!r}")
    j = json.loads(data)
    got = text_of(case[0], j["choices"][0])
    if got != ref[case]:
        return tally.fail("wrong", f"{case}: {got!r} != {ref[case]!r}")
    tally.add("full", j["usage"]["completion_tokens"])


def run_stream(server, case, ref, tally, cut_after):
    path, body = body_for(case, True)
    c = server.conn()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        c.close()
        return tally.fail("error", f"{case} stream: HTTP {r.status}")
    text, events, done = "", 0, False
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        j = json.loads(line[6:])
        if "error" in j:
            c.close()
            return tally.fail("error", f"{case} stream: {j['error']}")
        events += 1
        for ch in j.get("choices", []):
            text += delta_of(case[0], ch)
        if cut_after is not None and events >= cut_after:
            c.sock.shutdown(socket.SHUT_RDWR)  # the client hangs up mid-stream
            c.close()
            return tally.add("cut_stream")
    c.close()
    if not done:
        return tally.fail("error", f"{case} stream: ended without [DONE]")
    if text != ref[case]:
        return tally.fail("wrong", f"{case} stream: {text!r} != {ref[case]!r}")
    tally.add("stream")


def run_cut_full(server, case, rng, tally):
    """Sends a non-streamed request and hangs up before its answer."""
    path, body = body_for(case, False)
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall(raw_post(path, json.dumps(body)))
    time.sleep(rng.uniform(0, 0.3))
    s.close()
    tally.add("cut_full")


def run_malformed(server, case, tally):
    """Sends one malformed request: it must get its status and an OpenAI error body."""
    name, data, want = case
    s = socket.create_connection((server.host, server.port), timeout=60)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may refuse before the whole body is sent, then close
        status, body = read_response(s)
    finally:
        s.close()
    if status != want:
        return tally.fail("error", f"malformed '{name}': HTTP {status}, not {want}: {body[:200]!r}")
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    if not isinstance(message, str):
        return tally.fail("error", f"malformed '{name}': no OpenAI error body: {body[:200]!r}")
    tally.add("malformed")


def worker(server, cases, bad, ref, tally, stop, seed):
    rng = random.Random(seed)
    kinds, weights = zip(*KINDS)
    while not stop():
        case = rng.choice(cases)
        kind = rng.choices(kinds, weights)[0]
        try:
            if kind == "full":
                run_full(server, case, ref, tally)
            elif kind == "stream":
                run_stream(server, case, ref, tally, None)
            elif kind == "cut_stream":
                run_stream(server, case, ref, tally, rng.randint(1, 8))
            elif kind == "cut_full":
                run_cut_full(server, case, rng, tally)
            else:
                run_malformed(server, rng.choice(bad), tally)
        except (OSError, http.client.HTTPException, ValueError) as e:
            tally.fail("error", f"{case} {kind}: {type(e).__name__}: {e}")
            if not server.alive():
                return


def slow_client(server, drip, tally, stop, connected):
    """Drips a request's header lines until the server cuts the connection, then again."""
    first = True
    while not stop():
        s = socket.create_connection((server.host, server.port), timeout=drip + 60)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\n")
            if first:
                connected.release()
                first = False
            i = 0
            while not stop():
                time.sleep(drip)
                s.sendall(f"X-Slow-{i}: {'v' * 8}\r\n".encode())
                i += 1
        except OSError:  # the server closed it: its request deadline passed
            with tally.lock:
                tally.slow_cuts += 1
        finally:
            s.close()


COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def check_monotonic(prev, cur, problems):
    for k, v in cur.items():
        name = k.split("{")[0]
        if name.endswith(COUNTER_SUFFIXES) or "_bucket{" in k:
            if k in prev and v < prev[k]:
                problems.append(f"/metrics: {k} went down, {prev[k]:g} -> {v:g}")


def busy(m):
    return sum(v for k, v in m.items() if k.startswith(("vllm:num_requests_running",
                                                        "vllm:num_requests_waiting")))


def wait_idle(server, timeout):
    """The metrics once nothing runs or waits and every KV block is back, or the last seen."""
    end, m = time.time() + timeout, {}
    while time.time() < end:
        m = server.metrics()
        if busy(m) == 0 and m.get("pagedinfer_kv_blocks_used", -1) == 0:
            break
        time.sleep(0.5)
    return m


def check_idle_metrics(m, tally, problems):
    """What /metrics must say once the server is idle, against what the clients saw."""
    def get(name):
        return m.get(name, float("nan"))

    def family(name):
        return sum(v for k, v in m.items() if k.startswith(name + "{"))

    if busy(m) != 0:
        problems.append(f"/metrics: {busy(m):g} requests running or waiting when idle")
    if get("pagedinfer_kv_blocks_used") != 0:
        problems.append(f"/metrics: {get('pagedinfer_kv_blocks_used'):g} KV blocks used when idle")
    accepted, finished = get("pagedinfer_requests_accepted_total"), get("pagedinfer_requests_finished_total")
    if accepted != finished:
        problems.append(f"/metrics: {accepted:g} requests accepted but {finished:g} finished")
    if family("vllm:request_success_total") != finished:
        problems.append(f"/metrics: request_success_total adds up to "
                        f"{family('vllm:request_success_total'):g}, not {finished:g}")
    completed = tally.counts["full"] + tally.counts["stream"]
    if finished < completed:
        problems.append(f"/metrics: {finished:g} requests finished, fewer than the {completed} "
                        "answers the clients read")
    if get("vllm:generation_tokens_total") < tally.tokens:
        problems.append(f"/metrics: {get('vllm:generation_tokens_total'):g} tokens generated, "
                        f"fewer than the {tally.tokens} in the non-streamed answers")
    if get("pagedinfer_http_timeouts_total") < tally.slow_cuts:
        problems.append(f"/metrics: {get('pagedinfer_http_timeouts_total'):g} timeouts, fewer "
                        f"than the {tally.slow_cuts} cuts the slow clients saw")


def report(server, tally, start, rss, problems, last):
    with tally.lock:
        done = dict(tally.counts)
        bad = (len(tally.wrong), len(tally.errors), tally.slow_cuts)
    m = server.metrics()
    check_monotonic(last, m, problems)
    print(f"soak: {time.time() - start:6.0f} s  requests {done}  wrong {bad[0]}  errors {bad[1]}"
          f"  slow clients cut {bad[2]}  RSS {rss[-1][1] / 1024:.1f} MiB  KV blocks used "
          f"{m.get('pagedinfer_kv_blocks_used', -1):.0f}", flush=True)
    return m


def rss_growth(rss):
    """MiB from the end of the warm-up (the largest of the run's second tenth) to the largest
    of its last tenth, so allocator pools grown at start do not count, and whether that is flat."""
    span = max(rss[-1][0], 1)
    warm = [k for t, k in rss if span * 0.1 <= t <= span * 0.2] or [k for _, k in rss]
    tail = [k for t, k in rss if t >= span * 0.9] or [k for _, k in rss]
    growth = (max(tail) - max(warm)) / 1024
    return max(warm) / 1024, max(tail) / 1024, growth, growth <= max(8.0, max(warm) / 1024 * 0.05)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server's process id")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--requests", type=int, default=0,
                    help="stop after this many requests instead of --minutes (no RSS check)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--slow-clients", type=int, default=64)
    ap.add_argument("--drip", type=float, default=2.0, help="seconds between a slow client's lines")
    ap.add_argument("--max-body", type=int, default=1 << 20, help="the server's --max-body")
    ap.add_argument("--report-every", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args()


def run_load(a, server, cases, bad, ref, tally, problems):
    """Slow clients first (each holding a connection), then the workers, until --minutes or
    --requests; returns the RSS samples [(seconds, KiB)] and the last metrics read."""
    ended = threading.Event()
    start = time.time()
    deadline = start + a.minutes * 60

    def stop():
        return ended.is_set()

    connected = threading.Semaphore(0)
    slow = [threading.Thread(target=slow_client, args=(server, a.drip, tally, stop, connected),
                             daemon=True) for _ in range(a.slow_clients)]
    for t in slow:
        t.start()
    for _ in slow:
        connected.acquire()
    for case in bad:  # each malformed request once, then at random among the others
        try:
            run_malformed(server, case, tally)
        except OSError as e:
            tally.fail("error", f"malformed '{case[0]}': {type(e).__name__}: {e}")
    threads = [threading.Thread(target=worker, args=(server, cases, bad, ref, tally, stop,
                                                     a.seed * 1000 + i), daemon=True)
               for i in range(a.clients)]
    for t in threads:
        t.start()
    rss = [(0.0, server.rss_kib())]
    last = report(server, tally, start, rss, problems, {})
    next_report = start + a.report_every
    while any(t.is_alive() for t in threads) and server.alive():
        now = time.time()
        rss.append((now - start, server.rss_kib()))
        if (a.requests and tally.done() >= a.requests) or (not a.requests and now >= deadline):
            ended.set()
        if now >= next_report or ended.is_set():
            last = report(server, tally, start, rss, problems, last)
            next_report = now + a.report_every
        time.sleep(0.5)
    ended.set()
    for t in threads + slow:
        t.join(timeout=a.drip + 130)
    return rss, last, time.time() - start


def summary(a, tally, problems, rss, m, alive, elapsed):
    """Prints the figures; True when every check passed."""
    total = tally.done()
    print(f"soak: {elapsed / 60:.1f} min, {a.clients} clients and {a.slow_clients} slow ones: "
          f"{total} requests ({tally.counts['full']} non-streamed, {tally.counts['stream']} "
          f"streamed, {tally.counts['cut_stream']} streams cut, {tally.counts['cut_full']} "
          f"non-streamed cut, {tally.counts['malformed']} malformed refused), {tally.tokens} "
          f"tokens in non-streamed answers, {total / elapsed:.1f} requests/s; the server cut "
          f"{tally.slow_cuts} slow connections")
    print(f"soak: crashes {0 if alive else 1}, wrong answers {len(tally.wrong)}, "
          f"errors {len(tally.errors)}, /metrics problems {len(problems)}")
    warm, tail, growth, flat = rss_growth(rss)
    print(f"soak: RSS {warm:.1f} MiB after warm-up, {tail:.1f} MiB in the last tenth (growth "
          f"{growth:+.1f} MiB), peak {max(k for _, k in rss) / 1024:.1f} MiB"
          + (" (not checked: a run bounded by requests)" if a.requests else ""))
    print(f"soak: at the end: {busy(m):.0f} requests running or waiting, KV blocks used "
          f"{m.get('pagedinfer_kv_blocks_used', -1):.0f} of "
          f"{m.get('pagedinfer_kv_blocks_capacity', -1):.0f}, requests accepted "
          f"{m.get('pagedinfer_requests_accepted_total', -1):.0f}, finished "
          f"{m.get('pagedinfer_requests_finished_total', -1):.0f}, cancelled "
          f"{m.get('pagedinfer_requests_cancelled_total', -1):.0f}, HTTP timeouts "
          f"{m.get('pagedinfer_http_timeouts_total', -1):.0f}")
    for what in tally.wrong[:5] + tally.errors[:5] + problems[:5]:
        print(f"soak:   {what}")
    return (alive and not tally.wrong and not tally.errors and not problems
            and (flat or a.requests > 0))


def main():
    a = parse_args()
    server = Server(a.host, a.port, a.pid)
    cases = [(e, p, n) for e in ("completions", "chat") for p in PROMPTS for n in MAX_TOKENS]
    t0 = time.time()
    ref = references(server, cases)
    print(f"soak: {len(cases)} reference answers, each run alone, in {time.time() - t0:.1f} s",
          flush=True)
    tally, problems = Tally(), []
    rss, last, elapsed = run_load(a, server, cases, malformed_cases(a.max_body), ref, tally,
                                  problems)
    alive, m = server.alive(), {}
    if alive:
        m = wait_idle(server, 60)
        check_monotonic(last, m, problems)
        check_idle_metrics(m, tally, problems)
    ok = summary(a, tally, problems, rss, m, alive, elapsed)
    print("soak: PASS" if ok else "soak: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
