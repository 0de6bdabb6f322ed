import sys, time, collections, functools, asyncio
sys.argv = [sys.argv[0]] + sys.argv[1:]
acc = collections.Counter(); cnt = collections.Counter()
def wrap(obj, name, label, is_async=False):
    orig = getattr(obj, name)
    if is_async:
        @functools.wraps(orig)
        async def w(*a, **k):
            s = time.process_time()
            try: return await orig(*a, **k)
            finally: acc[label] += time.process_time() - s; cnt[label] += 1
    else:
        @functools.wraps(orig)
        def w(*a, **k):
            s = time.process_time()
            try: return orig(*a, **k)
            finally: acc[label] += time.process_time() - s; cnt[label] += 1
    setattr(obj, name, w)
import autocad_bench.harness.pilot as P
from autocad_bench.broker.client import BrokerClient
from autocad_bench.harness.trace import TraceWriter
from autocad_bench.retry.caller import ModelCaller
wrap(BrokerClient, "actions", "broker.actions", True)
wrap(BrokerClient, "frame", "broker.frame", True)
wrap(BrokerClient, "actions_with_frame", "broker.actions_with_frame", True)
import hashlib

wrap(TraceWriter, "save_frame", "save_frame")
wrap(TraceWriter, "checkpoint", "checkpoint")
wrap(TraceWriter, "run_state", "run_state")
wrap(TraceWriter, "receipts", "receipts")
wrap(TraceWriter, "turn_summary", "turn_summary")
wrap(TraceWriter, "model_turn", "model_turn")
wrap(ModelCaller, "request_turn", "request_turn", True)
wrap(P, "validate_batch", "validate_batch")
wrap(P.Pilot, "_handle_turn", "handle_turn(total)", True)
sys.path.insert(0, "benchmarks")
import harness_turn_cpu as H
import gc
if "--nogc" in sys.argv: gc.disable(); sys.argv.remove("--nogc")
if "--freeze" in sys.argv: gc.freeze(); sys.argv.remove("--freeze")
H.main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
for k, v in sorted(acc.items(), key=lambda x: -x[1]):
    print(f"{k:22s} {v/300*1e3:7.3f} ms/turn  calls {cnt[k]}")
