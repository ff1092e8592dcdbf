#!/usr/bin/env python3
"""What a libibverbs application sees when `hcasim serve` dies under it (docs/libibverbs.md):
IBV_EVENT_DEVICE_FATAL from ibv_get_async_event, and failing verbs - never a hang.

Runs through scripts/with-simhca.sh, which exports HCASIM_SERVER_PID; kills the server with
SIGKILL (no goodbye on the socket), then busy-polls a CQ, reads the asynchronous event and tries
two verbs. Exits 0 when every check holds, 1 with the failed checks otherwise, and dies of
SIGALRM if anything hangs.
"""
import os
import signal
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
import pyverbs.enums as e

TIMEOUT_S = 20
failures = []


def check(what, ok):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


ctx = Context(name=os.environ.get("HCASIM_DEVICE", "hcasim0"))
pd = PD(ctx)
cq = CQ(ctx, 16)

# A hang is the failure this guards against: SIGALRM's default action ends the process.
signal.alarm(TIMEOUT_S)
check("the CQ polls empty while the server lives", cq.poll(1)[0] == 0)

# A child forked without exec that closes a context it inherited: the context's watcher thread
# is its parent's, so the child must neither wait for it nor end the parent's connection.
other = Context(name=os.environ.get("HCASIM_DEVICE", "hcasim0"))
child = os.fork()
if child == 0:
    try:
        other.close()
    finally:
        os._exit(0)
_, status = os.waitpid(child, 0)
check("a forked child that closes an inherited context exits normally (status %d)" % status, status == 0)
check("the parent's other context is still served after that", PD(ctx) is not None)

os.kill(int(os.environ["HCASIM_SERVER_PID"]), signal.SIGKILL)

# A busy-polling application: ibv_poll_cq must start failing (the provider notices the server's
# end of the connection closing on its own, with no verb in flight).
polls = 0
deadline = time.monotonic() + TIMEOUT_S / 2
poll_failed = False
while time.monotonic() < deadline and not poll_failed:
    try:
        cq.poll(1)
        polls += 1
    except PyverbsError:
        poll_failed = True
check("a busy-polling ibv_poll_cq fails instead of spinning on (%d empty polls first)" % polls, poll_failed)
event = ctx.get_async_event()
check("ibv_get_async_event returns IBV_EVENT_DEVICE_FATAL", event.event_type == e.IBV_EVENT_DEVICE_FATAL)
event.ack()
try:
    PD(ctx)
    check("ibv_alloc_pd fails", False)
except PyverbsError:
    check("ibv_alloc_pd fails", True)
try:
    CQ(ctx, 4)
    check("ibv_create_cq fails", False)
except PyverbsError:
    check("ibv_create_cq fails", True)

if failures:
    print("server_death.py: %d check(s) failed" % len(failures), file=sys.stderr)
    sys.stdout.flush()
    os._exit(1)
print("server_death.py: all checks passed", flush=True)
# The objects' destructors would ask the dead server to destroy them: leave without them.
os._exit(0)
