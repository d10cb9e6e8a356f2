"""bench/rnn_bench.py — PyTorch peer of bench/rnn_bench.lua (same benches and names).
   /opt/torchvenv/bin/python bench/rnn_bench.py [--threads=1] [--quick]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, _A, threads = H.torch_setup(sys.argv[1:])
Q = 0.2 if _A.get("quick") else 1
T, N, I, Hd, L = 35, 32, 256, 256, 2
note = "threads=%d lstm L%d H%d T%d N%d I%d" % (threads, L, Hd, T, N, I)
H.env_note()

net = torch.nn.LSTM(I, Hd, L)
x = torch.rand(T, N, I) * 2 - 1
h0, c0 = torch.zeros(L, N, Hd), torch.zeros(L, N, Hd)
dy = torch.rand(T, N, Hd) * 2 - 1
n = max(1, int(10 * Q))


def fwd(k):
    with torch.no_grad():
        for _ in range(k):
            net(x, (h0, c0))


def cpu_ms(f):
    """the process's CPU time per call (moves far less than wall time on a busy machine)"""
    import time
    c0 = time.process_time()
    f(n)
    return (time.process_time() - c0) * 1000 / n


t = H.time(fwd, n=n, reps=7)
H.report("lstm_fwd", t["median"] / 1e6, "ms/call", note=note)
H.report("lstm_fwd_cpu", cpu_ms(fwd), "cpu-ms/call", note=note)

xg, hg, cg = x.clone().requires_grad_(), h0.clone().requires_grad_(), c0.clone().requires_grad_()


def fb(k):
    for _ in range(k):
        net.zero_grad()
        xg.grad = hg.grad = cg.grad = None
        y, _ = net(xg, (hg, cg))
        y.backward(dy)


t = H.time(fb, n=n, reps=7)
H.report("lstm_fwd_bwd", t["median"] / 1e6, "ms/call", note=note)
H.report("lstm_fwd_bwd_cpu", cpu_ms(fb), "cpu-ms/call", note=note)
