"""The workloads, built from code: no download, random weights, random data.

Only torch is needed (no torchvision, no transformers): a compact ResNet-50
and GPT-2/BERT-shaped transformer blocks are defined here with torch.nn.
torch is imported lazily, so this module (its SPECS, the names and the
guessed times used for budgeting) imports on a machine without torch.

Inference (one request = one batch, forward only, torch.inference_mode):
  resnet50-infer  ResNet-50, batch 8, 3x224x224
  bert-infer      BERT-base encoder (12 layers, 768, 12 heads), batch 8, sequence 128
  gpt-decode      GPT-2-small decoder (12 layers, 768, 12 heads), batch 8: one new
                  token per sequence against a 512-token KV cache (one decode step)
Training (one iteration = forward, backward, optimizer step):
  resnet50-train  ResNet-50, batch 64, SGD with momentum, cross-entropy over 1000 classes
  gpt2-train      GPT-2-small, batch 8, sequence 512, AdamW, next-token loss (vocab 50257)
  bert-train      BERT-base with an MLM head, batch 32, sequence 128, AdamW (vocab 30522)

Synthetic trainers for head-of-line blocking (CUDA only, through CuPy's NVRTC):
  spin-long-train   kernels that fill every SM (2 blocks of 1024 threads per SM)
                    and whose blocks each run about 1 ms of dependent FMAs
  spin-short-train  the same kernel with blocks of about 50 us: the same
                    utilisation (back to back, every SM full), 20x shorter kernels
  spin-mem-low-train  spin-short-train's blocks (the same FMAs, about 50 us) that
                      also stream 64 KiB each from a buffer larger than L2
  spin-mem-high-train the same with 512 KiB per block (about half of an H200's
                      memory bandwidth): block time fixed, memory traffic varied
  One iteration is about 60 ms of such kernels. Under MPS another client's
  block can only start on an SM when one of these blocks retires.

scale="tiny" shrinks every size (for CPU smoke tests of the same code).
"""

import math

# guess_ms: a guessed H200 time of one request / iteration in TF32, used only
# to estimate the budget before anything is measured (measure.py --plan).
# They are guesses, not measurements.
SPECS = {
    "resnet50-infer": {"kind": "inference", "model": "resnet50", "batch": 8, "image": 224, "guess_ms": 4.0},
    "bert-infer": {"kind": "inference", "model": "bert", "batch": 8, "seq": 128, "guess_ms": 4.0},
    "gpt-decode": {"kind": "inference", "model": "gpt-decode", "batch": 8, "context": 512, "guess_ms": 2.5},
    "resnet50-train": {"kind": "training", "model": "resnet50", "batch": 64, "image": 224, "guess_ms": 110.0},
    "gpt2-train": {"kind": "training", "model": "gpt2", "batch": 8, "seq": 512, "guess_ms": 90.0},
    "bert-train": {"kind": "training", "model": "bert", "batch": 32, "seq": 128, "guess_ms": 70.0},
    # fma_pairs: fixed work per thread, about block_us on a whole H200 (53,099
    # and 2,655 measured there on 2026-12-04). Fixed rather than timed in each
    # process, so that an MPS client at a lower percentage runs the profiled
    # kernels (in more waves), not kernels re-sized to its share.
    "spin-long-train": {"kind": "training", "model": "spin", "block_us": 1000.0, "fma_pairs": 53099,
                        "iter_ms": 60.0, "guess_ms": 60.0},
    "spin-short-train": {"kind": "training", "model": "spin", "block_us": 50.0, "fma_pairs": 2655,
                         "iter_ms": 60.0, "guess_ms": 60.0},
    # spin-short-train's work per block plus mem_bytes read per block (16 B
    # loads spread through the FMA chain, which hides them: about 2 % more
    # instructions at 512 KiB). build() times the block, for the record.
    "spin-mem-low-train": {"kind": "training", "model": "spin", "block_us": 50.0, "fma_pairs": 2655,
                           "mem_bytes": 65536, "iter_ms": 60.0, "guess_ms": 60.0},
    "spin-mem-high-train": {"kind": "training", "model": "spin", "block_us": 50.0, "fma_pairs": 2655,
                            "mem_bytes": 524288, "iter_ms": 60.0, "guess_ms": 60.0},
}

