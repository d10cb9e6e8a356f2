"""bench/image_bench.py — the peer of bench/image_bench.lua: MXNet 1.9.1's mx.image
(OpenCV + libjpeg-turbo inside libmxnet.so) on the file image_bench.lua wrote.
  /opt/mxvenv/bin/python bench/image_bench.py [--quick]"""
import sys, time
import mxnet as mx

quick = "--quick" in sys.argv
data = open("/tmp/luamx_bench_500x375.jpg", "rb").read()


def run(name, fn, n):
    for _ in range(20):
        fn()
    mx.nd.waitall()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        mx.nd.waitall()
        best = min(best, time.perf_counter() - t0)
    print("mxnet %-22s %8.1f images/s  (%.3f ms/image)" % (name, n / best, best / n * 1e3))


n = 50 if quick else 500
run("decode", lambda: mx.image.imdecode(data), n)
run("decode+resize224", lambda: mx.image.imresize(mx.image.imdecode(data), 224, 224), n)
img = mx.image.imdecode(data)
run("resize224", lambda: mx.image.imresize(img, 224, 224), n)
