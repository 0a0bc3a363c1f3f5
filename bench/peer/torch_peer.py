#!/usr/bin/env python3
"""torch_peer.py — acg's reference model decode step in PyTorch, eager and as a CUDA graph.

Usage:
  python3 bench/peer/torch_peer.py [--device cuda|cpu] [--preset small|tiny] [--batch 1,8,32]
                                   [--steps N] [--repeats R] [--warmup W] [--pos P] [--seed S]
                                   [--json FILE]
  python3 bench/peer/torch_peer.py --json peer.json         # on the GPU: eager against graphs
  python3 bench/peer/torch_peer.py --device cpu --steps 8   # anywhere torch runs: eager only

Exit status: 0 done; 1 a check failed (graph tokens differ from eager ones); 2 bad arguments;
77 torch (or numpy) missing, or --device cuda without a CUDA device: nothing was measured.

The step is the one src/model/forward.c runs for b rows of one token each: embedding; per
layer rmsnorm, the q/k/v matmuls, RoPE, the keys and values into the cache, attention over the
positions up to the row's own, the output matmul and the residual, rmsnorm, w1 and w3, SwiGLU,
w2 and the residual; the final rmsnorm, the classifier and a greedy pick. The weights are the
preset's own, bit for bit (acg_model_preset_load's splitmix64 stream, seed 1 like `acg bench
decode`), in f32, and the matmuls run in IEEE f32 (no TF32).

Each batch size is stepped eagerly and replayed from one torch.cuda.graph capture, interleaved
in the same run (ABAB), from the same state: the cache holds --pos positions written by forced
prompt tokens, then every segment restarts from that position and token. Two figures per mode,
each a median over the timed steps of every repeat:
  - device us: CUDA events around each step, the steps queued back to back; an eager step that
    the host cannot launch fast enough shows the gaps, a replay does not;
  - sync us: host wall time of a step including the read-back of its tokens, as `acg bench
    decode` times a step (its eager_step_us and graph_step_us).
On --device cpu there are no graphs: only the eager sync figure.

What differs from acg's step:
  - the KV cache is one contiguous (seq_len, kv_dim) run per row and layer, written by
    index_put_: no pages, no block table, no gather through it;
  - attention reads all seq_len positions under a mask (the shapes a graph needs fixed), where
    acg's kernel reads the pos + 1 the row holds;
  - the matmuls are cuBLAS's, reductions in its order, where acg's kernels are one-order dot
    products built with --fmad=false; tokens may differ from acg's after a near tie;
  - no admission, attention plan or uploads: token and position are device tensors the step
    advances itself (argmax into the token, position + 1), as acg's on-device sampler state does;
  - the greedy pick is torch.argmax; acg's sampler kernel also serves temperature and top-p.
"""
import argparse
import json
import math
import statistics
import sys
import time

PRESETS = {
    # name: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len (presets.c)
    "tiny": (64, 172, 2, 4, 2, 512, 256),
    "small": (288, 768, 6, 6, 6, 32000, 256),
}
TOKEN_BYTE0 = 3  # ACG_TOKEN_BYTE0: the first token id past the special ones
EXIT_SKIP = 77


def parse_args(argv):
    p = argparse.ArgumentParser(description="acg's decode step in PyTorch: eager and CUDA graph")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
    p.add_argument("--batch", default="1,8,32", help="batch sizes, comma-separated")
    p.add_argument("--steps", type=int, default=64, help="timed steps per segment")
    p.add_argument("--repeats", type=int, default=3, help="segments per mode")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before capture")
    p.add_argument("--pos", type=int, default=8, help="positions in the cache before timing")
    p.add_argument("--seed", type=int, default=1, help="the preset's weight seed")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    a = p.parse_args(argv)
    try:
        a.batches = [int(x) for x in a.batch.split(",")]
    except ValueError:
        p.error("--batch takes numbers separated by commas")
    seq_len = PRESETS[a.preset][6]
    if not a.batches or min(a.batches) < 1 or max(a.batches) > 1024:
        p.error("--batch sizes are 1..1024")
    if a.steps < 1 or a.repeats < 1 or a.warmup < 1 or a.pos < 1:
        p.error("--steps, --repeats, --warmup and --pos are at least 1")
    if a.pos + max(a.steps, a.warmup) > seq_len:
        p.error("--pos + --steps (and --pos + --warmup) must not pass seq_len %d" % seq_len)
    return a


def skip(why):
    print("torch_peer: skipped: " + why, file=sys.stderr)
    sys.exit(EXIT_SKIP)


# ---- the preset's weights -----------------------------------------------------------------------