BERT = {"layers": 12, "d": 768, "heads": 12, "ff": 3072, "vocab": 30522, "max_pos": 512}
GPT2 = {"layers": 12, "d": 768, "heads": 12, "ff": 3072, "vocab": 50257, "max_pos": 1024}
RESNET50 = {"blocks": (3, 4, 6, 3), "width": 64, "classes": 1000}

TINY = {
    "bert": {"layers": 2, "d": 64, "heads": 4, "ff": 128, "vocab": 1000, "max_pos": 128},
    "gpt2": {"layers": 2, "d": 64, "heads": 4, "ff": 128, "vocab": 1000, "max_pos": 128},
    "resnet50": {"blocks": (1, 1, 1, 1), "width": 8, "classes": 10},
    "batch": 2, "seq": 16, "image": 32, "context": 16,
}


def names(kind=None):
    return [n for n, s in SPECS.items() if kind is None or s["kind"] == kind]


def guesses():
    return {n: s["guess_ms"] for n, s in SPECS.items()}


_NN = None


def _nn():
    """Define the torch.nn modules once, on first use (imports torch)."""
    global _NN
    if _NN is not None:
        return _NN
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def attention(q, k, v, causal, p):
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        if sdpa is not None:
            return sdpa(q, k, v, dropout_p=p, is_causal=causal)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if causal:
            t, s = q.size(-2), k.size(-2)
            keep = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=s - t)
            att = att.masked_fill(~keep, float("-inf"))
        att = att.softmax(dim=-1)
        if p:
            att = F.dropout(att, p)
        return torch.matmul(att, v)

    class Bottleneck(nn.Module):
        def __init__(self, cin, planes, stride):
            super().__init__()
            out = planes * 4
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != out:
                self.down = nn.Sequential(nn.Conv2d(cin, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    class ResNet(nn.Module):
        """ResNet-50 (torchvision's layout: bottlenecks 3-4-6-3, stride on the 3x3)."""

        def __init__(self, blocks, width, classes):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
            layers, cin = [], width
            for i, n in enumerate(blocks):
                planes = width * (2 ** i)
                for j in range(n):
                    layers.append(Bottleneck(cin, planes, 2 if (i > 0 and j == 0) else 1))
                    cin = planes * 4
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))

    class SelfAttention(nn.Module):
        def __init__(self, d, heads, causal, dropout):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.heads, self.causal, self.p = heads, causal, dropout

        def split(self, x):
            b, t, c = x.shape
            return x.view(b, t, self.heads, c // self.heads).transpose(1, 2)

        def forward(self, x, cache=None, pos=None):
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = self.split(q), self.split(k), self.split(v)
            if cache is not None:
                # One decode step: write this token's key and value at pos and
                # attend over the cache up to it.
                kc, vc = cache
                kc[:, :, pos:pos + t] = k
                vc[:, :, pos:pos + t] = v
                k, v = kc[:, :, :pos + t], vc[:, :, :pos + t]
                y = attention(q, k, v, False, 0.0)
            else:
                y = attention(q, k, v, self.causal, self.p if self.training else 0.0)
            return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        """A transformer block: pre-norm (GPT-2) or post-norm (BERT), GELU MLP."""

        def __init__(self, d, heads, ff, causal, prenorm, dropout):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = SelfAttention(d, heads, causal, dropout)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.drop = nn.Dropout(dropout)
            self.prenorm = prenorm

        def mlp(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

        def forward(self, x, cache=None, pos=None):
            if self.prenorm:
                x = x + self.drop(self.attn(self.ln1(x), cache, pos))
                return x + self.drop(self.mlp(self.ln2(x)))
            x = self.ln1(x + self.drop(self.attn(x, cache, pos)))
            return self.ln2(x + self.drop(self.mlp(x)))

    class Bert(nn.Module):
        """A BERT-base-shaped encoder; with mlm=True an MLM head over the vocabulary."""

        def __init__(self, layers, d, heads, ff, vocab, max_pos, mlm=False, dropout=0.1):
            super().__init__()
            self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(max_pos, d), nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block(d, heads, ff, False, False, dropout) for _ in range(layers)])
            self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d), nn.Linear(d, vocab)) if mlm else None

        def forward(self, ids):
            t = ids.size(1)
            pos = torch.arange(t, device=ids.device)
            x = self.drop(self.ln(self.tok(ids) + self.pos(pos)[None] + self.typ(torch.zeros_like(ids))))
            for blk in self.blocks:
                x = blk(x)
            return x if self.head is None else self.head(x)

    class GPT(nn.Module):
        """A GPT-2-small-shaped decoder with a tied LM head."""

        def __init__(self, layers, d, heads, ff, vocab, max_pos, dropout=0.1):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block(d, heads, ff, True, True, dropout) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.heads, self.d = heads, d

        def forward(self, ids):
            t = ids.size(1)
            x = self.drop(self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))[None])
            for blk in self.blocks:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)

        def new_cache(self, batch, length, dtype, device):
            hd = self.d // self.heads
            shape = (batch, self.heads, length, hd)
            return [(torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))
                    for _ in self.blocks]

        def decode_step(self, tok, pos, caches):
            """Logits of one new token per sequence at position pos."""
            p = torch.full((1,), pos, dtype=torch.long, device=tok.device)
            x = self.wte(tok) + self.wpe(p)[None]
            for blk, cache in zip(self.blocks, caches):
                x = blk(x, cache, pos)
            return F.linear(self.ln_f(x[:, -1]), self.wte.weight)

    _NN = {"torch": torch, "nn": nn, "F": F, "ResNet": ResNet, "Bert": Bert, "GPT": GPT}
    return _NN


