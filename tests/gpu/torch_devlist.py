#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch on a device list of two servers (tests/gpu/devlist.sh): work on
the first device and the last, and tensors moved between them
(tensor.to(), copy_() both ways, which the CUDA runtime does with
cuMemcpyPeer / device-to-device copies: daemon to daemon through lupine).
Prints one line per check with a digest of the result; run on the local
driver (one GPU: the first device is the last) the lines must be the same.
The device count and peer access go to stderr (they differ by design)."""
import hashlib
import sys

import torch


def digest(t):
    t = t.detach().cpu().contiguous()
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]


def main():
    n = torch.cuda.device_count()
    first, last = torch.device('cuda:0'), torch.device(f'cuda:{n - 1}')
    print('devices', n, [torch.cuda.get_device_name(i) for i in range(n)], file=sys.stderr)
    if n > 1:
        print('peer access 0 ->', n - 1, torch.cuda.can_device_access_peer(0, n - 1), file=sys.stderr)
    torch.manual_seed(1234)  # on the CPU: one device or two, the same numbers
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(2048, 2048).to(first)
    b = torch.randn(2048, 2048).to(last)
    print('first matmul', digest(a @ a))
    print('last matmul', digest(b @ b))
    moved = a.to(last)  # first -> last
    print('to last', digest(moved), bool(torch.equal(moved.cpu(), a.cpu())))
    print('work on the moved tensor', digest(moved @ b))
    back = (moved * 2 + b).to(first)  # last -> first
    print('back to first', digest(back))
    dst = torch.empty_like(b)
    dst.copy_(a, non_blocking=True)  # an async copy between the devices, then used on the destination
    torch.cuda.synchronize(last)
    print('copy_ async', digest(dst.sum(dim=0)), bool(torch.equal(dst.cpu(), a.cpu())))
    big = torch.arange(64 << 20, dtype=torch.int32, device=last)  # 256 MiB
    print('256 MiB last -> first', digest(big.to(first)[::4096]))
    print('torch_devlist: done')


if __name__ == '__main__':
    main()
