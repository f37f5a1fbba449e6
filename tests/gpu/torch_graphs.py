#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch features that need graphs, pools or VMM (issue 13), on whatever
libcuda.so.1 the process loads. One line per check with a digest, so the
local run and the run through lupine can be compared line by line.

  torch_graphs.py graph     torch.cuda.graph capture and replay of a training step
  torch_graphs.py compile   torch.compile(mode="reduce-overhead") on a small model
  torch_graphs.py alloc     tensor traffic under whatever allocator
                            PYTORCH_CUDA_ALLOC_CONF selects (expandable_segments:True,
                            backend:cudaMallocAsync)
"""
import hashlib
import os
import sys

import torch


def digest(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]


def setup():
    torch.manual_seed(1234)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch.device('cuda')


def model_and_data(dev):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).to(dev)
    data = torch.randn(256, 64, device=dev)
    target = torch.randint(0, 10, (256,), device=dev)
    return model, data, target


def graph(dev):
    model, data, target = model_and_data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    static_x, static_y = data.clone(), target.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up, as the PyTorch docs prescribe
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = torch.nn.functional.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    losses = []
    for i in range(20):
        static_x.copy_(data * (1 + i / 100))
        g.replay()
        losses.append(float(static_loss))
    torch.cuda.synchronize()
    print('graph_losses', digest(torch.tensor(losses)))
    print('graph_weights', digest(torch.cat([p.flatten() for p in model.parameters()])))
    # a second, inference-only graph sharing the first one's memory pool
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2, pool=g.pool()):
        out = model(static_x).softmax(-1)
    g2.replay()
    print('graph_infer', digest(out))


def compile_(dev):
    model, data, _ = model_and_data(dev)
    f = torch.compile(model, mode='reduce-overhead')
    with torch.no_grad():
        for i in range(5):
            y = f(data * (1 + i))
    print('compile_out', digest(y))


def alloc(dev):
    print('alloc_conf', os.environ.get('PYTORCH_CUDA_ALLOC_CONF', ''))
    xs = []
    for i in range(40):
        xs.append(torch.full((1 << (10 + i % 12),), float(i), device=dev))
        if i % 3 == 2:
            xs.pop(0)
    big = torch.randn(64 << 20, device=dev)  # 256 MiB
    print('big_sum', float(big.sum()))
    del big
    print('small_sums', digest(torch.stack([x.sum() for x in xs])))
    model, data, target = model_and_data(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(20):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        opt.step()
    print('adamw_weights', digest(torch.cat([p.flatten() for p in model.parameters()])))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        z = torch.randn(1 << 20, device=dev) * 2
    torch.cuda.synchronize()
    print('side_stream', digest(z))
    torch.cuda.empty_cache()
    print('reserved_after_empty_cache', torch.cuda.memory_reserved() < (64 << 20))


def main():
    dev = setup()
    mode = sys.argv[1] if len(sys.argv) > 1 else 'graph'
    {'graph': graph, 'compile': compile_, 'alloc': alloc}[mode](dev)
    print(f'torch_graphs {mode}: OK')


if __name__ == '__main__':
    main()