def configure(precision, device="cuda"):
    """Process-wide math settings (never GPU settings): TF32 on or off, cuDNN
    autotuning on."""
    torch = _nn()["torch"]
    if precision not in ("tf32", "fp32", "bf16"):
        raise ValueError("precision: want tf32, fp32 or bf16, got %r" % precision)
    # set_float32_matmul_precision is the one TF32 switch that every torch
    # since 1.12 accepts without mixing the legacy and the 2.9+ flags.
    torch.set_float32_matmul_precision("highest" if precision == "fp32" else "high")
    if precision == "fp32":
        # cuDNN convolutions use TF32 by default; only fp32 turns it off.
        try:
            torch.backends.cudnn.allow_tf32 = False
        except Exception:  # a torch that refuses the legacy flag keeps its default
            pass
    torch.backends.cudnn.benchmark = device != "cpu"


class Workload(object):
    """One workload on one device. build() makes the model and the data;
    step() runs one request or one training iteration without waiting for
    the GPU; sync() waits for it."""

    def __init__(self, name, device="cuda", precision="tf32", scale="full", seed=0):
        if name not in SPECS:
            raise KeyError("unknown workload %r (known: %s)" % (name, ", ".join(SPECS)))
        if scale not in ("full", "tiny"):
            raise ValueError("scale: want full or tiny")
        self.name, self.spec = name, dict(SPECS[name])
        self.kind = self.spec["kind"]
        self.device, self.precision, self.scale, self.seed = device, precision, scale, seed
        self._step = None
        self.params = 0

    def _size(self, key):
        if self.scale == "tiny" and key in TINY:
            return TINY[key]
        return self.spec[key]

    def _cfg(self, model):
        if self.scale == "tiny":
            return dict(TINY[model])
        return dict({"bert": BERT, "gpt2": GPT2, "resnet50": RESNET50}[model])

    def build(self):
        nn_ = _nn()
        torch = nn_["torch"]
        torch.manual_seed(self.seed)
        dev = torch.device(self.device)
        bf16 = self.precision == "bf16"
        infer = self.kind == "inference"
        model_name = self.spec["model"]
        b = self._size("batch")
        gen_dtype = torch.bfloat16 if (bf16 and infer) else torch.float32

        if model_name == "resnet50":
            model = nn_["ResNet"](**self._cfg("resnet50"))
            img = self._size("image")
            x = torch.randn(b, 3, img, img, device=dev, dtype=gen_dtype)
            y = torch.randint(0, self._cfg("resnet50")["classes"], (b,), device=dev)
        elif model_name == "bert":
            c = self._cfg("bert")
            model = nn_["Bert"](mlm=not infer, **c)
            x = torch.randint(0, c["vocab"], (b, self._size("seq")), device=dev)
            y = torch.randint(0, c["vocab"], (b, self._size("seq")), device=dev)
        elif model_name in ("gpt2", "gpt-decode"):
            c = self._cfg("gpt2")
            model = nn_["GPT"](**c)
            if model_name == "gpt2":
                x = torch.randint(0, c["vocab"], (b, self._size("seq")), device=dev)
                y = torch.randint(0, c["vocab"], (b, self._size("seq")), device=dev)
            else:
                x = torch.randint(0, c["vocab"], (b, 1), device=dev)
                y = None
        else:
            raise KeyError(model_name)
        self.params = sum(p.numel() for p in model.parameters())
        model = model.to(dev)
        if infer:
            model.eval()
            if bf16:
                model = model.to(torch.bfloat16)
            self._step = self._inference_step(model, x, model_name, gen_dtype, b)
        else:
            model.train()
            if model_name == "resnet50":
                opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
            else:
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            self._step = self._training_step(model, opt, x, y, bf16)
        return self

    def _inference_step(self, model, x, model_name, dtype, batch):
        torch = _nn()["torch"]
        if model_name == "gpt-decode":
            context = self._size("context")
            caches = model.new_cache(batch, context + 1, dtype, x.device)
            state = {"tok": x}

            def step():
                with torch.inference_mode():
                    logits = model.decode_step(state["tok"], context, caches)
                    state["tok"] = logits.argmax(dim=-1, keepdim=True)
            return step

        def step():
            with torch.inference_mode():
                self._out = model(x)
        return step

    def _training_step(self, model, opt, x, y, bf16):
        nn_ = _nn()
        torch, F = nn_["torch"], nn_["F"]

        def loss_of(out):
            if out.dim() == 3:
                return F.cross_entropy(out.reshape(-1, out.size(-1)), y.reshape(-1))
            return F.cross_entropy(out, y)

        def step():
            if bf16:
                with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):
                    loss = loss_of(model(x))
            else:
                loss = loss_of(model(x))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            self._loss = loss
        return step

    def step(self):
        self._step()

    def sync(self):
        torch = _nn()["torch"]
        if self.device != "cpu" and torch.cuda.is_available():
            torch.cuda.synchronize()

    def info(self):
        d = {k: (self._size(k) if k in ("batch", "seq", "image", "context") else v)
             for k, v in self.spec.items() if k != "guess_ms"}
        d.update({"params": self.params, "precision": self.precision, "scale": self.scale})
        if self.scale == "tiny":
            d["tiny"] = True
        return d


