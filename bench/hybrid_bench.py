"""bench/hybrid_bench.py — the PyTorch peer of bench/hybrid_bench.lua: eager and
torch.compile (CPU, inductor) on the same MLP training step, Dense(64->64) at batch 1
and the two 6-op elementwise chains on 1 M floats. Same RESULT lines.
    /opt/torchvenv/bin/python bench/hybrid_bench.py --threads=1 [--no-compile]
"""
import sys

sys.path.insert(0, "bench")
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
note = "%dT" % threads
H.env_note()
ver = H.default_impl()


def impl(compiled):
    return ver + ("-compile" if compiled else "")


modes = [False] if A.get("no-compile") else [False, True]

x = torch.randn(64, 784)
y = torch.arange(64) % 10
for compiled in modes:
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    if compiled:
        step = torch.compile(step)

    def run(n, step=step):
        for _ in range(n):
            step()
    t = H.time(run, n=int(A.get("steps", 200)), reps=5)
    H.report("hyb_mlp_train", 64 / (t["median"] * 1e-9), "samples/s", impl(compiled), note)

for compiled in modes:
    d = torch.nn.Linear(64, 64)
    f = torch.compile(d) if compiled else d
    x1 = torch.ones(1, 64)

    def run(n, f=f):
        with torch.no_grad():
            for _ in range(n):
                f(x1)
    t = H.time(run, n=20000)
    H.report("hyb_dense_b1", t["median"] * 1e-3, "us/call", impl(compiled), note)


def arith(v):
    return torch.square(torch.relu(v * 2 + 1) * 0.5 - 0.25)


def trans(v):
    return torch.exp(torch.sigmoid(torch.tanh(v * 2 + 1) * 0.5 - 0.25))


big = torch.randn(1000000)
for name, fn in (("hyb_chain_arith", arith), ("hyb_chain_trans", trans)):
    for compiled in modes:
        f = torch.compile(fn) if compiled else fn

        def run(n, f=f):
            with torch.no_grad():
                for _ in range(n):
                    f(big)
        t = H.time(run, n=20)
        H.report(name, t["median"] * 1e-6, "ms", impl(compiled), note)