class SplitMix64:
    """acg_model_weights_create_random's stream: draw i (from 1) mixes seed + i * gamma."""

    GAMMA, M1, M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB

    def __init__(self, np, seed):
        self.np, self.state, self.drawn = np, seed, 0

    def uniform(self, shape, scale):
        """(shape) f32 uniform in [-scale, scale): 24 random bits times a power-of-two scale."""
        np = self.np
        n = math.prod(shape)
        out = np.empty(n, dtype=np.float32)
        u64 = np.uint64
        chunk = 1 << 22  # bounds the temporaries (32 MiB of uint64 each)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            i = np.arange(self.drawn + lo + 1, self.drawn + hi + 1, dtype=np.uint64)
            z = u64(self.state) + i * u64(self.GAMMA)  # wraps modulo 2^64, as in C
            z = (z ^ (z >> u64(30))) * u64(self.M1)
            z = (z ^ (z >> u64(27))) * u64(self.M2)
            z = z ^ (z >> u64(31))
            u = (z >> u64(40)).astype(np.float32) * np.float32(1.0 / 8388608.0) - np.float32(1.0)
            out[lo:hi] = u * np.float32(scale)
        self.drawn += n
        return out.reshape(shape)


def matrix_scale(cols):
    """The largest power of two not above 1/sqrt(cols), as presets.c chooses it."""
    s = 1.0
    while cols * s * s > 1.0:
        s *= 0.5
    return s


def preset_weights(np, preset, seed):
    """The preset's tensors in llama2.c file order, as numpy f32 arrays."""
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = PRESETS[preset]
    kv_dim = kv_heads * (dim // heads)
    s_dim, s_hidden = matrix_scale(dim), matrix_scale(hidden)
    r = SplitMix64(np, seed)
    ones = lambda *shape: np.ones(shape, dtype=np.float32)  # noqa: E731
    w = {}
    w["embedding"] = r.uniform((vocab, dim), 1.0)
    w["rms_att"] = ones(layers, dim)
    w["wq"] = r.uniform((layers, dim, dim), s_dim)
    w["wk"] = r.uniform((layers, kv_dim, dim), s_dim)
    w["wv"] = r.uniform((layers, kv_dim, dim), s_dim)
    w["wo"] = r.uniform((layers, dim, dim), s_dim)
    w["rms_ffn"] = ones(layers, dim)
    w["w1"] = r.uniform((layers, hidden, dim), s_dim)
    w["w2"] = r.uniform((layers, dim, hidden), s_hidden)
    w["w3"] = r.uniform((layers, hidden, dim), s_dim)
    w["rms_final"] = ones(dim)
    w["classifier"] = r.uniform((vocab, dim), 1.0)  # the presets' classifiers are not shared
    # The rotation tables of model.c's build_rope, in single precision.
    hs = dim // heads
    f = np.arange(hs // 2, dtype=np.float32)
    freq = np.float32(1.0) / np.power(np.float32(10000.0), (2 * f) / np.float32(hs))
    ang = np.arange(seq_len, dtype=np.float32)[:, None] * freq[None, :]
    w["rope_cos"], w["rope_sin"] = np.cos(ang), np.sin(ang)  # (seq_len, head_size / 2)
    return w


# ---- the model ----------------------------------------------------------------------------------

class Peer:
    """One batch size's decode state and step; every tensor the step reads or writes is static,
    so the step can be captured once and replayed."""

    def __init__(self, torch, weights, preset, batch, device, start_pos):
        self.t = torch
        (self.dim, self.hidden, self.layers, self.heads, self.kv_heads, self.vocab,
         self.seq_len) = PRESETS[preset]
        self.hs = self.dim // self.heads
        self.kv_dim = self.kv_heads * self.hs
        self.B, self.start_pos = batch, start_pos
        self.w = weights
        dev = torch.device(device)
        # (layers, B, seq_len, kv_dim) each
        self.k_cache = torch.zeros(self.layers, batch, self.seq_len, self.kv_dim, device=dev)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.rows = torch.arange(batch, device=dev)
        self.positions = torch.arange(self.seq_len, device=dev)
        self.tok = torch.zeros(batch, dtype=torch.int64, device=dev)  # the next input token
        self.pos = torch.zeros(batch, dtype=torch.int64, device=dev)  # its position
        self.tok0 = None

    def rmsnorm(self, x, weight):
        ms = (x * x).mean(-1, keepdim=True)
        return x * self.t.rsqrt(ms + 1e-5) * weight

    def rope(self, x, cos, sin, heads):
        """Rotates each pair (2i, 2i+1) of every head by the row's position."""
        x = x.view(self.B, heads, self.hs // 2, 2)
        x0, x1 = x[..., 0], x[..., 1]
        c, s = cos[:, None, :], sin[:, None, :]
        return self.t.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).view(self.B, -1)

    def attention(self, q, kc, vc, mask):
        """q (B, dim) over kc, vc (B, seq_len, kv_dim); mask (B, seq_len)."""
        group = self.heads // self.kv_heads
        k = kc.view(self.B, self.seq_len, self.kv_heads, self.hs)
        v = vc.view(self.B, self.seq_len, self.kv_heads, self.hs)
        if group > 1:
            k = k.repeat_interleave(group, dim=2)
            v = v.repeat_interleave(group, dim=2)
        qh = q.view(self.B, self.heads, 1, self.hs)
        scores = qh @ k.permute(0, 2, 3, 1) / math.sqrt(self.hs)  # (B, heads, 1, seq_len)
        p = self.t.softmax(scores + mask[:, None, None, :], dim=-1)
        return (p @ v.permute(0, 2, 1, 3)).reshape(self.B, self.dim)

    def step(self):
        """One decode step of every row: no host syncs, no Python state that a replay would
        freeze; the token and position it leaves are the next step's inputs."""
        t, w, F = self.t, self.w, self.t.nn.functional
        x = w["embedding"][self.tok]
        cos, sin = w["rope_cos"][self.pos], w["rope_sin"][self.pos]
        mask = t.where(self.positions[None, :] <= self.pos[:, None], 0.0, float("-inf"))
        for l in range(self.layers):
            h = self.rmsnorm(x, w["rms_att"][l])
            q = self.rope(F.linear(h, w["wq"][l]), cos, sin, self.heads)
            k = self.rope(F.linear(h, w["wk"][l]), cos, sin, self.kv_heads)
            v = F.linear(h, w["wv"][l])
            self.k_cache[l].index_put_((self.rows, self.pos), k)
            self.v_cache[l].index_put_((self.rows, self.pos), v)
            x = x + F.linear(self.attention(q, self.k_cache[l], self.v_cache[l], mask), w["wo"][l])
            h = self.rmsnorm(x, w["rms_ffn"][l])
            x = x + F.linear(F.silu(F.linear(h, w["w1"][l])) * F.linear(h, w["w3"][l]), w["w2"][l])
        logits = F.linear(self.rmsnorm(x, w["rms_final"]), w["classifier"])
        self.tok.copy_(t.argmax(logits, dim=-1))
        self.pos.add_(1)
        return logits

    def fill(self):
        """Writes start_pos positions of every row from forced prompt tokens (distinct ids in
        each row); the first decode token is the greedy pick after them. Every timed segment
        starts from here."""
        span = self.vocab - TOKEN_BYTE0
        for k in range(self.start_pos):
            ids = [TOKEN_BYTE0 + (r * self.start_pos + k) % span for r in range(self.B)]
            self.tok.copy_(self.t.tensor(ids, dtype=self.t.int64))
            self.pos.fill_(k)
            self.step()
        self.tok0 = self.tok.clone()

    def reset(self):
        self.tok.copy_(self.tok0)
        self.pos.fill_(self.start_pos)


# ---- timing -------------------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def segment_events(torch, peer, run, n, hist):
    """n steps queued back to back with CUDA events around each: (device us of each step,
    host us per step to queue them); hist (n, B) gets each step's tokens."""
    peer.reset()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(n)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n):
        ev[i][0].record()
        run()
        ev[i][1].record()
        hist[i].copy_(peer.tok)
    host = (time.perf_counter() - t0) * 1e6 / n
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in ev], host