_SPIN_SRC = r"""
extern "C" __global__ void spin(long long n, float *sink) {
    float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-3f;
    for (long long i = 0; i < n; i++) {
        a = fmaf(a, 0.999999f, b);
        b = fmaf(b, 0.999999f, a);
    }
    if (a == -1.0f) sink[blockIdx.x] = a + b;
}
"""


# spin's FMA chain cut into `loads` segments, each followed by one 16-byte
# load per thread from the block's chunk of buf (coalesced; the chunk moves
# on by a grid's bytes every launch, base4, so that successive kernels read
# memory L2 no longer holds).
_SPIN_MEM_SRC = r"""
extern "C" __global__ void spin_mem(long long n, const float4 *buf, long long len4, long long base4,
                                    int loads, float *sink) {
    float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-3f, acc = 0.0f;
    long long chunk = base4 + (long long)blockIdx.x * loads * blockDim.x + threadIdx.x;
    long long seg = n / loads;
    for (int j = 0; j < loads; j++) {
        for (long long i = 0; i < seg; i++) {
            a = fmaf(a, 0.999999f, b);
            b = fmaf(b, 0.999999f, a);
        }
        float4 v = buf[(chunk + (long long)j * blockDim.x) % len4];
        acc += v.x + v.y + v.z + v.w;
    }
    if (a == -1.0f) sink[blockIdx.x] = a + b + acc;
}
"""


