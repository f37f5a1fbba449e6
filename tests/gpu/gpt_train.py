#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small GPT trained with fixed seeds: 4 layers, width 128, 4 heads,
context 64, batch 32, a Conv1d token mixer in each block, AdamW.

usage: gpt_train.py STEPS [OUT.pt] [--graph]
Prints ms/step (after 10 warm-up steps) and a digest of the final weights;
writes the final state dict to OUT.pt so two runs can be compared bit for
bit (run it on the local driver and through lupine in the same job).
--graph: after 3 eager steps on a side stream, the whole step (forward,
backward, AdamW with capturable=True) is captured once in a CUDA graph and
replayed for every later step, as the PyTorch docs show for whole-network
capture."""
import hashlib
import os
import sys
import time

os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, HEADS, LAYERS, CTX, BATCH = 256, 128, 4, 4, 64, 32


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(WIDTH)
        # causal depthwise convolution over time
        self.conv = nn.Conv1d(WIDTH, WIDTH, 3, padding=2, groups=WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        c = self.conv(x.transpose(1, 2))[:, :, :x.shape[1]].transpose(1, 2)
        x = x + c
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.zeros(1, CTX, WIDTH))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        mask = torch.triu(torch.full((T, T), float('-inf'), device=idx.device), 1)
        x = self.tok(idx) + self.pos[:, :T]
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def main():
    args = [a for a in sys.argv[1:] if a != '--graph']
    graph = '--graph' in sys.argv[1:]
    steps = int(args[0]) if args else 120
    out = args[1] if len(args) > 1 else None
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device('cuda')
    # a fixed synthetic corpus with structure to learn, made on the CPU
    g = torch.Generator().manual_seed(42)
    corpus = torch.cumsum(torch.randint(0, 7, (200000,), generator=g), 0) % VOCAB
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, capturable=graph)
    starts = torch.randint(0, len(corpus) - CTX - 1, (steps, BATCH), generator=g)
    t0 = None
    static_x = torch.zeros((BATCH, CTX), dtype=torch.long, device=dev)
    static_y = torch.zeros((BATCH, CTX), dtype=torch.long, device=dev)
    side = torch.cuda.Stream()
    cuda_graph = None

    def train_step():
        loss = F.cross_entropy(model(static_x).view(-1, VOCAB), static_y.view(-1))
        loss.backward()
        opt.step()
        return loss

    for step in range(steps):
        if step == 10:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        ix = starts[step]
        static_x.copy_(torch.stack([corpus[i:i + CTX] for i in ix]), non_blocking=True)
        static_y.copy_(torch.stack([corpus[i + 1:i + CTX + 1] for i in ix]), non_blocking=True)
        if not graph:
            opt.zero_grad(set_to_none=True)
            loss = train_step()
        elif step < 3:  # warm-up on a side stream before the capture
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                opt.zero_grad(set_to_none=True)
                loss = train_step()
            torch.cuda.current_stream().wait_stream(side)
        else:
            if cuda_graph is None:
                cuda_graph = torch.cuda.CUDAGraph()
                opt.zero_grad(set_to_none=True)
                with torch.cuda.graph(cuda_graph):
                    loss = train_step()
            cuda_graph.replay()
        if step % 20 == 0 or step == steps - 1:
            print(f'step {step} loss {loss.item():.4f}', flush=True)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1000 / (steps - 10)
    h = hashlib.sha256()
    sd = model.state_dict()
    for k in sorted(sd):
        h.update(sd[k].detach().cpu().contiguous().numpy().tobytes())
    print(f'gpt_train: {ms:.3f} ms/step over {steps - 10} steps')
    print(f'gpt_train: final weights sha256 {h.hexdigest()}')
    if out:
        torch.save({k: v.cpu() for k, v in sd.items()}, out)


if __name__ == '__main__':
    main()