def segment_sync(torch, peer, run, n, sync):
    """n steps, each waited for by reading its tokens back: host us of each step."""
    peer.reset()
    sync()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        peer.tok.to("cpu")
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def measure(torch, a, weights, batch, device):
    peer = Peer(torch, weights, a.preset, batch, device, a.pos)
    peer.fill()
    res = {"batch": batch}
    if device == "cpu":
        for _ in range(a.warmup):
            peer.reset()
            peer.step()
        sync_us = []
        for _ in range(a.repeats):
            sync_us += segment_sync(torch, peer, peer.step, a.steps, lambda: None)
        res["eager_sync_us"] = median(sync_us)
        res["tokens_per_s_eager"] = batch * 1e6 / res["eager_sync_us"]
        return res

    # Warm up on a side stream, so that cuBLAS's handle and workspace and the allocator's
    # blocks are made outside the capture; then capture one step (capture runs nothing).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(a.warmup):
            peer.reset()
            peer.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(graph):
        peer.step()
    torch.cuda.synchronize()
    res["capture_ms"] = (time.perf_counter() - t0) * 1e3
    peer.reset()
    graph.replay()  # the first replay uploads the graph: never timed
    torch.cuda.synchronize()

    modes = {"eager": peer.step, "graph": graph.replay}
    hist = {m: torch.zeros(a.steps, batch, dtype=torch.int64, device=device) for m in modes}
    dev_us = {m: [] for m in modes}
    host_us = {m: [] for m in modes}
    sync_us = {m: [] for m in modes}
    match = True
    for r in range(a.repeats):
        order = ("eager", "graph") if r % 2 == 0 else ("graph", "eager")  # drift hits both
        for m in order:
            d, h = segment_events(torch, peer, modes[m], a.steps, hist[m])
            dev_us[m] += d
            host_us[m].append(h)
        match = match and bool(torch.equal(hist["eager"], hist["graph"]))
        for m in order:
            sync_us[m] += segment_sync(torch, peer, modes[m], a.steps, torch.cuda.synchronize)
    for m in modes:
        res[m + "_us"] = median(dev_us[m])
        res[m + "_host_us"] = median(host_us[m])
        res[m + "_sync_us"] = median(sync_us[m])
        res["tokens_per_s_" + m] = batch * 1e6 / res[m + "_sync_us"]
    res["ratio"] = res["eager_us"] / res["graph_us"]
    res["sync_ratio"] = res["eager_sync_us"] / res["graph_sync_us"]
    res["tokens_match"] = match
    del graph
    return res