class SpinWorkload(object):
    """A synthetic trainer of identical compute-bound kernels that fill every
    SM: 2 blocks of 1024 threads per SM, each block running spec["fma_pairs"]
    pairs of dependent FMAs (about spec["block_us"] microseconds on a whole
    H200). An iteration launches iter_ms / block_us such kernels back to back
    on the default stream, so two spin trainers differ only in kernel length.
    With spec["mem_bytes"] each block also reads that many bytes (spin_mem)
    from a buffer of at least 1 GiB and 8 kernels' reads, so that they come
    from memory, not L2. build() times one kernel (measured_block_us, for
    the record); it never re-sizes the work. Needs CUDA and CuPy (compiled
    with NVRTC at build time)."""

    THREADS = 1024
    BLOCKS_PER_SM = 2

    def __init__(self, name, device="cuda", precision="tf32", scale="full", seed=0):
        self.name, self.spec = name, dict(SPECS[name])
        self.kind = self.spec["kind"]
        self.device, self.precision, self.scale, self.seed = device, precision, scale, seed
        if device == "cpu":
            raise ValueError("%s: needs a CUDA device (CuPy kernels)" % name)
        self.params = 0
        self.n = 0
        self.kernels = 0
        self.loads = 0
        self.measured_block_us = 0.0

    def build(self):
        import cupy
        torch = _nn()["torch"]
        torch.cuda.init()
        self._cp = cupy
        self._k = cupy.RawKernel(_SPIN_SRC, "spin")
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.grid = sms * self.BLOCKS_PER_SM
        self._sink = cupy.zeros(self.grid, dtype=cupy.float32)
        self.n = int(self.spec["fma_pairs"])
        self.loads = int(self.spec.get("mem_bytes", 0)) // (16 * self.THREADS)
        if self.loads:
            self._k = cupy.RawKernel(_SPIN_MEM_SRC, "spin_mem")
            per_kernel4 = self.grid * self.loads * self.THREADS
            self._len4 = max((1 << 30) // 16, 8 * per_kernel4)
            self._buf = cupy.ones(self._len4 * 4, dtype=cupy.float32)
            self._base4 = 0
        self.measured_block_us = self._time(self.n)
        self.kernels = max(1, int(round(self.spec["iter_ms"] * 1e3 / float(self.spec["block_us"]))))
        return self

    def _time(self, n):
        cp = self._cp
        self._launch(n)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(3):
            self._launch(n)
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e3 / 3

    def _launch(self, n):
        cp = self._cp
        if not self.loads:
            self._k((self.grid,), (self.THREADS,), (cp.int64(n), self._sink))
            return
        self._k((self.grid,), (self.THREADS,), (cp.int64(n), self._buf, cp.int64(self._len4), cp.int64(self._base4),
                                                 cp.int32(self.loads), self._sink))
        self._base4 = (self._base4 + self.grid * self.loads * self.THREADS) % self._len4

    def step(self):
        for _ in range(self.kernels):
            self._launch(self.n)

    def sync(self):
        self._cp.cuda.runtime.deviceSynchronize()

    def info(self):
        d = {k: v for k, v in self.spec.items() if k != "guess_ms"}
        d.update({"params": 0, "precision": "fp32", "scale": self.scale, "grid": self.grid,
                  "threads": self.THREADS, "fma_pairs": self.n, "kernels_per_iter": self.kernels,
                  "measured_block_us": round(self.measured_block_us, 2),
                  "mem_bytes_per_block": self.loads * 16 * self.THREADS,
                  "mem_gbps": round(self.grid * self.loads * 16 * self.THREADS / self.measured_block_us / 1e3, 1)
                  if self.measured_block_us > 0 else None})
        return d


def make(name, **kw):
    if SPECS.get(name, {}).get("model") == "spin":
        return SpinWorkload(name, **kw)
    return Workload(name, **kw)


def torch_env(device="cuda"):
    """Versions and the device, for the measurements' source."""
    torch = _nn()["torch"]
    env = {"torch": torch.__version__, "torch_cuda": getattr(torch.version, "cuda", None)}
    try:
        env["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # no cuDNN
        env["cudnn"] = None
    if device != "cpu" and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update({"device_name": p.name, "sms": p.multi_processor_count,
                    "capability": "%d.%d" % (p.major, p.minor), "memory_mib": p.total_memory // (1 << 20)})
    else:
        env.update({"device_name": "cpu", "sms": 0})
    return env
