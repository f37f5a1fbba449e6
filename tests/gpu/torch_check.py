#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch basics on whatever libcuda.so.1 the process loads: availability,
the device name, tensor ops, matmul, conv2d, autograd and AdamW. Prints one
line per check with a digest of the result, so the same script run on the
local driver and through lupine can be compared line by line (the runs
must agree bit for bit: same GPU, same kernels, fixed seeds)."""
import hashlib
import sys

import torch


def digest(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # numpy has no bfloat16; the bits are what count
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]


def main():
    assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'
    print('name', torch.cuda.get_device_name(0), file=sys.stderr)
    print('count', torch.cuda.device_count())
    torch.manual_seed(1234)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device('cuda')

    a = torch.randn(1000, 1000, device=dev)
    b = torch.randn(1000, 1000, device=dev)
    print('add', digest(a + b))
    print('mul_scalar', digest(a * 3.5 - 1))
    print('sum', float(a.sum()))
    print('max', float(a.max()), 'min', float(a.min()))
    print('matmul', digest(a @ b))
    h = a.half()
    print('matmul_fp16', digest(h @ b.half()))
    print('matmul_bf16', digest(a.bfloat16() @ b.bfloat16()))
    x = torch.randn(8, 3, 32, 32, device=dev)
    conv = torch.nn.Conv2d(3, 16, 3, padding=1).to(dev)
    y = conv(x)
    print('conv2d', digest(y))
    y.sum().backward()
    print('conv2d_grad', digest(conv.weight.grad))

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randn(256, 64, device=dev)
    target = torch.randint(0, 10, (256,), device=dev)
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        opt.step()
    print('adamw_loss', float(loss))
    print('adamw_weights', digest(torch.cat([p.flatten() for p in model.parameters()])))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = a.mm(b)
    torch.cuda.synchronize()
    print('side_stream', digest(c))
    print('memory_allocated', torch.cuda.memory_allocated() > 0)
    print('torch_check: OK')


if __name__ == '__main__':
    main()
