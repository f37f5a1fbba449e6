# SPDX-License-Identifier: MIT
"""A client's virtual memory across the three kinds of restart (run by
test_restart.py): e2e_vmm's hold mode builds a reservation with mappings
and data (one allocation mapped twice) and one unmapped physical allocation
with data, waits while the daemon goes through

  durable  SIGTERM, then a new daemon on the same checkpoint directory;
  hot      SIGTERM under a fake service manager, the memory fds kept in its
           fd store, the new daemon maps them (zero bytes copied);
  upgrade  SIGHUP, twice: a re-exec with the fds kept (the second hands on
           memory the first imported), the client never disconnected,

then checks the data at the same addresses under the same handle ids, and
that unmap, remap and new allocations work.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restart_harness import Hold  # noqa: E402


def _hold(progs, shim, kernels, check):
    return Hold(check, progs, kernels, shim, 'e2e_vmm', 'vmm', 'vmm',
                'reservation, mappings and an unmapped allocation with data built',
                'data at the same addresses under the same handles; unmap, remap, new allocations work',
                'e2e_vmm hold: OK')


def durable(lupined, progs, shim, kernels, tmp, check):
    _hold(progs, shim, kernels, check).durable(lupined, tmp)


def hot(lupined, progs, shim, kernels, tmp, check):
    def drained(m, rc):
        fds = [n for n, _ in m.stored_fds if n.startswith('lupine-mem.vmmhot.')]
        check('vmm (hot): the drain stores the memory fds, one per physical allocation (three)',
              rc == 0 and len(fds) >= 3, f'rc={rc} {fds}\n' + m.log()[-2000:])

    _hold(progs, shim, kernels, check).hot(lupined, tmp, drained)


def upgrade(lupined, progs, shim, kernels, tmp, check):
    _hold(progs, shim, kernels, check).upgrade(lupined, tmp)


def run(lupined, progs, shim, kernels, tmp, check):
    durable(lupined, progs, shim, kernels, tmp, check)
    hot(lupined, progs, shim, kernels, tmp, check)
    upgrade(lupined, progs, shim, kernels, tmp, check)