# ---- output -------------------------------------------------------------------------------------

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(info, results):
    print("torch %s on %s (%s): preset %s, dim %d, %d layers, vocab %d, seq_len %d, f32"
          % (info["torch"], info["device"], info["device_name"], info["preset"], info["dim"],
             info["n_layers"], info["vocab_size"], info["seq_len"]))
    print("%d timed steps x %d repeats per mode from position %d; medians over the steps\n"
          % (info["steps"], info["repeats"], info["start_pos"]))
    cols = [("batch", "batch", "d"), ("eager us", "eager_us", ".1f"),
            ("graph us", "graph_us", ".1f"), ("ratio", "ratio", ".2f"),
            ("eager host us", "eager_host_us", ".1f"), ("graph host us", "graph_host_us", ".1f"),
            ("eager sync us", "eager_sync_us", ".1f"), ("graph sync us", "graph_sync_us", ".1f"),
            ("tok/s graph", "tokens_per_s_graph", ".0f"),
            ("tok/s eager", "tokens_per_s_eager", ".0f"), ("capture ms", "capture_ms", ".1f")]
    print("  ".join("%*s" % (len(h), h) for h, _, _ in cols) + "  tokens")
    for r in results:
        cells = ["%*s" % (len(h), fmt(r.get(k), f)) for h, k, f in cols]
        same = r.get("tokens_match")
        cells.append("ERROR" if "error" in r else "-" if same is None else
                     "same" if same else "DIFFER")
        print("  ".join(cells))
    print("\neager/graph us: CUDA events around each step, steps queued back to back; sync us: "
          "a step\nwaited for by reading its tokens back (as `acg bench decode` times one); "
          "tokens: graph\nreplays against eager steps from the same state")


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import numpy as np
    except ImportError as e:
        skip("%s is not installed (python3 -m pip install torch numpy)" % e.name)
    if a.device == "cuda" and not torch.cuda.is_available():
        skip("torch %s sees no CUDA device" % torch.__version__)
    t_start = time.perf_counter()
    # IEEE f32 matmuls: TF32 would round the inputs to 10 mantissa bits.
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_grad_enabled(False)
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = PRESETS[a.preset]
    host = preset_weights(np, a.preset, a.seed)
    weights = {k: torch.from_numpy(v).to(a.device) for k, v in host.items()}
    del host
    name = torch.cuda.get_device_name() if a.device == "cuda" else "host cpu, %d threads" % (
        torch.get_num_threads())
    info = {"impl": "torch", "torch": torch.__version__, "device": a.device, "device_name": name,
            "preset": a.preset, "dim": dim, "hidden_dim": hidden, "n_layers": layers,
            "n_heads": heads, "n_kv_heads": kv_heads, "vocab_size": vocab, "seq_len": seq_len,
            "dtype": "f32", "kv_cache": "contiguous", "steps": a.steps, "repeats": a.repeats,
            "warmup_steps": a.warmup, "start_pos": a.pos, "seed": a.seed,
            "graphs": a.device == "cuda"}
    results = []
    with torch.inference_mode():
        for b in a.batches:
            try:
                results.append(measure(torch, a, weights, b, a.device))
            except Exception as e:  # one batch size failing leaves the others measured
                print("torch_peer: batch %d: %s: %s" % (b, type(e).__name__, e), file=sys.stderr)
                results.append({"batch": b, "error": "%s: %s" % (type(e).__name__, e)})
    info["results"] = results
    info["seconds"] = time.perf_counter() - t_start
    print_table(info, results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
    if any(r.get("tokens_match") is False for r in results):
        print("torch_peer: graph replays gave other tokens than eager steps", file=sys.stderr)
        return 1
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
